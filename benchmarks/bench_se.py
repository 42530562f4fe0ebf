"""Squeeze-and-excitation blocks fused (`passes.fuse_squeeze_excitation`) or not, on the models
that have them: whole-model time against onnxruntime with the pass on and off, the kernel calls
of each build, and the profile's kernel sum with the SE kernels' share.

Each model is exported and imported as in bench_wild.py and built twice (the pipeline with and
without the pass). Each round times the three in turn (ours without, ours with, onnxruntime with
spinning off), each in a block after a pause; ratios are medians of the per-round ratios, and
of the fastest rounds. Then both builds are profiled in turn, one run at a time, and each
kernel's least time kept: sums of those are what a loaded machine leaves comparable.

    python benchmarks/bench_se.py --models efficientnet_b0,mobilenet_v3_large --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable

import numpy as np
import torch
from bench_models import _onnxruntime
from bench_wild import _export, _vision

import tensorlang as tl
import topi.graph as tg
from tensorlang.benchmark import calls_per_sample
from topi.graph.passes import PIPELINE

MODELS = "efficientnet_b0,mobilenet_v3_large,regnet_y_400mf,efficientnet_v2_s"


def _block(fn: Callable[[], object], number: int, settle: float) -> float:
    time.sleep(settle)
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def _kernel_mins(m: tg.Module, feeds: dict[str, np.ndarray], best: dict[str, float]) -> None:
    """Lower `best` (kernel call -> ms) to this profile's times (one run): over many runs, the
    least each kernel took, which a loaded machine's preemptions leave alone."""
    for line in m.profile(number=1, inputs=feeds).splitlines()[1:-1]:
        name, *_, ms, _ = line.split()
        best[name] = min(best.get(name, float("inf")), float(ms))


def _sums(m: tg.Module, best: dict[str, float]) -> tuple[float, float]:
    """(all kernels, the SE kernels) of the least times: the SE kernels are those with a 1 x 1
    output plane (pools, the 1x1 convolutions on them, the SE gates; the classifier's pool too),
    the multiplies (with the layout transforms fused into them) and the scaled weights."""
    se = 0.0
    for step in m.steps:
        node = m.graph.node(step.name)
        ops = set(step.op.split("+"))
        scale = "multiply" in ops and ops <= {"multiply", "layout_transform"}
        if scale or step.op == "se_scaled_weight" or tuple(node.shape[2:4]) == (1, 1):
            se += best[step.name]
    return sum(best.values()), se


def bench(name: str, args: argparse.Namespace) -> None:
    torch.manual_seed(0)
    module, inputs = _vision(name)
    module = module.eval()
    proto, _ = _export(module, inputs)
    g = tg.from_onnx(proto)
    feeds = {node.name: t.numpy() for node, t in zip(g.inputs, inputs)}
    without = [p for p in PIPELINE if p[0] != "fuse_squeeze_excitation"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = {"off": tg.build(g, pipeline=without, target=args.target),
                 "on": tg.build(g, target=args.target)}
    with torch.no_grad():
        expected = module(*inputs).numpy()
    for key, m in built.items():
        error = np.abs(m(**feeds)[0] - expected).max() / np.abs(expected).max()
        ops = [n.op for n in m.graph.ops]
        print(f"{name} pass {key}: {len(m.steps)} kernel calls, max rel err vs PyTorch "
              f"{error:.1e}, se_gate {ops.count('se_gate')}, "
              f"se_scaled_weight {ops.count('se_scaled_weight')}")
    fns = {"off": lambda: built["off"](**feeds), "on": lambda: built["on"](**feeds),
           "ort": _onnxruntime(proto, feeds, args.threads)}
    numbers = {k: calls_per_sample(fn, 0.1) for k, fn in fns.items()}
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(args.rounds):
        for key, fn in fns.items():
            times[key].append(_block(fn, numbers[key], args.settle))
    best: dict[str, dict[str, float]] = {"off": {}, "on": {}}
    for _ in range(args.profiles):
        for key in best:
            _kernel_mins(built[key], feeds, best[key])

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(times[a], times[b]))

    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    low = {k: min(v) * 1e3 for k, v in times.items()}
    print(f"{name}: median ms off {ms['off']:.2f} on {ms['on']:.2f} onnxruntime {ms['ort']:.2f}; "
          f"onnxruntime/ours off {ratio('ort', 'off'):.2f} -> on {ratio('ort', 'on'):.2f}; "
          f"off/on {ratio('off', 'on'):.2f}")
    print(f"  fastest round ms off {low['off']:.2f} on {low['on']:.2f} onnxruntime "
          f"{low['ort']:.2f}; onnxruntime/ours off {low['ort'] / low['off']:.2f} -> on "
          f"{low['ort'] / low['on']:.2f}; off/on {low['off'] / low['on']:.2f}")
    sums = {key: _sums(built[key], best[key]) for key in best}
    for key, (total, se) in sums.items():
        print(f"  least kernel times, {key}: sum {total:.2f} ms, SE kernels {se:.2f} ms")
    print(f"  kernel sum off/on {sums['off'][0] / sums['on'][0]:.2f}, SE kernels off/on "
          f"{sums['off'][1] / sums['on'][1]:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profiles", type=int, default=40,
                        help="profiled runs of each build, alternated (least time per kernel)")
    parser.add_argument("--settle", type=float, default=0.2, help="pause before each block (s)")
    parser.add_argument("--target", default="llvm")
    parser.add_argument("--threads", type=int, default=tl.get_num_threads())
    args = parser.parse_args()
    tl.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    for name in args.models.split(","):
        bench(name, args)


if __name__ == "__main__":
    main()
