"""PyTorch's torch.compile CPU inference suites (timm 54 models, Hugging Face 27) through
`backend="tensorlang"`, against eager PyTorch and inductor, side by side in one run.

The models are built as pytorch's benchmarks/dynamo harness builds them (suite_models.py):
random weights, eval mode, torch.no_grad(), float32, batch 1 (--batch 8 as the option). Each
model runs in subprocesses of its own with a timeout (suite_measure.py), with fresh kernel
caches (TL_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR), so that compile times are cold ones.

Per model and per suite it reports:
  pass      whole (every graph Dynamo handed over ran compiled) and right (max |ours - eager|
            / max |eager| < 2e-3 on the first and the second call);
  compile   seconds of the first call (capture and a cold build), ours and inductor's;
  memory    peak RSS of building and running the model, ours (build + two calls) and eager's
            (one call), and the bytes of the weights;
  speed     inductor/ours and eager/ours (> 1: ours is faster), medians of per-round ratios
            timed alternately in one process; geomeans per suite.

    python benchmarks/bench_compile_suites.py --models resnet18,BertForMaskedLM --seq-cap 64
    python benchmarks/bench_compile_suites.py --suite timm --freezing
    python benchmarks/bench_compile_suites.py --suite hf --batch 8 --json hf.jsonl

Timing needs an otherwise idle machine: while other processes load the cores, torch's OpenMP
team slows down far more than tensorlang's thread pool, and the ratios mean nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import suite_measure
import suite_models
from bench_models import _table

HERE = Path(__file__).resolve()
MIB = 1 << 20
COLUMNS = ["model", "verdict", "whole", "right", "err", "ours compile s", "inductor compile s",
           "ours RSS MiB", "eager RSS MiB", "ours/eager RSS", "weights MiB", "inductor/ours",
           "eager/ours"]


def child_main(args: argparse.Namespace) -> None:
    """In a child: build one model and measure one side (eager or compiled)."""
    import torch

    side, suite, name = args.child
    torch.set_num_threads(args.threads)
    out = suite_measure.Recorder(Path(args.out), suite=suite, model=name)
    try:
        built = suite_models.build(suite, name, args.batch, args.seq_cap)
    except suite_models.MissingModel as exc:
        out.stage("done", verdict="missing", note=str(exc))
        return
    out.stage("built", **built.info)
    reference = Path(args.out).with_name("reference.pt")
    if side == "eager":
        suite_measure.run_eager(built, reference, out)
    else:
        suite_measure.run_compiled(built, reference, out, args.freezing, args.rounds)
    out.stage("done")


def _child_command(side: str, suite: str, name: str, out: Path,
                   args: argparse.Namespace) -> list[str]:
    command = [sys.executable, str(HERE), "--child", side, suite, name, "--out", str(out),
               "--batch", str(args.batch), "--threads", str(args.threads),
               "--rounds", str(args.rounds)]
    command += ["--seq-cap", str(args.seq_cap)] * bool(args.seq_cap)
    return command + ["--freezing"] * args.freezing


def run_child(side: str, suite: str, name: str, folder: Path,
              args: argparse.Namespace) -> dict[str, Any]:
    """The last row a child wrote, marked `timeout` or `crashed` where it did not finish."""
    out = folder / f"{side}.jsonl"
    env = {**os.environ, "TL_NUM_THREADS": str(args.threads),
           "TL_CACHE_DIR": str(folder / "tl_cache"),
           "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor_cache")}
    log = folder / f"{side}.log"
    with open(log, "w") as log_file:
        child = subprocess.Popen(_child_command(side, suite, name, out, args), env=env,
                                 stdout=log_file, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        timed_out = False
        try:
            child.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(child.pid, signal.SIGKILL)  # its own session: it and any workers
            child.wait()
    lines = out.read_text().splitlines() if out.exists() else []
    row = json.loads(lines[-1]) if lines else {"suite": suite, "model": name}
    if row.get("stage") != "done":
        row.update(verdict="timeout" if timed_out else "crashed", failed_after=row.get("stage"),
                   log_tail=log.read_text(errors="replace")[-400:])
    return row


def measure_model(suite: str, name: str, args: argparse.Namespace) -> dict[str, Any]:
    """The eager child's row merged with the compiled child's, and the model's verdict."""
    with tempfile.TemporaryDirectory(prefix="compile_suites_") as tmp:
        start = time.perf_counter()
        row = run_child("eager", suite, name, Path(tmp), args)
        if row.get("stage") == "done" and "eager" in row:
            row.update(run_child("compiled", suite, name, Path(tmp), args))
        elif row.get("verdict") != "missing":
            row["verdict"] = "eager_failed"
        row["wall_s"] = round(time.perf_counter() - start, 1)
    row.setdefault("verdict", verdict(row))
    return row


