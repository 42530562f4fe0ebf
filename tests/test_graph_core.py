"""topi.graph.Graph and the op registry: building, shape inference from topi, printing, errors."""

from __future__ import annotations

import numpy as np
import pytest

import topi
import topi.graph as tg
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
