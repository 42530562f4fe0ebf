"""Other architectures: aarch64 (NEON, SVE) and riscv64 (RVV) targets, what they tell schedules,
their assembly, libraries cross-built for them and run under qemu by the native runner, against
numpy and onnxruntime. Tests that run code skip without the cross compiler or qemu."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from topi_check import shape_of

import tensorlang as tl
from tensorlang.cli import main
from tensorlang.codegen import isa
from tensorlang.codegen.loop_mix import inner_loop_mix
from tensorlang.runtime.toolchain import build_runner, c_compiler, emulator_command
from topi import nn, x86

NEON = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod"
SVE = "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1"
RVV = "llvm -mtriple=riscv64-linux-gnu -mattr=+v,+f,+d"
FOREIGN = [NEON, SVE, RVV]
#: target -> a regular expression of its vector multiply-add on float32 vectors
VECTOR_FMA = {
    NEON: r"fmla\s+v\d+\.4s",
    SVE: r"fmla\s+z\d+\.s",
    RVV: r"vfmacc\.v|vfmadd\.v",
}

pytestmark = [pytest.mark.filterwarnings("ignore:workload"),
              pytest.mark.filterwarnings("ignore:.*tunable workload")]


def _missing_tools(spec: str) -> str | None:
    target = tl.Target(spec)
    try:
        c_compiler(target)
    except RuntimeError as err:
        return str(err)
    if emulator_command(target) is None:
        return f"qemu-{target.arch} is not installed (apt-get install qemu-user)"
    return None


def _needs_tools(spec: str) -> None:
    reason = _missing_tools(spec)
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def runners(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A native runner per target, built once (lazily: a target's tools may be missing)."""
    built: dict[str, Path] = {}

    class Runners(dict):
        def __missing__(self, spec: str) -> Path:
            path = tmp_path_factory.mktemp("runner") / "run"
            built[spec] = build_runner(tl.Target(spec), path)
            return built[spec]

    return Runners()


def _run(spec: str, runner: Path, library: Path, inputs: dict[str, np.ndarray],
         outputs: int = 1) -> tuple[subprocess.CompletedProcess, list[np.ndarray]]:
    """Run `library` with the native runner under qemu: the process and the output arrays."""
    work = library.parent
    args = []
    for name, value in inputs.items():
        np.save(work / f"{name}.npy", value)
        args.append(f"{name}={work / f'{name}.npy'}")
    outs = [work / f"out{k}.npy" for k in range(outputs)]
    for out in outs:
        args += ["--out", str(out)]
    proc = subprocess.run([*emulator_command(tl.Target(spec)), str(runner), str(library), *args],
                          capture_output=True, text=True, timeout=300)
    return proc, [np.load(o) for o in outs] if proc.returncode == 0 else []


# -- what a target tells schedules -----------------------------------------------------------

@pytest.mark.parametrize("spec, arch, lanes, signature, l1d", [
    (NEON, "aarch64", 4, "generic neon-128 fma", 32),
    ("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1", "aarch64", 4, "neoverse-n1 neon-128", 64),
    (SVE, "aarch64", 8, "neoverse-v1 sve-256 fma", 64),
    ("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-v1 -mattr=-sve", "aarch64", 4,
     "neoverse-v1 neon-128", 64),
    ("llvm -mtriple=aarch64-linux-gnu -mcpu=apple-m1", "aarch64", 4, "apple-m1 neon-128", 128),
    ("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76", "aarch64", 4, "cortex-a76 neon-128", 64),
    (RVV, "riscv64", 4, "generic-rv64 rvv-128 fma", 32),
    ("llvm -mtriple=riscv64-linux-gnu -mattr=+v,+zvl256b,+d", "riscv64", 8, "rvv-256", 32),
])
def test_foreign_targets_describe_their_cpu(spec, arch, lanes, signature, l1d):
    t = tl.Target(spec)
    assert (t.arch, t.runs_here) == (arch, False)
    assert t.vector_lanes("float32") == lanes
    assert t.vector_lanes("int8") == 4 * lanes
    assert t.vector_registers == 32 and t.has_fma
    assert signature in t.cpu_signature
    assert t.caches.l1d == l1d * 1024
    assert str(t) == spec
    assert t.module_header()[1] == t.triple


