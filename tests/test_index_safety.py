"""Indices read from data at run time cannot escape their buffers: gathers, scatters, export."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from ir_builders import buf

import tensorlang as tl
from tensorlang.dtype import INT32
from tensorlang.expr import Var, const
from tensorlang.ir import BufferLoad, BufferStore, For, ForKind, PrimFunc
from tensorlang.lower.bound_check import (
    CheckSite,
    check_data_dependent_indices,
    checks_of,
)
from tensorlang.lower.vectorize import vectorize_loops
from tensorlang.runtime import Module, build_module, load_module

ROWS, DIM, N = 10, 16, 32

Scheduler = Callable[[tl.Schedule, tl.Tensor], None]


def _plain(s: tl.Schedule, out: tl.Tensor) -> None:
    return None


def _vectorized(s: tl.Schedule, out: tl.Tensor) -> None:
    axis = out.op.axis[-1]
    _, inner = s[out].split(axis, factor=8)
    s[out].vectorize(inner)


def _parallel(s: tl.Schedule, out: tl.Tensor) -> None:
    s[out].parallel(out.op.axis[0])


SCHEDULES = {"scalar": _plain, "vectorized": _vectorized, "parallel": _parallel}


def _embedding(schedule: Scheduler) -> Module:
    """Out[i, j] = W[Idx[i], j]: a lane-invariant row, contiguous columns when vectorized."""
    w = tl.placeholder((ROWS, DIM), name="W")
    idx = tl.placeholder((N,), name="Idx", dtype="int32")
    out = tl.compute((N, DIM), lambda i, j: w[idx[i], j], name="Embed")
    s = tl.create_schedule(out.op)
    schedule(s, out)
    return tl.build(s, [w, idx, out])


def _gather(schedule: Scheduler, name: str = "main") -> Module:
    """Out[i] = W[Idx[i]]: one data-dependent index per lane when vectorized (a gather)."""
    w = tl.placeholder((ROWS,), name="W")
    idx = tl.placeholder((N,), name="Idx", dtype="int32")
    out = tl.compute((N,), lambda i: w[idx[i]], name="Gather")
    s = tl.create_schedule(out.op)
    schedule(s, out)
    return tl.build(s, [w, idx, out], name=name)


BUILDERS = {"embedding": _embedding, "gather": _gather}


@pytest.fixture(scope="module", params=sorted(SCHEDULES))
def schedule_name(request: pytest.FixtureRequest) -> str:
    return request.param


def _inputs(kind: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    shape = (ROWS, DIM) if kind == "embedding" else (ROWS,)
    out_shape = (N, DIM) if kind == "embedding" else (N,)
    w = rng.uniform(1.0, 2.0, size=shape).astype("float32")  # never 0: a masked read shows
    idx = rng.integers(0, ROWS, size=N).astype("int32")
    return w, idx, np.full(out_shape, -7.0, "float32")


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_in_range_equals_numpy(kind: str, schedule_name: str) -> None:
    mod = BUILDERS[kind](SCHEDULES[schedule_name])
    w, idx, out = _inputs(kind, np.random.default_rng(1))
    idx[:2] = (0, ROWS - 1)  # both ends of the range
    mod(w, idx, out)
    np.testing.assert_array_equal(out, w[idx])


@pytest.mark.parametrize("bad", [-1, ROWS, -(2**31), 2**31 - 1])
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_out_of_range_raises_and_masks(kind: str, bad: int, schedule_name: str) -> None:
    mod = BUILDERS[kind](SCHEDULES[schedule_name])
    w, idx, out = _inputs(kind, np.random.default_rng(2))
    idx[5] = bad
    stage = "Embed" if kind == "embedding" else "Gather"
    with pytest.raises(IndexError, match=rf"reading W in stage {stage} \(shape \({ROWS},"):
        mod(w, idx, out)
    good = np.arange(N) != 5
    np.testing.assert_array_equal(out[good], w[idx[good]])  # the other rows are right
    np.testing.assert_array_equal(out[5], np.zeros_like(out[5]))  # the bad one reads 0
    idx[5] = 3
    mod(w, idx, out)  # the status does not stick to the module
    np.testing.assert_array_equal(out, w[idx])


def test_mod_of_data_is_checked() -> None:
    """A[B[i] % 7] with A of 5 elements: floormod keeps it >= 0 but not below 5."""
    a = tl.placeholder((5,), name="A", dtype="int64")
    b = tl.placeholder((N,), name="B", dtype="int32")
    c = tl.compute((N,), lambda i: a[b[i] % 7] + 1, name="C")
    mod = tl.build(tl.create_schedule(c.op), [a, b, c])
    av = np.arange(10, 15, dtype="int64")
    bv = np.arange(-3, N - 3, dtype="int32") * 5  # floor mod 7 covers 0..6
    out = np.zeros(N, "int64")
    with pytest.raises(IndexError, match="reading A in stage C"):
        mod(av, bv, out)
    m = bv % 7
    np.testing.assert_array_equal(out, np.where(m < 5, av[np.minimum(m, 4)], 0) + 1)
    bv = bv % 5
    mod(av, bv, out)
    np.testing.assert_array_equal(out, av[bv] + 1)


def test_guarded_lookup_reports_nothing() -> None:
    """A lookup the user guards with if_then_else reads only where the guard holds."""
    w = tl.placeholder((ROWS, DIM), name="W")
    idx = tl.placeholder((N,), name="Idx", dtype="int32")
    out = tl.compute(
        (N, DIM), lambda i, j: tl.if_then_else(idx[i] >= 0, w[idx[i], j], 0.0), name="Pad"
    )
    for schedule in SCHEDULES.values():
        s = tl.create_schedule(out.op)
        schedule(s, out)
        mod = tl.build(s, [w, idx, out])
        wv, iv, ov = _inputs("embedding", np.random.default_rng(3))
        iv[::3] = -1  # padding
        mod(wv, iv, ov)
        np.testing.assert_array_equal(ov, np.where(iv[:, None] >= 0, wv[iv], 0.0))


def test_affine_kernels_get_no_checks() -> None:
    a = tl.placeholder((N, DIM), name="A")
    b = tl.compute((N, DIM), lambda i, j: a[i, j] * 2.0, name="B")
    func = tl.lower(tl.create_schedule(b.op), [a, b]).main
    assert checks_of(func) == () and "checked_index" not in str(func)
    assert check_data_dependent_indices(func) is func
    mod = tl.build(tl.create_schedule(b.op), [a, b])
    assert 'define void @"__tl_main"' in mod.get_source("ll")
    assert "llvm.expect" not in mod.get_source("ll")


def test_lowered_ir_names_the_check() -> None:
    mod = _embedding(_plain)
    assert mod.func is not None
    assert "W[checked_index(Idx[i] * 16 + j, 160, 0)]" in str(mod.func)
    assert checks_of(mod.func) == (CheckSite("W", "Embed", is_store=False),)
    assert 'define i32 @"__tl_main"' in mod.get_source("ll")


def _scatter(kind: ForKind) -> PrimFunc:
    """Out[Idx[i]] = Val[i] * 2 over n = 4 * m elements, by hand: compute cannot scatter."""
    m = Var("m", INT32)
    idx, val, out = (
        buf("Idx", "int32", (m * 4,)),
        buf("Val", "float32", (m * 4,)),
        buf("Out", "float32", (ROWS,)),
    )
    i, j = Var("i", INT32), Var("j", INT32)
    flat = i * 4 + j
    store = BufferStore(
        out, BufferLoad(idx, flat, idx.dtype), BufferLoad(val, flat, val.dtype) * 2.0
    )
    inner = ForKind.VECTORIZED if kind is ForKind.VECTORIZED else ForKind.SERIAL
    outer = ForKind.PARALLEL if kind is ForKind.PARALLEL else ForKind.SERIAL
    body = For(i, const(0), m, outer, For(j, const(0), const(4), inner, store))
    return vectorize_loops(
        check_data_dependent_indices(PrimFunc("scatter", (idx, val, out), (m,), body))
    )


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.VECTORIZED, ForKind.PARALLEL])
def test_scatter_store_is_checked(kind: ForKind) -> None:
    func = _scatter(kind)
    assert checks_of(func) == (CheckSite("Out", "Out", is_store=True),)
    mod = build_module(func)
    if kind is ForKind.VECTORIZED:
        assert "llvm.masked.scatter" in mod.get_source("ll")
    perm = np.random.default_rng(4).permutation(ROWS).astype("int32")[:8]
    val = np.arange(1, 9, dtype="float32")
    out = np.zeros(ROWS, "float32")
    mod(perm, val, out)
    expected = np.zeros(ROWS, "float32")
    expected[perm] = val * 2
    np.testing.assert_array_equal(out, expected)

    bad = perm.copy()
    bad[[2, 6]] = (ROWS, -3)
    out[:] = 0
    with pytest.raises(IndexError, match=r"writing Out in stage Out \(shape \(10,\)\)"):
        mod(bad, val, out)
    keep = np.ones(8, bool)
    keep[[2, 6]] = False
    expected[:] = 0
    expected[perm[keep]] = val[keep] * 2
    np.testing.assert_array_equal(out, expected)  # the out-of-range writes were skipped


def test_call_overhead_with_checks() -> None:
    mod = _gather(_plain)
    w, idx, out = _inputs("gather", np.random.default_rng(5))
    mod(w, idx, out)
    calls = 2000
    start = time.perf_counter()
    for _ in range(calls):
        mod(w, idx, out)
    assert (time.perf_counter() - start) / calls < 50e-6  # a few us; generous for loaded CI


_C_MAIN = r"""
#include <stdio.h>
#include "gather.h"
int main(void) {
    float w[10], out[32];
    int32_t idx[32];
    for (int i = 0; i < 10; i++) w[i] = (float)i + 0.5f;
    for (int i = 0; i < 32; i++) idx[i] = i % 10;
    int32_t ok = gather(w, idx, out);
    idx[7] = 99;
    int32_t bad = gather(w, idx, out);
    printf("%d %d %g %g\n", ok, bad, out[6], out[7]);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_exported_library_returns_the_status(tmp_path: Path) -> None:
    _gather(_parallel, name="gather").export_library(tmp_path / "gather.so")
    header = (tmp_path / "gather.h").read_text()
    assert "int32_t gather(float *W, int32_t *Idx, float *Gather);" in header
    assert "1: reading W in stage Gather" in header

    loaded = load_module(tmp_path / "gather.so")
    wv, iv, ov = _inputs("gather", np.random.default_rng(6))
    loaded(wv, iv, ov)
    np.testing.assert_array_equal(ov, wv[iv])
    iv[0] = -1
    with pytest.raises(IndexError, match="gather: .*reading W in stage Gather"):
        loaded(wv, iv, ov)

    (tmp_path / "main.c").write_text(_C_MAIN)
    exe = tmp_path / "main"
    subprocess.run(
        ["cc", "-o", str(exe), "main.c", "gather.so", f"-Wl,-rpath,{tmp_path}"],
        check=True,
        cwd=tmp_path,
    )
    ok, bad, six, seven = subprocess.run(
        [str(exe)], capture_output=True, text=True, check=True
    ).stdout.split()
    assert (ok, bad, six, seven) == ("0", "1", "6.5", "0")
