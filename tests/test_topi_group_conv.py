"""Grouped convolution on NCHW[x]c activations: group_conv2d_NCHWc against numpy and PyTorch on
awkward shapes (groups 1, 2, 3 and more; channels per group 1, 3, 4, 8, 24, narrower and wider
than a vector and not multiples of it; strides, padding, dilation, prime image sizes) on the host
target and on AVX2; its kernel packing; random configs of its template; its fallback config per
target; and the layout pass keeping it blocked between convolutions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from topi_check import assert_close, run_op, shape_of, uniform

import autotune
import tensorlang as tl
import topi.graph as tg
from topi import nn, x86
from topi import testing as ref
from topi.graph.reference import run_reference

# Untuned templates warn once per workload; these tests run them untuned on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

TASK = "group_conv2d_NCHWc.x86"
HASWELL = "llvm -mcpu=haswell"
TARGETS = [None, HASWELL]


def _in_target(target: str | None, fn):
    if target is None:
        return fn()
    with tl.Target(target):
        return fn()


def _torch_group_conv(data: np.ndarray, weight: np.ndarray, stride, padding, dilation,
                      groups: int) -> np.ndarray:
    """PyTorch's grouped convolution, with the (possibly asymmetric) padding applied first."""
    dh, dw = nn.utils.as_pair(dilation, "dilation")
    r, s = weight.shape[2:]
    top, left, bottom, right = nn.get_pad_tuple(padding, ((r - 1) * dh + 1, (s - 1) * dw + 1))
    x = torch.nn.functional.pad(torch.from_numpy(data), (left, right, top, bottom))
    out = torch.nn.functional.conv2d(x, torch.from_numpy(weight), stride=stride,
                                     dilation=(dh, dw), groups=groups)
    return out.numpy()


CASES = [
    # N, groups, in per group, out per group, bi (0: NCHW data), bo, H, W, R, stride, padding,
    # dilation
    (1, 1, 24, 24, 8, 8, 13, 13, 3, 1, 1, 1),           # one group
    (1, 2, 8, 8, 16, 16, 11, 7, 3, 2, 1, 1),            # two groups in one vector
    (1, 3, 8, 8, 8, 8, 13, 11, 3, 1, "SAME", 1),        # three groups, one vector each on AVX2
    (2, 3, 3, 3, 0, 3, 7, 5, 3, 2, (1, 0, 2, 1), 1),    # 3 per group, NCHW data
    (1, 8, 1, 2, 8, 16, 7, 7, 3, 2, 1, 1),              # 1 input channel per group
    (1, 8, 4, 4, 16, 16, 13, 13, 3, 1, 1, 1),           # ResNeXt's 4 per group: 4 in a vector
    (1, 2, 24, 24, 8, 16, 7, 7, 3, 2, (1, 0, 2, 1), 1),  # 24 per group: blocks straddle groups
    (1, 2, 8, 16, 8, 8, 11, 11, 3, 1, 2, 2),            # a group two blocks wide, dilated
    (1, 3, 4, 8, 4, 8, 7, 5, 1, 1, 0, 1),               # 1x1, fewer inputs than outputs
    (1, 5, 8, 8, 8, 8, 5, 3, 3, 2, "SAME", (2, 1)),     # prime groups and image
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES)
def test_group_conv2d_NCHWc(case, target, rng):
    n, groups, per_in, per_out, bi, bo, h, w, r, stride, padding, dilation = case
    c, k = groups * per_in, groups * per_out
    plain = uniform(rng, n, c, h, w)
    weight = uniform(rng, k, per_in, r, r)
    packed = nn.pack_group_conv2d_kernel(weight, groups, bo)
    array = ref.layout_transform_python(plain, "NCHW", f"NCHW{bi}c") if bi else plain
    data = tl.placeholder(array.shape, name="data")
    kernel = tl.placeholder(packed.shape, name="kernel")

    def run():
        out = nn.group_conv2d_NCHWc(data, kernel, stride, padding, dilation, groups)
        return run_op(out, [data, kernel], [array, packed], x86.schedule_group_conv2d_NCHWc)

    got = ref.layout_transform_python(_in_target(target, run), f"NCHW{bo}c", "NCHW")
    reduction = per_in * r * r
    assert_close(got, ref.group_conv2d_nchw_python(plain, weight, stride, padding, dilation,
                                                   groups), reduction)
    assert_close(got, _torch_group_conv(plain, weight, stride, padding, dilation, groups),
                 reduction)