def test_the_host_still_runs_here():
    assert tl.Target("llvm").runs_here and tl.Target("llvm").arch == "x86_64"


@pytest.mark.parametrize("spec, message", [
    ("llvm -mtriple=mips-linux-gnu", "unsupported architecture 'mips'"),
    ("llvm -mtriple=aarch64-linux-gnu -mcpu=native", "this machine's CPU"),
    ("llvm -mtriple=", "malformed option"),
])
def test_bad_foreign_targets_are_named(spec, message):
    with pytest.raises(ValueError, match=message):
        tl.Target(spec)


def _elementwise(n: int = 67) -> tuple[tl.Schedule, list[tl.Tensor]]:
    a, b = tl.placeholder((n,), name="a"), tl.placeholder((n,), name="b")
    c = tl.compute((n,), lambda i: a[i] * b[i] + tl.exp(b[i]), name="c")
    s = tl.create_schedule(c.op)
    _, inner = s[c].split(c.op.axis[0], factor=tl.Target.current().vector_lanes("float32"))
    s[c].vectorize(inner)
    return s, [a, b, c]


def _dense(m: int = 13, n: int = 19, k: int = 31) -> tuple[tl.Schedule, list[tl.Tensor]]:
    d, w = tl.placeholder((m, k), name="data"), tl.placeholder((n, k), name="weight")
    out = nn.dense(d, w)
    return x86.schedule_dense(out), [d, w, out]


def _conv(data: tuple[int, ...], kernel: tuple[int, ...], compute=nn.conv2d_nchw,
          schedule=x86.schedule_conv2d_nchw) -> tuple[tl.Schedule, list[tl.Tensor]]:
    d, k = tl.placeholder(data, name="data"), tl.placeholder(kernel, name="kernel")
    out = compute(d, k, 1, 1)
    return schedule(out), [d, k, out]


def _conv2d() -> tuple[tl.Schedule, list[tl.Tensor]]:
    return _conv((1, 5, 9, 11), (19, 5, 3, 3))


def _row_sum() -> tuple[tl.Schedule, list[tl.Tensor]]:
    a = tl.placeholder((37, 53), name="a")
    out = nn.sum(a, axis=1)
    return x86.schedule_reduce(out), [a, out]


def _int8_dense() -> tuple[tl.Schedule, list[tl.Tensor]]:
    d = tl.placeholder((5, 67), "uint8", name="data")
    w = tl.placeholder((19, 67), "int8", name="weight")
    out = nn.dense(d, w, out_dtype="int32")
    return x86.schedule_dense(out), [d, w, out]


def _int8_conv2d() -> tuple[tl.Schedule, list[tl.Tensor]]:
    from topi.nn.conv2d_int8 import conv2d_nchw_int8
    from topi.x86.conv2d_int8 import schedule_conv2d_nchw_int8

    d = tl.placeholder((1, 8, 7, 9), "uint8", name="data")
    k = tl.placeholder((16, 8, 3, 3), "int8", name="kernel")
    out = conv2d_nchw_int8(d, k, 1, 1)
    return schedule_conv2d_nchw_int8(out), [d, k, out]


def _dense_quantized() -> tuple[tl.Schedule, list[tl.Tensor]]:
    """int4 weights with zero points, groups of 32, packed into the target's panels inside the
    kernel (37 channels: a partial last panel); float16 scales and zero points where the panels
    of `quantize_weights` hold them so (not RVV: `packing.HALF_BY_LIBRARY`)."""
    from topi.graph.llm.packing import HALF_BY_LIBRARY
    from topi.nn.dense_quantized import dense_quantized
    from topi.x86.dense_quantized import schedule_dense_quantized

    half = tl.Target.current().arch not in HALF_BY_LIBRARY
    d = tl.placeholder((3, 64), name="data")
    w = tl.placeholder((37, 2, 16), "uint8", name="weight")
    s, z = (tl.placeholder((37, 2), "float16" if half else "float32", name=name)
            for name in ("scale", "zero"))
    out = dense_quantized(d, w, s, z, bits=4, group_size=32)
    return schedule_dense_quantized(out), [d, w, s, z, out]


