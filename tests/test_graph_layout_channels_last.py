"""The layout pass's channels-last views (`passes/channels_last.py`): ConvNeXt's permutes,
LayerNorm and Linear layers on channel-blocked values, no transpose left.

The fused layer_norm_NCHWc kernel against numpy at awkward blocks, maps and offsets; small
ConvNeXt stacks (stem + LayerNorm2d, a CNBlock, a downsampling LayerNorm2d + conv, a CNBlock)
at channel counts that block in halves of a vector (24, 40) and one that does not block (17),
batch 1 and 2, against PyTorch and against the same graph built without the views, with the
kernel count showing that no transpose or layout transform is left inside the model."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import tensorlang as tl
import topi.graph as tg
from topi.graph.graph import Graph, NodeKind, op_label
from topi.graph.reference import run_reference
from topi.nn.channel_norm import layer_norm_NCHWc
from topi.testing import layer_norm_python
from wild_models import torchvision

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore::DeprecationWarning")

# the module (the package exports its function under the same name)
alter_layout = importlib.import_module("topi.graph.passes.alter_layout")

TARGETS = ["llvm", "llvm -mcpu=haswell"]
MOVES = {"layout_transform", "transpose"}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(1, 3, 7, 13, 8), (2, 1, 1, 5, 16), (1, 5, 6, 3, 16),
                                   (2, 2, 9, 1, 8)])
def test_layer_norm_NCHWc_matches_numpy(target: str, shape: tuple) -> None:
    """Inputs far from zero (a mean of 30) show a variance that cancels."""
    rng = np.random.default_rng(sum(shape))
    _, blocks, _, _, lanes = shape
    g = Graph()
    x = g.input("x", shape)
    gamma, beta = (rng.standard_normal((blocks, lanes)).astype("float32") for _ in range(2))
    g.output(g.apply("layer_norm_NCHWc", x, g.constant(gamma), g.constant(beta), epsilon=1e-6))
    m = tg.build(g, target=target)
    data = (rng.standard_normal(shape) * 2 + 30).astype("float32")
    expected = layer_norm_python(data, gamma, beta, axis=(1, 4), epsilon=1e-6)
    np.testing.assert_allclose(m(x=data)[0], expected, rtol=1e-4, atol=2e-4)


def test_layer_norm_NCHWc_rejects_bad_shapes() -> None:
    x = tl.placeholder((1, 3, 4, 4, 8), name="x")
    with pytest.raises(ValueError, match="gamma lanes"):
        layer_norm_NCHWc(x, tl.placeholder((3, 4)), tl.placeholder((3, 8)))
    with pytest.raises(ValueError, match="x must have 5 dimensions"):
        layer_norm_NCHWc(tl.placeholder((1, 24, 4, 4)), tl.placeholder((3, 8)),
                         tl.placeholder((3, 8)))


def _convnext(channels: int) -> torch.nn.Module:
    convnext = torchvision().models.convnext
    torch.manual_seed(channels)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(3, channels, 4, 4), convnext.LayerNorm2d(channels),
        convnext.CNBlock(channels, 0.5, 0.0),
        convnext.LayerNorm2d(channels), torch.nn.Conv2d(channels, 2 * channels, 2, 2),
        convnext.CNBlock(2 * channels, 0.5, 0.0)).eval()
    with torch.no_grad():  # norms away from the identity, so that a lost scale shows
        for m in module.modules():
            if isinstance(m, (torch.nn.LayerNorm, convnext.LayerNorm2d)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return module


class _NoViews:
    """The layout pass without channels-last views: every permute runs through NCHW."""

    def __init__(self, rewriter: object) -> None:
        pass

    def visit(self, old: object, inputs: object) -> None:
        return None


def _moves_inside(m: tg.Module) -> list[str]:
    """Labels of the kernels of `m` that transpose or transform a layout, other than the
    transforms of its outputs."""
    outputs = set(m.graph.outputs)
    return [op_label(n) for n in m.graph.ops
            if MOVES & set(op_label(n).split("+")) and n not in outputs]


@pytest.mark.parametrize("channels,batch,target", [
    (24, 1, "llvm"), (40, 2, "llvm"), (17, 1, "llvm"), (24, 2, "llvm -mcpu=haswell"),
    (17, 2, "llvm -mcpu=haswell")])
def test_convnext_blocks_match_pytorch_and_the_unfused_graph(
        channels: int, batch: int, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = _convnext(channels)
    x = torch.randn((batch, 3, 32, 32), generator=torch.Generator().manual_seed(batch))
    with torch.no_grad():
        expected = module(x).numpy()
    g = tg.from_torch(module, (x,))
    m = tg.build(g, target=target)
    feed = {m.inputs[0].name: x.numpy()}
    got = m(**feed)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(alter_layout, "ChannelsLastViews", _NoViews)
    unfused = tg.build(g, target=target)
    np.testing.assert_allclose(got, unfused(**feed)[0], rtol=1e-5, atol=1e-5)
    labels = [op_label(n) for n in m.graph.ops]
    if channels % 8:  # 17: no convolution blocks, the permutes stay
        assert not any("layer_norm_NCHWc" in label for label in labels)
        return
    # The four norms over the channels of blocked values, the Linear layers as convolutions,
    # and no transpose, layout transform or dense inside the model.
    assert sum("layer_norm_NCHWc" in label for label in labels) == 4
    assert _moves_inside(m) == []
    assert not any("dense" in label.split("+") for label in labels)
    assert _moves_inside(unfused), "the unfused graph should transpose"
    assert all(n.kind is not NodeKind.OP or "layer_norm" not in op_label(n).split("+")
               for n in m.graph.nodes)


def test_views_read_by_outputs_and_plain_ops_match_numpy() -> None:
    """A channels-last LayerNorm that is a graph output (NHWC, its name kept) and is also read
    by an op that knows no view (a softmax over channels), next to the Linear path that goes
    back to NCHW: the view's NHWC copy serves the output and the softmax, and the norm runs once."""
    rng = np.random.default_rng(7)
    g = Graph()
    x = g.input("x", (2, 8, 6, 5))
    conv = g.conv2d(x, g.constant(rng.standard_normal((24, 8, 3, 3)).astype("float32")),
                    padding=1)
    nhwc = g.transpose(conv, (0, 2, 3, 1))
    normed = g.layer_norm(nhwc, g.constant(rng.uniform(0.5, 1.5, 24).astype("float32")),
                          g.constant(rng.standard_normal(24).astype("float32")), axis=-1,
                          name="normed")
    rows = g.reshape(normed, (-1, 24))
    linear = g.add(g.dense(rows, g.constant(rng.standard_normal((40, 24)).astype("float32"))),
                   g.constant(rng.standard_normal(40).astype("float32")))
    back = g.transpose(g.reshape(linear, (2, 6, 5, 40)), (0, 3, 1, 2), name="back")
    g.output(normed, back, g.softmax(normed, axis=-1, name="soft"))
    m = tg.build(g)
    feed = {"x": rng.standard_normal((2, 8, 6, 5)).astype("float32")}
    for got, expected in zip(m(**feed), run_reference(g, feed)):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert [o.name for o in m.graph.outputs] == ["normed", "back", "soft"]
    labels = [op_label(n) for n in m.graph.ops]
    assert sum("layer_norm" in label.split("+") for label in labels) == 0
    assert sum("layer_norm_NCHWc" in label.split("+") for label in labels) == 1
