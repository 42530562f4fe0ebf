"""Shared test helpers: random inputs per dtype and a one-call build-and-compare."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl


def random_array(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Values that keep integer arithmetic in range and floats well conditioned."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith(("int", "uint")):
        lo = 0 if dtype.startswith("uint") else -8
        return rng.integers(lo, 9, size=shape).astype(dtype)
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


def tolerance(dtype: str) -> dict:
    return {"float16": dict(rtol=1e-2, atol=1e-2), "float32": dict(rtol=1e-4, atol=1e-5)}.get(
        dtype, dict(rtol=1e-10, atol=0)
    )


def run(s: tl.Schedule, args: list, inputs: list[np.ndarray], out_shapes: list, dtypes: list) -> list:
    """Build `s`, call it with `inputs` and fresh outputs, return the outputs."""
    f = tl.build(s, args)
    outs = [np.zeros(shape, dtype) for shape, dtype in zip(out_shapes, dtypes)]
    f(*inputs, *outs)
    return outs


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture
def two_threads():
    """Two runtime threads for the test (schedules that split work between threads)."""
    before = tl.get_num_threads()
    tl.set_num_threads(2)
    yield
    tl.set_num_threads(before)
