"""Runtime: argument checks, timing, sources, the thread pool, export_library + load_module."""

from __future__ import annotations

import ctypes
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from ir_builders import buf

from tensorlang.codegen import Target
from tensorlang.dtype import INT32
from tensorlang.expr import Var, const
from tensorlang.ir import BufferLoad, BufferStore, For, ForKind, PrimFunc
from tensorlang.runtime import (
    Module,
    build_module,
    get_num_threads,
    load_module,
    set_num_threads,
)
from tensorlang.runtime.threadpool import native


def _scaled_add(name: str = "scaled_add", kind: ForKind = ForKind.SERIAL) -> PrimFunc:
    """C[i, j] = A[i, j] + B[j] * 2 with A, C of shape (n, 4) and B of shape (4,)."""
    n = Var("n", INT32)
    a, b, c = buf("A", "float32", (n, 4)), buf("B", "float32", (4,)), buf("C", "float32", (n, 4))
    i, j = Var("i", INT32), Var("j", INT32)
    value = BufferLoad(a, i * 4 + j, a.dtype) + BufferLoad(b, j, b.dtype) * 2.0
    body = For(
        i,
        const(0),
        n,
        kind,
        For(j, const(0), const(4), ForKind.SERIAL, BufferStore(c, i * 4 + j, value)),
    )
    return PrimFunc(name, (a, b, c), (n,), body)


@pytest.fixture(scope="module")
def mod() -> Module:
    return build_module(_scaled_add(), "llvm")


