"""int8 and bf16: the x86 dot intrinsics per target (assembly + exact numpy checks), the int8
dense through topi.nn.dense and topi.x86.schedule_dense, and topi.nn.qnn."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tensorlang as tl
import topi
from topi.x86.tensor_intrin import dot_bf16, dot_int8, has_bf16_dot, int8_dot_kind, int8_lanes

HOST = tl.Target("llvm")


def _host_has(*features: str) -> bool:
    return all(HOST._has(f) for f in features)


# target, expected kind, instruction in the assembly, whether this host can run the code
INT8_TARGETS = [
    ("llvm -mcpu=cascadelake", "avx512vnni", "vpdpbusd", _host_has("avx512vnni", "avx512bw")),
    ("llvm -mcpu=sapphirerapids", "avx512vnni", "vpdpbusd", False),
    ("llvm -mcpu=znver4", "avx512vnni", "vpdpbusd", _host_has("avx512vnni", "avx512bw")
     and HOST.mcpu == "znver4"),
    ("llvm -mcpu=alderlake", "avxvnni", "{vex}\tvpdpbusd", _host_has("avxvnni")),
    ("llvm -mcpu=skylake-avx512", "maddubs", "vpmaddubsw", _host_has("avx512bw")),
    ("llvm -mcpu=haswell", "maddubs", "vpmaddubsw", _host_has("avx2")),
]


def _tensorized_dot(target: str, m: int, n: int, k: int):
    """out (m, n) = data (m, k) u8 . packed kernel, one intrinsic per (row, vector, 4 k)."""
    with tl.Target(target):
        lanes = int8_lanes()
        intrin = dot_int8(lanes)
        data = tl.placeholder((m, k), "uint8", name="data")
        packed = tl.placeholder((n // lanes, k // 4, lanes, 4), "int8", name="packed")
        rk = tl.reduce_axis((0, k), name="k")
        out = tl.compute((m, n), lambda i, j: tl.sum(
            data[i, rk].astype("int32")
            * packed[j // lanes, rk // 4, j % lanes, rk % 4].astype("int32"), axis=rk), name="out")
        s = tl.create_schedule(out.op)
        i, j = s[out].op.axis
        jo, ji = s[out].split(j, factor=lanes)
        ko, ki = s[out].split(rk, factor=4)
        s[out].reorder(i, jo, ko, ji, ki)
        s[out].tensorize(ji, intrin)
        return tl.build(s, [data, packed, out], target=target), lanes


def _pack(w: np.ndarray, lanes: int) -> np.ndarray:
    n, k = w.shape
    return w.reshape(n // lanes, lanes, k // 4, 4).transpose(0, 2, 1, 3).copy()


@pytest.mark.parametrize("target, kind, instruction, runs", INT8_TARGETS,
                         ids=[t[0].split("=")[1] for t in INT8_TARGETS])
def test_int8_dot_intrinsic(target, kind, instruction, runs):
    assert int8_dot_kind(tl.Target(target)) == kind
    f, lanes = _tensorized_dot(target, 3, 32, 16)
    assert instruction in f.get_source("asm")
    if kind != "maddubs":
        assert "vpmaddubsw" not in f.get_source("asm")
    if not runs:
        return
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (3, 16)).astype("uint8")
    w = rng.integers(-128, 128, (32, 16)).astype("int8")
    a[0], w[0] = 255, -128  # the extremes that saturate a plain vpmaddubsw
    out = np.zeros((3, 32), "int32")
    f(a, _pack(w, lanes), out)
    np.testing.assert_array_equal(out, a.astype(np.int64) @ w.astype(np.int64).T)


@pytest.mark.parametrize("target, runs", [
    ("llvm -mcpu=sapphirerapids", False),
    ("llvm -mcpu=znver4", HOST.mcpu == "znver4"),
    ("llvm -mcpu=cooperlake", _host_has("avx512bf16")),
])
def test_bf16_dot_intrinsic(target, runs):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert has_bf16_dot(tl.Target(target))
    assert not has_bf16_dot(tl.Target("llvm -mcpu=icelake-server"))
    m, n, k = 2, 32, 8
    with tl.Target(target):
        data = tl.placeholder((m, k), "bfloat16", name="data")
        packed = tl.placeholder((n // 16, k // 2, 16, 2), "bfloat16", name="packed")
        rk = tl.reduce_axis((0, k), name="k")
        out = tl.compute((m, n), lambda i, j: tl.sum(
            data[i, rk].astype("float32")
            * packed[j // 16, rk // 2, j % 16, rk % 2].astype("float32"), axis=rk), name="out")
        s = tl.create_schedule(out.op)
        i, j = s[out].op.axis
        jo, ji = s[out].split(j, factor=16)
        ko, ki = s[out].split(rk, factor=2)
        s[out].reorder(i, jo, ko, ji, ki)
        s[out].tensorize(ji, dot_bf16())
        f = tl.build(s, [data, packed, out], target=target)
    assert "vdpbf16ps" in f.get_source("asm")
    if not runs:
        return
    rng = np.random.default_rng(0)
    a = rng.integers(-8, 8, (m, k)).astype(ml_dtypes.bfloat16)  # small integers: exact sums
    w = rng.integers(-8, 8, (n, k)).astype(ml_dtypes.bfloat16)
    wp = w.reshape(n // 16, 16, k // 2, 2).transpose(0, 2, 1, 3).copy()
    o = np.zeros((m, n), "float32")
    f(a, wp, o)
    np.testing.assert_array_equal(o, a.astype("float32") @ w.astype("float32").T)


def _int8_dense(m: int, n: int, k: int, target: str = "llvm", bias: bool = False):
    with tl.Target(target):
        data = tl.placeholder((m, k), "uint8", name="data")
        weight = tl.placeholder((n, k), "int8", name="weight")
        b = tl.placeholder((n,), "int32", name="bias") if bias else None
        out = topi.nn.dense(data, weight, b, out_dtype="int32")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # no tuned config: the fallback
            s = topi.x86.schedule_dense(out)
        args = [data, weight, *([b] if bias else []), out]
        return tl.build(s, args, target=target)


@pytest.mark.parametrize("m, n, k, bias", [(64, 64, 64, False), (13, 40, 18, True),
                                           (1, 16, 4, False), (50, 96, 256, False)])
@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_int8_dense_is_exact(m, n, k, bias, target):
    if "haswell" in target and not _host_has("avx2"):
        pytest.skip("the host cannot run AVX2 code")
    f = _int8_dense(m, n, k, target, bias)
    rng = np.random.default_rng(m + n + k)
    a = rng.integers(0, 256, (m, k)).astype("uint8")
    w = rng.integers(-128, 128, (n, k)).astype("int8")
    a[0, :], w[0, :] = 255, -128
    ref = a.astype(np.int64) @ w.astype(np.int64).T
    args = [a, w]
    if bias:
        bb = rng.integers(-1000, 1000, n).astype("int32")
        args.append(bb)
        ref = ref + bb
    out = np.zeros((m, n), "int32")
    f(*args, out)
    np.testing.assert_array_equal(out, ref)


def test_dense_int8_template_configs_are_exact():
    import autotune

    task = autotune.create_task("dense_int8.x86", ((24, 64), (64, 64), "int32"))
    assert len(task.config_space) > 1 and task.flop == 2 * 24 * 64 * 64
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (24, 64)).astype("uint8")
    w = rng.integers(-128, 128, (64, 64)).astype("int8")
    valid = task.config_space.valid_indices()
    for index in rng.choice(valid, size=min(3, len(valid)), replace=False):
        s, tensors = task.instantiate(int(index))
        f = tl.build(s, tensors, target=task.compile_target)
        out = np.zeros((24, 64), "int32")
        f(a, w, out)
        np.testing.assert_array_equal(out, a.astype(np.int64) @ w.astype(np.int64).T)


def _run(out, inputs, arrays):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = topi.x86.schedule_injective(out)
    f = tl.build(s, [*inputs, out])
    result = np.zeros(tuple(int(d) for d in out.shape), out.dtype)
    f(*arrays, result)
    return result


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("out_dtype", ["uint8", "int8"])
def test_qnn_quantize_dequantize(per_channel, out_dtype):
    from topi.nn import qnn
    from topi.testing import qnn as ref

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 3, 5)) * 4).astype("float32")
    x[0, 0, :3] = [0.5, 1.5, -2.5]  # ties: half to even
    zp = 128 if out_dtype == "uint8" else 0
    if per_channel:
        scale = np.array([0.5, 0.05, 1.0], "float32")
        zero = np.array([zp, zp - 3, zp + 2], "int32")
    else:
        scale, zero = np.array([0.5], "float32"), np.array([zp], "int32")
    xt = tl.placeholder(x.shape, "float32", name="x")
    st = tl.placeholder(scale.shape, "float32", name="scale")
    zt = tl.placeholder(zero.shape, "int32", name="zero")
    q = _run(qnn.quantize(xt, st, zt, axis=1, out_dtype=out_dtype), [xt, st, zt], [x, scale, zero])
    expected = ref.quantize_python(x, scale, zero, 1, out_dtype)
    np.testing.assert_array_equal(q, expected)
    qt = tl.placeholder(x.shape, out_dtype, name="q")
    d = _run(qnn.dequantize(qt, st, zt, axis=1), [qt, st, zt], [q, scale, zero])
    np.testing.assert_array_equal(d, ref.dequantize_python(q, scale, zero, 1))


def test_qnn_requantize_per_channel_and_python_scalars():
    from topi.nn import qnn
    from topi.testing import qnn as ref

    rng = np.random.default_rng(1)
    acc = rng.integers(-40000, 40000, (4, 6)).astype("int32")
    acc[0, :2] = [5, 15]  # (x * 0.1) = 0.5 and 1.5: ties
    out_scale = np.linspace(0.5, 2.0, 6).astype("float32")
    xt = tl.placeholder(acc.shape, "int32", name="acc")
    ot = tl.placeholder(out_scale.shape, "float32", name="out_scale")
    r = _run(qnn.requantize(xt, 0.1, 0, ot, 3, axis=1, out_dtype="int8"), [xt, ot],
             [acc, out_scale])
    np.testing.assert_array_equal(r, ref.requantize_python(acc, 0.1, 0, out_scale, 3, 1, "int8"))
    r = _run(qnn.requantize(xt, 0.1, 0, 20.0, 128, out_dtype="uint8"), [xt], [acc])
    np.testing.assert_array_equal(r, ref.requantize_python(acc, 0.1, 0, 20.0, 128, 1, "uint8"))


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_bf16_dense_matches_float32(target):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if "haswell" in target and not _host_has("avx2"):
        pytest.skip("the host cannot run AVX2 code")
    m, n, k = 20, 48, 70
    with tl.Target(target):
        data = tl.placeholder((m, k), "bfloat16", name="data")
        weight = tl.placeholder((n, k), "bfloat16", name="weight")
        out = topi.nn.dense(data, weight)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = topi.x86.schedule_dense(out)
        f = tl.build(s, [data, weight, out], target=target)
    if target == "llvm" and has_bf16_dot():
        assert "vdpbf16ps" in f.get_source("asm")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((n, k)).astype(ml_dtypes.bfloat16)
    o = np.zeros((m, n), "float32")
    f(a, w, o)
    ref = a.astype("float32") @ w.astype("float32").T  # the same bf16 inputs, float32 sums
    np.testing.assert_allclose(o, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape, zero_point", [
    ((1, 8, 6, 6, 16, 3, 1, 1), 0),
    ((1, 20, 9, 9, 40, 3, 1, 2), 7),
    ((2, 3, 7, 5, 5, 1, 0, 1), 128),
])
@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_int8_conv2d_is_exact(shape, zero_point, target):
    from topi.nn.conv2d_int8 import conv2d_nchw_int8
    from topi.x86.conv2d_int8 import schedule_conv2d_nchw_int8

    if "haswell" in target and not _host_has("avx2"):
        pytest.skip("the host cannot run AVX2 code")
    n, c, h, w, k, r, pad, stride = shape
    with tl.Target(target), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = tl.placeholder((n, c, h, w), "uint8", name="data")
        kernel = tl.placeholder((k, c, r, r), "int8", name="kernel")
        out = conv2d_nchw_int8(data, kernel, stride, pad, 1, zero_point)
        f = tl.build(schedule_conv2d_nchw_int8(out), [data, kernel, out], target=target)
    rng = np.random.default_rng(c + k)
    a = rng.integers(0, 256, (n, c, h, w)).astype("uint8")
    wt = rng.integers(-128, 128, (k, c, r, r)).astype("int8")
    result = np.zeros(tuple(int(d) for d in out.shape), "int32")
    f(a, wt, result)
    np.testing.assert_array_equal(result, _conv_int8_reference(a, wt, zero_point, pad, stride))


def _conv_int8_reference(a: np.ndarray, wt: np.ndarray, zero_point: int, pad: int,
                         stride: int, depthwise: bool = False) -> np.ndarray:
    """int64 NCHW convolution of (a - zero_point), the padding counting as the zero point; with
    `depthwise`, channel c by its own (C, 1, R, R) kernel."""
    padded = np.pad(a.astype(np.int64) - zero_point, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    r = wt.shape[2]
    oh, ow = (padded.shape[2] - r) // stride + 1, (padded.shape[3] - r) // stride + 1
    ref = np.zeros((a.shape[0], wt.shape[0], oh, ow), np.int64)
    for y in range(r):
        for x in range(r):
            window = padded[:, :, y:y + stride * oh:stride, x:x + stride * ow:stride]
            tap = wt[:, :, y, x].astype(np.int64)
            ref += (window * tap[None, :, 0, None, None] if depthwise
                    else np.einsum("nchw,kc->nkhw", window, tap))
    return ref


@pytest.mark.parametrize("shape, zero_point", [
    ((1, 16, 7, 7, 32, 1, 0, 1), 0),      # 1x1: the blocked input read as it is
    ((1, 32, 9, 11, 48, 3, 1, 2), 3),     # padded, strided, a zero point
    ((2, 8, 5, 13, 16, 3, 1, 1), 0),      # a block of 4 channels, 13 columns (prime)
])
@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_int8_conv2d_blocked_with_requantize_epilogue(shape, zero_point, target):
    """NCHW[x]c uint8 in, the requantization to uint8 fused into the blocked output."""
    from topi.nn.conv2d_int8 import conv2d_NCHWc_int8
    from topi.x86.conv2d_int8 import schedule_conv2d_nchw_int8

    if "haswell" in target and not _host_has("avx2"):
        pytest.skip("the host cannot run AVX2 code")
    n, c, h, w, k, r, pad, stride = shape
    block = 4 if c == 8 else 16
    rng = np.random.default_rng(c + k)
    a = rng.integers(0, 256, (n, c, h, w)).astype("uint8")
    wt = rng.integers(-128, 128, (k, c, r, r)).astype("int8")
    scale = rng.uniform(1e-4, 4e-4, k).astype("float32")
    with tl.Target(target), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = tl.placeholder((n, c // block, h, w, block), "uint8", name="data")
        kernel = tl.placeholder((k, c, r, r), "int8", name="kernel")
        acc = conv2d_NCHWc_int8(data, kernel, stride, pad, 1, zero_point)
        lanes = int(acc.shape[4])
        blocked_scale = tl.placeholder((k // lanes, lanes), "float32", name="scale")
        scaled = tl.compute(acc.shape, lambda b, o, y, x, i: acc[b, o, y, x, i].astype(
            "float32") * blocked_scale[o, i], name="rescale", tag="elemwise")
        out = topi.nn.qnn.quantize(scaled, 0.5, 10, out_dtype="uint8")
        f = tl.build(schedule_conv2d_nchw_int8(out), [data, kernel, blocked_scale, out],
                     target=target)
    result = np.zeros(tuple(int(d) for d in out.shape), "uint8")
    f(a.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2).copy(), wt,
      scale.reshape(k // lanes, lanes), result)
    ref = _conv_int8_reference(a, wt, zero_point, pad, stride).astype(np.float32) \
        * scale[:, None, None]
    ref = np.clip(np.rint(ref / np.float32(0.5)) + 10, 0, 255).astype("uint8")
    oh, ow = ref.shape[2:]
    blocked_ref = ref.reshape(n, k // lanes, lanes, oh, ow).transpose(0, 1, 3, 4, 2)
    np.testing.assert_array_equal(result, blocked_ref)


def test_conv2d_int8_template_configs_are_exact():
    import autotune

    task = autotune.create_task("conv2d_int8.x86", ((1, 16, 6, 6), (32, 16, 3, 3), 1, 1, 1, 5))
    assert len(task.config_space) > 1
    rng = np.random.default_rng(4)
    a = rng.integers(0, 256, (1, 16, 6, 6)).astype("uint8")
    w = rng.integers(-128, 128, (32, 16, 3, 3)).astype("int8")
    outs = []
    valid = task.config_space.valid_indices()
    for index in rng.choice(valid, size=min(3, len(valid)), replace=False):
        s, tensors = task.instantiate(int(index))
        f = tl.build(s, tensors, target=task.compile_target)
        out = np.zeros((1, 32, 6, 6), "int32")
        f(a, w, out)
        outs.append(out)
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])


def test_qnn_quantize_rounds_ties_to_even():
    from topi.nn import qnn

    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, np.nextafter(np.float32(0.5), 0), 3.49, 1e9,
                  -1e9], "float32")
    xt = tl.placeholder(x.shape, "float32", name="x")
    q = _run(qnn.quantize(xt, 1.0, 0, axis=0, out_dtype="int8"), [xt], [x])
    np.testing.assert_array_equal(q, [0, 2, 2, 0, -2, -2, 0, 3, 127, -128])


@pytest.mark.parametrize("out_dtype", ["uint8", "int16", "int32"])
def test_qnn_quantize_rounds_ties_to_even_at_every_width(out_dtype):
    """8/16-bit outputs round by adding and subtracting 1.5 * 2^23 after a clamp; int32 rounds
    exactly: halves, large values and values past the clamp agree with numpy."""
    from topi.nn import qnn
    from topi.testing.qnn import quantize_python

    x = np.array([1000.5, 1001.5, -1000.5, 254.5, 255.5, 4194303.5, 4194304.0, 3e7, -3e7,
                  8388609.0, 0.49999997], "float32")
    xt = tl.placeholder(x.shape, "float32", name="x")
    q = _run(qnn.quantize(xt, 1.0, 3, axis=0, out_dtype=out_dtype), [xt], [x])
    np.testing.assert_array_equal(q, quantize_python(x, 1.0, 3, axis=0, out_dtype=out_dtype))


@pytest.mark.parametrize("c, size, k, r, stride, blocked", [
    (3, 11, 32, 3, 2, False), (32, 9, 48, 3, 1, True), (16, 7, 16, 1, 1, True)])
def test_bf16_conv2d_matches_float32(c, size, k, r, stride, blocked):
    """vdpbf16ps convolution (NCHW or NCHW16c bf16 in, float32 NCHW16c out) against float32
    sums of the same bf16 values."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from topi.nn.conv2d_int8 import conv2d_NCHWc_bf16
    from topi.testing import conv2d_nchw_python
    from topi.x86.conv2d_int8 import schedule_conv2d_nchw_int8

    if not has_bf16_dot(HOST):
        pytest.skip("the host has no AVX512-BF16")
    shape = (1, c // 16, size, size, 16) if blocked else (1, c, size, size)
    data = tl.placeholder(shape, "bfloat16", name="data")
    kernel = tl.placeholder((k, c, r, r), "bfloat16", name="kernel")
    out = conv2d_NCHWc_bf16(data, kernel, stride, r // 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned: the fallback config
        f = tl.build(schedule_conv2d_nchw_int8(out), [data, kernel, out])
    assert "vdpbf16ps" in f.get_source("asm")
    rng = np.random.default_rng(c)
    a = rng.standard_normal((1, c, size, size)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((k, c, r, r)).astype(ml_dtypes.bfloat16)
    feed = a.reshape(1, c // 16, 16, size, size).transpose(0, 1, 3, 4, 2).copy() if blocked \
        else a
    result = np.zeros(tuple(int(d) for d in out.shape), "float32")
    f(feed, w, result)
    ref = conv2d_nchw_python(a.astype("float32"), w.astype("float32"), stride, r // 2)
    oh = ref.shape[2]
    got = result.transpose(0, 1, 4, 2, 3).reshape(1, -1, oh, oh)[:, :k]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_conv2d_nchw_dispatches_uint8_int8_to_the_int8_path(target):
    """topi.nn.conv2d_nchw(uint8, int8) -> int32 and topi.x86.schedule_conv2d_nchw: exact."""
    if "haswell" in target and not _host_has("avx2"):
        pytest.skip("the host cannot run AVX2 code")
    with tl.Target(target), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = tl.placeholder((1, 13, 7, 11), "uint8", name="data")
        kernel = tl.placeholder((19, 13, 3, 3), "int8", name="kernel")
        out = topi.nn.conv2d_nchw(data, kernel, 2, 1, 1)
        assert out.dtype == "int32"
        f = tl.build(topi.x86.schedule_conv2d_nchw(out), [data, kernel, out], target=target)
    rng = np.random.default_rng(14)
    a = rng.integers(0, 256, (1, 13, 7, 11)).astype("uint8")
    wt = rng.integers(-128, 128, (19, 13, 3, 3)).astype("int8")
    result = np.zeros(tuple(int(d) for d in out.shape), "int32")
    f(a, wt, result)
    np.testing.assert_array_equal(result, _conv_int8_reference(a, wt, 0, 1, 2))


@pytest.mark.parametrize("c", [1, 3, 17, 32])
@pytest.mark.parametrize("r, stride, pad, zero_point", [
    (3, 1, 1, 7), (3, 2, 1, 128), (5, 1, 2, 0), (5, 2, 0, 255)])
@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_int8_depthwise_conv2d_is_exact(c, r, stride, pad, zero_point, target):
    from topi.nn.conv2d_int8 import depthwise_conv2d_nchw_int8
    from topi.x86.conv2d_int8 import schedule_conv2d_nchw_int8

    if "haswell" in target and not _host_has("avx2"):
        pytest.skip("the host cannot run AVX2 code")
    n, h, w = (2, 11, 13) if c == 3 else (1, 7, 9)
    with tl.Target(target), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = tl.placeholder((n, c, h, w), "uint8", name="data")
        kernel = tl.placeholder((c, 1, r, r), "int8", name="kernel")
        out = depthwise_conv2d_nchw_int8(data, kernel, stride, pad, 1, zero_point)
        f = tl.build(schedule_conv2d_nchw_int8(out), [data, kernel, out], target=target)
    rng = np.random.default_rng(c + r)
    a = rng.integers(0, 256, (n, c, h, w)).astype("uint8")
    wt = rng.integers(-128, 128, (c, 1, r, r)).astype("int8")
    result = np.zeros(tuple(int(d) for d in out.shape), "int32")
    f(a, wt, result)
    np.testing.assert_array_equal(
        result, _conv_int8_reference(a, wt, zero_point, pad, stride, depthwise=True))


@pytest.mark.parametrize("c, size, r, stride, zero_point", [
    (32, 9, 3, 1, 3), (48, 7, 5, 2, 0), (16, 13, 3, 2, 200)])
@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_int8_depthwise_blocked_with_requantize_epilogue(c, size, r, stride, zero_point,
                                                         target):
    """NCHW[x]c uint8 in (an int8 convolution's output), the requantization to uint8 fused
    into the blocked output, as int8_layout chains them."""
    from topi.nn.conv2d_int8 import depthwise_conv2d_NCHWc_int8
    from topi.x86.conv2d_int8 import schedule_conv2d_nchw_int8

    if "haswell" in target and not _host_has("avx2"):
        pytest.skip("the host cannot run AVX2 code")
    pad = r // 2
    rng = np.random.default_rng(c + r)
    a = rng.integers(0, 256, (1, c, size, size)).astype("uint8")
    wt = rng.integers(-128, 128, (c, 1, r, r)).astype("int8")
    scale = rng.uniform(1e-3, 4e-3, c).astype("float32")
    with tl.Target(target), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lanes = int8_lanes()
        data = tl.placeholder((1, c // lanes, size, size, lanes), "uint8", name="data")
        kernel = tl.placeholder((c, 1, r, r), "int8", name="kernel")
        acc = depthwise_conv2d_NCHWc_int8(data, kernel, stride, pad, 1, zero_point)
        blocked_scale = tl.placeholder((c // lanes, lanes), "float32", name="scale")
        scaled = tl.compute(acc.shape, lambda b, o, y, x, i: acc[b, o, y, x, i].astype(
            "float32") * blocked_scale[o, i], name="rescale", tag="elemwise")
        out = topi.nn.qnn.quantize(scaled, 0.5, 10, out_dtype="uint8")
        f = tl.build(schedule_conv2d_nchw_int8(out), [data, kernel, blocked_scale, out],
                     target=target)
    result = np.zeros(tuple(int(d) for d in out.shape), "uint8")
    f(a.reshape(1, c // lanes, lanes, size, size).transpose(0, 1, 3, 4, 2).copy(), wt,
      scale.reshape(c // lanes, lanes), result)
    sums = _conv_int8_reference(a, wt, zero_point, pad, stride, depthwise=True)
    ref = sums.astype(np.float32) * scale[:, None, None]
    ref = np.clip(np.rint(ref / np.float32(0.5)) + 10, 0, 255).astype("uint8")
    oh, ow = ref.shape[2:]
    np.testing.assert_array_equal(
        result, ref.reshape(1, c // lanes, lanes, oh, ow).transpose(0, 1, 3, 4, 2))


def test_depthwise_conv2d_int8_template_configs_are_exact():
    import autotune

    task = autotune.create_task("depthwise_conv2d_int8.x86",
                                ((1, 24, 12, 12), (24, 1, 3, 3), 1, 1, 1, 5))
    assert len(task.config_space) > 1
    rng = np.random.default_rng(4)
    a = rng.integers(0, 256, (1, 24, 12, 12)).astype("uint8")
    w = rng.integers(-128, 128, (24, 1, 3, 3)).astype("int8")
    valid = task.config_space.valid_indices()
    for index in rng.choice(valid, size=min(3, len(valid)), replace=False):
        s, tensors = task.instantiate(int(index))
        f = tl.build(s, tensors, target=task.compile_target)
        out = np.zeros((1, 24, 12, 12), "int32")
        f(a, w, out)
        np.testing.assert_array_equal(out, _conv_int8_reference(a, w, 5, 1, 1, depthwise=True))


def test_int8_depthwise_names_bad_inputs():
    from topi.nn.conv2d_int8 import depthwise_conv2d_NCHWc_int8

    data = tl.placeholder((1, 16, 8, 8), "uint8", name="data")
    with pytest.raises(ValueError, match="uint8 data and an int8 kernel"):
        depthwise_conv2d_NCHWc_int8(data, tl.placeholder((16, 1, 3, 3), "float32"))
    with pytest.raises(ValueError, match=r"\(C, 1, R, S\)"):
        depthwise_conv2d_NCHWc_int8(data, tl.placeholder((16, 2, 3, 3), "int8"))
    with pytest.raises(ValueError, match="data has 16 channels, the kernel 8"):
        depthwise_conv2d_NCHWc_int8(data, tl.placeholder((8, 1, 3, 3), "int8"))
    blocked = tl.placeholder((1, 4, 8, 8, 4), "uint8", name="blocked")
    with pytest.raises(ValueError, match="a data block of 4 channels for an output block"):
        depthwise_conv2d_NCHWc_int8(blocked, tl.placeholder((16, 1, 3, 3), "int8"),
                                    out_block=16)