def _top_k() -> tuple[tl.Schedule, list[tl.Tensor]]:
    """The positions of the 5 largest of each row of 23 (rank reductions, a mixture of experts'
    routing)."""
    a = tl.placeholder((7, 23), name="a")
    out = nn.argsort(a, axis=1, descending=True, k=5)
    return x86.schedule_reduce(out), [a, out]


def _reference(kernel, arrays: list[np.ndarray]) -> np.ndarray:
    if kernel is _top_k:
        from topi.testing import argsort_python

        return argsort_python(arrays[0], 1, True, 5)
    if kernel is _int8_conv2d:
        import torch

        wide = [torch.from_numpy(a.astype(np.float64)) for a in arrays]
        return torch.nn.functional.conv2d(*wide, padding=1).numpy().astype(np.int32)
    if kernel is _elementwise:
        a, b = arrays
        return a * b + np.exp(b)
    if kernel is _conv2d:
        import torch

        return torch.nn.functional.conv2d(*map(torch.from_numpy, arrays), padding=1).numpy()
    if kernel is _row_sum:
        return arrays[0].sum(axis=1)
    if kernel is _dense_quantized:
        from topi.graph.llm.packing import PackedWeight

        d, *packed = arrays
        return (d @ PackedWeight(*packed, bits=4, group_size=32).dequantize().T).astype("float32")
    d, w = arrays
    wide = "int64" if d.dtype == np.uint8 else "float64"
    return (d.astype(wide) @ w.astype(wide).T).astype("int32" if wide == "int64" else "float32")


@pytest.mark.parametrize("spec", FOREIGN)
def test_topi_schedules_take_the_targets_lanes(spec):
    lanes = tl.Target(spec).vector_lanes("float32")
    with tl.Target(spec):
        dense = tl.build(*_dense(), name="dense").get_source("ll")
        conv = tl.build(*_conv2d(), name="conv").get_source("ll")
    for ll in (dense, conv):
        assert f"<{lanes} x float>" in ll
        assert f"<{2 * lanes} x float>" not in ll, "vectors wider than the target's registers"


@pytest.mark.parametrize("spec", FOREIGN)
def test_assembly_shows_the_targets_vector_instructions(spec):
    with tl.Target(spec):
        dense = tl.build(*_dense(), name="dense").get_source("asm")
        exp = tl.build(*_elementwise(), name="ew").get_source("asm")
        int8 = tl.build(*_int8_dense(), name="qdense").get_source("asm")
    assert re.search(VECTOR_FMA[spec], dense), dense[:2000]
    for asm in (dense, exp, int8):
        assert not re.search(r"\b[xyz]mm\d|_ZGV|vpdpbusd|pmaddubs", asm), "x86 code on " + spec
    if spec == SVE:
        assert "p0" in dense or "ptrue" in dense  # SVE predicates: the fixed vectors use SVE


@pytest.mark.parametrize("spec, instruction", [
    (NEON, "sdot"),  # dotprod: the unsigned data split into two signed halves
    (SVE, "usdot"),  # neoverse-v1 has i8mm: the mixed-sign dot in one instruction
    ("llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod,+i8mm", "usdot"),
    ("llvm -mtriple=aarch64-linux-gnu -mattr=+neon", None),  # no dot: widening multiply-adds
])
def test_int8_products_use_the_aarch64_dot_instructions(spec, instruction):
    with tl.Target(spec):
        dense = tl.build(*_int8_dense(), name="qdense").get_source("asm")
        conv = tl.build(*_int8_conv2d(), name="qconv").get_source("asm")
    for asm in (dense, conv):
        used = set(re.findall(r"^\s+(u?s?dot|smlal2?)\s", asm, flags=re.MULTILINE))
        if instruction is None:
            assert used and used <= {"smlal", "smlal2"}, used
        else:
            assert used == {instruction}, used


