"""topi operator benchmark: fallback and tuned GFLOP/s against PyTorch and numpy, side by side.

Workloads: ResNet-18's 12 distinct conv2d layers (batch 1), a MobileNet depthwise conv, dense
1x512->1000 and 128x768->3072, matmul 1024^3, batch_matmul 12x128x64x128. For each, our kernel
and the reference library are timed alternately in one process for several rounds and the table
reports the median of the per-round ratios (the machine has slow spells; only ratios measured
side by side are comparable). PyTorch is optional (`pip install torch`); it is not a dependency.

    python benchmarks/bench_ops.py                 # fallback configs only
    python benchmarks/bench_ops.py --trials 200    # also tune each workload (XGBoost tuner)
"""

from __future__ import annotations

import argparse
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import autotune
import tensorlang as tl
from tensorlang.benchmark import compare
from topi import nn, x86

RESNET18_CONVS = [  # C, H, K, R, stride, padding
    (3, 224, 64, 7, 2, 3), (64, 56, 64, 3, 1, 1), (64, 56, 64, 1, 1, 0), (64, 56, 128, 3, 2, 1),
    (64, 56, 128, 1, 2, 0), (128, 28, 128, 3, 1, 1), (128, 28, 256, 3, 2, 1),
    (128, 28, 256, 1, 2, 0), (256, 14, 256, 3, 1, 1), (256, 14, 512, 3, 2, 1),
    (256, 14, 512, 1, 2, 0), (512, 7, 512, 3, 1, 1),
]


@dataclass
class Workload:
    """One benchmark row: how to build our kernel and the reference callables."""

    label: str
    task_name: str
    task_args: tuple
    build: Callable[[], tuple[list[tl.Tensor], tl.Tensor, Callable]]
    flop: int
    torch_fn: Callable[[list[np.ndarray]], Callable[[], object]] | None
    numpy_fn: Callable[[list[np.ndarray]], Callable[[], object]] | None


def _conv(c: int, h: int, k: int, r: int, stride: int, pad: int) -> Workload:
    oh = (h + 2 * pad - r) // stride + 1

    def build():
        data = tl.placeholder((1, c, h, h), name="data")
        kernel = tl.placeholder((k, c, r, r), name="kernel")
        return [data, kernel], nn.conv2d_nchw(data, kernel, stride, pad), x86.schedule_conv2d_nchw

    def torch_fn(arrays):
        import torch

        d, w = (torch.from_numpy(a) for a in arrays)
        return lambda: torch.nn.functional.conv2d(d, w, stride=stride, padding=pad)

    return Workload(f"conv {c}x{h}x{h}->{k} {r}x{r} s{stride}", "conv2d_nchw.x86",
                    ((1, c, h, h), (k, c, r, r), stride, pad, 1, "float32"), build,
                    2 * k * c * oh * oh * r * r, torch_fn, None)


def _depthwise(c: int, h: int) -> Workload:
    def build():
        data = tl.placeholder((1, c, h, h), name="data")
        kernel = tl.placeholder((c, 1, 3, 3), name="kernel")
        out = nn.depthwise_conv2d_nchw(data, kernel, 1, 1)
        return [data, kernel], out, x86.schedule_depthwise_conv2d_nchw

    def torch_fn(arrays):
        import torch

        d, w = (torch.from_numpy(a) for a in arrays)
        return lambda: torch.nn.functional.conv2d(d, w, padding=1, groups=c)

    return Workload(f"depthwise {c}x{h}x{h} 3x3", "depthwise_conv2d_nchw.x86",
                    ((1, c, h, h), (c, 1, 3, 3), 1, 1, 1, "float32"), build, 2 * c * h * h * 9,
                    torch_fn, None)


def _dense(m: int, k: int, n: int) -> Workload:
    def build():
        data, weight = tl.placeholder((m, k), name="data"), tl.placeholder((n, k), name="weight")
        return [data, weight], nn.dense(data, weight), x86.schedule_dense

    def torch_fn(arrays):
        import torch

        a, w = (torch.from_numpy(x) for x in arrays)
        return lambda: torch.nn.functional.linear(a, w)

    def numpy_fn(arrays):
        a, w = arrays
        return lambda: a @ w.T

    return Workload(f"dense {m}x{k}->{n}", "dense.x86", ((m, k), (n, k), "float32"), build,
                    2 * m * k * n, torch_fn, numpy_fn)


def _matmul(n: int) -> Workload:
    def build():
        a, b = tl.placeholder((n, n), name="a"), tl.placeholder((n, n), name="b")
        return [a, b], nn.matmul(a, b), x86.schedule_matmul

    def torch_fn(arrays):
        import torch

        a, b = (torch.from_numpy(x) for x in arrays)
        return lambda: a @ b

    def numpy_fn(arrays):
        a, b = arrays
        return lambda: a @ b

    return Workload(f"matmul {n}^3", "matmul.x86", ((n, n), (n, n), "float32"), build,
                    2 * n ** 3, torch_fn, numpy_fn)


