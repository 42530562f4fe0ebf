"""from_torch: the ATen ops the frontend translates, each in a small module against PyTorch's own
output (built and run with the fallback configs), the core-ATen decompositions of the same, and
errors for what is not supported."""

from __future__ import annotations

import numpy as np
import pytest

import topi.graph as tg

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
from torch import nn

from topi.graph.importer import UnsupportedError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


class Lambda(nn.Module):
    def __init__(self, fn, *params: torch.Tensor) -> None:
        super().__init__()
        self.fn = fn
        self.params = nn.ParameterList([nn.Parameter(p, requires_grad=False) for p in params])

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.fn(*xs, *self.params)


def check(module: nn.Module, *shapes: tuple[int, ...], decompose: bool = False,
          rtol: float = 1e-5, atol: float = 1e-5) -> tg.Graph:
    gen = torch.Generator().manual_seed(0)
    inputs = tuple(torch.rand(s, generator=gen) * 4 - 2 for s in shapes)
    module = module.eval()
    with torch.no_grad():
        expected = module(*inputs)
    source = torch.export.export(module, inputs) if decompose else module
    if decompose:
        source = source.run_decompositions()
    g = tg.from_torch(source, inputs)
    feeds = {n.name: t.numpy() for n, t in zip(g.inputs, inputs)}
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = tg.build(g)(**feeds)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a, e.numpy(), rtol=rtol, atol=atol)
    return g


@pytest.mark.parametrize("decompose", [False, True])
@pytest.mark.parametrize("conv", [
    lambda: nn.Conv2d(3, 5, 3, stride=2, padding=1),
    lambda: nn.Conv2d(3, 4, (2, 3), padding="same", dilation=(2, 1), bias=False),
    lambda: nn.Conv2d(3, 6, 3, groups=3, padding="valid"),
    lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
    lambda: nn.ConvTranspose2d(3, 6, (3, 2), stride=(1, 2), groups=3, dilation=(2, 1)),
])
def test_convolutions(conv, decompose):
    torch.manual_seed(0)
    check(conv(), (1, 3, 7, 6), decompose=decompose)


@pytest.mark.parametrize("decompose", [False, True])
def test_batch_norm_and_linear(decompose):
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(3)
    bn.running_mean.uniform_(-0.5, 0.5)
    bn.running_var.uniform_(0.5, 2)
    check(nn.Sequential(bn, nn.Flatten(), nn.Linear(3 * 25, 7)), (2, 3, 5, 5),
          decompose=decompose)
    check(nn.Sequential(nn.Linear(5, 3), nn.GELU(approximate="tanh"), nn.Linear(3, 2)),
          (2, 4, 5), decompose=decompose)


@pytest.mark.parametrize("act", [nn.ReLU(), nn.ReLU6(), nn.Hardswish(), nn.Hardsigmoid(),
                                 nn.Sigmoid(), nn.Tanh(), nn.GELU(), nn.LeakyReLU(0.2),
                                 nn.Hardtanh(-0.5, 1.5)])
def test_activations(act):
    check(act, (3, 17))


@pytest.mark.parametrize("fn", [
    lambda x, y: x + y * 2, lambda x, y: x - y, lambda x, y: x / (y.abs() + 1),
    lambda x, y: torch.maximum(x, y), lambda x, y: (x.abs() + 0.5) ** 1.5 + torch.erf(y),
    lambda x, y: torch.clamp(x, min=-0.5) * torch.rsqrt(y.abs() + 1),
    lambda x, y: torch.exp(x) - torch.sqrt(y.abs()) + torch.neg(x) - 1.0,
])
def test_arithmetic(fn):
    check(Lambda(fn), (2, 3, 5), (3, 1))


@pytest.mark.parametrize("pool", [
    nn.MaxPool2d(3, 2, 1), nn.MaxPool2d(2, ceil_mode=True), nn.AvgPool2d(3, 2, 1),
    nn.AvgPool2d(3, 2, 1, count_include_pad=False), nn.AdaptiveAvgPool2d((3, 2)),
    nn.AdaptiveAvgPool2d(1), nn.AdaptiveMaxPool2d((2, 3)),
])
@pytest.mark.parametrize("decompose", [False, True])
def test_pooling(pool, decompose):
    check(pool, (1, 3, 7, 9), decompose=decompose)


