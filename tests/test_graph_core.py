"""topi.graph.Graph and the op registry: building, shape inference from topi, printing, errors."""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pytest

import topi
import topi.graph as tg
from topi.graph import graph, ops
from topi.graph.ops import OpPattern


def _w(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype("float32")


def test_shapes_come_from_topi_on_awkward_sizes() -> None:
    g = tg.Graph()
    x = g.input("data", (1, 3, 17, 13))
    conv = g.conv2d(x, g.constant(_w(7, 3, 3, 3)), stride=2, padding=(1, 0, 2, 1), dilation=1)
    assert conv.shape == (1, 7, 9, 6) and conv.dtype == "float32"
    same = g.conv2d(conv, g.constant(_w(5, 7, 3, 3)), padding="SAME", dilation=2)
    assert same.shape == (1, 5, 9, 6)
    pool = g.max_pool2d(same, 3, stride=2, padding=1, ceil_mode=True)
    assert pool.shape == (1, 5, 5, 4)
    flat = g.reshape(g.global_avg_pool2d(pool), (1, -1))
    assert flat.shape == (1, 5)
    assert g.dense(flat, g.constant(_w(11, 5))).shape == (1, 11)
    a = g.input("a", (3, 1, 4))
    assert g.add(a, g.input("b", (5, 1))).shape == (3, 5, 4)
    assert g.matmul(g.input("m", (2, 3, 7)), g.input("n", (7, 5))).shape == (2, 3, 5)
    assert g.concatenate([a, a], axis=2).shape == (3, 1, 8)
    assert g.transpose(a, (2, 0, 1)).shape == (4, 3, 1)
    assert g.pad(a, (0, 1, 2), (1, 0, 0)).shape == (4, 2, 6)


def test_grouped_and_depthwise_conv_pick_the_topi_op() -> None:
    g = tg.Graph()
    x = g.input("x", (1, 6, 9, 9))
    dw = g.conv2d(x, g.constant(_w(12, 1, 3, 3)), groups=6, padding=1)
    assert dw.op == "depthwise_conv2d" and dw.shape == (1, 12, 9, 9)
    assert dw.inputs[1].op == "reshape" and dw.inputs[1].shape == (6, 2, 3, 3)
    grouped = g.conv2d(x, g.constant(_w(4, 3, 3, 3)), groups=2)
    assert grouped.op == "group_conv2d" and grouped.shape == (1, 4, 7, 7)
    with pytest.raises(ValueError, match="groups"):
        g.conv2d(x, g.constant(_w(4, 3, 3, 3)), groups=0)
    with pytest.raises(ValueError, match="divide by groups"):
        g.conv2d(x, g.constant(_w(4, 3, 3, 3)), groups=4)


def test_apply_reaches_every_registered_op_and_scalars_become_constants() -> None:
    g = tg.Graph()
    x = g.input("x", (2, 3), "float32")
    y = g.apply("leaky_relu", x, alpha=0.2)
    assert y.attrs == {"alpha": 0.2}
    with pytest.raises(TypeError):
        y.attrs["alpha"] = 0.3  # nodes are immutable
    z = g.multiply(y, 2)
    const = z.inputs[1]
    assert const.kind is tg.NodeKind.CONSTANT and const.dtype == "float32" and const.shape == ()
    for number in (np.float64(0.5), np.int32(3), np.bool_(True), np.float16(2)):  # numpy's
        const = g.add(y, number).inputs[1]
        assert const.dtype == "float32" and const.value == np.float32(number)
    with pytest.raises(TypeError, match="got str"):
        g.add(y, "1")
    assert {"conv2d", "dense", "softmax", "layer_norm", "concatenate"} <= set(tg.registered_ops())
    assert tg.get_op("conv2d").tunable and tg.get_op("conv2d").pattern is OpPattern.OUT_FUSABLE
    assert not tg.get_op("relu").tunable


def test_print_lists_ops_with_shapes() -> None:
    g = tg.Graph()
    x = g.input("data", (1, 4, 8, 8))
    w = g.constant(_w(8, 4, 3, 3), name="w")
    g.output(g.relu(g.conv2d(x, w, padding=1), name="act"))
    text = str(g)
    assert text.splitlines()[0] == "graph(%data: float32[1, 4, 8, 8]) -> (%act) {"
    conv = "%conv2d = conv2d{stride=1, padding=1, dilation=1}(%data, %w) : float32[1, 8, 8, 8]"
    assert conv in text
    assert "%act = relu(%conv2d) : float32[1, 8, 8, 8]" in text
    assert repr(g) == "<topi.graph.Graph 1 inputs, 1 constants, 2 ops, 1 outputs>"


def test_errors_name_the_culprit() -> None:
    g = tg.Graph()
    x = g.input("x", (2, 3))
    with pytest.raises(ValueError, match="unknown graph op 'nope'"):
        g.apply("nope", x)
    with pytest.raises(ValueError, match="do not broadcast"):
        g.add(x, g.input("y", (4,)))
    with pytest.raises(ValueError, match="already has a node named 'x'"):
        g.input("x", (1,))
    with pytest.raises(TypeError, match="dtype"):
        g.input("s", (1,), "complex64")
    with pytest.raises(ValueError, match="dimensions must be >= 1"):
        g.input("z", (0, 3))
    with pytest.raises(TypeError, match="attrs must be"):
        g.apply("reshape", x, newshape={3: 2})
    other = tg.Graph().input("o", (2, 3))
    with pytest.raises(ValueError, match="not a node of this graph"):
        g.relu(other)
    with pytest.raises(TypeError, match="inputs must be graph nodes"):
        g.relu("x")
    with pytest.raises(ValueError, match="already registered"):
        tg.register_op("relu", topi.nn.relu, topi.x86.schedule_injective, OpPattern.ELEMWISE)


def _graph_method_cases(rng: np.random.Generator) -> list:
    """(call on a Graph and its node `x` (1, 5, 7, 3), numpy on the array x) for every method
    made from the registry; convolutions are checked against topi.testing's numpy loops."""
    x3 = rng.uniform(0.5, 2.0, (7, 3)).astype("float32")
    k = rng.standard_normal((5, 2, 3, 2)).astype("float32")  # depthwise (C, M, R, S)
    kt = rng.standard_normal((5, 3, 2, 3)).astype("float32")
    kn = rng.standard_normal((2, 3, 3, 11)).astype("float32")  # HWIO, on x as NHWC (1, 5, 7, 3)
    idx = np.array([[2, -1], [0, 4]], dtype="int64")
    T = topi.testing
    return [
        (lambda g, x: g.depthwise_conv2d(x, g.constant(k), stride=(2, 1), padding=1),
         lambda x: T.depthwise_conv2d_nchw_python(x, k, (2, 1), 1, 1)),
        (lambda g, x: g.group_conv2d(x, g.constant(k[:, :1]), padding=(1, 0), groups=5),
         lambda x: T.group_conv2d_nchw_python(x, k[:, :1], 1, (1, 0), 1, 5)),
        (lambda g, x: g.conv2d_transpose(x, g.constant(kt), stride=2, padding=1,
                                         output_padding=1),
         lambda x: T.conv2d_transpose_nchw_python(x, kt, 2, 1, 1, 1, 1)),
        (lambda g, x: g.conv2d_nhwc(x, g.constant(kn), padding=1),
         lambda x: T.conv2d_nhwc_python(x, kn, 1, 1, 1)),
        (lambda g, x: g.sum(x, (1, 3), keepdims=True), lambda x: x.sum((1, 3), keepdims=True)),
        (lambda g, x: g.max(x, axis=2), lambda x: x.max(2)),
        (lambda g, x: g.min(x), lambda x: x.min()),
        (lambda g, x: g.mean(x, -1), lambda x: x.mean(-1)),
        (lambda g, x: g.sqrt(g.abs(x)), lambda x: np.sqrt(np.abs(x))),
        (lambda g, x: g.exp(x), np.exp),
        (lambda g, x: g.log(g.abs(x)), lambda x: np.log(np.abs(x))),
        (lambda g, x: g.tanh(x), np.tanh),
        (lambda g, x: g.sigmoid(x), lambda x: 1 / (1 + np.exp(-x))),
        (lambda g, x: g.erf(x), lambda x: np.vectorize(math.erf)(x)),
        (lambda g, x: g.negative(x), np.negative),
        (lambda g, x: g.reciprocal(x), lambda x: 1 / x),
        (lambda g, x: g.hard_swish(x), lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
        (lambda g, x: g.gelu_tanh(x),
         lambda x: x / 2 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))),
        (lambda g, x: g.hard_sigmoid(x, 0.3), lambda x: np.clip(0.3 * x + 0.5, 0, 1)),
        (lambda g, x: g.clip(x, a_max=0.25), lambda x: np.minimum(x, 0.25)),
        (lambda g, x: g.cast(x, "int32"), lambda x: x.astype("int32")),
        (lambda g, x: g.power(g.abs(x), g.constant(x3)), lambda x: np.abs(x) ** x3),
        (lambda g, x: g.maximum(x, 0.5), lambda x: np.maximum(x, 0.5)),
        (lambda g, x: g.minimum(g.constant(x3), x), lambda x: np.minimum(x3, x)),
        (lambda g, x: g.strided_slice(x, (4, -1), (0, 1), (-3, -2), axes=(1, 2)),
         lambda x: x[:, 4:0:-3, -1:1:-2]),
        (lambda g, x: g.take(x, g.constant(idx), axis=2), lambda x: np.take(x, idx % 7, axis=2)),
        (lambda g, x: g.adaptive_pool2d(x, (2, 3), pool_type="max"),
         lambda x: T.adaptive_pool2d_python(x, (2, 3), "max")),
    ]