@pytest.mark.parametrize("spec", [NEON, RVV])
def test_calling_code_of_another_architecture_raises(spec):
    with tl.Target(spec):
        f = tl.build(*_elementwise(), name="ew")
    arrays = [np.zeros(67, "float32") for _ in range(3)]
    with pytest.raises(RuntimeError, match=r"compiled for \w+ .* export_library"):
        f(*arrays)
    with pytest.raises(RuntimeError, match="cannot run it"):
        f.time_evaluator()(*arrays)
    assert "define" in f.get_source("ll") and "for i.outer" in f.get_source("ir")


def test_tuning_for_another_architecture_fails_clearly_instead_of_timing_host_code():
    """A measurement runs the code where the tuner runs: here it cannot, and no trial may time
    x86 code compiled in its place."""
    import autotune

    task = autotune.create_task("dense.x86", ((13, 31), (19, 31), "float32"), target=NEON)
    assert task.target == NEON
    with pytest.raises(autotune.TuningError, match="compiled for aarch64"):
        autotune.tune(task, trials=2, progress=False)


# -- libraries run under qemu by the native runner ------------------------------------------

KERNELS = [_elementwise, _dense, _conv2d, _row_sum, _int8_dense, _int8_conv2d, _top_k,
           _dense_quantized]


def _inputs(tensors: list[tl.Tensor], rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for t in tensors:
        shape = shape_of(t)
        if t.dtype == "uint8":
            out[t.name] = rng.integers(0, 256, shape, dtype=np.uint8)
        elif t.dtype == "int8":
            out[t.name] = rng.integers(-128, 128, shape, dtype=np.int8)
        else:
            out[t.name] = rng.uniform(-1, 1, shape).astype(t.dtype)
    return out


@pytest.mark.parametrize("spec", FOREIGN)
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.__name__.strip("_"))
def test_kernels_run_on_the_target_under_qemu(spec, kernel, runners, tmp_path):
    _needs_tools(spec)
    with tl.Target(spec):
        s, tensors = kernel()
        f = tl.build(s, tensors, name="kernel")
    f.export_library(tmp_path / "kernel.so")
    inputs = _inputs(tensors[:-1], np.random.default_rng(3))
    proc, (result,) = _run(spec, runners[spec], tmp_path / "kernel.so", inputs)
    assert proc.returncode == 0, proc.stderr
    want = _reference(kernel, list(inputs.values()))
    assert result.shape == want.shape and result.dtype == want.dtype
    if want.dtype == np.int32:
        np.testing.assert_array_equal(result, want)
    else:
        np.testing.assert_allclose(result, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", FOREIGN)
@pytest.mark.parametrize("name, args", [("gemm", (37, 29, 53)), ("softmax", (7, 45))])
def test_auto_scheduled_workloads_run_on_the_target_under_qemu(spec, name, args, runners,
                                                               tmp_path):
    """The auto-scheduler's sketches (lanes and register blocks from the target) give code that
    runs there."""
    _needs_tools(spec)
    import auto_schedule_workloads as workloads

    from autotune.auto_schedule import generate
    from autotune.space import FallbackConfig

    with tl.Target(spec):
        tensors = getattr(workloads, name)(*args)
        s, _ = generate(tensors, FallbackConfig())
        f = tl.build(s, tensors, name="kernel")
    if name == "gemm":
        assert re.search(VECTOR_FMA[spec], f.get_source("asm"))
    f.export_library(tmp_path / "kernel.so")
    inputs = _inputs([t for t in tensors if not isinstance(t.op, tl.ComputeOp)],
                     np.random.default_rng(6))
    proc, (result,) = _run(spec, runners[spec], tmp_path / "kernel.so", inputs)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(result, workloads.REFERENCES[name](*inputs.values()), rtol=1e-4,
                               atol=1e-5)


def _tiny_onnx_model(rng: np.random.Generator):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    weights = {"W": rng.standard_normal((8, 3, 3, 3)), "B": rng.standard_normal(8),
               "F": rng.standard_normal((8, 5))}
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("MatMul", ["f", "F"], ["y"]),
             helper.make_node("Softmax", ["y"], ["out"], axis=1)]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 11, 13])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 5])],
        [numpy_helper.from_array(w.astype(np.float32), name) for name, w in weights.items()])
    return onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("spec", FOREIGN)
