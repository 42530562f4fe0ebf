"""Targets: the current-target scope, what a Target tells schedules, code for another CPU than
this one (AVX2 and SSE builds run here), and topi schedules that follow the target's lanes."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from topi_check import assert_close, shape_of, uniform

import tensorlang as tl
from tensorlang.codegen.cpuinfo import CACHE_DEFAULTS, GENERIC_CACHES, read_sysfs_caches
from tensorlang.codegen.target import host_target
from topi import nn, x86
from topi import testing as ref

HASWELL, SSE = "llvm -mcpu=haswell", "llvm -mcpu=x86-64"
#: target -> (float32 lanes, vector registers, the assembly registers it may use, those it must not)
ISAS = {
    HASWELL: (8, 16, "ymm", ("zmm",)),
    SSE: (4, 16, "xmm", ("ymm", "zmm")),
}


def test_current_target_is_the_host_outside_any_scope():
    assert tl.Target.current() == tl.Target("llvm")
    assert tl.Target.current() is host_target()
    assert tl.Target.current(allow_none=True) is None
    with tl.Target(HASWELL) as t:
        assert tl.Target.current(allow_none=True) is t


def test_target_scopes_nest_and_restore():
    outer, inner = tl.Target(HASWELL), tl.Target(SSE)
    with outer as entered:
        assert entered is outer and tl.Target.current() is outer
        with inner:
            assert tl.Target.current() is inner
        assert tl.Target.current() is outer
    assert tl.Target.current() == tl.Target("llvm")


def test_target_scope_leaving_out_of_order_raises():
    a, b = tl.Target(HASWELL), tl.Target(SSE)
    a.__enter__()
    b.__enter__()
    with pytest.raises(RuntimeError, match="out of order"):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)
    assert tl.Target.current() == tl.Target("llvm")


def test_target_scope_is_per_thread():
    """Threads never see each other's scope; a new thread starts at the host."""
    barrier = threading.Barrier(3)
    seen: dict[str, str] = {}

    def work(spec: str | None) -> None:
        if spec is None:
            barrier.wait()
            seen["none"] = str(tl.Target.current())
            barrier.wait()
            return
        with tl.Target(spec):
            barrier.wait()  # all threads are inside their scopes now
            seen[spec] = str(tl.Target.current())
            barrier.wait()

    threads = [threading.Thread(target=work, args=(spec,)) for spec in (HASWELL, SSE, None)]
    with tl.Target(HASWELL):  # the main thread's scope is not inherited by the threads
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert seen == {HASWELL: HASWELL, SSE: SSE, "none": "llvm"}


@pytest.mark.parametrize("spec, lanes, registers, fma", [
    (HASWELL, 8, 16, True),
    (SSE, 4, 16, False),
    ("llvm -mcpu=skylake-avx512", 16, 32, True),
    ("llvm -mcpu=skylake-avx512 -mattr=-avx512f", 8, 16, True),
    ("llvm -mcpu=haswell -mattr=-fma", 8, 16, False),
])
def test_target_describes_the_cpu(spec, lanes, registers, fma):
    t = tl.Target(spec)
    assert t.vector_lanes("float32") == lanes
    assert t.vector_lanes("float64") == lanes // 2
    assert t.vector_lanes("int8") == lanes * 4
    assert (t.vector_registers, t.has_fma) == (registers, fma)
    assert t.cpu_signature.startswith(t.mcpu) and str(t.vector_bits) in t.cpu_signature


def test_cache_sizes_of_named_cpus_and_of_the_host(tmp_path):
    assert tl.Target(HASWELL).caches == CACHE_DEFAULTS["haswell"]
    assert tl.Target(HASWELL).caches.l1d == 32 * 1024
    assert tl.Target("llvm -mcpu=znver5").caches.l1d == 48 * 1024
    assert tl.Target(SSE).caches == GENERIC_CACHES
    host = tl.Target("llvm").caches
    assert 0 < host.l1d < host.l2 <= host.l3
    from pathlib import Path

    sysfs = read_sysfs_caches(Path("/sys/devices/system/cpu/cpu0/cache"))
    if sysfs is not None:
        assert host == sysfs
    # The sysfs format: one index directory per cache; instruction caches do not count.
    for name, (level, kind, size) in {"index0": (1, "Data", "48K"),
                                      "index1": (1, "Instruction", "32K"),
                                      "index2": (2, "Unified", "2048K"),
                                      "index3": (3, "Unified", "30M")}.items():
        d = tmp_path / name
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    parsed = read_sysfs_caches(tmp_path)
    assert (parsed.l1d, parsed.l2, parsed.l3) == (48 << 10, 2048 << 10, 30 << 20)
    assert read_sysfs_caches(tmp_path / "missing") is None


def _saxpy(n: int) -> tuple[tl.Schedule, list[tl.Tensor]]:
    a = tl.placeholder((n,), name="a")
    b = tl.placeholder((n,), name="b")
    c = tl.compute((n,), lambda i: a[i] * 3.0 + b[i], name="c")
    s = tl.create_schedule(c.op)
    _, inner = s[c].split(c.op.axis[0], factor=tl.Target.current().vector_lanes("float32"))
    s[c].vectorize(inner)
    return s, [a, b, c]


