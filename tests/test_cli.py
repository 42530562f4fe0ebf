"""The `tensorlang` command line: tune, best, plot and lower end to end, and its errors."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import autotune
import topi.graph as tg
from tensorlang.cli import main
from tensorlang.cli.logs import curves
from topi.graph.model_io import TensorInfo, random_inputs

ROOT = Path(__file__).resolve().parent.parent
GEMM = ["matmul", "--shape", "16,24,8"]
#: A workload whose space takes minutes to measure (a GEMM's few hundred configs of tiny kernels
#: can all be measured between the log's first record and an interrupt).
CONV = ["conv2d_nchw", "--shape", "1,16,14,14,32,3,3", "--padding", "1"]




def record_line(workload: list, index: int, cost: float | None) -> str:
    """A log line of `workload`'s config `index`: `cost` seconds, or a timeout for None."""
    return json.dumps({
        "version": 1, "workload": workload, "target": "llvm",
        "config": {"index": index, "knobs": {}},
        "result": {"costs": [cost] if cost else [], "error_no": 0 if cost else 6,
                   "error_msg": "", "all_cost": 0.1, "timestamp": 0.0},
    })


def trials_in(log: Path) -> int:
    """Tuning trials in a log (the re-measured verdicts at the end of runs are not trials)."""
    return sum(not r.remeasured for r in autotune.load_records(log))


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_tune_says_when_the_best_config_is_the_fallback(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # One trial measures the fallback config alone, so the run ends on it.
    code, out, err = run(capsys, "tune", *GEMM, "--trials", "1", "--log",
                         str(tmp_path / "mm.jsonl"), "--rounds", "1", "--seed", "0")
    assert code == 0, err
    assert "(the fallback config; no other config beat it)" in out
    assert "run the same kernel" in out


def test_tune_writes_its_trials_and_compares_with_the_fallback_and_numpy(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "mm.jsonl"
    code, out, err = run(capsys, "tune", *GEMM, "--trials", "6", "--log", str(log),
                         "--rounds", "1", "--seed", "0")
    assert code == 0, err
    assert trials_in(log) == 6 and "best re-measured" in out
    assert "tuned (best of 6)" in out and "fallback" in out and "numpy" in out
    assert str(log) in out
    table = out[out.index("kernel"):].splitlines()
    assert float(table[1].split()[-1]) > 0  # the tuned kernel's GFLOP/s
    # A rerun with a larger budget resumes: only the missing trials are measured.
    code, out, err = run(capsys, "tune", *GEMM, "--trials", "8", "--log", str(log),
                         "--no-compare")
    assert code == 0, err
    assert trials_in(log) == 8 and "8 trials" in out

    code, out, err = run(capsys, "best", str(log))
    assert code == 0, err
    header, row = out.splitlines()
    assert header.split()[:2] == ["workload", "target"]
    assert row.startswith("matmul.x86 [[16, 8], [8, 24], 'float32']") and " 8 " in row
    assert "median of 5" in row  # the best is the last run's re-measured verdict

    curve = curves(log)[0]
    assert len(curve.trial_gflops) == 8
    assert curve.best_so_far == sorted(curve.best_so_far) and max(curve.best_so_far) > 0
    png = tmp_path / "curve.png"
    code, out, err = run(capsys, "plot", str(log), "-o", str(png))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {png}" in out

    code, out, err = run(capsys, "lower", *GEMM, "--log", str(log))
    assert code == 0, err
    assert "for " in out and "from " + str(log) in err
    code, out, _ = run(capsys, "lower", *GEMM, "--asm")
    assert code == 0 and ("zmm" in out or "ymm" in out)
    code, out, _ = run(capsys, "lower", *GEMM, "--llvm")
    assert code == 0 and "define" in out


def test_tune_checks_a_convolution_against_numpy_and_pytorch(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("torch")
    code, out, err = run(capsys, "tune", "conv2d_nhwc", "--shape", "1,9,7,5,17,3,3",
                         "--padding", "1", "--stride", "2", "--trials", "2", "--rounds", "1",
                         "--log", str(tmp_path / "c.jsonl"))
    assert code == 0, err
    assert "PyTorch" in out  # its output was checked against numpy before it was timed


def test_tune_takes_a_user_template_from_a_file(tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    source = tmp_path / "cli_user_templates.py"
    source.write_text(textwrap.dedent('''
        import autotune
        import tensorlang as tl

        @autotune.template("test_cli/scale")
        def scale(n, dtype):
            A = tl.placeholder((n,), dtype, name="A")
            B = tl.compute((n,), lambda i: A[i] * 2.0, name="B")
            s = tl.create_schedule(B.op)
            cfg = autotune.get_config()
            cfg.define_split("split", B.op.axis[0], num_outputs=2)
            cfg["split"].apply(s, B, B.op.axis[0])
            return s, [A, B]
    '''))
    log = tmp_path / "scale.jsonl"
    code, out, err = run(capsys, "tune", f"{source}:scale", "--shape", "48", "--trials", "3",
                         "--rounds", "1", "--log", str(log))
    assert code == 0, err
    assert trials_in(log) == 3 and "fallback" in out
    code, out, err = run(capsys, "best", "--import", str(source), str(log))
    assert code == 0, err
    assert "test_cli/scale" in out
    code, out, err = run(capsys, "lower", f"{source}:scale", "--args", "(48, 'float64')")
    assert code == 0 and "float64" in out


@pytest.mark.parametrize("argv,code,message", [
    (["tune", "nonesuch", "--shape", "4"], 1, "neither a known op"),
    (["tune", "matmul", "--shape", "4,x,4"], 1, "not a list of integers"),
    (["tune", "matmul", "--shape", "4,4"], 1, "takes --shape M,N,K"),
    (["tune", "matmul", "--shape", "4,0,4"], 1, ">= 1"),
    (["tune", "matmul"], 1, "exactly one of --shape and --args"),
    (["tune", "matmul", "--shape", "4,4,4", "--target", "cuda"], 1, "unknown target"),
    (["tune", "conv2d_nchw", "--shape", "1,3,4,4,8,7,7"], 1, "larger than the padded input"),
    (["tune", "matmul", "--shape", "4,4,4", "--trials", "0"], 2, "--trials"),
    (["tune", "matmul", "--shape", "4,4,4", "--tuner", "best"], 2, "--tuner"),
    (["tune", "matmul", "--shape", "4,4,4", "--padding", "lots"], 2, "--padding"),
    (["tune", "no_such_module_xyz:f", "--shape", "4"], 1, "cannot import"),
    (["lower", "matmul", "--shape", "4,4,4", "--llvm", "--asm"], 2, "at most one"),
    (["best", "/nonexistent/log.jsonl"], 1, "cannot read log"),
    (["plot", "/nonexistent/log.jsonl"], 1, "cannot read log"),
    (["frobnicate"], 2, "No such command"),
])
def test_bad_input_gives_one_line_and_an_exit_code(argv: list[str], code: int, message: str,
                                                   capsys: pytest.CaptureFixture) -> None:
    got, out, err = run(capsys, *argv)
    assert got == code
    assert err.startswith("tensorlang: error: ") and message in err
    assert len(err.strip().splitlines()) == 1 and out == ""


@pytest.mark.filterwarnings("ignore:.*skipping a broken log line")
def test_a_log_of_garbage_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "junk.jsonl"
    log.write_text("not json\n")
    code, _, err = run(capsys, "best", str(log))
    assert code == 1 and "holds no tuning records" in err.splitlines()[-1]


def test_plotting_a_template_that_is_not_registered_says_how_to_register_it(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "other.jsonl"
    log.write_text(record_line(["elsewhere/unknown", [8]], 0, 1e-6) + "\n")
    code, _, err = run(capsys, "plot", str(log), "-o", str(tmp_path / "c.png"))
    assert code == 1 and "'elsewhere/unknown' is not registered" in err and "--import" in err
    code, out, err = run(capsys, "best", str(log))  # no GFLOP/s without the flop count
    assert code == 0, err
    assert "elsewhere/unknown [8]" in out and out.splitlines()[1].split()[-5] == "-"


def test_merge_keeps_the_best_per_workload_and_counts_what_it_read_kept_and_skipped(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    farm, laptop, out = tmp_path / "farm.jsonl", tmp_path / "laptop.jsonl", tmp_path / "m.jsonl"
    farm.write_text("\n".join([record_line(["mine/a", [8]], 1, 3e-6),
                               record_line(["mine/a", [8]], 2, 1e-6),
                               '{"version": 1, "workload": ["mine/a", [8',  # cut off mid-line
                               record_line(["mine/b", [5]], 0, None)]) + "\n")
    laptop.write_text("\n".join([record_line(["mine/a", [8]], 3, 2e-6),
                                 record_line(["mine/b", [5]], 4, 9e-6), "garbage"]) + "\n")
    code, out_text, err = run(capsys, "merge", str(farm), str(laptop), "-o", str(out))
    assert code == 0 and err == ""
    assert out_text.splitlines() == [
        "read 7 lines from 2 logs: kept 2 (the best per workload and target), skipped 2 broken",
        f"wrote {out}"]
    kept = {tuple(map(str, r.workload)): r.config_index for r in autotune.load_records(out)}
    assert kept == {("mine/a", "[8]"): 2, ("mine/b", "[5]"): 4}


@pytest.mark.parametrize("inputs,output,message", [
    (["/nonexistent/farm.jsonl"], "m.jsonl", "cannot merge: /nonexistent/farm.jsonl: No such"),
    (["log.jsonl"], "/nonexistent/m.jsonl", "cannot merge: /nonexistent/m.jsonl: No such"),
    (["log.jsonl", "image.png"], "m.jsonl", "image.png is not a text file of tuning records"),
])
def test_merge_names_the_file_it_cannot_read_or_write(
        inputs: list[str], output: str, message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("log.jsonl").write_text(record_line(["mine/a", [8]], 1, 3e-6) + "\n")
    Path("image.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    code, out, err = run(capsys, "merge", *inputs, "-o", output)
    assert code == 1 and out == "" and err.startswith("tensorlang: error: ") and message in err
    assert len(err.strip().splitlines()) == 1 and not Path("m.jsonl").exists()


@pytest.mark.parametrize("command", ["tune", "best", "plot", "lower", "merge"])
def test_every_command_has_help_with_an_example(command: str,
                                                capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, command, "--help")
    assert code == 0 and "Example" in out and f"tensorlang {command}" in out


def test_python_dash_m_runs_the_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "tensorlang", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "tune" in done.stdout


def children(pid: int) -> set[int]:
    """The process ids of `pid`'s children (Linux /proc)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.update(int(c) for c in (task / "children").read_text().split())
    return found


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_ctrl_c_stops_tuning_with_130_keeps_the_log_and_no_worker_prints_a_traceback(
        tmp_path: Path) -> None:
    log = tmp_path / "mm.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH",
                                                                                  "")]))
    tune = subprocess.Popen(  # its own process group: Ctrl-C signals the whole group
        [sys.executable, "-m", "tensorlang", "tune", *CONV, "--trials", "10000", "--tuner",
         "random", "--log", str(log), "--no-compare", "--quiet"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 60  # generous for a loaded machine; usually ~3 s
        while not (log.exists() and log.read_text().count("\n") >= 1):
            assert tune.poll() is None, tune.communicate()[1]
            assert time.monotonic() < deadline, "no record within 60 s"
            time.sleep(0.1)
        workers = children(tune.pid)
        assert workers  # measuring: the interrupt reaches them too
        os.killpg(tune.pid, signal.SIGINT)
        out, err = tune.communicate(timeout=60)
    finally:
        if tune.poll() is None:
            tune.kill()
    assert tune.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1] == "tensorlang: interrupted"
    measured = autotune.load_records(log)  # every line it wrote is whole
    assert measured and all(r.template_name == "conv2d_nchw.x86" for r in measured)
    assert not any(alive(pid) for pid in workers)  # the parent stopped them


HANGS_WHILE_UNWINDING = """
import signal, sys, time
import tensorlang.cli as cli
from autotune.workers import WorkerPool
cli.INTERRUPT_GRACE = 0.5
pool = WorkerPool(1)
pool.workers[0].ensure_started()
print(pool.workers[0].process.pid, flush=True)
signal.signal(signal.SIGINT, cli._interrupt)
try:
    time.sleep(60)
finally:
    time.sleep(60)  # an unwinding that waits on something that never comes
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_ctrl_c_leaves_within_its_grace_when_the_unwinding_hangs(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH",
                                                                                  "")]))
    proc = subprocess.Popen([sys.executable, "-c", HANGS_WHILE_UNWINDING], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        worker = int(proc.stdout.readline())
        assert alive(worker)
        start = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and time.monotonic() - start < 10
    assert err.strip().splitlines()[-1] == "tensorlang: interrupted"
    deadline = time.monotonic() + 5
    while alive(worker) and time.monotonic() < deadline:  # killed, then reaped by init
        time.sleep(0.05)
    assert not alive(worker)


def test_the_console_script_is_declared() -> None:
    assert '"tensorlang = tensorlang.cli:main"' in (ROOT / "setup.py").read_text()



def tiny_convnet(path: Path, data_shape: tuple = (1, 3, 7, 7)) -> dict[str, np.ndarray]:
    """Save a small ONNX conv net of awkward sizes (conv 3->5 on 7x7, relu, global average pool,
    5->3 gemm) at `path`, its input declared `data_shape` (names for symbolic dimensions);
    returns its weights."""
    onnx = pytest.importorskip("onnx", reason="the model commands need the onnx extra")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {k: rng.standard_normal(s).astype("float32") for k, s in
               [("w", (5, 3, 3, 3)), ("b", (5,)), ("fc", (3, 5)), ("fc_b", (3,))]}
    nodes = [helper.make_node("Conv", ["data", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fc_b"], ["logits"], transB=1)]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("data", TensorProto.FLOAT, data_shape)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [data_shape[0], 3])],
        [numpy_helper.from_array(a, k) for k, a in weights.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return weights


def tiny_convnet_numpy(data: np.ndarray, weights: dict[str, np.ndarray]) -> np.ndarray:
    padded = np.pad(data.astype("float64"), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    conv = np.einsum("nchwyx,kcyx->nkhw", windows, weights["w"]) + weights["b"][:, None, None]
    pooled = np.maximum(conv, 0).mean(axis=(2, 3))
    return pooled @ weights["fc"].T + weights["fc_b"]


def test_model_tune_build_run_bench_an_onnx_model(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    net = tmp_path / "tiny.onnx"
    weights = tiny_convnet(net)
    log = tmp_path / "tiny.jsonl"
    code, out, err = run(capsys, "model", "tune", str(net), "--trials", "4", "--log", str(log),
                         "--seed", "0")
    assert code == 0, err
    # the conv's and the gemm's templates, and the pooling's auto-scheduled task
    assert "3 tasks" in out and "each task's default tuner" in out
    assert "round 1: task" in out and str(log) in out
    assert trials_in(log) == 4

    so = tmp_path / "tiny.so"
    with pytest.warns(UserWarning, match="fallback"):  # the task the 4 trials did not reach
        code, out, err = run(capsys, "model", "build", str(net), "--log", str(log),
                             "--export", str(so))
    assert code == 0, err
    assert "data: float32[1, 3, 7, 7]" in out and "logits: float32[1, 3]" in out
    assert [o.shape for o in tg.load_module(str(so)).outputs] == [(1, 3)]

    with pytest.warns(UserWarning, match="fallback"):
        code, out, err = run(capsys, "model", "run", str(net), "--log", str(log))
    assert code == 0, err
    row = out.splitlines()[1].split()
    assert row[:4] == ["logits", "[1,", "3]", "float32"]
    expected = tiny_convnet_numpy(random_inputs(
        [TensorInfo("data", (1, 3, 7, 7), "float32")])["data"], weights)
    assert float(row[4]) == pytest.approx(expected.sum(), rel=1e-4, abs=1e-4)
    has_onnxruntime = importlib.util.find_spec("onnxruntime") is not None
    if has_onnxruntime:
        assert float(row[5]) < 1e-4 and "outputs match onnxruntime" in out

    with pytest.warns(UserWarning, match="no log given"):
        code, out, err = run(capsys, "model", "bench", str(net), "--repeat", "2")
    assert code == 0, err
    if has_onnxruntime:
        assert "onnxruntime time / ours" in out
        ours_ms = float(out.split("\ntensorlang")[1].split()[0])
        assert ours_ms > 0
    else:
        assert "mean" in out


def test_model_commands_fix_symbolic_input_shapes_with_shape(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    net = tmp_path / "dynamic.onnx"
    weights = tiny_convnet(net, ("batch", 3, "height", 11))
    shape = ["--shape", "data=2,3,5,11"]
    with pytest.warns(UserWarning, match="no log given"):
        code, out, err = run(capsys, "model", "build", str(net), *shape)
    assert code == 0, err
    assert "data: float32[2, 3, 5, 11]" in out and "logits: float32[2, 3]" in out
    with pytest.warns(UserWarning, match="no log given"):
        code, out, err = run(capsys, "model", "run", str(net), *shape, "--seed", "3")
    assert code == 0, err
    row = out.splitlines()[1].split()
    assert row[:4] == ["logits", "[2,", "3]", "float32"]
    data = random_inputs([TensorInfo("data", (2, 3, 5, 11), "float32")], 3)["data"]
    expected = tiny_convnet_numpy(data, weights)
    assert float(row[4]) == pytest.approx(expected.sum(), rel=1e-4, abs=1e-4)
    if importlib.util.find_spec("onnxruntime") is not None:
        assert "outputs match onnxruntime" in out
    code, out, err = run(capsys, "model", "tune", str(net), *shape, "--trials", "1",
                         "--log", str(tmp_path / "d.jsonl"))
    assert code == 0, err
    assert "3 tasks" in out
    symbolic = "input 'data' has the symbolic shape [batch,3,height,11]; fix it with --shape"
    model_errors = [  # one line on stderr, exit status 1
        ([], f"{symbolic} data=N,3,N,11"),
        (["--shape", "image=1,3,5,11"],
         "names 'image', which is not an input of the model (its inputs: data)"),
        (["--shape", "data=2,4,5,11"],
         "gives (2, 4, 5, 11) for an input declared ['batch', 3, 'height', 11]"),
        (["--shape", "data=2,3,5"], "shapes gives (2, 3, 5)"),
    ]
    for argv, message in model_errors:
        code, _, err = run(capsys, "model", "build", str(net), *argv)
        assert code == 1 and message in err, (argv, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    usage_errors = [  # click's usage error, exit status 2, naming the option
        ("data:2,3,5,11", "is not NAME=D1,D2,... (e.g. data=1,3,224,224)"),
        ("=2,3", "is not NAME=D1,D2,..."),
        ("data=2,3,x,11", "the dimensions '2,3,x,11' are not comma-separated integers"),
        ("data=2,0,5,11", "dimensions must be >= 1"),
    ]
    for text, message in usage_errors:
        code, _, err = run(capsys, "model", "run", str(net), "--shape", text)
        assert code == 2 and "--shape" in err and message in err, (text, err)
    code, _, err = run(capsys, "model", "bench", str(net), "--shape", "data=1,3,5,11",
                       "--shape", "data=2,3,5,11")
    assert code == 2 and "input 'data' is given twice" in err, err


def test_model_commands_fail_in_one_line_on_bad_models_and_logs(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    onnx = pytest.importorskip("onnx", reason="the model commands need the onnx extra")
    from onnx import TensorProto, helper

    good = tmp_path / "tiny.onnx"
    tiny_convnet(good)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a protobuf at all")
    det = tmp_path / "det.onnx"
    graph = helper.make_graph(
        [helper.make_node("Det", ["x"], ["y"])], "det",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), det)
    empty_log = tmp_path / "empty.jsonl"
    empty_log.write_text("")
    cases = [
        (["run", str(tmp_path / "missing.onnx")], "cannot read model"),
        (["build", str(garbage)], "is not a valid ONNX model"),
        (["tune", str(det), "--trials", "1"], "not implemented: Det (1 node"),
        (["run", str(good), "--log", str(tmp_path / "missing.jsonl")], "cannot read log"),
        (["bench", str(good), "--log", str(empty_log)], "holds no tuning records"),
        (["build", str(good), "--target", "cuda"], "unknown target"),
    ]
    for argv, message in cases:
        code, _, err = run(capsys, "model", *argv)
        assert code == 1 and message in err, (argv, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, out, err = run(capsys, "model", "bench", "--help")
    assert code == 0 and "tensorlang model bench net.onnx" in out