def test_an_onnx_model_runs_on_the_target_under_qemu(spec, runners, tmp_path):
    _needs_tools(spec)
    ort = pytest.importorskip("onnxruntime")
    import topi.graph as tg

    rng = np.random.default_rng(4)
    model = _tiny_onnx_model(rng)
    x = rng.standard_normal((2, 3, 11, 13)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    m = tg.build(tg.from_onnx(model), target=spec)
    with pytest.raises(RuntimeError, match="export_library"):
        m(x=x)
    m.export_library(tmp_path / "model.so")
    proc, (result,) = _run(spec, runners[spec], tmp_path / "model.so", {"x": x})
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(result, want, rtol=1e-5, atol=1e-6)


def test_a_symbolic_model_for_another_architecture_raises_and_exports(runners, tmp_path):
    pytest.importorskip("onnx")
    import topi.graph as tg
    from onnx import TensorProto, helper, numpy_helper

    weight = np.random.default_rng(7).standard_normal((8, 5)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"]), helper.make_node("Relu", ["y"], ["out"])],
        "symbolic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 5])],
        [numpy_helper.from_array(weight, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m = tg.build(tg.from_onnx(model), target=NEON, bounds={"n": 64})
    with pytest.raises(RuntimeError, match="compiled for aarch64 .* cannot run it"):
        m(x=np.ones((3, 8), np.float32))
    _needs_tools(NEON)
    m.export_library(tmp_path / "model.so")
    proc, _ = _run(NEON, runners[NEON], tmp_path / "model.so", {"x": np.ones((3, 8), np.float32)})
    assert proc.returncode != 0 and "symbolic sizes is not supported" in proc.stderr


# -- the runner itself (natively: no emulator needed) ----------------------------------------

def test_runner_checks_its_arguments_natively(tmp_path):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    runner = build_runner(tl.Target("llvm"), tmp_path / "run")
    s, tensors = _dense()
    tl.build(s, tensors, name="kernel").export_library(tmp_path / "k.so")
    rng = np.random.default_rng(5)
    data, weight = (rng.standard_normal(shape_of(t)).astype("float32") for t in tensors[:2])
    np.save(tmp_path / "d.npy", data)
    np.save(tmp_path / "w.npy", weight)
    np.save(tmp_path / "d64.npy", data.astype("float64"))
    np.save(tmp_path / "short.npy", data[:-1])

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(runner), str(tmp_path / "k.so"), *args], capture_output=True,
                              text=True, timeout=60)

    ok = run(f"data={tmp_path / 'd.npy'}", f"weight={tmp_path / 'w.npy'}", "--out",
             str(tmp_path / "o.npy"), "--repeat", "3")
    assert ok.returncode == 0, ok.stderr
    assert "ms per call" in ok.stdout
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), data @ weight.T, rtol=1e-5, atol=1e-5)
    for args, message in [
        ((f"data={tmp_path / 'd.npy'}", "--out", "x.npy"), "no file given for input: weight"),
        ((f"data={tmp_path / 'd64.npy'}", f"weight={tmp_path / 'w.npy'}", "--out", "x.npy"),
         "data must be float32"),
        ((f"data={tmp_path / 'short.npy'}", f"weight={tmp_path / 'w.npy'}", "--out", "x.npy"),
         "shape does not match"),
        ((f"bias={tmp_path / 'd.npy'}",), "no input named: bias"),
        ((f"data={tmp_path / 'd.npy'}", f"weight={tmp_path / 'w.npy'}"), "one --out per output"),
    ]:
        proc = run(*args)
        assert proc.returncode != 0 and message in proc.stderr, (args, proc.stderr)


