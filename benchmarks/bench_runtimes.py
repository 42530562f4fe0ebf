"""Runtimes side by side: ours against onnxruntime, OpenVINO, eager PyTorch and inductor.

Each model (torchvision CNNs and small transformer configs of bench_wild.py, random weights) is
exported to ONNX once per batch size; that file feeds ours (`from_onnx` -> `build`, untuned, and
tuned from --log or after --tune-trials N), onnxruntime (spinning of idle threads off) and
OpenVINO (`PERFORMANCE_HINT` LATENCY and THROUGHPUT, f32); the PyTorch module itself runs eager
and through inductor (default config, `freezing` as PyTorch's CPU dashboard runs it, and with
--max-autotune `mode="max-autotune"`). Every runtime gets --threads threads.

Each round times every side in turn: a discarded warm-up of at least 0.15 s (the side's own
steady state, and the previous side's idle threads done spinning) and then a block of calls of
at least --block seconds. Latency is the block's time per call; throughput is batch / latency,
except OpenVINO THROUGHPUT's, which keeps its optimal number of requests in flight
(`AsyncInferQueue`). Ratios are medians of the per-round ratios (side's time over ours: > 1
means ours is faster). `%peak` is the graph's conv / dense / matmul FLOPs per second over the
machine's fp32 peak, measured by a register-only FMA loop (peak.py).

    python benchmarks/bench_runtimes.py --models resnet50,bert --batches 1 --rounds 3
    python benchmarks/bench_runtimes.py --tune-trials 1000 --log-dir logs --max-autotune
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from bench_models import _cpu_name, _onnxruntime, _table
from bench_wild import TEXT, VISION, _build, _export, _text, _vision
from peak import graph_flop, peak_gflops

import tensorlang as tl
import topi.graph as tg

CNNS = ("resnet50", "mobilenet_v3_large", "efficientnet_b0", "densenet121", "googlenet",
        "inception_v3", "squeezenet1_1", "shufflenet_v2_x1_0", "regnet_y_400mf", "mnasnet1_0",
        "convnext_tiny", "vgg11", "resnext50_32x4d", "efficientnet_v2_s", "regnet_x_400mf")
TRANSFORMERS = ("bert", "distilbert", "gpt2", "llama")
WARMUP_S = 0.15


class Side:
    """One runtime running one model: `run()` is a call at the model's batch; `stream()`, where
    the runtime keeps several requests in flight, runs `requests` batches and waits for them."""

    def __init__(self, run: Callable[[], object],
                 stream: tuple[Callable[[], None], int] | None = None) -> None:
        self.run = run
        self.stream = stream


def _block(fn: Callable[[], object], seconds: float, warmup: float = WARMUP_S) -> float:
    """Seconds per call of `fn` over a block of at least `seconds`, after `warmup` seconds of
    discarded calls."""
    start = time.perf_counter()
    while time.perf_counter() - start < warmup:
        fn()
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        fn()
        calls += 1
    return elapsed / calls


def _openvino(proto_bytes: bytes, feeds: dict[str, np.ndarray], threads: int,
              hint: str) -> Side:
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(proto_bytes, b""), "CPU", {
        "PERFORMANCE_HINT": hint, "INFERENCE_NUM_THREADS": threads,
        "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    inputs = list(feeds.values())
    jobs = compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
    queue = ov.AsyncInferQueue(compiled, jobs)

    def stream() -> None:
        for _ in range(jobs):
            queue.start_async(inputs)
        queue.wait_all()

    return Side(lambda: [request.infer(inputs)[o] for o in compiled.outputs],
                (stream, jobs) if jobs > 1 else None)


def _torch_call(module: torch.nn.Module, args: tuple) -> Callable[[], object]:
    def run() -> object:
        with torch.no_grad():
            return module(*args)

    return run


def _inductor(module: torch.nn.Module, args: tuple, **options: object) -> Side:
    """`torch.compile` of a copy of `module` (its own guards and cache entries), compiled on
    the first call under the inductor config `options` (freezing must be set then)."""
    import torch._inductor.config as inductor_config

    mode = options.pop("mode", None)
    run = _torch_call(torch.compile(copy.deepcopy(module), mode=mode), args)
    with inductor_config.patch(**options):
        run()
    return Side(run)


def _first(output: object) -> np.ndarray:
    leaves = torch.utils._pytree.tree_leaves(output)
    first = leaves[0]
    return first.detach().numpy() if isinstance(first, torch.Tensor) else np.asarray(first)


def _model(name: str, batch: int, seq: int) -> tuple[torch.nn.Module, tuple]:
    torch.manual_seed(0)
    if name in TEXT:
        module, _ = _text(name, seq)
        return module.eval(), (torch.randint(0, 1000, (batch, seq)),)
    module, (image,) = _vision(name)
    return module.eval(), (torch.randn(batch, *image.shape[1:]),)


def _ours(g: tg.Graph, feeds: dict[str, np.ndarray], name: str, batch: int,
          args: argparse.Namespace) -> dict[str, Side]:
    """Ours untuned, and tuned where --log or --tune-trials asks for it."""
    ours = {"ours": Side(lambda m=_build(g)[0]: m(**feeds))}
    log = args.log
    if args.tune_trials > 0:
        log = str(Path(args.log_dir) / f"runtimes_{name}_b{batch}.jsonl")
        tg.tune(g, trials=args.tune_trials, log_file=log, progress=False)
    if log:
        ours["ours tuned"] = Side(lambda m=_build(g, log)[0]: m(**feeds))
    return ours


def sides(name: str, batch: int, args: argparse.Namespace
          ) -> tuple[dict[str, Side], int, dict[str, str]]:
    """Every runtime's Side for `name` at `batch` (those that could run it), the graph's FLOPs
    and each runtime's output error against eager PyTorch (max abs error over the largest eager
    value) or why it failed."""
    module, inputs = _model(name, batch, args.seq)
    proto, _ = _export(module, inputs)
    g = tg.from_onnx(proto)
    feeds = {node.name: t.numpy() for node, t in zip(g.inputs, inputs)}
    runs = _ours(g, feeds, name, batch, args)
    runs["eager"] = Side(_torch_call(module, inputs))
    expected = _first(runs["eager"].run())
    scale = max(float(np.abs(expected).max()), 1e-30)
    errors = {k: f"{float(np.abs(_first(s.run()) - expected).max()) / scale:.1e}"
              for k, s in runs.items() if k != "eager"}
    others: dict[str, Callable[[], Side]] = {
        "onnxruntime": lambda: Side(_onnxruntime(proto, feeds, args.threads)),
        **{f"openvino {hint.lower()}": lambda hint=hint: _openvino(
            proto.SerializeToString(), feeds, args.threads, hint)
           for hint in ("LATENCY", "THROUGHPUT")},
        "inductor": lambda: _inductor(module, inputs),
        "inductor freezing": lambda: _inductor(module, inputs, freezing=True)}
    if args.max_autotune:
        others["inductor max-autotune"] = lambda: _inductor(module, inputs, mode="max-autotune",
                                                           freezing=True)
    for key, make in others.items():
        try:
            side = make()
            errors[key] = f"{float(np.abs(_first(side.run()) - expected).max()) / scale:.1e}"
            runs[key] = side
        except Exception as err:  # noqa: BLE001 - one runtime's failure is its row's finding
            errors[key] = f"failed: {type(err).__name__}: {str(err)[:80]}"
    return runs, graph_flop(g), errors


def bench(name: str, batch: int, args: argparse.Namespace, peak: float) -> list[dict]:
    """One row per runtime: latency, throughput, the ratios to ours and the fraction of peak."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs, flop, errors = sides(name, batch, args)
    latency: dict[str, list[float]] = {k: [] for k in runs}
    rate: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.rounds):
        for key, side in runs.items():
            latency[key].append(_block(side.run, args.block))
            if side.stream is None:
                rate[key].append(batch / latency[key][-1])
            else:
                stream, jobs = side.stream
                rate[key].append(batch * jobs / _block(stream, args.block))
    rows = []
    for key in runs:
        ms = statistics.median(latency[key]) * 1e3
        streamed = runs[key].stream is not None
        per_second = statistics.median(rate[key]) if streamed else batch * 1e3 / ms
        rows.append({
            "model": name, "batch": batch, "runtime": key, "ms": ms,
            "samples/s": per_second,
            "time/ours": statistics.median(t / o for t, o in zip(latency[key], latency["ours"])),
            "ours/rate": statistics.median(o / r for o, r in zip(rate["ours"], rate[key])),
            "%peak": 100 * flop * per_second / batch / (peak * 1e9),
            "err": errors.get(key, "-")})
    rows += [{"model": name, "batch": batch, "runtime": key, "err": error}
             for key, error in errors.items() if key not in runs]
    del runs
    # The next model starts without this one's sessions and threads, and with dynamo's caches
    # empty: models of one class (resnet50 and resnext50_32x4d, both batches, every inductor
    # variant) would otherwise fill its per-code-object limit and run eager, unannounced.
    torch._dynamo.reset()
    gc.collect()
    return rows


