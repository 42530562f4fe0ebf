"""1-D convolutions and pooling (audio, ConvBERT, SqueezeBERT, temporal models) through both
frontends: computed as the 2-D ones of images one row high, checked against PyTorch on odd
lengths, groups of 1, 2 and 3, channels that fill no vector, strides, dilations and "same"
padding; the ONNX importer also on a hand-built graph with auto_pad."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import topi.graph as tg

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
from onnx import TensorProto, helper, numpy_helper
from torch import nn

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def _graph(module: nn.Module, x: torch.Tensor, frontend: str) -> tg.Graph:
    if frontend == "torch":
        return tg.from_torch(module, (x,))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), buffer, dynamo=False, opset_version=17)
    return tg.from_onnx(onnx.load_from_string(buffer.getvalue()))


def _check(module: nn.Module, shape: tuple[int, ...], frontend: str) -> tg.Graph:
    torch.manual_seed(0)
    module = module.eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        expected = module(x).numpy()
    g = _graph(module, x, frontend)
    got = tg.build(g)(**{g.inputs[0].name: x.numpy()})[0]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    return g


FRONTENDS = ("torch", "onnx")


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("channels, filters, kernel, kwargs", [
    (6, 10, 5, dict(stride=2, padding=3)),
    (3, 7, 1, {}),
    (8, 8, 3, dict(padding="same", dilation=2, groups=2)),
    (9, 6, 4, dict(padding=1, groups=3, bias=False)),
    (12, 12, 9, dict(padding=4, groups=12)),  # depthwise, as ConvBERT's span convolution
    (5, 3, 7, dict(stride=3)),
])
def test_conv1d(frontend, channels, filters, kernel, kwargs):
    g = _check(nn.Conv1d(channels, filters, kernel, **kwargs), (2, channels, 37), frontend)
    assert any("conv2d" in n.op for n in g.ops)  # on the 2-D convolution kernels


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("kwargs", [dict(stride=2, padding=1, output_padding=1),
                                    dict(stride=1, groups=2), dict(stride=3, dilation=2)])
def test_conv_transpose1d(frontend, kwargs):
    _check(nn.ConvTranspose1d(4, 6, 4, **kwargs), (1, 4, 11), frontend)


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("pool", [nn.MaxPool1d(3, stride=2, padding=1), nn.MaxPool1d(2),
                                  nn.AvgPool1d(3, stride=2, padding=1),
                                  nn.AvgPool1d(4, ceil_mode=True, count_include_pad=False)])
def test_pool1d(frontend, pool):
    _check(pool, (2, 5, 23), frontend)


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_conv1d_block(frontend):
    """Convolutions, an activation, a residual add and a pooling in a row, as a temporal
    model chains them."""
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(6, 10, 5, stride=2, padding=3)
            self.mix = nn.Conv1d(10, 10, 3, padding="same", groups=5, dilation=2)
            self.pool = nn.MaxPool1d(3, stride=2, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.conv(x))
            return self.pool(self.mix(y) + y)

    _check(Block(), (2, 6, 37), frontend)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_onnx_conv1d_auto_pad(auto_pad):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 10)).astype("float32")
    w = rng.standard_normal((4, 3, 4)).astype("float32")
    node = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad=auto_pad, strides=[3],
                            kernel_shape=[4])
    graph = helper.make_graph([node], "conv1d", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    got = tg.build(tg.from_onnx(model))(x=x)[0]
    total = 0 if auto_pad == "VALID" else max((-(-10 // 3) - 1) * 3 + 4 - 10, 0)
    before = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
    expected = torch.nn.functional.conv1d(
        torch.nn.functional.pad(torch.from_numpy(x), (before, total - before)),
        torch.from_numpy(w), stride=3).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_a_window_of_the_wrong_rank_is_named():
    x = np.zeros((1, 3, 10), "float32")
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[1, 1])
    graph = helper.make_graph([node], "bad", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.zeros((4, 3, 3), "float32"), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(Exception, match=r"strides=\[1, 1\] for a 1-D window"):
        tg.from_onnx(model)
