"""The blocks of mobile and modern CNNs as the graph passes and x86 schedules see them: activations
spelt as products (SiLU, Hardswish, GELU), checked against the unfolded graph and numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorlang as tl
import topi
import topi.graph as tg
from topi.graph.graph import FUSED
from topi.graph.passes import PIPELINE, fold_activations, optimize
from topi.graph.passes.channel_shuffle import fold_channel_shuffles
from topi.graph.reference import run_reference
from topi.nn import logistic

TARGETS = ["llvm", "llvm -mcpu=haswell"]


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype("float32")


def _silu(g: tg.Graph, x: tg.Node, swapped: bool = False) -> tg.Node:
    gate = g.sigmoid(x)
    return g.multiply(gate, x) if swapped else g.multiply(x, gate)


def _gelu(g: tg.Graph, x: tg.Node, scale_by: str = "divide") -> tg.Node:
    """GELU as ONNX exporters write it: x * (erf(x / sqrt 2) + 1) * 0.5."""
    if scale_by == "divide":
        scaled = g.divide(x, g.constant(np.array(math.sqrt(2), "float32")))
    else:
        scaled = g.multiply(x, g.constant(np.array(math.sqrt(0.5), "float32")))
    plus = g.add(g.erf(scaled), g.constant(np.array(1.0, "float32")))
    return g.multiply(g.multiply(x, plus), g.constant(np.array(0.5, "float32")))


def _hard_swish(g: tg.Graph, x: tg.Node) -> tg.Node:
    return g.multiply(x, g.hard_sigmoid(x, alpha=1 / 6, beta=0.5))


def _conv_act(rng: np.random.Generator, act, channels: int = 19, size: int = 7) -> tg.Graph:
    """conv (3 -> `channels`) + bias, then the activation spelt out."""
    g = tg.Graph()
    x = g.input("data", (1, 3, size, size))
    y = g.conv2d(x, g.constant(_w(rng, channels, 3, 3, 3)), padding=1)
    y = g.bias_add(y, g.constant(_w(rng, channels)))
    g.output(act(g, y))
    return g


def _check_same(before: tg.Graph, after: tg.Graph, rng: np.random.Generator) -> None:
    inputs = {i.name: _w(rng, *i.shape) for i in before.inputs}
    for want, got in zip(run_reference(before, inputs), run_reference(after, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("act, op", [
    (_silu, "silu"),
    (lambda g, x: _silu(g, x, swapped=True), "silu"),
    (_gelu, "gelu"),
    (lambda g, x: _gelu(g, x, "multiply"), "gelu"),
    (_hard_swish, "hard_swish"),
])
def test_activation_products_fold_to_one_op(rng: np.random.Generator, act, op: str) -> None:
    g = _conv_act(rng, act)
    folded = fold_activations(g)
    assert [n.op for n in folded.ops] == ["conv2d", "bias_add", op]
    assert folded.outputs[0].name == g.outputs[0].name
    _check_same(g, folded, rng)


def test_shared_intermediates_stay_unfolded(rng: np.random.Generator) -> None:
    """A sigmoid that something else reads too, or a GELU scaled by another constant, is left
    as it is."""
    g = tg.Graph()
    x = g.input("data", (1, 4, 5, 5))
    gate = g.sigmoid(x)
    g.output(g.multiply(x, gate), g.relu(gate))
    assert {n.op for n in fold_activations(g).ops} == {"sigmoid", "multiply", "relu"}
    h = tg.Graph()
    y = h.input("data", (2, 9))
    plus = h.add(h.erf(h.divide(y, h.constant(np.array(1.5, "float32")))),
                 h.constant(np.array(1.0, "float32")))
    h.output(h.multiply(h.multiply(y, plus), h.constant(np.array(0.5, "float32"))))
    assert "gelu" not in {n.op for n in fold_activations(h).ops}


def test_product_that_broadcasts_its_input_is_no_activation(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("data", (3,))
    g.output(g.multiply(g.multiply(x, g.add(g.erf(g.divide(
        x, g.constant(np.array(math.sqrt(2), "float32")))), g.constant(np.array(1.0, "float32")))),
        g.constant(np.full((2, 1), 0.5, "float32"))))
    assert "gelu" not in {n.op for n in fold_activations(g).ops}


@pytest.mark.filterwarnings("ignore:.*no tuned config")  # fallback configs, as intended here
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("act", [_silu, _gelu, _hard_swish])
def test_folded_activation_runs_in_the_conv_kernel(rng: np.random.Generator, target: str,
                                                   act) -> None:
    """After the passes, conv + bias + activation is one kernel (the activation in its output
    stage), and the built model matches the unfolded graph's numpy reference; 24 channels
    (blocked, not a multiple of AVX-512's 16) and 1 channel (NCHW)."""
    for channels in (24, 1):
        g = _conv_act(rng, act, channels, size=11)
        with tl.Target(target):
            opt = optimize(g)
        (kernel,) = [n for n in opt.ops if n.op == FUSED]
        assert kernel.body.ops[-1].op in ("silu", "gelu", "hard_swish")
        inputs = {"data": _w(rng, 1, 3, 11, 11)}
        (want,) = run_reference(g, inputs)
        (got,) = tg.build(g, target=target)(**inputs)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_pipeline_folds_before_layouts() -> None:
    names = [name for name, _ in PIPELINE]
    assert names.index("fold_activations") < names.index("alter_layout")


def test_dead_readers_do_not_block_the_fold(rng: np.random.Generator) -> None:
    """Readers that no output needs (left behind by an earlier pass) do not count."""
    g = tg.Graph()
    x = g.input("data", (6, 10))
    gate = g.sigmoid(x)
    g.reshape(gate, (60,))  # dead
    g.output(g.multiply(x, gate))
    assert [n.op for n in fold_activations(g).ops] == ["silu"]


# -- the logistic function inline (SiLU in a conv's output stage) ---------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_inline_sigmoid_within_an_ulp_vectorized(target: str) -> None:
    """sigmoid as vector arithmetic (its exp inline), against float64 numpy over float32's
    range and past it (0 and 1 at the ends), a length that leaves a vector tail."""
    a = tl.placeholder((1001,), "float32", "a")
    sg = tl.compute(a.shape, lambda i: logistic.sigmoid(a[i]), name="sg", tag="elemwise")
    x = np.concatenate([np.linspace(-87.3, 88, 988),
                        [0, -0.0, 1e-20, -1e-9, 0.5, -0.5, 30, -30, 80, -80, 3, -1000, 1000]]
                       ).astype("float32")
    with tl.Target(target):
        s = tl.create_schedule(sg.op)
        _, inner = s[sg].split(sg.op.axis[0], factor=tl.Target.current().vector_lanes("float32"))
        s[sg].vectorize(inner)
        f = tl.build(s, [a, sg])
    got = np.empty_like(x)
    f(x, got)
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-x.astype(np.float64))), rtol=2.5e-7,
                               atol=0)


