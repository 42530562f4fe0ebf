"""Every zoo model end to end at a reduced size: imported from ONNX and from PyTorch, built
with fallback configs (and once with a tiny tuning budget), against onnxruntime and PyTorch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import topi.graph as tg

torch = pytest.importorskip("torch", reason="the zoo needs the torch extra")
pytest.importorskip("onnx", reason="the ONNX models need the onnx extra")
ort = pytest.importorskip("onnxruntime", reason="the reference runtime is in the onnx extra")

from topi.graph import zoo  # needs torch

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


def _onnxruntime(model, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, inputs)


def _check(actual: np.ndarray, expected: np.ndarray) -> None:
    # rtol 1e-3 relative to the output's scale: logits near zero have no meaningful rtol.
    np.testing.assert_allclose(actual, expected, rtol=1e-3,
                               atol=1e-3 * float(np.abs(expected).max()))


@pytest.fixture(scope="module", params=sorted(zoo.MODELS))
def model(request) -> zoo.ZooModel:
    return zoo.get(request.param, **zoo.REDUCED[request.param])


@pytest.fixture(scope="module")
def proto(model: zoo.ZooModel):
    """The model exported to ONNX once for all the tests of this module."""
    return model.onnx()


def test_from_onnx_matches_onnxruntime(model: zoo.ZooModel, proto) -> None:
    inputs = model.inputs(seed=1)
    expected = _onnxruntime(proto, inputs)
    g = tg.from_onnx(proto)
    assert [i.name for i in g.inputs] == list(model.input_shapes)
    module = tg.build(g)
    (actual,) = module(**inputs)
    assert actual.shape == expected[0].shape
    _check(actual, expected[0])
    if model.name in ("resnet18", "mobilenet_v2"):  # each residual Add joins its conv's kernel
        adds = sum(node.op_type == "Add" for node in proto.graph.node)
        assert adds > 0 and sum(map(_has_residual_add, module.steps)) == adds, \
            [s.op for s in module.steps]


def _has_residual_add(step) -> bool:
    """A convolution kernel whose tail adds twice: its bias, then the residual (in NCHW the
    bias is a `bias_add`, in NCHW[x]c an `add` of the re-laid-out bias)."""
    first, *tail = step.op.split("+")
    return first.startswith("conv2d") and sum(op in ("add", "bias_add") for op in tail) == 2


@pytest.mark.parametrize("name", ["mobilenet_v2", "bert_layer"])
def test_avx2_build_matches_onnxruntime(name: str) -> None:
    """The same imported models built for an AVX2 CPU (the host runs that code too)."""
    model = zoo.get(name, **zoo.REDUCED[name])
    proto = model.onnx()
    inputs = model.inputs(seed=4)
    module = tg.build(tg.from_onnx(proto), target="llvm -mcpu=haswell")
    _check(module(**inputs)[0], _onnxruntime(proto, inputs)[0])


def test_from_torch_matches_pytorch(model: zoo.ZooModel) -> None:
    inputs = model.inputs(seed=2)
    g = tg.from_torch(model.module, model.torch_inputs(seed=2))
    (actual,) = tg.build(g)(**dict(zip([i.name for i in g.inputs], inputs.values())))
    _check(actual, model.torch_outputs(inputs)[0])


def test_zoo_sizes_and_errors() -> None:
    full = zoo.get("bert_layer")
    assert full.input_shapes == {"hidden_states": (1, 128, 768)}
    assert sum(p.numel() for p in full.module.parameters()) == 7_087_872  # BERT-base's layer
    resnet = zoo.get("resnet18")
    assert sum(p.numel() for p in resnet.module.parameters()) == 11_689_512  # torchvision's
    with pytest.raises(ValueError, match="unknown model 'vgg'"):
        zoo.get("vgg")


def test_tiny_tuning_budget_end_to_end(model: zoo.ZooModel, proto, tmp_path: Path) -> None:
    """Two trials (the first two workloads get one each, the others keep their fallback
    configs), then a build with the log, against onnxruntime."""
    g = tg.from_onnx(proto)
    log = tmp_path / f"{model.name}.jsonl"
    result = tg.tune(g, trials=2, per_round=1, tuner="random", log_file=log, seed=0,
                     progress=False)
    assert result.trials == 2 and sorted(s.trials for s in result.states)[-2:] == [1, 1]
    assert len(result.states) == len(tg.extract_tasks(g))
    module = tg.build(g, log_file=log)
    inputs = model.inputs(seed=3)
    _check(module(**inputs)[0], _onnxruntime(proto, inputs)[0])