def verdict(row: dict[str, Any]) -> str:
    """pass, not_whole (right, some graph ran eagerly), wrong or error (tensorlang's result)."""
    ours = row.get("tensorlang", {})
    if "error" in ours or not ours:
        return "error"
    if not ours.get("right"):
        return "wrong"
    return "pass" if ours.get("whole") else "not_whole"


def table_row(row: dict[str, Any]) -> dict[str, Any]:
    """One model's line of the table."""
    ours, inductor = row.get("tensorlang", {}), row.get("inductor", {})
    speed = row.get("speed", {})
    mib = {k: v / MIB for k, v in (("ours RSS MiB", ours.get("peak_rss")),
                                   ("eager RSS MiB", row.get("eager", {}).get("peak_rss")),
                                   ("weights MiB", row.get("weight_bytes"))) if v}
    return {"model": row["model"], "verdict": row.get("verdict"),
            "whole": ours.get("whole"), "right": ours.get("right"),
            "err": f"{ours['err']:.1e}" if ours.get("err") is not None else None,
            "ours compile s": ours.get("first_call_s"),
            "inductor compile s": inductor.get("first_call_s"), **mib,
            "ours/eager RSS": _ratio(mib.get("ours RSS MiB"), mib.get("eager RSS MiB")),
            "inductor/ours": speed.get("inductor/ours"), "eager/ours": speed.get("eager/ours")}


def geomean(values: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def suite_summary(suite: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts, median compile times, memory ratio and speed geomeans of one suite's rows."""
    lines = [table_row(r) for r in rows if r.get("verdict") != "missing"]

    def values(column: str) -> list[float]:
        return [line[column] for line in lines if isinstance(line.get(column), (int, float))]

    return {"model": f"{suite} ({len(lines)} built of {len(rows)})",
            "verdict": f"{sum(line['verdict'] == 'pass' for line in lines)} pass",
            "whole": sum(bool(line["whole"]) for line in lines),
            "right": sum(bool(line["right"]) for line in lines),
            "ours compile s": _median(values("ours compile s")),
            "inductor compile s": _median(values("inductor compile s")),
            "ours RSS MiB": _median(values("ours RSS MiB")),
            "eager RSS MiB": _median(values("eager RSS MiB")),
            "weights MiB": _median(values("weights MiB")),
            "ours/eager RSS": geomean(values("ours/eager RSS")),
            "inductor/ours": geomean(values("inductor/ours")),
            "eager/ours": geomean(values("eager/ours"))}


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator and denominator else None


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def plan(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(suite, model) pairs to run: the suites' lists, or the --models found in them (a name in
    neither list is tried as a timm model and then as a transformers class)."""
    suites = ["timm", "hf"] if args.suite == "all" else [args.suite]
    if not args.models:
        return [(s, m) for s in suites for m in suite_models.SUITES[s]]
    pairs = []
    for name in args.models.split(","):
        listed = [s for s in suites if name in suite_models.SUITES[s]]
        pairs.append((listed[0] if listed else _library_of(name), name))
    return pairs


def _library_of(name: str) -> str:
    """"hf" for a name that looks like a transformers class, else "timm"."""
    return "hf" if name[:1].isupper() else "timm"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=["timm", "hf", "all"], default="all")
    parser.add_argument("--models", help="comma-separated names (default: the whole suites)")
    parser.add_argument("--batch", type=int, default=1, help="batch size (the suite's: 1 or 8)")
    parser.add_argument("--seq-cap", type=int, help="cap the HF sequence lengths (quick runs)")
    parser.add_argument("--freezing", action="store_true",
                        help="inductor with torch._inductor.config.freezing = True, as "
                             "PyTorch's CPU dashboard runs it")
    parser.add_argument("--rounds", type=int, default=5,
                        help="alternating timing rounds per pair (0: no timing)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per child")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="threads of torch and tensorlang (default: all cores)")
    parser.add_argument("--json", help="append each model's row to this JSON-lines file")
    parser.add_argument("--child", nargs=3, metavar=("SIDE", "SUITE", "MODEL"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        child_main(args)
        return
    rows: dict[str, list[dict[str, Any]]] = {}
    for k, (suite, name) in enumerate(plan(args), 1):
        print(f"[{k}] {suite} {name} ...", file=sys.stderr, flush=True)
        row = measure_model(suite, name, args)
        rows.setdefault(suite, []).append(row)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    for suite, suite_rows in rows.items():
        print(f"\n{suite} (batch {args.batch}, {args.threads} threads"
              f"{', inductor frozen' if args.freezing else ''})\n")
        print(_table([table_row(r) for r in suite_rows] + [suite_summary(suite, suite_rows)],
                     COLUMNS))


if __name__ == "__main__":
    main()
