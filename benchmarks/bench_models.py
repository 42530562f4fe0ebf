"""Model benchmark: batch-1 latency of the zoo models, ours against onnxruntime and PyTorch.

For each model of `topi.graph.zoo` (random weights, full size unless --reduced): our build with
fallback configs, our build tuned with `topi.graph.tune` (when --trials > 0; the budget and the
tuning wall time are printed), onnxruntime (spinning of its idle threads off, so it does not slow
what runs next) and PyTorch (inference mode), all on the same number of threads. Each pair is
timed alternately in one process and the table reports medians of the per-round ratios as
speeds relative to ours (> 1: ours is faster). It also times a cold build of each model (empty
kernel cache) and a warm one (the cache filled). Needs the onnx and torch extras.

    python benchmarks/bench_models.py                         # untuned, all models
    python benchmarks/bench_models.py --trials 2000 --models resnet18,mobilenet_v2
    python benchmarks/bench_models.py --reduced --rounds 3    # a quick smoke run
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

import tensorlang as tl
import topi.graph as tg
from tensorlang.benchmark import compare
from topi.graph import zoo


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _onnxruntime(proto, inputs: dict[str, np.ndarray], threads: int) -> Callable[[], object]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return lambda: session.run(None, inputs)


def _pytorch(model: zoo.ZooModel, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
    tensors = tuple(torch.from_numpy(a) for a in inputs.values())

    def run() -> object:
        with torch.inference_mode():
            return model.module(*tensors)

    return run


def _build(g: tg.Graph, log: str | None, cache_dir: str) -> tuple[tg.Module, float]:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the untuned build lists its fallback workloads
        module = tg.build(g, log_file=log, cache_dir=cache_dir)
    return module, time.perf_counter() - start


def bench_model(name: str, args: argparse.Namespace, threads: int) -> dict:
    sizes = zoo.REDUCED[name] if args.reduced else {}
    model = zoo.get(name, **sizes)
    proto = model.onnx()
    inputs = model.inputs(seed=0)
    g = tg.from_onnx(proto)
    row: dict = {"model": name}
    with tempfile.TemporaryDirectory() as cache:
        module, row["cold build s"] = _build(g, None, cache)
        _, row["warm build s"] = _build(g, None, cache)
    expected = _onnxruntime(proto, inputs, threads)()[0]
    np.testing.assert_allclose(module(**inputs)[0], expected, rtol=1e-3,
                               atol=1e-3 * float(np.abs(expected).max()))
    ours = {"untuned": lambda: module(**inputs)}
    if args.trials > 0:
        log = str(Path(args.log_dir) / f"{name}{'_reduced' if args.reduced else ''}.jsonl")
        start = time.perf_counter()
        result = tg.tune(g, trials=args.trials, log_file=log, progress=not args.quiet)
        row["tuning s"] = time.perf_counter() - start
        row["trials"] = result.trials
        tuned, _ = _build(g, log, tempfile.mkdtemp())
        np.testing.assert_allclose(tuned(**inputs)[0], expected, rtol=1e-3,
                                   atol=1e-3 * float(np.abs(expected).max()))
        ours["tuned"] = lambda: tuned(**inputs)
    refs = {"onnxruntime": _onnxruntime(proto, inputs, threads),
            "pytorch": _pytorch(model, inputs)}
    # PyTorch last: its OpenMP threads keep spinning after each run and would slow whatever
    # is timed next.
    for ref_name, ref in refs.items():
        for mode, run in ours.items():
            # Alternating rounds; the ratio is the median of t_ref / t_ours over the rounds.
            result = compare(run, ref, repeat=args.rounds)
            row.setdefault(f"{mode} ms", result.ours * 1e3)
            row.setdefault(f"{ref_name} ms", result.reference * 1e3)
            row[f"{mode}/{ref_name}"] = result.speedup
    return row


def _table(rows: list[dict], columns: list[str] | None = None) -> str:
    """A markdown table of `rows`, with `columns` (default: this benchmark's) that any row has."""
    columns = columns or ["model", "untuned ms", "tuned ms", "onnxruntime ms", "pytorch ms",
                          "untuned/onnxruntime", "tuned/onnxruntime", "untuned/pytorch",
                          "tuned/pytorch", "trials", "tuning s", "cold build s", "warm build s"]
    columns = [c for c in columns if any(c in r for r in rows)]

    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:.2f}"
        return str(value) if value is not None else "-"

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(cell(r.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(zoo.MODELS),
                        help=f"comma-separated, from {', '.join(zoo.MODELS)}")
    parser.add_argument("--trials", type=int, default=0, help="tuning budget per model")
    parser.add_argument("--rounds", type=int, default=7, help="alternating timing rounds")
    parser.add_argument("--log-dir", default=".", help="where the tuning logs go (resumed)")
    parser.add_argument("--reduced", action="store_true", help="the test suite's small sizes")
    parser.add_argument("--quiet", action="store_true", help="no tuning progress")
    parser.add_argument("--threads", type=int, default=tl.get_num_threads(),
                        help="threads of every runtime (default: ours, TL_NUM_THREADS or all "
                             "cores); on a loaded machine PyTorch's OpenMP threads degrade far "
                             "more than the others when cores are oversubscribed")
    args = parser.parse_args()
    threads = args.threads
    tl.set_num_threads(threads)
    torch.set_num_threads(threads)
    rows = []
    for name in args.models.split(","):
        rows.append(bench_model(name, args, threads))
        print(_table(rows[-1:]), flush=True)
    print(f"\n{_cpu_name()}, {threads} threads, batch 1, fp32; onnxruntime {ort.__version__}, "
          f"PyTorch {torch.__version__}; load average {os.getloadavg()[0]:.1f}")
    print("x/ref columns: the reference's time over ours (> 1: ours is faster)")
    print(_table(rows))


if __name__ == "__main__":
    main()