def _geomeans(rows: list[dict]) -> list[str]:
    lines = []
    for batch in sorted({r["batch"] for r in rows}):
        for key in dict.fromkeys(r["runtime"] for r in rows if r["runtime"] != "ours"):
            picked = [r for r in rows if r["batch"] == batch and r["runtime"] == key
                      and "time/ours" in r]
            if not picked:
                continue
            latency = np.exp(np.mean(np.log([r["time/ours"] for r in picked])))
            rate = np.exp(np.mean(np.log([r["ours/rate"] for r in picked])))
            lines.append(f"batch {batch}, {key}: time/ours geomean {latency:.2f}, ours/rate "
                         f"geomean {rate:.2f} over {len(picked)} models")
    return lines


COLUMNS = ["model", "batch", "runtime", "ms", "samples/s", "time/ours", "ours/rate", "%peak",
           "err"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join([*CNNS, *TRANSFORMERS]),
                        help=f"comma-separated, from {', '.join([*VISION, *TEXT])}")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds over all runtimes")
    parser.add_argument("--block", type=float, default=0.5, help="seconds of one timed block")
    parser.add_argument("--seq", type=int, default=128, help="transformer sequence length")
    parser.add_argument("--threads", type=int, default=tl.get_num_threads())
    parser.add_argument("--log", help="tuning records to build 'ours tuned' from")
    parser.add_argument("--tune-trials", type=int, default=0,
                        help="tune each model and batch with this budget first (log in --log-dir)")
    parser.add_argument("--log-dir", default=".")
    parser.add_argument("--max-autotune", action="store_true",
                        help="also inductor with mode='max-autotune' (slow to compile)")
    args = parser.parse_args()
    tl.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    peak = peak_gflops(args.threads)
    print(f"{_cpu_name()}, {args.threads} threads: measured fp32 peak {peak:.0f} GFLOP/s",
          flush=True)
    rows: list[dict] = []
    for batch in (int(b) for b in args.batches.split(",")):
        for name in args.models.split(","):
            try:
                rows += bench(name, batch, args, peak)
            except Exception as err:  # noqa: BLE001 - one model's failure is a row, not the end
                rows.append({"model": name, "batch": batch,
                             "runtime": f"failed: {type(err).__name__}: {str(err)[:120]}"})
            print(_table([r for r in rows if r["model"] == name and r["batch"] == batch],
                         COLUMNS), flush=True)
    import onnxruntime
    import openvino

    print(f"\n{_cpu_name()}, {args.threads} threads, fp32, peak {peak:.0f} GFLOP/s (FMA loop); "
          f"onnxruntime {onnxruntime.__version__}, OpenVINO {openvino.__version__}, PyTorch "
          f"{torch.__version__}; load average {os.getloadavg()[0]:.1f}")
    print("time/ours: the runtime's latency over ours; ours/rate: our samples/s over the "
          "runtime's (> 1: ours is faster)")
    print(_table(rows, COLUMNS))
    print("\n".join(_geomeans([r for r in rows if "ms" in r])))


if __name__ == "__main__":
    main()
