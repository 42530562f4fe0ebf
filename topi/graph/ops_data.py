"""Graph ops that move or normalise data beyond the core set: resizing, padding modes, scans,
tiling and broadcasting, gathers and scatters, triangular masks and group/instance norms; each
registered once with its topi compute, x86 schedule and numpy reference (the pattern of
`ops.py`)."""

from __future__ import annotations
