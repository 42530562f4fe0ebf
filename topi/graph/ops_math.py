"""Graph ops of elementwise math beyond the core set: comparisons and logic (bool results),
`where`, rounding and remainders, and the activations that real models use; each registered once
with its topi compute, x86 schedule and numpy reference (the pattern of `ops.py`)."""

from __future__ import annotations
