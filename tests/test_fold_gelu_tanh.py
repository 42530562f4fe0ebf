"""GELU's tanh approximation spelt out as products (HF's gelu_new in GPT-2, ALBERT and Phi; the
TorchScript ONNX export of `gelu(approximate="tanh")`) folds into one `gelu_tanh` that joins the
dense layer before it, checked against the unfolded graph, onnxruntime and PyTorch."""

from __future__ import annotations

import io
import math
import warnings

import numpy as np
import pytest

import topi.graph as tg
from topi.graph.passes import fold_activations
from topi.graph.reference import run_reference

C = math.sqrt(2 / math.pi)


def _const(g: tg.Graph, value: float) -> tg.Node:
    return g.constant(np.array(value, "float32"))


def _gelu_new(g: tg.Graph, x: tg.Node) -> tg.Node:
    """HF's NewGELUActivation as TorchScript exports it: (x * 0.5) * (1 + tanh(
    (x + pow(x, 3) * 0.044715) * c))."""
    cube = g.multiply(g.power(x, _const(g, 3.0)), _const(g, 0.044715))
    inner = g.multiply(g.add(x, cube), _const(g, C))
    return g.multiply(g.multiply(x, _const(g, 0.5)), g.add(g.tanh(inner), _const(g, 1.0)))


def _torch_tanh_gelu(g: tg.Graph, x: tg.Node, kappa: float = 0.044715) -> tg.Node:
    """`gelu(approximate="tanh")` as TorchScript exports it: 0.5 * (x * (1 + tanh(c * (x +
    kappa * (x * (x * x))))))."""
    cube = g.multiply(_const(g, kappa), g.multiply(x, g.multiply(x, x)))
    inner = g.multiply(_const(g, C), g.add(x, cube))
    return g.multiply(_const(g, 0.5), g.multiply(x, g.add(_const(g, 1.0), g.tanh(inner))))


def _graph(act, shape: tuple[int, ...] = (3, 7, 13)) -> tg.Graph:
    g = tg.Graph()
    g.output(act(g, g.input("data", shape)))
    return g


@pytest.mark.parametrize("act", [_gelu_new, _torch_tanh_gelu])
@pytest.mark.parametrize("shape", [(3, 7, 13), (1,), (2, 1, 5)])
def test_tanh_gelu_folds_to_one_op(rng: np.random.Generator, act, shape) -> None:
    g = _graph(act, shape)
    folded = fold_activations(g)
    assert [n.op for n in folded.ops] == ["gelu_tanh"]
    assert folded.outputs[0].name == g.outputs[0].name
    inputs = {"data": rng.uniform(-4, 4, size=shape).astype("float32")}
    (want,) = run_reference(g, inputs)
    (got,) = run_reference(folded, inputs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_other_constants_and_shared_values_stay_unfolded() -> None:
    """Another cubic coefficient, or a tanh that something else reads too, is no GELU."""
    assert "gelu_tanh" not in {n.op for n in fold_activations(
        _graph(lambda g, x: _torch_tanh_gelu(g, x, kappa=0.05))).ops}
    g = tg.Graph()
    x = g.input("data", (4, 6))
    inner = g.multiply(_const(g, C), g.add(x, g.multiply(_const(g, 0.044715),
                                                         g.power(x, _const(g, 3.0)))))
    t = g.tanh(inner)
    g.output(g.multiply(_const(g, 0.5), g.multiply(x, g.add(t, _const(g, 1.0)))), g.relu(t))
    assert "gelu_tanh" not in {n.op for n in fold_activations(g).ops}


torch = pytest.importorskip("torch", reason="the PyTorch checks need the torch extra")
onnx = pytest.importorskip("onnx", reason="the export needs the onnx extra")
ort = pytest.importorskip("onnxruntime", reason="the reference needs onnxruntime")


class _GeluNew(torch.nn.Module):
    """A dense layer, then HF's gelu_new written with torch.pow, as transformers does."""

    def __init__(self, features: int, out: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(features, out)

    def forward(self, x):
        y = self.linear(x)
        return 0.5 * y * (1.0 + torch.tanh(C * (y + 0.044715 * torch.pow(y, 3.0))))


class _GeluTanh(torch.nn.Module):
    def __init__(self, features: int, out: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(features, out)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x), approximate="tanh")


def _export(module, inputs: tuple) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, buffer, dynamo=False, opset_version=17)
    return buffer.getvalue()


@pytest.mark.filterwarnings("ignore:.*no tuned config")  # fallback configs, as intended here
@pytest.mark.parametrize("block", [_GeluNew, _GeluTanh])
@pytest.mark.parametrize("rows, features, out", [(13, 29, 37), (1, 5, 3)])
def test_dense_then_tanh_gelu_is_one_kernel(block, rows: int, features: int, out: int) -> None:
    """Through from_onnx and from_torch the dense layer and the GELU are one kernel, equal to
    onnxruntime's and PyTorch's result."""
    torch.manual_seed(0)
    module = block(features, out).eval()
    x = torch.randn(rows, features) * 3
    with torch.no_grad():
        want = module(x).numpy()
    proto = _export(module, (x,))
    session = ort.InferenceSession(proto, providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0],
                               want, rtol=1e-5, atol=1e-5)
    for g in (tg.from_onnx(onnx.load_from_string(proto)), tg.from_torch(module, (x,))):
        built = tg.build(g)
        ops = [step.op for step in built.steps]
        assert len(ops) == 1 and ops[0].startswith("dense") and ops[0].endswith("gelu_tanh"), ops
        (got,) = built(**{g.inputs[0].name: x.numpy()})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
