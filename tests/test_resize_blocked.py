"""resize2d in the channel-blocked layout (NCHW[x]c): a resize between convolutions stays
blocked where a reader takes it blocked, against the NCHW reference (`resize2d_python`, itself
checked against onnxruntime)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
import topi
import topi.graph as tg
import topi.testing as T
from topi.graph.passes import PIPELINE, optimize

TARGETS = ["llvm", "llvm -mcpu=haswell"]

# (batch, channels, in (h, w), out (h, w), method, coordinate mode): upsampling by 2 (LR-ASPP's
# 14 -> 28), DeepLab's pooled 1 x 1 broadcast to 14 x 14, odd and shrinking sizes, batch 2, 24
# channels (blocks of 8 on both targets).
CASES = [
    (1, 32, (14, 14), (28, 28), "linear", "pytorch_half_pixel"),
    (1, 16, (1, 1), (14, 14), "linear", "pytorch_half_pixel"),
    (2, 24, (7, 5), (13, 11), "linear", "align_corners"),
    (1, 16, (9, 13), (4, 6), "cubic", "half_pixel"),
    (2, 24, (5, 7), (10, 21), "nearest", "asymmetric"),
    (1, 16, (6, 6), (17, 5), "nearest", "half_pixel"),
]


def _w(rng: np.random.Generator, k: int, c: int) -> np.ndarray:
    return rng.uniform(-1, 1, (k, c, 1, 1)).astype("float32")


def _graph(case, weight: np.ndarray) -> tg.Graph:
    batch, channels, size, out, method, mode = case
    g = tg.Graph()
    x = g.relu(g.conv2d(g.input("data", (batch, channels, *size)), g.constant(weight)))
    g.output(g.relu(g.apply("resize2d", x, size=out, method=method,
                            coordinate_transformation_mode=mode)))
    return g


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"n{c[0]}c{c[1]}{c[4]}{c[3][0]}x{c[3][1]}")
def test_blocked_resize_matches_reference(case, target: str, rng: np.random.Generator) -> None:
    batch, channels, size, out, method, mode = case
    weight = rng.uniform(-1, 1, (channels, channels, 1, 1)).astype("float32")
    g = _graph(case, weight)
    names = [name for name, _ in PIPELINE]
    with tl.Target(target):
        blocked = optimize(g, pipeline=PIPELINE[:names.index("alter_layout") + 1])
    (resize,) = [n for n in blocked.nodes if n.op == "resize2d"]
    assert resize.attrs["layout"].startswith("NCHW") and resize.attrs["layout"] != "NCHW"
    assert sum(n.op == "layout_transform" for n in blocked.nodes) == 2  # graph input, output
    data = rng.uniform(-1, 1, (batch, channels, *size)).astype("float32")
    (got,) = tg.build(g, target=target)(data=data)
    conv = np.maximum(np.einsum("kc,nchw->nkhw", weight[:, :, 0, 0], data), 0)
    want = np.maximum(T.resize2d_python(conv, out, method, mode), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_resize_read_in_nchw_stays_nchw(rng: np.random.Generator) -> None:
    """A resize read only as a graph output or by a conv too narrow for a block (LR-ASPP's 21
    classes) resizes the NCHW value: blocked, a layout transform would follow it."""
    g = tg.Graph()
    x = g.relu(g.conv2d(g.input("data", (1, 16, 7, 7)), g.constant(_w(rng, 16, 16))))
    up = g.apply("resize2d", x, size=(14, 14), method="linear")
    g.output(up)
    g.output(g.conv2d(up, g.constant(_w(rng, 5, 16))))
    names = [name for name, _ in PIPELINE]
    with tl.Target("llvm"):
        blocked = optimize(g, pipeline=PIPELINE[:names.index("alter_layout") + 1])
    (resize,) = [n for n in blocked.nodes if n.op == "resize2d"]
    assert resize.attrs.get("layout", "NCHW") == "NCHW"


def test_resize_layout_errors() -> None:
    x = tl.placeholder((1, 2, 4, 4, 8), name="x")
    with pytest.raises(ValueError, match="layout"):
        topi.nn.resize2d(x, (8, 8), layout="NHWC")
    with pytest.raises(ValueError, match="last axis must be 16"):
        topi.nn.resize2d(x, (8, 8), layout="NCHW16c")
    with pytest.raises(ValueError, match="5 dimensions"):
        topi.nn.resize2d(tl.placeholder((1, 2, 4, 4), name="y"), (8, 8), layout="NCHW8c")


@pytest.mark.parametrize("target", TARGETS)
def test_blocked_resize_between_convs(target: str, rng: np.random.Generator) -> None:
    """A resize read by a blocked conv is a kernel of its own with a blocked output (the ones
    above end in the transform to NCHW)."""
    w1, w2 = (rng.uniform(-1, 1, (24, 24, 1, 1)).astype("float32") for _ in range(2))
    g = tg.Graph()
    x = g.relu(g.conv2d(g.input("data", (2, 24, 5, 7)), g.constant(w1)))
    x = g.apply("resize2d", x, size=(11, 9), method="linear",
                coordinate_transformation_mode="pytorch_half_pixel")
    g.output(g.conv2d(x, g.constant(w2)))
    module = tg.build(g, target=target)
    assert "resize2d" in [step.op for step in module.steps]
    data = rng.uniform(-1, 1, (2, 24, 5, 7)).astype("float32")
    conv = np.maximum(np.einsum("kc,nchw->nkhw", w1[:, :, 0, 0], data), 0)
    want = np.einsum("kc,nchw->nkhw", w2[:, :, 0, 0],
                     T.resize2d_python(conv, (11, 9), "linear", "pytorch_half_pixel"))
    np.testing.assert_allclose(module(data=data)[0], want, rtol=1e-4, atol=1e-4)


def test_blocked_reference(rng: np.random.Generator) -> None:
    x = rng.standard_normal((2, 3, 5, 7, 8)).astype("float32")
    plain = x.transpose(0, 1, 4, 2, 3).reshape(2, 24, 5, 7)
    want = T.resize2d_python(plain, (4, 9), "cubic", "half_pixel")
    got = T.resize2d_python(x, (4, 9), "cubic", "half_pixel", layout="NCHW8c")
    np.testing.assert_array_equal(got.transpose(0, 1, 4, 2, 3).reshape(2, 24, 4, 9), want)
