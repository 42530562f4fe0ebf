"""Per-bucket kernels of a symbolic build (filled in by tuning by bucket)."""

from __future__ import annotations

from typing import Any


def bucket_kernels(node: Any, spec: Any, prepack: bool, target: Any, cache_dir: Any) -> Any:
    return None
