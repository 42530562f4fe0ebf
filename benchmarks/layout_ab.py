"""Shared steps of the layout pass A/B benchmarks: a model built with one class of the layout
pass swapped for its earlier behaviour, and a block of timed calls."""

from __future__ import annotations

import importlib
import time
import warnings
from collections.abc import Callable

import topi.graph as tg

# the module (the package exports its function under the same name)
alter_layout = importlib.import_module("topi.graph.passes.alter_layout")


def build_with(proto, name: str, replacement: type) -> tg.Module:  # noqa: ANN001
    """`proto` imported and built untuned while alter_layout's class `name` is `replacement`."""
    saved = getattr(alter_layout, name)
    setattr(alter_layout, name, replacement)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the untuned build lists its fallback workloads
            return tg.build(tg.from_onnx(proto))
    finally:
        setattr(alter_layout, name, saved)


def block_seconds(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of `fn` over `calls` calls after one untimed call (the other side's
    threads may still spin)."""
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls
