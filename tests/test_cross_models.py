"""Two small ONNX models exported for aarch64 (NEON, SVE) and riscv64 (RVV) and run under qemu by
the native runner that `tensorlang runner` writes (no Python on the device side), against
onnxruntime: a CNN at odd channel counts (conv, batch norm, relu, max pool, strided conv, global
pool, dense) and a transformer block (layer norm, attention's matrix products and softmax, a
GELU MLP, residuals). Skips without the cross compilers, qemu or onnx."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_cross_targets import FOREIGN, _missing_tools, _run

import tensorlang as tl
from tensorlang.cli import main

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import topi.graph as tg  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:workload"),
              pytest.mark.filterwarnings("ignore:.*tunable workload")]


def _model(name: str, nodes: list, inputs: dict[str, list[int]], output: list[int],
           weights: dict[str, np.ndarray]):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, output)],
        [numpy_helper.from_array(w.astype(np.float32), n) for n, w in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def small_cnn(rng: np.random.Generator):
    """3 -> 7 -> 13 channels on a 17 x 19 image, 5 classes."""
    weights = {"W1": rng.standard_normal((7, 3, 3, 3)) * 0.4, "B1": rng.standard_normal(7),
               "W2": rng.standard_normal((13, 7, 3, 3)) * 0.2, "B2": rng.standard_normal(13),
               "F": rng.standard_normal((5, 13)), "FB": rng.standard_normal(5)}
    for n, c in (("1", 7), ("2", 13)):
        weights |= {f"g{n}": rng.uniform(0.5, 1.5, c), f"b{n}": rng.standard_normal(c),
                    f"m{n}": rng.standard_normal(c) * 0.1, f"v{n}": rng.uniform(0.5, 2, c)}
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g1", "b1", "m1", "v1"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "W2", "B2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c2", "g2", "b2", "m2", "v2"], ["n2"]),
        helper.make_node("Relu", ["n2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "F", "FB"], ["out"], transB=1),
    ]
    return _model("cnn", nodes, {"x": [2, 3, 17, 19]}, [2, 5], weights)


def transformer_block(rng: np.random.Generator):
    """One pre-norm block over 7 tokens of width 12 (one head), an MLP of width 29."""
    d, hidden = 12, 29
    weights = {n: rng.standard_normal((d, d)) / np.sqrt(d) for n in ("Wq", "Wk", "Wv", "Wo")}
    weights |= {"W1": rng.standard_normal((d, hidden)) / np.sqrt(d),
                "W2": rng.standard_normal((hidden, d)) / np.sqrt(hidden),
                "g1": rng.uniform(0.5, 1.5, d), "b1": rng.standard_normal(d) * 0.1,
                "g2": rng.uniform(0.5, 1.5, d), "b2": rng.standard_normal(d) * 0.1,
                "scale": np.array(1 / np.sqrt(d))}
    nodes = [
        helper.make_node("LayerNormalization", ["x", "g1", "b1"], ["h"], axis=-1),
        *(helper.make_node("MatMul", ["h", f"W{p}"], [p]) for p in "qkv"),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["qk"]),
        helper.make_node("Mul", ["qk", "scale"], ["s"]),
        helper.make_node("Softmax", ["s"], ["a"], axis=-1),
        helper.make_node("MatMul", ["a", "v"], ["av"]),
        helper.make_node("MatMul", ["av", "Wo"], ["o"]),
        helper.make_node("Add", ["x", "o"], ["x1"]),
        helper.make_node("LayerNormalization", ["x1", "g2", "b2"], ["h2"], axis=-1),
        helper.make_node("MatMul", ["h2", "W1"], ["u"]),
        helper.make_node("Gelu", ["u"], ["gu"]),
        helper.make_node("MatMul", ["gu", "W2"], ["m"]),
        helper.make_node("Add", ["x1", "m"], ["out"]),
    ]
    return _model("block", nodes, {"x": [2, 7, d]}, [2, 7, d], weights)


#: ELF e_machine of each architecture
ELF_MACHINES = {"aarch64": 183, "riscv64": 243}


def _elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", f"{path} is no ELF file"
    return int.from_bytes(header[18:20], "little")


@pytest.fixture(scope="module")
def cli_runners(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The runner program `tensorlang runner --target T -o PATH` writes, once per target."""
    built: dict[str, Path] = {}

    class Runners(dict):
        def __missing__(self, spec: str) -> Path:
            path = tmp_path_factory.mktemp("runner") / "run"
            assert main(["runner", "--target", spec, "-o", str(path)]) == 0
            built[spec] = path
            return path

    return Runners()


@pytest.mark.parametrize("spec", FOREIGN)
@pytest.mark.parametrize("make, shape", [(small_cnn, (2, 3, 17, 19)),
                                         (transformer_block, (2, 7, 12))],
                         ids=["cnn", "transformer"])
def test_small_models_run_on_the_target_under_qemu(make, shape, spec, cli_runners, tmp_path):
    reason = _missing_tools(spec)
    if reason:
        pytest.skip(reason)
    rng = np.random.default_rng(11)
    model = make(rng)
    x = rng.standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    m = tg.build(tg.from_onnx(model), target=spec)
    m.export_library(tmp_path / "model.so")
    assert _elf_machine(tmp_path / "model.so") == ELF_MACHINES[tl.Target(spec).arch]
    proc, (result,) = _run(spec, cli_runners[spec], tmp_path / "model.so", {"x": x})
    assert proc.returncode == 0, proc.stderr
    assert result.shape == want.shape
    np.testing.assert_allclose(result, want, rtol=1e-4, atol=1e-4)