def test_every_registered_op_has_a_graph_method_matching_numpy() -> None:
    rng = np.random.default_rng(3)
    assert set(tg.registered_ops()) <= set(dir(tg.Graph()))
    g = tg.Graph()
    x = g.input("x", (1, 5, 7, 3))
    value = rng.standard_normal((1, 5, 7, 3)).astype("float32")
    cases = _graph_method_cases(rng)
    g.output(*(call(g, x) for call, _ in cases))
    assert {n.op for n in g.ops} >= set(graph.__dict__["_OP_METHODS"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned convolutions use their fallback configs
        outs = tg.build(g)(x=value)
    assert len(outs) == len(cases)
    for (_, ref), node, out in zip(cases, g.outputs, outs):
        want = np.asarray(ref(value))
        assert out.dtype == node.dtype and out.shape == want.shape, node
        np.testing.assert_allclose(out, want.astype(out.dtype), rtol=2e-5, atol=2e-5,
                                   err_msg=node.op)


def test_graph_methods_bind_like_their_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    g = tg.Graph()
    x = g.input("x", (2, 6, 5, 5))
    grouped = g.group_conv2d(x, g.constant(_w(4, 3, 3, 3)), groups=2, name="gc")
    assert grouped.name == "gc" and grouped.attrs["groups"] == 2 and grouped.shape == (2, 4, 3, 3)
    assert g.sum(x).attrs == {"axis": None, "keepdims": False}  # the compute's defaults
    assert str(inspect.signature(tg.Graph.take)) == (
        "(self, x: 'Node', indices: 'Node', axis=0, *, name: 'str | None' = None) -> 'Node'")
    assert tg.Graph.clip.__doc__ and tg.Graph.clip.__qualname__ == "Graph.clip"
    with pytest.raises(TypeError, match=r"Graph.cast\(x: 'Node', dtype.*'dtype'"):
        g.cast(x)
    with pytest.raises(TypeError, match="unexpected keyword argument 'axes'"):
        g.sum(x, axes=1)
    with pytest.raises(ValueError, match="groups"):
        g.group_conv2d(x, g.constant(_w(4, 3, 3, 3)), groups=4)
    with pytest.raises(AttributeError, match="no attribute 'not_an_op'"):
        g.not_an_op(x)
    # An op registered after the Graph class still is a method (inputs positional, attrs by
    # keyword), as when another module registers ops.
    twice = tg.OpDef("twice", lambda t, scale=2.0: topi.nn.multiply(t, scale),
                     topi.x86.schedule_injective, OpPattern.ELEMWISE)
    monkeypatch.setitem(ops._REGISTRY, "twice", twice)
    node = g.twice(x, scale=3.0, name="t")
    assert node.op == "twice" and node.name == "t" and node.attrs == {"scale": 3.0}
    assert "twice" in dir(g)
