"""split_border_taps: convolutions cut into regions of one set of live taps, against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tensorlang as tl
import topi.graph as tg
from topi.graph.passes import PIPELINE, optimize
from topi.graph.passes.trim_taps import tap_bands

TARGETS = ["llvm", "llvm -mcpu=haswell"]


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype("float32")


def _graph(weight: np.ndarray, shape: tuple[int, ...], groups: int, **attrs) -> tg.Graph:
    g = tg.Graph()
    x = g.input("data", shape)
    g.output(g.relu(g.conv2d(x, g.constant(weight), groups=groups, **attrs)))
    return g


def _through(g: tg.Graph, last: str = "split_border_taps") -> tg.Graph:
    """`g` after the passes up to `last` (the fold of a depthwise weight's reshape included)."""
    names = [name for name, _ in PIPELINE]
    return optimize(g, pipeline=PIPELINE[:names.index(last) + 1])


def _convs(g: tg.Graph) -> list[tg.Node]:
    return [n for n in g.nodes if n.op in ("conv2d", "depthwise_conv2d", "group_conv2d")]


def test_tap_bands() -> None:
    # DeepLab-V3's rate 12 on MobileNet-V3's 14 x 14 map: the centre tap alone inside.
    assert tap_bands(14, 3, 12, 12, 14) == [(0, 2, 1, 3), (2, 12, 1, 2), (12, 14, 0, 2)]
    # Every tap live everywhere: one band.
    assert tap_bands(9, 3, 1, 0, 7) == [(0, 7, 0, 3)]
    # An output whose window reads padding only: no bands.
    assert tap_bands(1, 1, 1, 3, 7) is None


# (batch, in channels, out channels, groups, map (h, w), padding, dilation): primes, a depthwise
# and a grouped conv, asymmetric padding, batch 2.
CASES = [
    (1, 17, 13, 1, (14, 14), 12, 12),
    (2, 5, 19, 1, (13, 11), 9, 9),
    (1, 7, 31, 1, (28, 23), 24, 24),
    (2, 24, 24, 24, (11, 13), 8, 8),
    (1, 19, 19, 19, (7, 9), 5, 5),
    (1, 6, 10, 2, (9, 9), 7, 7),
    (1, 3, 17, 1, (10, 10), (9, 2, 5, 11), 6),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"n{c[0]}c{c[1]}k{c[2]}g{c[3]}d{c[6]}")
def test_split_matches_torch(case, target: str, rng: np.random.Generator) -> None:
    batch, channels, out_channels, groups, size, padding, dilation = case
    weight = _w(rng, out_channels, channels // groups, 3, 3)
    g = _graph(weight, (batch, channels, *size), groups, padding=padding, dilation=dilation)
    assert len(_convs(_through(g))) > 1
    data = _w(rng, batch, channels, *size)
    (got,) = tg.build(g, target=target)(data=data)
    top, left, bottom, right = (padding,) * 4 if isinstance(padding, int) else padding
    padded = np.pad(data, ((0, 0), (0, 0), (top, bottom), (left, right)))
    want = torch.relu(torch.nn.functional.conv2d(
        torch.from_numpy(padded), torch.from_numpy(weight), dilation=dilation, groups=groups))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)


def test_aspp_rate_12_regions(rng: np.random.Generator) -> None:
    """9 regions: the 10 x 10 interior a 1 x 1 conv of the input's interior, every region
    without padding; on a blocked input (a 1 x 1 conv's), the slices and concatenations stay
    blocked: the only layout transforms are the graph input's and output's."""
    g = tg.Graph()
    x = g.relu(g.conv2d(g.input("data", (1, 16, 14, 14)), g.constant(_w(rng, 16, 16, 1, 1))))
    g.output(g.conv2d(x, g.constant(_w(rng, 32, 16, 3, 3)), padding=12, dilation=12))
    convs = _convs(_through(g))[1:]
    assert [c.inputs[1].shape[2:] for c in convs] == [(2, 2), (2, 1), (2, 2), (1, 2), (1, 1),
                                                      (1, 2), (2, 2), (2, 1), (2, 2)]
    assert all(tuple(c.attrs["padding"]) == (0, 0, 0, 0) for c in convs)
    assert convs[4].inputs[0].shape == (1, 16, 10, 10) and convs[4].shape == (1, 32, 10, 10)
    with tl.Target("llvm"):
        blocked = _through(g, "alter_layout")
    assert sum(n.op == "layout_transform" for n in blocked.nodes) == 2
    data = _w(rng, 1, 16, 14, 14)
    want = tg.build(g, pipeline=[p for p in PIPELINE if p[0] != "split_border_taps"])(data=data)
    np.testing.assert_allclose(tg.build(g)(data=data)[0], want[0], rtol=1e-4, atol=1e-4)


def test_split_leaves_dense_undilated_and_strided_convs(rng: np.random.Generator) -> None:
    """A rate-2 conv on 28 x 28 (live taps nearly everywhere), an undilated one on a 2 x 2 map
    and a strided one stay whole."""
    dense = _graph(_w(rng, 4, 3, 3, 3), (1, 3, 28, 28), 1, padding=2, dilation=2)
    assert len(_convs(_through(dense))) == 1
    small = _graph(_w(rng, 4, 3, 3, 3), (1, 3, 2, 2), 1, padding=1)
    assert len(_convs(_through(small))) == 1
    strided = _graph(_w(rng, 4, 3, 3, 3), (1, 3, 14, 14), 1, padding=12, dilation=12, stride=2)
    assert len(_convs(_through(strided))) == 1


def test_pipeline_splits_after_the_trim() -> None:
    names = [name for name, _ in PIPELINE]
    assert names.index("trim_dead_taps") < names.index("split_border_taps")
    assert names.index("split_border_taps") < names.index("alter_layout")


def test_region_names_miss_later_nodes(rng: np.random.Generator) -> None:
    """The regions' names are free among the nodes still to copy (an ONNX import names a conv
    `c` and its bias add `c_0`)."""
    g = tg.Graph()
    conv = g.conv2d(g.input("data", (1, 16, 14, 14)), g.constant(_w(rng, 8, 16, 3, 3)),
                    padding=12, dilation=12, name="c")
    g.output(g.relu(conv, name="c_0"))
    split = _through(g)
    assert len(_convs(split)) == 9 and [n.name for n in split.outputs] == ["c_0"]