def _assert_isa(module: tl.Module, spec: str) -> None:
    asm = module.get_source("asm")
    _, _, uses, forbidden = ISAS[spec]
    assert uses in asm
    for reg in forbidden:
        assert reg not in asm, f"{spec} code uses {reg} registers"


@pytest.mark.parametrize("spec", [HASWELL, SSE])
def test_build_for_an_older_cpu_emits_its_isa_and_runs_here(spec):
    with tl.Target(spec):
        s, args = _saxpy(103)
    f = tl.build(s, args, target=spec)
    assert f.target == tl.Target(spec)
    _assert_isa(f, spec)
    rng = np.random.default_rng(0)
    a, b = uniform(rng, 103), uniform(rng, 103)
    c = np.zeros(103, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a * 3.0 + b, rtol=1e-6)


def test_build_uses_the_current_target_and_an_explicit_one_wins():
    s, args = _saxpy(64)
    with tl.Target(HASWELL):
        scoped = tl.build(s, args)
        explicit = tl.build(s, args, target=SSE)
    assert scoped.target == tl.Target(HASWELL)
    _assert_isa(scoped, HASWELL)
    assert explicit.target == tl.Target(SSE)
    _assert_isa(explicit, SSE)
    assert tl.build(s, args).target == tl.Target("llvm")


def _matmul():
    a, b = tl.placeholder((37, 29), name="a"), tl.placeholder((29, 45), name="b")
    return [a, b], nn.matmul(a, b), x86.schedule_matmul, ref.matmul_python, 29


def _dense():
    d, w = tl.placeholder((13, 31), name="d"), tl.placeholder((19, 31), name="w")
    return [d, w], nn.dense(d, w), x86.schedule_dense, ref.dense_python, 31


def _conv2d():
    d, k = tl.placeholder((1, 5, 9, 11), name="d"), tl.placeholder((19, 5, 3, 3), name="k")
    return ([d, k], nn.conv2d_nchw(d, k, 1, 1), x86.schedule_conv2d_nchw,
            lambda a, b: ref.conv2d_nchw_python(a, b, 1, 1, 1), 45)


def _depthwise():
    d, k = tl.placeholder((1, 7, 13, 17), name="d"), tl.placeholder((7, 1, 3, 3), name="k")
    return ([d, k], nn.depthwise_conv2d_nchw(d, k, 1, 1), x86.schedule_depthwise_conv2d_nchw,
            lambda a, b: ref.depthwise_conv2d_nchw_python(a, b, 1, 1), 9)


def _packed_width(out: tl.Tensor) -> int | None:
    """The innermost extent of the packed operand layout behind `out`, if it has one."""
    stack, seen = [out.op], set()
    while stack:
        op = stack.pop()
        if id(op) in seen or not isinstance(op, tl.ComputeOp):
            continue
        seen.add(id(op))
        if op.tag in ("injective,panel_pack", "injective,kernel_pack"):
            return shape_of(op.output(0))[-1]
        stack.extend(t.op for t in op.input_tensors)
    return None


@pytest.mark.filterwarnings("ignore:workload")
@pytest.mark.parametrize("spec", [HASWELL, SSE])
@pytest.mark.parametrize("op", [_matmul, _dense, _conv2d, _depthwise])
def test_topi_fallback_schedules_follow_the_target(spec, op):
    lanes = ISAS[spec][0]
    with tl.Target(spec):
        inputs, out, schedule, reference, reduction = op()
        s = schedule([out])
        f = tl.build(s, [*inputs, out])
    assert _packed_width(out) in (None, lanes)
    if op is not _depthwise:
        assert _packed_width(out) == lanes
    _assert_isa(f, spec)
    ll = f.get_source("ll")
    assert f"<{lanes} x float>" in ll
    assert f"<{2 * lanes} x float>" not in ll, "vectors wider than the target's registers"
    rng = np.random.default_rng(1)
    arrays = [uniform(rng, *shape_of(t)) for t in inputs]
    result = np.zeros(shape_of(out), "float32")
    f(*arrays, result)
    assert_close(result, reference(*arrays), reduction)


@pytest.mark.filterwarnings("ignore:workload")
@pytest.mark.parametrize("dtype, out_dtype, lanes", [("int8", "int32", 8), ("float64", None, 4)])
def test_gemm_panels_are_one_vector_of_the_accumulation_dtype(dtype, out_dtype, lanes):
    """int8 inputs accumulate in int32: panels of 8 int32 lanes on AVX2, not 32 int8 lanes."""
    with tl.Target(HASWELL):
        d, w = tl.placeholder((13, 31), dtype, name="d"), tl.placeholder((19, 31), dtype, name="w")
        out = nn.dense(d, w, out_dtype=out_dtype)
        f = tl.build(x86.schedule_dense(out), [d, w, out])
    assert _packed_width(out) == lanes
    rng = np.random.default_rng(2)
    a, b = (rng.integers(-8, 9, size=s).astype(dtype) for s in ((13, 31), (19, 31)))
    result = np.zeros((13, 19), out.dtype)
    f(a, b, result)
    np.testing.assert_array_equal(result, a.astype(out.dtype) @ b.astype(out.dtype).T)