def test_fused_tail(rng):
    """bias (laid out as the output) and relu, computed in the output stage."""
    data = tl.placeholder((1, 2, 9, 7, 16), name="data")
    kernel = tl.placeholder((2, 16, 3, 3, 16), name="kernel")
    bias = tl.placeholder((1, 2, 1, 1, 16), name="bias")
    out = nn.relu(nn.add(nn.group_conv2d_NCHWc(data, kernel, 1, 1, 1, 4), bias))
    arrays = [uniform(rng, 1, 2, 9, 7, 16), uniform(rng, 2, 16, 3, 3, 16),
              uniform(rng, 1, 2, 1, 1, 16)]
    got = run_op(out, [data, kernel, bias], arrays, x86.schedule_group_conv2d_NCHWc)
    conv = ref.group_conv2d_NCHWc_python(arrays[0], arrays[1], 1, 1, 1, 4)
    assert_close(got, np.maximum(conv + arrays[2], 0.0), 8 * 9)


def test_kernel_packing():
    """Narrow groups share a block (no channel padded), wide ones read only their inputs, and
    unpacking gives the weight back."""
    assert nn.group_conv2d_width(128, 128, 32, 16) == 16   # ResNeXt 32x4d: 4 groups a block
    assert nn.group_conv2d_width(400, 400, 25, 16) == 16   # RegNet-X: one group a block
    assert nn.group_conv2d_width(400, 400, 25, 8) == 16    # ... two blocks a group on AVX2
    assert nn.group_conv2d_width(48, 48, 2, 16) == 48      # 24 per group: a block spans two
    rng = np.random.default_rng(0)
    weight = uniform(rng, 48, 24, 3, 3)
    packed = nn.pack_group_conv2d_kernel(weight, 2, 16)
    assert packed.shape == (3, 48, 3, 3, 16)
    np.testing.assert_array_equal(ref.unpack_group_conv2d_kernel(packed, 48, 2), weight)
    # Block 0 holds group 0 only: its second group's columns are zero.
    assert not packed[0, 24:].any() and packed[1, 24:].any()


def test_bad_arguments():
    data = tl.placeholder((1, 2, 7, 7, 16), name="data")
    with pytest.raises(ValueError, match="reads 32 input channels per block, expected 16"):
        nn.group_conv2d_NCHWc(data, tl.placeholder((2, 32, 3, 3, 16)), 1, 1, 1, 4)
    with pytest.raises(ValueError, match="must divide by groups=3"):
        nn.group_conv2d_NCHWc(data, tl.placeholder((2, 32, 3, 3, 16)), 1, 1, 1, 3)
    with pytest.raises(ValueError, match="groups must be a positive int"):
        nn.group_conv2d_NCHWc(data, tl.placeholder((2, 32, 3, 3, 16)), 1, 1, 1, 0)