def _args(n: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (
        rng.random((n, 4), dtype="float32"),
        rng.random(4, dtype="float32"),
        np.zeros((n, 4), "float32"),
    )


def test_call_binds_shape_var(mod: Module) -> None:
    for n in (0, 1, 5):
        a, b, c = _args(n)
        mod(a, b, c)
        np.testing.assert_allclose(c, a + b * 2, rtol=1e-6)


def test_wrong_count(mod: Module) -> None:
    a, b, c = _args()
    with pytest.raises(TypeError, match=r"takes 3 arguments \(A, B, C\), got 2"):
        mod(a, b)


def test_wrong_ndim(mod: Module) -> None:
    a, b, c = _args()
    with pytest.raises(ValueError, match=r"argument 0 \(A\).*2 dimensions"):
        mod(a.reshape(-1), b, c)


def test_wrong_const_shape(mod: Module) -> None:
    a, b, c = _args()
    with pytest.raises(ValueError, match=r"argument 1 \(B\).*dimension 0 must be 4"):
        mod(a, np.zeros(5, "float32"), c)


def test_wrong_dtype(mod: Module) -> None:
    a, b, c = _args()
    with pytest.raises(TypeError, match=r"argument 2 \(C\).*float32, got float64"):
        mod(a, b, c.astype("float64"))


def test_inconsistent_symbolic_dim(mod: Module) -> None:
    a, b, _ = _args(3)
    with pytest.raises(ValueError, match=r"argument 2 \(C\).*n = 4.*n = 3"):
        mod(a, b, np.zeros((4, 4), "float32"))


def test_read_only_output(mod: Module) -> None:
    a, b, c = _args()
    c.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 2 \(C\).*read-only"):
        mod(a, b, c)
    a.flags.writeable = False  # inputs may be read-only
    mod(a, b, np.zeros_like(a))


def test_non_contiguous(mod: Module) -> None:
    a, b, c = _args(4)
    with pytest.raises(ValueError, match=r"argument 0 \(A\).*C-contiguous.*ascontiguousarray"):
        mod(np.zeros((4, 8), "float32")[:, ::2], b, c)
    with pytest.raises(ValueError, match=r"argument 0 \(A\).*C-contiguous"):
        mod(np.zeros((4, 4), "float32").T, b, c)


def test_output_overlapping_input(mod: Module) -> None:
    a, b, _ = _args()
    with pytest.raises(ValueError, match=r"argument 2 \(C\).*shares memory with argument 0 \(A\)"):
        mod(a, b, a)


def test_not_an_array(mod: Module) -> None:
    a, b, c = _args()
    with pytest.raises(TypeError, match=r"argument 1 \(B\).*numpy array.*list"):
        mod(a, [1.0, 2.0, 3.0, 4.0], c)


def test_dlpack_and_array_interface_inputs(mod: Module) -> None:
    a, b, c = _args()

    class DLPackOnly:
        def __init__(self, arr: np.ndarray) -> None:
            self.arr = arr

        def __dlpack__(self, **kwargs):  # noqa: ANN003, ANN204
            return self.arr.__dlpack__(**kwargs)

        def __dlpack_device__(self):  # noqa: ANN204
            return self.arr.__dlpack_device__()

    class InterfaceOnly:
        def __init__(self, arr: np.ndarray) -> None:
            self.__array_interface__ = arr.__array_interface__
            self.arr = arr

    out = np.zeros_like(c)
    mod(DLPackOnly(a), InterfaceOnly(b), DLPackOnly(out))  # zero-copy: writes land in `out`
    np.testing.assert_allclose(out, a + b * 2, rtol=1e-6)


def test_call_overhead_is_small(mod: Module) -> None:
    a, b, c = _args(2)
    mod(a, b, c)
    calls = 2000
    start = time.perf_counter()
    for _ in range(calls):
        mod(a, b, c)
    per_call = (time.perf_counter() - start) / calls
    assert per_call < 50e-6  # ~3-5 us on an idle machine; generous for loaded CI


def test_time_evaluator(mod: Module) -> None:
    a, b, c = _args(1000)
    result = mod.time_evaluator(number=5, repeat=4, min_repeat_ms=2)(a, b, c)
    assert len(result.results) == 4
    assert 0 < result.median < 1e-2 and result.mean > 0
    np.testing.assert_allclose(c, a + b * 2, rtol=1e-6)
    with pytest.raises(ValueError):
        mod.time_evaluator(number=0)


def test_get_source(mod: Module) -> None:
    assert "define void" in mod.get_source("ll")
    assert "ret" in mod.get_source("asm")
    assert "def scaled_add(" in mod.get_source("ir")
    with pytest.raises(ValueError, match="unknown source format"):
        mod.get_source("cuda")


def test_same_ir_is_compiled_once() -> None:
    m1 = build_module(_scaled_add("cached"))
    m2 = build_module(_scaled_add("cached"))
    assert m1._keepalive is m2._keepalive


def test_a_dropped_kernel_leaves_the_compiler_working() -> None:
    """A compiled kernel that nobody keeps (here: evicted from the cache, as a compile that
    loses the race for it is) frees its code, and nothing the next compile needs; run in a
    process of its own, since a crash there would be a segfault."""
    script = """
import gc
import numpy as np
import tensorlang as tl
from tensorlang.runtime import jit

def kernel(scale):
    A = tl.placeholder((64,), "float32", name="A")
    B = tl.compute((64,), lambda i: A[i] * scale, name="B")
    return tl.build(tl.create_schedule(B.op), [A, B])

kernel(2.0)
jit._CACHE.clear()
gc.collect()
for scale in (3.0, 4.0):
    a, b = np.ones(64, "float32"), np.zeros(64, "float32")
    kernel(scale)(a, b)
    assert (b == scale).all()
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_target_parsing() -> None:
    assert str(Target("llvm")) == "llvm"
    t = Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f")
    assert t.mcpu == "skylake-avx512" and t.vector_bits == 512
    assert Target("llvm -mcpu=haswell").vector_bits == 256
    assert Target("llvm -mattr=-avx512f,-avx2,-avx").vector_bits == 128
    assert Target(str(t)) == t
    for bad in ("cuda", "llvm -mcpu", "llvm -O3", "llvm -mattr=avx2", ""):
        with pytest.raises(ValueError):
            Target(bad)


def test_thread_pool_uses_several_threads() -> None:
    """Tasks of one tl_parallel_for run on different threads; task 0 on the caller."""
    ffi, lib = native().ffi, native().lib
    seen: dict[int, int] = {}

    @ffi.callback("void(int32_t, int32_t, void *)")
    def task(task_id: int, num_tasks: int, closure: object) -> None:
        seen[task_id] = threading.get_ident()
        if task_id == 0:
            time.sleep(0.05)  # lets a worker claim task 1 (the callback releases the GIL here)

    old = get_num_threads()
    try:
        set_num_threads(2)
        assert get_num_threads() == 2
        lib.tl_parallel_for(task, ffi.NULL, 2)
        assert seen[0] == threading.get_ident() and seen[1] != seen[0]
        set_num_threads(1)
        seen.clear()
        lib.tl_parallel_for(task, ffi.NULL, 3)
        assert set(seen.values()) == {threading.get_ident()} and sorted(seen) == [0, 1, 2]
    finally:
        set_num_threads(old)


_MXCSR_IR = """
declare void @llvm.x86.sse.stmxcsr(ptr)
declare void @llvm.x86.sse.ldmxcsr(ptr)
define i32 @tl_test_mxcsr(i32 %write, i32 %value) {
entry:
  %p = alloca i32
  %w = icmp ne i32 %write, 0
  br i1 %w, label %set, label %get
set:
  store i32 %value, ptr %p
  call void @llvm.x86.sse.ldmxcsr(ptr %p)
  br label %get
get:
  call void @llvm.x86.sse.stmxcsr(ptr %p)
  %v = load i32, ptr %p
  ret i32 %v
}
define void @tl_test_mxcsr_packed(ptr %args) {
  ret void
}
"""
FLUSH_TO_ZERO, DENORMALS_ARE_ZERO, FP_CONTROL = 0x8000, 0x40, 0xFFC0


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86's MXCSR")
def test_workers_run_tasks_in_the_callers_floating_point_mode() -> None:
    """A worker runs each task under the MXCSR control bits (flush-to-zero, denormals-are-zero,
    rounding) of the thread that started the loop, whatever mode it had when it was created or
    last ran: with FTZ/DAZ set by the caller and then cleared again."""
    from tensorlang.runtime.jit import compile_ir

    mxcsr = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint32)(
        compile_ir(_MXCSR_IR, "tl_test_mxcsr", Target("llvm")).address)
    ffi, lib = native().ffi, native().lib
    seen: dict[int, tuple[int, int]] = {}

    @ffi.callback("void(int32_t, int32_t, void *)")
    def task(task_id: int, num_tasks: int, closure: object) -> None:
        seen[task_id] = (threading.get_ident(), mxcsr(0, 0) & FP_CONTROL)
        if task_id == 0:
            time.sleep(0.05)  # lets a worker claim task 1

    old, original = get_num_threads(), mxcsr(0, 0)
    try:
        set_num_threads(2)
        lib.tl_parallel_for(task, ffi.NULL, 2)  # the workers exist, in the default mode
        flushing = original | FLUSH_TO_ZERO | DENORMALS_ARE_ZERO
        for mode in (flushing, original & ~(FLUSH_TO_ZERO | DENORMALS_ARE_ZERO), flushing):
            mxcsr(1, mode)
            seen.clear()
            lib.tl_parallel_for(task, ffi.NULL, 2)
            assert seen[1][0] != seen[0][0]
            assert seen[0][1] == seen[1][1] == mode & FP_CONTROL, (hex(mode), seen)
    finally:
        mxcsr(1, original)
        set_num_threads(old)


def test_parallel_kernel_with_thread_counts() -> None:
    """Every iteration runs once whether the loop has fewer iterations than threads, a few per
    thread, or more than the chunks it is cut into (up to TASKS_PER_THREAD per thread)."""
    m = build_module(_scaled_add("par_add", ForKind.PARALLEL))
    old = get_num_threads()
    try:
        for threads in (1, 2, 3, 5):
            set_num_threads(threads)
            for n in (1, 2, 7, 9, 37):
                a, b, c = _args(n)
                c[:] = np.nan
                m(a, b, c)
                np.testing.assert_allclose(c, a + b * 2, rtol=1e-6)
    finally:
        set_num_threads(old)
    with pytest.raises(TypeError):
        set_num_threads(2.0)  # type: ignore[arg-type]


_C_MAIN = r"""
#include <stdio.h>
#include "lib.h"
int main(void) {
    float a[8], b[4] = {1, 2, 3, 4}, c[8];
    for (int i = 0; i < 8; i++) a[i] = (float)i;
    tl_set_num_threads(2);
    par_add(a, b, c, 2);
    for (int i = 0; i < 8; i++) printf("%g ", c[i]);
    printf("\n");
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_export_load_and_call_from_c(tmp_path: Path) -> None:
    m = build_module(_scaled_add("par_add", ForKind.PARALLEL))
    lib = tmp_path / "lib.so"
    m.export_library(lib)
    assert lib.exists() and (tmp_path / "lib.h").exists() and (tmp_path / "lib.json").exists()
    header = (tmp_path / "lib.h").read_text()
    assert "void par_add(float *A, float *B, float *C, int64_t n);" in header

    loaded = load_module(lib)
    a, b, c = _args(6)
    loaded(a, b, c)
    np.testing.assert_allclose(c, a + b * 2, rtol=1e-6)
    with pytest.raises(ValueError, match=r"argument 2 \(C\)"):
        loaded(a, b, np.zeros((5, 4), "float32"))
    assert loaded.time_evaluator(number=2, repeat=2)(a, b, c).mean > 0
    with pytest.raises(ValueError, match="loaded from a library"):
        loaded.get_source("ll")

    (tmp_path / "main.c").write_text(_C_MAIN)
    exe = tmp_path / "main"
    subprocess.run(
        ["cc", "-o", str(exe), str(tmp_path / "main.c"), str(lib), f"-Wl,-rpath,{tmp_path}"],
        check=True,
        cwd=tmp_path,
    )
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    np.testing.assert_allclose([float(x) for x in out], np.arange(8) + np.tile([2, 4, 6, 8], 2))


def test_export_rejects_libm_names(tmp_path: Path) -> None:
    m = build_module(_scaled_add("exp"))
    a, b, c = _args()
    m(a, b, c)  # the JIT is immune to the clash
    np.testing.assert_allclose(c, a + b * 2, rtol=1e-6)
    with pytest.raises(ValueError, match="libm"):
        m.export_library(tmp_path / "exp.so")


def test_export_vector_math_kernel(tmp_path: Path) -> None:
    """Vector math calls (libmvec where available) link into the exported library."""
    from tensorlang import intrin
    from tensorlang.lower.vectorize import vectorize_loops

    a, c = buf("A", "float32", (32,)), buf("C", "float32", (32,))
    i = Var("i", INT32)
    body = For(
        i,
        const(0),
        const(32),
        ForKind.VECTORIZED,
        BufferStore(c, i, intrin.tanh(BufferLoad(a, i, a.dtype))),
    )
    m = build_module(vectorize_loops(PrimFunc("vtanh", (a, c), (), body)))
    m.export_library(tmp_path / "vtanh.so")
    loaded = load_module(tmp_path / "vtanh.so")
    x = np.linspace(-3, 3, 32, dtype="float32")
    y = np.zeros(32, "float32")
    loaded(x, y)
    np.testing.assert_allclose(y, np.tanh(x), rtol=1e-5, atol=1e-6)


def _in_place_parallel_add_one(n: int, tasks: int, x: np.ndarray):
    """A kernel adding 1 to `x` in place, its loop cut into `tasks` parallel tasks (every run of
    a task adds 1 to its part once more): the module (which keeps the code alive), its packed
    entry and the arguments for it."""
    import tensorlang as tl

    A = tl.placeholder((n,), "float32", name="A")
    B = tl.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = tl.create_schedule(B.op)
    outer, _ = s[B].split(B.op.axis[0], nparts=tasks)
    s[B].parallel(outer)
    f = tl.build(s, [A, B])
    ffi = native().ffi
    address = x.__array_interface__["data"][0]
    # Both arguments at x (the checked call refuses an output that overlaps an input).
    return f, f._packed, ffi.new("int64_t[2]", [address, address])


def test_back_to_back_parallel_loops_run_each_task_once() -> None:
    """A job of 2 tasks, then one of 64, over and over: a worker whose claim failed at the end
    of the small job must not run a task of the big one that was never claimed for it (a task
    run twice, and a caller that returned while a task still read its closure, crashed the
    in-model verdict now and then)."""
    small_x, big_x = np.zeros(2, "float32"), np.zeros(4096, "float32")
    _small_module, small, small_args = _in_place_parallel_add_one(2, 2, small_x)
    _big_module, big, big_args = _in_place_parallel_add_one(4096, 64, big_x)
    rounds = 300_000  # the race showed in every run of this many (a third of a second)
    for _ in range(rounds):
        small(small_args)
        big(big_args)
    assert np.all(small_x == rounds) and np.all(big_x == rounds)
