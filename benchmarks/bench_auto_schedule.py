"""Auto-scheduling benchmarks: plain computes tuned with no template, side by side.

    python benchmarks/bench_auto_schedule.py bar --trials 150            # the issue's bar
    python benchmarks/bench_auto_schedule.py bar --only gemm softmax --trials 200
    python benchmarks/bench_auto_schedule.py bar --only gemm --size gemm=1024,1024,1024
    python benchmarks/bench_auto_schedule.py templates --trials 150 --tuner xgb_knob
    python benchmarks/bench_auto_schedule.py untuned --trials 100        # vs topi's schedules
    python benchmarks/bench_auto_schedule.py bert --trials 64 --seq 128  # a BERT layer's groups
    python benchmarks/bench_auto_schedule.py overhead --trials 128       # the tuner's own time

bar: each compute of tests/auto_schedule_workloads.py at a realistic size (GEMM 512^3, softmax
and layer norm 512x768, a 1024^2 five-point stencil, a 3x3 convolution 64x56x56 -> 64 over a
padded compute, attention scores 1x12x128x64, and the layer norm and the scaled scores written
with their reductions inside expressions) tuned with `--trials` trials, then its best
(and its untuned default) timed against numpy or the PyTorch op in one process. The ratio
is reference time / our time (> 1: faster); the bar is 0.8 (GEMM), 1.0 (softmax, layer norm,
stencil), 0.6 (convolution), 0.8 (scores).
templates: the same GEMM and convolution auto-scheduled against the topi templates
(`matmul.x86`, `conv2d_nchw.x86`) tuned with equal trials (each with its default tuner unless
--tuner: evolutionary search for the auto-scheduled task, xgb for the template). untuned:
auto-scheduled softmax and layer norm against topi's default schedules of `topi.nn.softmax` /
`layer_norm`.
bert: every kernel of a BERT encoder layer without a template (its softmax, the residual + layer
norm groups, the fused elementwise chains) as `topi.graph.extract_tasks` lists it, tuned with
`--trials` trials each, against the default schedule that `topi.graph.build` gives it untuned;
then the whole layer built with those records against the layer built without.
overhead: the tuner's own time per trial (proposals, features, model fits; the measurement
replaced by a synthetic timing) on the auto-scheduled GEMM 512^3, xgb against evolutionary,
alternately in one process.

Timings on a shared machine drift: compare the ratios of one run only. Each tuning log goes
to a temporary folder, so every run starts fresh.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import autotune
import tensorlang as tl
from tensorlang.benchmark import compare

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import auto_schedule_workloads as W  # noqa: E402 - the computes the tests check

Arrays = Sequence[np.ndarray]


def _torch() -> Any:
    import torch

    return torch


def _references() -> dict[str, tuple[tuple, float, Callable[[Arrays], Callable[[], Any]]]]:
    """name -> (args, bar, make the reference call from the input arrays)."""
    torch = _torch()
    F = torch.nn.functional
    T = torch.from_numpy
    return {
        "gemm": ((512, 512, 512), 0.8, lambda a: lambda: a[0] @ a[1]),
        "softmax": ((512, 768), 1.0, lambda a: lambda: torch.softmax(T(a[0]), -1)),
        "layer_norm": ((512, 768), 1.0, lambda a: lambda: F.layer_norm(
            T(a[0]), (a[0].shape[1],), T(a[1]), T(a[2]))),
        "stencil": ((1024, 1024), 1.0, lambda a: lambda: W.REFERENCES["stencil"](a[0])),
        "conv3x3": ((64, 56, 56, 64), 0.6, lambda a: lambda: F.conv2d(T(a[0]), T(a[1]),
                                                                       padding=1)),
        "scores": ((1, 12, 128, 64), 0.8, lambda a: lambda: torch.matmul(
            T(a[0]), T(a[1]).transpose(-1, -2))),
        # the same, written with their reductions inside expressions
        "layer_norm_inline": ((512, 768), 1.0, lambda a: lambda: F.layer_norm(
            T(a[0]), (a[0].shape[1],), T(a[1]), T(a[2]))),
        "scores_scaled": ((1, 12, 128, 64), 0.8, lambda a: lambda: torch.matmul(
            T(a[0]), T(a[1]).transpose(-1, -2)) * 0.125),
    }


def _arrays(tensors: Sequence[tl.Tensor]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(0)
    shape = [[int(d) for d in t.shape] for t in tensors]
    ins = [rng.standard_normal(s).astype("float32") for s, t in zip(shape, tensors)
           if not isinstance(t.op, tl.ComputeOp)]
    outs = [np.zeros(s, "float32") for s, t in zip(shape, tensors)
            if isinstance(t.op, tl.ComputeOp)]
    return ins, outs


TUNER: str | None = None  # --tuner (None: each task's default)


def _tuned(task: autotune.Task, trials: int, folder: str) -> tuple[Any, float]:
    log = os.path.join(folder, f"{task.name.replace('/', '_')}.jsonl")
    start = time.perf_counter()
    autotune.tune(task, trials=trials, log_file=log, progress=False, tuner=TUNER)
    return log, time.perf_counter() - start


def bar(trials: int, only: Sequence[str], folder: str,
        sizes: dict[str, tuple[int, ...]] | None = None) -> None:
    """Tune each computation and time it against its reference (at `sizes[name]` where given)."""
    print(f"{'workload':<28} {'tuned':>7} {'untuned':>8} {'bar':>5} {'ok':>3} {'tuning':>8}")
    for name, (args, target_ratio, make_ref) in _references().items():
        if only and name not in only:
            continue
        args = (sizes or {}).get(name, args)
        task = autotune.create_task(getattr(W, name), args)
        log, seconds = _tuned(task, trials, folder)
        s, tensors = task.apply_best(log)
        f = tl.build(s, tensors)
        d_s, d_tensors = task.default_schedule()
        g = tl.build(d_s, d_tensors)
        ins, outs = _arrays(tensors)
        f(*ins, *outs)
        np.testing.assert_allclose(outs[-1], W.REFERENCES[name](*ins), rtol=2e-3, atol=2e-3)
        ref = make_ref(ins)
        tuned = compare(lambda: f(*ins, *outs), ref, repeat=9).speedup
        untuned = compare(lambda: g(*ins, *outs), ref, repeat=5).speedup
        label = f"{name} {list(args)}"
        print(f"{label:<28} {tuned:>6.2f}x {untuned:>7.2f}x {target_ratio:>5.1f} "
              f"{'yes' if tuned >= target_ratio else 'no':>3} {seconds:>7.0f}s", flush=True)


def templates(trials: int, only: Sequence[str], folder: str) -> None:
    """Auto-scheduled GEMM and convolution against the topi templates, equal trials."""
    import topi  # noqa: F401 - registers the templates

    pairs = [("gemm", (512, 512, 512), "matmul.x86", ((512, 512), (512, 512), "float32")),
             ("conv3x3", (64, 56, 56, 64), "conv2d_nchw.x86",
              ((1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1, "float32"))]
    for name, args, template, template_args in pairs:
        if only and name not in only:
            continue
        auto = autotune.create_task(getattr(W, name), args)
        hand = autotune.create_task(template, template_args)
        auto_log, _ = _tuned(auto, trials, folder)
        hand_log, _ = _tuned(hand, trials, folder)
        s, tensors = auto.apply_best(auto_log)
        f = tl.build(s, tensors)
        best = autotune.best_records(autotune.load_records(hand_log))[(hand.key, hand.target)]
        hs, htensors = hand.instantiate(best.config_index)
        h = tl.build(hs, htensors)
        ins, outs = _arrays(tensors)
        h_ins, h_outs = _arrays(htensors)
        ratio = compare(lambda: f(*ins, *outs), lambda: h(*h_ins, *h_outs), repeat=9).speedup
        print(f"{name} {list(args)}: auto-scheduled / {template} tuned, {trials} trials each: "
              f"{ratio:.2f}x", flush=True)


def untuned(trials: int, folder: str) -> None:
    """Auto-scheduled softmax and layer norm against topi's default schedules."""
    import topi

    for name, args in (("softmax", (512, 768)), ("layer_norm", (512, 768))):
        task = autotune.create_task(getattr(W, name), args)
        log, _ = _tuned(task, trials, folder)
        s, tensors = task.apply_best(log)
        f = tl.build(s, tensors)
        x = tl.placeholder(args, name="x")
        if name == "softmax":
            out, extra = topi.nn.softmax(x), []
            sched = topi.x86.schedule_softmax(out)
        else:
            gamma = tl.placeholder((args[1],), name="g")
            beta = tl.placeholder((args[1],), name="b")
            out, extra = topi.nn.layer_norm(x, gamma, beta), [gamma, beta]
            sched = topi.x86.schedule_layer_norm(out)
        g = tl.build(sched, [x, *extra, out])
        ins, outs = _arrays(tensors)
        ratio = compare(lambda: f(*ins, *outs), lambda: g(*ins, *outs), repeat=9).speedup
        print(f"{name} {list(args)}: auto-scheduled ({trials} trials) / topi's schedule: "
              f"{ratio:.2f}x", flush=True)