TEMPLATE_CASES = [
    # data shape, groups, out channels, bo, R, stride, padding
    ((1, 2, 13, 11, 16), 8, 32, 16, 3, 1, 1),      # 4 per group
    ((1, 4, 7, 7, 8), 2, 32, 8, 3, 2, (0, 1)),     # 16 per group, two blocks each
    ((1, 6, 11, 5, 8), 3, 48, 16, 1, 1, 0),        # 16 per group, blocks straddle groups
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", TEMPLATE_CASES)
def test_random_template_configs_are_correct(case, target, rng):
    """A few random configs of the space (and the fallback) build and match numpy."""
    data_shape, groups, k, bo, r, stride, padding = case
    channels = data_shape[1] * data_shape[4]
    width = nn.group_conv2d_width(channels, k, groups, bo)
    args = (data_shape, (k // bo, width, r, r, bo), stride, padding, 1, groups, "float32")
    task = autotune.create_task(TASK, args, target=target or "llvm")
    weight = uniform(rng, k, channels // groups, r, r)
    arrays = [uniform(rng, *data_shape), nn.pack_group_conv2d_kernel(weight, groups, bo)]
    expected = ref.group_conv2d_NCHWc_python(*arrays, stride, padding, 1, groups)
    assert task.flop == 2 * expected.size * channels // groups * r * r  # no zero weights
    valid = task.config_space.valid_indices()
    fallback = task.fallback_config()
    assert fallback is not None
    configs = [fallback] + [int(i) for i in rng.choice(valid, size=min(4, len(valid)),
                                                         replace=False)]
    for config in configs:
        try:
            s, tensors = task.instantiate(config)
        except autotune.InstantiationError:
            continue  # a config the template rejects (too many registers) is never measured
        f = tl.build(s, tensors, target=task.compile_target)
        out = np.zeros(shape_of(tensors[-1]), "float32")
        f(*arrays, out)
        assert_close(out, expected, channels // groups * r * r)


@pytest.mark.parametrize("target, registers", [(None, None), (HASWELL, 16)])
def test_fallback_follows_the_target(target, registers):
    """The fallback's register block fits the target's registers, stacks only blocks of one
    group, and is a config of the space."""
    registers = registers or tl.Target.current().vector_registers
    for groups, bo in ((25, 16), (25, 8), (50, 8)):   # 16 per group: 1 or 2 blocks; 8 per group
        width = nn.group_conv2d_width(400, 400, groups, bo)
        args = ((1, 400 // bo, 14, 14, bo), (400 // bo, width, 3, 3, bo), 1, 1, 1, groups,
                "float32")
        task = autotune.create_task(TASK, args, target=target or "llvm")
        fallback = autotune.FallbackConfig()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _in_target(target, lambda: task.template.run(fallback, task.args))
        oc = fallback["tile_oc"].val
        assert oc == min(2, max(1, 400 // groups // bo))
        assert oc * fallback["tile_oh"].size[-1] * fallback["tile_ow"].size[-1] \
            <= registers - oc - 2
        assert task.config_space.find(fallback.knob_values()) is not None


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype("float32")


def _chain(rng: np.random.Generator, channels: int, groups: int, size: int) -> tg.Graph:
    """conv -> group conv (stride 2) -> conv, each with a bias and a relu, and a residual add
    around the last two (a RegNet / ResNeXt bottleneck)."""
    g = tg.Graph()
    x = g.input("x", (1, 8, size, size))
    y = g.relu(g.bias_add(g.conv2d(x, g.constant(_w(rng, channels, 8, 1, 1))),
                          g.constant(_w(rng, channels))))
    z = g.conv2d(y, g.constant(_w(rng, channels, channels // groups, 3, 3)), stride=2,
                 padding=1, groups=groups)
    z = g.relu(g.bias_add(z, g.constant(_w(rng, channels))))
    z = g.conv2d(z, g.constant(_w(rng, channels, channels, 1, 1)))
    short = g.conv2d(y, g.constant(_w(rng, channels, channels, 1, 1)), stride=2)
    g.output(g.relu(g.add(z, short)))
    return g


@pytest.mark.parametrize("target", ["llvm", HASWELL])
@pytest.mark.parametrize("channels, groups", [(32, 8), (48, 3), (64, 4), (64, 8)])
def test_group_conv_stays_blocked_between_convs(channels, groups, target, rng):
    """After the passes, the only layout transforms are at the input and the output, and the
    module matches the numpy reference of the original graph."""
    g = _chain(rng, channels, groups, 13)
    with tl.Target(target):
        optimized = tg.optimize(g)
        ops = [op for n in optimized.ops
               for op in ([b.op for b in n.body.ops] if n.body is not None else [n.op])]
    assert ops.count("group_conv2d_NCHWc") == 1 and "group_conv2d" not in ops
    assert ops.count("layout_transform") == 2
    # Groups of half a vector (8 channels on AVX-512, 4 on AVX2) fill half-vector blocks.
    lanes = tl.Target(target).vector_lanes("float32")
    grouped = next(n for n in optimized.ops if n.body is not None
                   and "group_conv2d_NCHWc" in [b.op for b in n.body.ops])
    assert grouped.shape[-1] == (lanes // 2 if channels // groups == lanes // 2 else
                                 min(16, lanes))
    inputs = {"x": _w(rng, 1, 8, 13, 13)}
    module = tg.build(g, target=target)
    for got, want in zip(module(**inputs), run_reference(g, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_graph_extracts_the_group_template(rng):
    tasks = tg.extract_tasks(_chain(rng, 32, 8, 13))
    names = [task.name for task, _ in tasks]
    assert TASK in names