def test_runner_command_line(tmp_path, monkeypatch, capsys):
    assert main(["runner", "--target", "llvm", "-o", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run").exists() and "runs on x86_64" in capsys.readouterr().out
    monkeypatch.setenv("TL_CC_AARCH64", "no-such-cross-gcc")
    assert main(["runner", "--target", NEON, "-o", str(tmp_path / "arm")]) == 1
    assert "needs the cross compiler no-such-cross-gcc" in capsys.readouterr().err


# -- register blocks that fill the register file: no spills in the hot loop ---------------------

def _full_gemm() -> tuple[tl.Schedule, list[tl.Tensor]]:
    a, b = tl.placeholder((12, 29), name="a"), tl.placeholder((29, 64), name="b")
    out = nn.matmul(a, b)
    return x86.schedule_matmul(out), [a, b, out]


def _full_conv2d() -> tuple[tl.Schedule, list[tl.Tensor]]:
    # 14 output columns: without registers for the operands, the fallback's block was 2 vectors
    # x 14 columns (28 accumulators), which spilled on NEON.
    return _conv((1, 5, 11, 14), (16, 5, 3, 3))


def _full_depthwise() -> tuple[tl.Schedule, list[tl.Tensor]]:
    return _conv((1, 16, 13, 29), (16, 1, 3, 3), nn.depthwise_conv2d_nchw,
                 x86.schedule_depthwise_conv2d_nchw)


def _full_reference(kernel, arrays: list[np.ndarray]) -> np.ndarray:
    import torch

    if kernel is _full_gemm:
        a, b = arrays
        return (a.astype("float64") @ b.astype("float64")).astype("float32")
    d, w = map(torch.from_numpy, arrays)
    groups = d.shape[1] if kernel is _full_depthwise else 1
    return torch.nn.functional.conv2d(d, w, padding=1, groups=groups).numpy()


FULL_BLOCKS = [_full_gemm, _full_conv2d, _full_depthwise]


@pytest.mark.parametrize("spec, operands", [(NEON, isa.LOAD_STORE_OPERANDS),
                                             (SVE, isa.LOAD_STORE_OPERANDS), (RVV, 0)])
def test_load_store_targets_keep_registers_for_operands(spec, operands):
    # fmla / vfmacc read no memory: aarch64 loads the broadcast operands into vector registers,
    # RVV into its scalar float registers.
    from topi.x86.common import accumulator_budget

    target = tl.Target(spec)
    assert not isa.fma_reads_memory(target.arch)
    with target:
        assert accumulator_budget(2) == 32 - 2 - 2 - operands
    with tl.Target("llvm -mcpu=skylake-avx512"):
        assert accumulator_budget(2) == 28, "x86 folds a broadcast into its FMA"
    with tl.Target("llvm -mcpu=haswell"):
        assert accumulator_budget(2) == 12


@pytest.mark.parametrize("spec", FOREIGN)
@pytest.mark.parametrize("kernel", FULL_BLOCKS, ids=lambda k: k.__name__.strip("_"))
def test_full_register_blocks_spill_nothing_in_their_hot_loop(spec, kernel, runners, tmp_path):
    target = tl.Target(spec)
    with target:
        s, tensors = kernel()
        f = tl.build(s, tensors, name="kernel")
    mix = inner_loop_mix(f.get_source("asm"), target)
    assert mix is not None and mix.fmas >= 9, "no vector FMA loop found"
    assert mix.stack_refs == 0, f"{mix.stack_refs} stack references in the hot loop"
    _needs_tools(spec)
    f.export_library(tmp_path / "kernel.so")
    inputs = _inputs(tensors[:-1], np.random.default_rng(5))
    proc, (result,) = _run(spec, runners[spec], tmp_path / "kernel.so", inputs)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(result, _full_reference(kernel, list(inputs.values())),
                               rtol=1e-5, atol=1e-5)
