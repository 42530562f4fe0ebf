"""ShuffleNet-V2 units (torchvision's InvertedResidual: split, 1x1 / depthwise 3x3 / 1x1 branch,
concatenation, channel shuffle) through the layout pass, against PyTorch, at the channel counts
of the real models (58, 116, 24) and awkward ones (29, 1): the shuffle's `take`, the branch
split and the concatenation must stay correct whichever of their values the layout pass blocks,
and the shuffle's gathers read a blocked concatenation through transforms fused into their own
kernels: no NCHW copy of it is written (on AVX-512 these units have no kernel that only
transforms a layout inside the graph; 58 channels, in blocks of 2, still stay NCHW)."""

from __future__ import annotations

import numpy as np
import pytest

import topi.graph as tg
from topi.graph.graph import NodeKind, op_label
from wild_models import torchvision

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore::DeprecationWarning")

TARGETS = ["llvm", "llvm -mcpu=haswell"]

# (input channels, output channels, stride): stride 1 keeps the channels (half of them pass
# through the identity branch), stride 2 runs both branches on the whole input.
UNITS = [(58, 58, 1), (116, 116, 1), (24, 24, 1), (29, 58, 2), (24, 116, 2), (1, 24, 2),
         (58, 116, 2)]


def _unit(inp: int, oup: int, stride: int) -> torch.nn.Module:
    residual = torchvision().models.shufflenetv2.InvertedResidual
    torch.manual_seed(inp * 7 + oup)
    module = torch.nn.Sequential(residual(inp, oup, stride), residual(oup, oup, 1)).eval()
    for m in module.modules():  # batch norms away from the identity, so that folding shows
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return module


def _transform_kernels(m: tg.Module) -> list[tg.Node]:
    """The kernels of `m` that only transform a layout, other than at its inputs and outputs."""
    outputs = set(m.graph.outputs)
    return [n for n in m.graph.ops
            if set(op_label(n).split("+")) == {"layout_transform"} and n not in outputs
            and any(i.kind is not NodeKind.INPUT for i in n.inputs)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("inp,oup,stride", UNITS)
def test_shufflenet_units_match_pytorch(target: str, inp: int, oup: int, stride: int) -> None:
    module = _unit(inp, oup, stride)
    x = torch.rand((1, inp, 13, 13), generator=torch.Generator().manual_seed(inp)) * 2 - 1
    with torch.no_grad():
        expected = module(x).numpy()
    m = tg.build(tg.from_torch(module, (x,)), target=target)
    np.testing.assert_allclose(m(**{m.inputs[0].name: x.numpy()})[0], expected, rtol=1e-4,
                               atol=1e-4)
    transforms = _transform_kernels(m)
    assert not [n.name for n in transforms if n.inputs[0].op == "concatenate"]
    if target == "llvm" and inp != 24:
        assert not transforms
