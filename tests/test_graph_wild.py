"""Real architectures end to end: torchvision and transformers models (small configurations,
random weights; among the transformers T5's encoder, Phi's partial rotary embeddings and
DeBERTa-v2's disentangled attention) imported through `from_torch`, through `from_onnx`
(TorchScript exporter, the dynamo exporter where TorchScript cannot export the model, and the
dynamo exporter for a few more), and through `torch.compile(backend="tensorlang")`, built with
fallback configs and compared with PyTorch eager."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import topi.graph as tg

torch = pytest.importorskip("torch", reason="the architectures need the torch extra")
onnx = pytest.importorskip("onnx", reason="the ONNX exports need the onnx extra")

import wild_models  # noqa: E402  (needs torch)
from topi.graph.torch_compile import TensorlangCompileWarning  # noqa: E402  (needs torch)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning",
                                        "ignore::FutureWarning")

#: Models also checked through the dynamo exporter, whose graphs differ from TorchScript's.
ALSO_DYNAMO = ("swin", "llama", "bert", "efficientnet")
#: Models checked through torch.compile.
COMPILED = ("shufflenet", "bert", "llama", "swin", "longformer")


def _leaves(value) -> list[np.ndarray]:
    """The tensors of a model's output in pytree order (torch.export's output order)."""
    return [t.detach().numpy() for t in torch.utils._pytree.tree_leaves(value)
            if isinstance(t, torch.Tensor)]


@pytest.fixture(scope="module", params=wild_models.VISION + wild_models.TEXT)
def arch(request) -> tuple[str, object, tuple, list[np.ndarray]]:
    """(name, module, example inputs, eager outputs)."""
    module, inputs = wild_models.get(request.param)
    with torch.no_grad():
        expected = _leaves(module(*inputs))
    return request.param, module, inputs, expected


def _check(actual: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(actual) >= 1 and len(actual) <= len(expected)
    for got, want in zip(actual, expected):
        assert got.shape == want.shape
        scale = float(np.abs(want).max()) or 1.0
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-3 * scale)


def _feed(g: tg.Graph, inputs: tuple) -> dict[str, np.ndarray]:
    return {node.name: t.numpy() for node, t in zip(g.inputs, inputs)}


def test_from_torch(arch) -> None:
    name, module, inputs, expected = arch
    g = tg.from_torch(module, inputs)
    outputs = tg.build(g)(**_feed(g, inputs))
    assert len(outputs) == len(expected)
    _check(outputs, expected)


def _onnx(module, inputs: tuple, dynamo: bool):
    """The module exported by the dynamo exporter, or by the TorchScript one where that one can
    export it (it cannot trace torchvision's fused multi-head attention, nor the transformers
    models, whose forward wrappers it calls with clashing arguments)."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not dynamo:
            buffer = io.BytesIO()
            try:
                torch.onnx.export(module, inputs, buffer, dynamo=False, opset_version=17)
                return onnx.load_from_string(buffer.getvalue())
            except (RuntimeError, TypeError, torch.onnx.errors.OnnxExporterError):
                pass
        return torch.onnx.export(module, inputs, dynamo=True, verbose=False).model_proto


def test_from_onnx(arch) -> None:
    name, module, inputs, expected = arch
    proto = _onnx(module, inputs, dynamo=False)
    g = tg.from_onnx(proto)
    _check(tg.build(g)(**_feed(g, inputs)), expected)


@pytest.mark.parametrize("name", ALSO_DYNAMO)
def test_from_onnx_dynamo_exporter(name: str) -> None:
    pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    module, inputs = wild_models.get(name)
    with torch.no_grad():
        expected = _leaves(module(*inputs))
    g = tg.from_onnx(_onnx(module, inputs, dynamo=True))
    _check(tg.build(g)(**_feed(g, inputs)), expected)


@pytest.mark.parametrize("name", COMPILED)
def test_torch_compile(name: str) -> None:
    module, inputs = wild_models.get(name)
    with torch.no_grad():
        expected = _leaves(module(*inputs))
        torch._dynamo.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("error", TensorlangCompileWarning)  # no fallback to eager
            actual = _leaves(torch.compile(module, backend="tensorlang")(*inputs))
    assert len(actual) == len(expected)
    _check(actual, expected)


def test_torch_compile_with_a_data_dependent_graph_break() -> None:
    conv = torch.nn.Conv2d(3, 5, 3, padding=1).eval()

    def f(x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(conv(x))
        if y.mean() > 0.25:  # data-dependent: Dynamo breaks the graph here
            return torch.sigmoid(y) * 2.0
        return torch.tanh(y) - 1.0

    torch._dynamo.reset()
    compiled = torch.compile(f, backend="tensorlang")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", TensorlangCompileWarning)  # every piece compiles
        for shift in (-1.0, 1.0):  # both branches
            x = torch.randn(1, 3, 7, 11, generator=torch.Generator().manual_seed(3)) + shift
            np.testing.assert_allclose(compiled(x).numpy(), f(x).numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ("regnet_y", "llama"))
def test_avx2_build(name: str) -> None:
    """The AVX2 path (blocked group convolutions; attention and RMSNorm) on the same models."""
    module, inputs = wild_models.get(name)
    with torch.no_grad():
        expected = _leaves(module(*inputs))
    g = tg.from_torch(module, inputs)
    _check(tg.build(g, target="llvm -mcpu=haswell")(**_feed(g, inputs)), expected)
