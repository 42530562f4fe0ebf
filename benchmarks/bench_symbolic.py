"""One symbolic module serving a sweep of (batch, sequence) sizes of a BERT-style encoder,
against our static builds of each size (untuned, and both tuned with one log of size buckets)
and against onnxruntime. Ratios > 1: the symbolic module is slower.

    python benchmarks/bench_symbolic.py [--seqs 16,64,256,512] [--batches 1,2,3]
        [--trials 64] [--rounds 7] [--target llvm] [--threads N] [--cpu-time]

`--trials 0` skips tuning. Every module of a size is timed in blocks (a discarded warm-up
block, then a timed one) taken in turn, `--rounds` times; each reports its fastest block (the
machine is shared: the fastest is the least disturbed). onnxruntime runs with spinning off so
that its idle threads do not slow the next block (shared/ANCHORS.md). `--threads` sets the
threads of both; `--cpu-time` times blocks by the process's CPU time instead of the wall
clock: with one thread each, a machine loaded by other work then slows no side (the wall clock
measured whichever side the scheduler preempted more: ratios moving 20% between runs at a
load of 10 on 2 cores).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import tensorlang as tl  # noqa: E402
import topi.graph as tg  # noqa: E402
from test_graph_symbolic import Encoder  # noqa: E402

#: Seconds of discarded calls before each timed block, and of timed calls in it.
WARMUP_S, BLOCK_S = 0.05, 0.1


def _block(fn: Callable[[], object], seconds: float, clock: Callable[[], float]) -> float:
    """The mean time of calls to `fn` over about `seconds` of `clock`."""
    calls, start = 0, clock()
    while True:
        fn()
        calls += 1
        elapsed = clock() - start
        if elapsed >= seconds:
            return elapsed / calls


def time_in_turn(fns: dict[str, Callable[[], object]], rounds: int,
                 clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """The fastest timed block of each function, their blocks taken in turn."""
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            _block(fn, WARMUP_S, clock)
            best[name] = min(best[name], _block(fn, BLOCK_S, clock))
    return best


def export_encoder(max_len: int) -> str:
    torch.manual_seed(0)
    model = Encoder(max_len=max_len).eval()
    path = str(Path(tempfile.mkdtemp()) / "encoder.onnx")
    example = (torch.zeros(1, 8, dtype=torch.int64), torch.ones(1, 8, dtype=torch.int64))
    axes = {0: "batch", 1: "seq"}
    torch.onnx.export(model, example, path, input_names=["ids", "attn"], output_names=["out"],
                      dynamic_axes={"ids": axes, "attn": axes, "out": axes}, dynamo=False,
                      opset_version=17)
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seqs", default="16,64,256,512")
    parser.add_argument("--batches", default="1,2,3")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--target", default="llvm")
    parser.add_argument("--threads", type=int, default=0, help="0: all cores")
    parser.add_argument("--cpu-time", action="store_true")
    args = parser.parse_args()
    seqs = [int(s) for s in args.seqs.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    if args.threads:
        tl.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message=".*(tuned config|fallback config|legacy).*")
    path = export_encoder(max(seqs))
    bounds = {"batch": (1, max(batches)), "seq": (1, max(seqs))}
    symbolic = tg.build(tg.from_onnx(path), bounds=bounds, target=args.target)
    log = None
    if args.trials:
        log = str(Path(tempfile.mkdtemp()) / "buckets.jsonl")
        tg.tune(tg.from_onnx(path), trials=args.trials, log_file=log, target=args.target,
                buckets={"seq": seqs, "batch": batches}, progress=False)
        tuned = tg.build(tg.from_onnx(path), log_file=log, bounds=bounds, target=args.target)
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.intra_op_num_threads = args.threads
    session = ort.InferenceSession(path, options)
    print(f"target {args.target}, {args.threads or 'all'} thread(s), {args.trials} tuning "
          f"trials over the buckets seq {seqs} x batch {batches}; ms per call "
          f"({'CPU' if args.cpu_time else 'wall'} time), and ratios")
    header = f"{'b x seq':>8} {'sym':>8} {'static':>8} {'ort':>8} {'sym/static':>10} {'sym/ort':>8}"
    if log:
        header += f" {'tuned sym':>9} {'tuned st':>9} {'tuned sym/st':>12}"
    print(header)
    for b in batches:
        for n in seqs:
            inputs = {"ids": np.random.randint(0, 50, (b, n)).astype("int64"),
                      "attn": np.ones((b, n), "int64")}
            shapes = {k: (b, n) for k in inputs}
            static = tg.build(tg.from_onnx(path, shapes=shapes), target=args.target)
            fns = {"sym": lambda: symbolic(**inputs), "static": lambda: static(**inputs),
                   "ort": lambda: session.run(None, inputs)}
            if log:
                static_tuned = tg.build(tg.from_onnx(path, shapes=shapes), log_file=log,
                                        target=args.target)
                fns["tsym"] = lambda: tuned(**inputs)
                fns["tstatic"] = lambda: static_tuned(**inputs)
            t = time_in_turn(fns, args.rounds,
                             time.process_time if args.cpu_time else time.perf_counter)
            line = (f"{b:>3} x {n:<4} {t['sym'] * 1e3:>8.3f} {t['static'] * 1e3:>8.3f} "
                    f"{t['ort'] * 1e3:>8.3f} {t['sym'] / t['static']:>10.2f} "
                    f"{t['sym'] / t['ort']:>8.2f}")
            if log:
                line += (f" {t['tsym'] * 1e3:>9.3f} {t['tstatic'] * 1e3:>9.3f} "
                         f"{t['tsym'] / t['tstatic']:>12.2f}")
            print(line, flush=True)


if __name__ == "__main__":
    main()