def test_sigmoid_of_other_dtypes_is_the_core_one() -> None:
    v = tl.placeholder((3,), "float64", "v")
    assert "sigmoid" in str(logistic.sigmoid(v[0]))


# -- NCHW convolutions (channels that make no block: ShuffleNet's 58 and 116) ---------------------


@pytest.mark.filterwarnings("ignore:.*no tuned config")  # fallback configs, as intended here
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("channels, out_channels, size, kernel", [
    (24, 58, 13, 1), (58, 58, 7, 1), (5, 29, 11, 3), (7, 1, 9, 3), (3, 17, 1, 1)])
def test_nchw_conv_stores_rows_from_the_block(rng: np.random.Generator, target: str,
                                              channels: int, out_channels: int, size: int,
                                              kernel: int) -> None:
    """conv2d_nchw with a bias + relu tail writes its rows straight from the register block
    (vectors along the row, output channels not a multiple of the vector, rows that leave a
    tail), against numpy, for the host and AVX2."""
    data = tl.placeholder((1, channels, size, size), name="data")
    weight = tl.placeholder((out_channels, channels, kernel, kernel), name="weight")
    bias = tl.placeholder((out_channels, 1, 1), name="bias")
    with tl.Target(target):
        conv = topi.nn.conv2d_nchw(data, weight, 1, kernel // 2)
        out = topi.nn.relu(topi.nn.add(conv, bias))
        f = tl.build(topi.x86.schedule_conv2d_nchw(out), [data, weight, bias, out])
    x, w, b = _w(rng, 1, channels, size, size), _w(rng, *weight.shape), _w(rng, *bias.shape)
    got = np.empty((1, out_channels, size, size), "float32")
    f(x, w, b, got)
    want = np.maximum(topi.testing.conv2d_nchw_python(x, w, 1, kernel // 2) + b, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# -- channel shuffles (ShuffleNet) -------------------------------------------------------------------


def _shuffle(g: tg.Graph, x: tg.Node, groups: int) -> tg.Node:
    n, c, *rest = x.shape
    split = g.reshape(x, (n, groups, c // groups, *rest))
    axes = (0, 2, 1, *range(3, len(rest) + 3))
    return g.reshape(g.transpose(split, axes), (n, c, *rest))


@pytest.mark.parametrize("channels, groups, rest", [(58 * 2, 2, (7, 5)), (15, 3, (4,)),
                                                    (6, 6, (1, 1)), (7, 1, (3, 2))])
def test_channel_shuffle_and_its_halves_become_gathers(rng: np.random.Generator, channels: int,
                                                       groups: int, rest: tuple) -> None:
    """ShuffleNet's concat -> shuffle -> two slices: the shuffle and the slices become takes of
    the concatenation's channels (the shuffled value is never built), against the unfolded
    graph; a shuffle read by something else than slices stays one take."""
    g = tg.Graph()
    x = g.input("x", (1, channels, *rest))
    shuffled = _shuffle(g, g.relu(x), groups)
    half = channels // 2
    first = g.strided_slice(shuffled, begin=(0,), end=(half,), strides=(1,), axes=(1,))
    second = g.strided_slice(shuffled, begin=(half,), end=(channels,), strides=(1,), axes=(1,))
    g.output(g.sigmoid(first), g.negative(second))
    folded = fold_channel_shuffles(g)
    assert sorted(n.op for n in folded.ops) == ["negative", "relu", "sigmoid", "take", "take"]
    _check_same(g, folded, rng)
    h = tg.Graph()
    y = h.input("x", (1, channels, *rest))
    h.output(h.relu(_shuffle(h, y, groups)))
    folded = fold_channel_shuffles(h)
    assert [n.op for n in folded.ops] == ["take", "relu"]
    _check_same(h, folded, rng)


def test_permutes_that_are_no_channel_shuffle_stay(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("x", (1, 6, 4, 4))
    split = g.reshape(x, (1, 2, 3, 4, 4))
    g.output(g.reshape(g.transpose(split, (0, 1, 2, 4, 3)), (1, 6, 4, 4)))  # swaps H and W
    h = tg.Graph()
    y = h.input("x", (1, 6, 4, 4))
    split = h.reshape(y, (1, 2, 3, 4, 4))
    h.output(h.reshape(h.transpose(split, (0, 2, 1, 3, 4)), (1, 6, 4, 4)), h.relu(split))
    for graph in (g, h):  # the second one's split is read twice
        assert "take" not in {n.op for n in fold_channel_shuffles(graph).ops}


def test_sliced_gather_with_a_step_and_negative_bounds(rng: np.random.Generator) -> None:
    g = tg.Graph()
    x = g.input("x", (2, 9, 3))
    taken = g.take(x, g.constant(np.array([8, 0, 3, 5, 1, 2], "int64")), axis=1)
    g.output(g.strided_slice(taken, begin=(-5,), end=(-1,), strides=(2,), axes=(1,)))
    folded = fold_channel_shuffles(g)
    assert [n.op for n in folded.ops] == ["take"]
    _check_same(g, folded, rng)


@pytest.mark.filterwarnings("ignore:.*no tuned config")  # fallback configs, as intended here
@pytest.mark.parametrize("target", TARGETS)
def test_shuffle_block_builds_against_numpy(rng: np.random.Generator, target: str) -> None:
    """A ShuffleNet unit (two 1x1 conv branches of 24 channels, concat, shuffle, split) built
    for the host and AVX2 matches the unfolded graph's numpy reference."""
    g = tg.Graph()
    x = g.input("x", (1, 24, 9, 9))
    left = g.relu(g.conv2d(x, g.constant(_w(rng, 24, 24, 1, 1))))
    right = g.relu(g.conv2d(x, g.constant(_w(rng, 24, 24, 3, 3)), padding=1))
    shuffled = _shuffle(g, g.concatenate([left, right], axis=1), 2)
    halves = [g.strided_slice(shuffled, begin=(b,), end=(b + 24,), strides=(1,), axes=(1,))
              for b in (0, 24)]
    g.output(g.add(halves[0], g.conv2d(halves[1], g.constant(_w(rng, 24, 24, 1, 1)))))
    inputs = {"x": _w(rng, 1, 24, 9, 9)}
    (want,) = run_reference(g, inputs)
    (got,) = tg.build(g, target=target)(**inputs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