def _batch_matmul(b: int, m: int, k: int, n: int) -> Workload:
    def build():
        x, y = tl.placeholder((b, m, k), name="x"), tl.placeholder((b, n, k), name="y")
        return [x, y], nn.batch_matmul(x, y), x86.schedule_batch_matmul

    def torch_fn(arrays):
        import torch

        x, y = (torch.from_numpy(v) for v in arrays)
        return lambda: torch.bmm(x, y.transpose(1, 2))

    def numpy_fn(arrays):
        x, y = arrays
        return lambda: x @ y.transpose(0, 2, 1)

    return Workload(f"batch_matmul {b}x{m}x{k}x{n}", "batch_matmul.x86",
                    ((b, m, k), (b, n, k), "float32"), build, 2 * b * m * k * n, torch_fn,
                    numpy_fn)


def workloads() -> list[Workload]:
    return [
        *(_conv(*c) for c in RESNET18_CONVS),
        _depthwise(256, 28),
        _dense(1, 512, 1000),
        _dense(128, 768, 3072),
        _matmul(1024),
        _batch_matmul(12, 128, 64, 128),
    ]


def _ours(w: Workload, log: str | None) -> tuple[Callable[[], object], list[np.ndarray]]:
    inputs, out, schedule = w.build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if log:
            with autotune.apply_history_best(log):
                s = schedule([out])
        else:
            s = schedule([out])
    f = tl.build(s, [*inputs, out])
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-1, 1, [int(d.value) for d in t.shape]).astype("float32")
              for t in inputs]
    result = np.zeros([int(d.value) for d in out.shape], "float32")
    return (lambda: f(*arrays, result)), arrays


def _ratios(ours: Callable[[], object], other: Callable[[], object] | None,
            rounds: int) -> tuple[float, float]:
    """(our median seconds, median of per-round speed ratios ours/other), alternating with a
    pause before each sample so neither side competes with the other's idle threads."""
    if other is None:
        return compare(ours, ours, repeat=rounds).ours, math.nan
    result = compare(ours, other, repeat=rounds)
    return result.ours, result.speedup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=0, help="tuning trials per workload")
    parser.add_argument("--rounds", type=int, default=5, help="alternating timing rounds")
    parser.add_argument("--log", default="bench_ops.jsonl", help="tuning log (resumed)")
    parser.add_argument("--only", default="", help="run workloads whose label contains this")
    args = parser.parse_args()
    if _has_torch():
        import torch

        torch.set_num_threads(tl.get_num_threads())
    rows = []
    for w in workloads():
        if args.only not in w.label:
            continue
        row = {"label": w.label}
        for mode in ("fallback", "tuned"):
            if mode == "tuned":
                if args.trials <= 0:
                    break
                task = autotune.create_task(w.task_name, w.task_args)
                autotune.tune(task, trials=args.trials, log_file=args.log)  # a bar on a terminal
            fn, arrays = _ours(w, args.log if mode == "tuned" else None)
            torch_call = w.torch_fn(arrays) if (w.torch_fn and _has_torch()) else None
            numpy_call = w.numpy_fn(arrays) if w.numpy_fn else None
            t, vs_torch = _ratios(fn, torch_call, args.rounds)
            _, vs_numpy = _ratios(fn, numpy_call, args.rounds) if numpy_call else (t, math.nan)
            row[mode] = (w.flop / t / 1e9, vs_torch, vs_numpy)
        rows.append(row)
        _print_row(row)
    _print_summary(rows, args.trials)


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _fmt(v: float) -> str:
    return "   -  " if math.isnan(v) else f"{v:6.2f}"


def _print_row(row: dict) -> None:
    cells = [f"{row['label']:<32}"]
    for mode in ("fallback", "tuned"):
        if mode in row:
            g, vt, vn = row[mode]
            cells.append(f"{mode}: {g:7.1f} GFLOP/s  x{_fmt(vt)} torch  x{_fmt(vn)} numpy")
    print(" | ".join(cells), flush=True)


def _geomean(values: list[float]) -> float:
    values = [v for v in values if not math.isnan(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def _print_summary(rows: list[dict], trials: int) -> None:
    convs = [r for r in rows if r["label"].startswith("conv ")]
    for mode in ("fallback", "tuned"):
        ratios = [r[mode][1] for r in convs if mode in r]
        if ratios:
            print(f"ResNet-18 conv2d geomean vs PyTorch, {mode}"
                  f"{f' ({trials} trials each)' if mode == 'tuned' else ''}: x{_geomean(ratios):.2f}")


if __name__ == "__main__":
    main()