def bert(trials: int, seq: int, hidden: int, heads: int, ffn: int, folder: str) -> None:
    """A BERT layer's untemplated kernels auto-scheduled against their default schedules, one
    by one, then the layer with and without their records."""
    import topi.graph as tg
    from autotune.auto_schedule import AutoTask
    from topi.graph import zoo
    from topi.graph.build import as_target, tuning_context
    from topi.graph.kernel import kernel_spec
    from topi.graph.passes import optimize

    model = zoo.get("bert_layer", seq_len=seq, hidden=hidden, heads=heads, ffn=ffn)
    g = tg.from_torch(model.module, model.torch_inputs())
    target = as_target("llvm")
    log = os.path.join(folder, "bert_auto.jsonl")
    tasks = {(t.name, t.args): (t, c) for t, c in tg.extract_tasks(g) if isinstance(t, AutoTask)}
    for task, _ in tasks.values():
        autotune.tune(task, trials=trials, log_file=log, progress=False, tuner=TUNER)
    print(f"BERT layer seq {seq} hidden {hidden}: untemplated kernels, auto-scheduled "
          f"({trials} trials each) / build's default schedule (> 1: tuned faster)")
    done = set()
    for node in optimize(g).ops:
        with tuning_context(log, target):
            spec = kernel_spec(node)
        if spec.auto is None or repr(spec.workload) in done:
            continue
        done.add(repr(spec.workload))
        with tuning_context(None, target):
            plain = kernel_spec(node)
        with target:
            f = tl.build(spec.schedule(), spec.params)
            d = tl.build(plain.schedule(), plain.params)
        ins, outs = _arrays(spec.params)
        ratio = compare(lambda: f(*ins, *outs), lambda: d(*ins, *outs), repeat=9).speedup
        count = tasks[spec.workload][1]
        print(f"  {spec.auto[0].name.removeprefix('auto/'):<46} x{count}: {ratio:.2f}x",
              flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the templates' fallbacks, in both builds
        tuned, plain_module = tg.build(g, log_file=log), tg.build(g)
    (name,) = [n.name for n in g.inputs]
    x = {name: model.inputs()["hidden_states"]}
    ratio = compare(lambda: tuned(**x), lambda: plain_module(**x), repeat=9).speedup
    print(f"  whole layer, with / without the records: {ratio:.2f}x", flush=True)


def overhead(trials: int) -> None:
    """The tuner's own milliseconds per trial, xgb against evolutionary (alternately, twice)."""
    from autotune.result import MeasureErrorNo, MeasureResult

    def synthetic(inputs: Sequence[Any]) -> list[MeasureResult]:
        return [MeasureResult((1e-3 * (1 + (i.config.index * 7919 % 101) / 101),),
                              MeasureErrorNo.NO_ERROR) for i in inputs]

    spent: dict[str, list[float]] = {"xgb": [], "evolutionary": []}
    for round_ in range(2):
        for name in spent:
            task = autotune.create_task(W.gemm, (512, 512, 512))
            start = time.perf_counter()
            autotune.tune(task, trials=trials, tuner=name, measure_option=synthetic,
                          progress=False, seed=round_, remeasure_top=0)
            spent[name].append((time.perf_counter() - start) / trials * 1e3)
    for name, ms in spent.items():
        print(f"{name:<13} {' '.join(f'{m:.0f}' for m in ms)} ms per trial "
              f"({trials} trials, auto-scheduled GEMM 512^3)")
    ratio = sum(spent["xgb"]) / sum(spent["evolutionary"])
    print(f"xgb / evolutionary: {ratio:.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("bar", "templates", "untuned", "bert", "overhead"))
    parser.add_argument("--trials", type=int, default=150)
    parser.add_argument("--only", nargs="*", default=())
    parser.add_argument("--tuner", default=None,
                        help="default: each task's own (evolutionary when auto-scheduled)")
    parser.add_argument("--seq", type=int, default=128, help="bert: sequence length")
    parser.add_argument("--hidden", type=int, default=768, help="bert: hidden size")
    parser.add_argument("--heads", type=int, default=12, help="bert: attention heads")
    parser.add_argument("--ffn", type=int, default=3072, help="bert: feed-forward size")
    parser.add_argument("--size", action="append", default=[], metavar="NAME=A,B,...",
                        help="bar: another size of one compute, e.g. gemm=1024,1024,1024")
    opts = parser.parse_args()
    sizes = {}
    for item in opts.size:
        name, _, dims = item.partition("=")
        if name not in _references() or not dims:
            parser.error(f"--size {item!r}: expected NAME=A,B,... with NAME one of "
                         f"{sorted(_references())}")
        sizes[name] = tuple(int(d) for d in dims.split(","))
    global TUNER
    TUNER = opts.tuner
    with tempfile.TemporaryDirectory() as folder:
        if opts.what == "bar":
            bar(opts.trials, opts.only, folder, sizes)
        elif opts.what == "templates":
            templates(opts.trials, opts.only, folder)
        elif opts.what == "bert":
            bert(opts.trials, opts.seq, opts.hidden, opts.heads, opts.ffn, folder)
        elif opts.what == "overhead":
            overhead(opts.trials)
        else:
            untuned(opts.trials, folder)


if __name__ == "__main__":
    main()
