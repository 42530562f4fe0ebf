"""Dilated (atrous) convolutions, as DeepLab's backbone and ASPP use them: built graphs against
PyTorch on awkward shapes, and the pass that drops the taps reading only padding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import topi.graph as tg
from topi.graph.passes import PIPELINE
from topi.graph.passes.trim_taps import live_taps, trim_dead_taps

TARGETS = ["llvm", "llvm -mcpu=haswell"]


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype("float32")


def _conv_graph(weight: np.ndarray, size: tuple[int, int], channels: int, groups: int,
                **attrs) -> tg.Graph:
    g = tg.Graph()
    x = g.input("data", (1, channels, *size))
    g.output(g.relu(g.conv2d(x, g.constant(weight), groups=groups, **attrs)))
    return g


def _torch(data: np.ndarray, weight: np.ndarray, groups: int, stride: int, padding,
           dilation: int) -> np.ndarray:
    if len(padding) == 4:  # (top, left, bottom, right)
        top, left, bottom, right = padding
        data, padding = np.pad(data, ((0, 0), (0, 0), (top, bottom), (left, right))), 0
    out = torch.nn.functional.conv2d(torch.from_numpy(data), torch.from_numpy(weight),
                                     stride=stride, padding=padding, dilation=dilation,
                                     groups=groups)
    return torch.relu(out).numpy()


# (in channels, out channels, groups, map (h, w), stride, padding, dilation): primes, channels
# that fill no vector, rates past the map (taps cut) and within it (none cut).
CASES = [
    (5, 19, 1, (13, 11), 1, (2, 2), 2),
    (17, 31, 1, (9, 7), 2, (3, 3), 3),
    (7, 13, 1, (6, 6), 1, (6, 6), 6),  # the outer taps read only padding: a 1 x 1 conv
    (7, 13, 1, (5, 8), 2, (6, 6), 6),
    (24, 24, 24, (11, 13), 1, (2, 2), 2),  # depthwise
    (19, 19, 19, (7, 9), 2, (3, 3), 3),
    (19, 19, 19, (5, 6), 1, (6, 6), 6),
    (6, 10, 2, (9, 9), 1, (3, 3), 3),  # grouped
    (6, 10, 2, (5, 5), 2, (6, 6), 6),
    (3, 17, 1, (10, 10), 1, (6, 0, 2, 4), 3),  # asymmetric padding
    (3, 17, 1, (4, 4), 1, (0, 0, 6, 6), 3),  # the bottom and right taps cut
    (3, 17, 1, (2, 2), 1, (5, 5, 0, 0), 3),  # taps dead, left for want of a crop
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"c{c[0]}k{c[1]}g{c[2]}s{c[4]}d{c[6]}")
def test_dilated_conv_matches_torch(case, target: str, rng: np.random.Generator) -> None:
    channels, out_channels, groups, size, stride, padding, dilation = case
    weight = _w(rng, out_channels, channels // groups, 3, 3)
    g = _conv_graph(weight, size, channels, groups, stride=stride, padding=padding,
                    dilation=dilation)
    data = _w(rng, 1, channels, *size)
    (got,) = tg.build(g, target=target)(data=data)
    want = _torch(data, weight, groups, stride, padding, dilation)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_live_taps() -> None:
    # ASPP rate 36 and 24 on a 28-wide map, padded by the rate.
    assert live_taps(28, 3, 1, 36, 36, 28) == (1, 2)
    assert live_taps(28, 3, 1, 24, 24, 28) == (0, 3)
    # Stride 2 reaches further: the last tap of rate 6 reads columns 6..12 of 7.
    assert live_taps(7, 3, 2, 6, 6, 4) == (0, 3)
    assert live_taps(4, 3, 2, 6, 6, 2) == (1, 2)
    # A window over padding only keeps its taps.
    assert live_taps(1, 1, 1, 1, 3, 7) == (0, 1)


def _convs(g: tg.Graph) -> list[tg.Node]:
    return [n for n in g.nodes if n.op in ("conv2d", "depthwise_conv2d", "group_conv2d")]


def test_trim_makes_aspp_rate_36_a_1x1_conv(rng: np.random.Generator) -> None:
    g = _conv_graph(_w(rng, 8, 16, 3, 3), (28, 28), 16, 1, padding=36, dilation=36)
    (conv,) = _convs(trim_dead_taps(g))
    assert conv.inputs[1].shape == (8, 16, 1, 1)
    assert tuple(conv.attrs["padding"]) == (0, 0, 0, 0)
    assert conv.shape == (1, 8, 28, 28)


def test_trim_cuts_one_axis(rng: np.random.Generator) -> None:
    """A wide map keeps its column taps; only the rows read padding alone."""
    g = _conv_graph(_w(rng, 4, 3, 3, 3), (5, 40), 3, 1, padding=12, dilation=12)
    (conv,) = _convs(trim_dead_taps(g))
    assert conv.inputs[1].shape == (4, 3, 1, 3)
    assert tuple(conv.attrs["padding"]) == (0, 12, 0, 12)
    bottom = _conv_graph(_w(rng, 4, 3, 3, 3), (4, 4), 3, 1, padding=(0, 0, 6, 6), dilation=3)
    (conv,) = _convs(trim_dead_taps(bottom))
    assert conv.inputs[1].shape == (4, 3, 2, 2)
    assert tuple(conv.attrs["padding"]) == (0, 0, 3, 3)


def test_trim_leaves_live_taps_and_crops(rng: np.random.Generator) -> None:
    """Nothing changes where every tap reads the input, nor where a cut would need the input
    cropped (the first two row taps dead, the third reading row 1 of 2: no padding left to
    shift by the 6 rows of the two taps cut)."""
    live = _conv_graph(_w(rng, 4, 3, 3, 3), (28, 28), 3, 1, padding=24, dilation=24)
    assert _convs(trim_dead_taps(live))[0].inputs[1].shape == (4, 3, 3, 3)
    crop = _conv_graph(_w(rng, 4, 3, 3, 3), (2, 2), 3, 1, padding=(5, 5, 0, 0), dilation=3)
    assert _convs(trim_dead_taps(crop))[0].inputs[1].shape == (4, 3, 3, 3)



def test_pipeline_trims_after_the_batch_norm_fold() -> None:
    names = [name for name, _ in PIPELINE]
    assert names.index("fold_batch_norm") < names.index("trim_dead_taps")
    assert names.index("trim_dead_taps") < names.index("alter_layout")