@pytest.mark.parametrize("fn", [
    lambda x: x.mean(dim=(1, 2), keepdim=True), lambda x: x.sum(-1), lambda x: x.amax(0),
    lambda x: x.amin(dim=(0, 2)), lambda x: torch.softmax(x, 1), lambda x: torch.log_softmax(x, -1),
])
@pytest.mark.parametrize("decompose", [False, True])
def test_reductions_and_softmax(fn, decompose):
    check(Lambda(fn), (2, 5, 7), decompose=decompose, rtol=1e-4)


@pytest.mark.parametrize("decompose", [False, True])
def test_layer_norm(decompose):
    torch.manual_seed(0)
    norm = nn.LayerNorm((3, 7), eps=1e-3)
    nn.init.uniform_(norm.weight)
    check(norm, (2, 3, 7), decompose=decompose, rtol=1e-4)


@pytest.mark.parametrize("fn", [
    lambda x: x.reshape(8, -1).t(), lambda x: torch.flatten(x, 1), lambda x: x.permute(2, 0, 1),
    lambda x: x.transpose(0, -1).unsqueeze(1), lambda x: x.unsqueeze(0).squeeze(0),
    lambda x: torch.cat([x, x * 2], dim=1), lambda x: x[:, 1:4:2, -3:],
    lambda x: x[1] + x.select(2, -1).sum(), lambda x: torch.split(x, [1, 3], dim=1)[1],
    lambda x: x.chunk(2, dim=2)[0],
    lambda x: torch.index_select(x, 1, torch.tensor([3, 0, 0])),
    lambda x: torch.matmul(x, x.transpose(1, 2)), lambda x: torch.bmm(x, x.transpose(1, 2)),
])
def test_data_movement_and_matmul(fn):
    check(Lambda(fn), (2, 4, 6))


def test_weights_and_embedding():
    torch.manual_seed(0)
    table = torch.rand(11, 4)
    ids = torch.tensor([[3, 10, 0]])
    g = check(Lambda(lambda x, w: x @ w + nn.functional.embedding(ids, table).sum(),
                     torch.rand(6, 3)), (2, 4, 6))
    assert any(n.op == "dense" for n in g.ops)  # a matmul with a weight is a dense


def test_from_torch_of_a_zoo_block_is_the_same_graph_as_from_onnx():
    """Both frontends give the same convolutions for a residual block (PyTorch's ONNX exporter
    folds the batch norms into them; torch.export keeps them for the graph passes to fold)."""
    onnx = pytest.importorskip("onnx")  # noqa: F841
    from topi.graph import zoo

    block = zoo.BasicBlock(4, 8, 2).eval()
    x = torch.rand(1, 4, 9, 9)
    g_torch = tg.from_torch(block, (x,))
    model = zoo.ZooModel("block", block, {"data": (1, 4, 9, 9)})
    g_onnx = tg.from_onnx(model.onnx())
    convs = [[(n.inputs[1].shape, dict(n.attrs)) for n in g.ops if n.op == "conv2d"]
             for g in (g_torch, g_onnx)]
    assert len(convs[0]) == 3 and sorted(map(str, convs[0])) == sorted(map(str, convs[1]))
    assert g_torch.node("body_0_weight").shape == (8, 4, 3, 3)  # weights keep their names


def test_errors():
    with pytest.raises(UnsupportedError, match=r"torch node 'cumsum' \(aten.cumsum.default\): "
                                               r"unsupported op"):
        tg.from_torch(Lambda(lambda x: torch.cumsum(x, 0)), (torch.rand(3),))
    with pytest.raises(TypeError, match="example_inputs must be a tuple of tensors"):
        tg.from_torch(nn.ReLU(), torch.rand(3))
    with pytest.raises(TypeError, match="nn.Module or an ExportedProgram"):
        tg.from_torch("model", (torch.rand(3),))
    with pytest.raises(UnsupportedError, match=r"output 1 of aten.max_pool2d_with_indices"):
        pool = nn.MaxPool2d(2, return_indices=True)
        tg.from_torch(Lambda(lambda x: pool(x)[1].float()), (torch.rand(1, 1, 4, 4),))
    ints = (torch.arange(6).reshape(2, 3),)
    with pytest.raises(UnsupportedError, match="float scalar 0.5"):
        tg.from_torch(Lambda(lambda x: x * 0.5), ints)
    with pytest.raises(UnsupportedError, match="integer true division"):
        tg.from_torch(Lambda(lambda x: x / x), ints)
    with pytest.raises(UnsupportedError, match="only no-op expands"):
        tg.from_torch(Lambda(lambda x: x.expand(4, 3)), (torch.rand(1, 3),))
