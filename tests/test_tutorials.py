"""The tutorials' schedules stay correct (run at small, awkward sizes; the full runs are manual)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl

TUTORIALS = Path(__file__).resolve().parent.parent / "tutorials"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, TUTORIALS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEMM_LADDER = load("03_optimize_gemm")


@pytest.mark.parametrize("name,step", GEMM_LADDER.STEPS, ids=[n for n, _ in GEMM_LADDER.STEPS])
@pytest.mark.parametrize("shape", [(64, 64, 64), (37, 45, 29)])
def test_gemm_ladder_step_is_correct(name, step, shape):
    M, N, K = shape
    s, args = step(M, N, K)
    f = tl.build(s, args)
    rng = np.random.default_rng(1)
    a = rng.random((M, K), dtype=np.float32)
    b = rng.random((K, N), dtype=np.float32)
    c = np.zeros((M, N), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)


PRIMITIVES = load("02_schedule_primitives")


@pytest.mark.parametrize("lesson", PRIMITIVES.LESSONS, ids=lambda f: f.__name__)
def test_schedule_primitive_lesson_is_correct(lesson):
    s, args = lesson()
    PRIMITIVES.check(s, args)
    assert str(tl.lower(s, args))  # the lesson prints this
