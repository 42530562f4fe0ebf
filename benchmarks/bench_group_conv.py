"""Grouped convolutions on the models that run them: untuned batch-1 latency of RegNet and ResNeXt
(torchvision, random weights) against onnxruntime, and where our time goes.

Each model is exported to ONNX (TorchScript exporter), imported with `from_onnx` and built with
fallback configs at 224x224. Ours and onnxruntime (intra-op threads as ours, spinning off) are
timed in alternating steady-state blocks in one process; the ratio is onnxruntime's time over
ours (> 1: ours is faster). `--profile` prints the slowest kernel calls of each model, and the
share of the grouped convolutions.

    python benchmarks/bench_group_conv.py
    python benchmarks/bench_group_conv.py --models regnet_x_400mf --rounds 7 --profile 12
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from bench_models import _build, _cpu_name, _onnxruntime, _table
from bench_wild import _export, _vision

import tensorlang as tl
import topi.graph as tg
from tensorlang.benchmark import compare

MODELS = ("regnet_x_400mf", "resnext50_32x4d", "regnet_y_400mf")


def _group_share(profile: str) -> float:
    """The share of the run spent in kernels whose ops include a grouped convolution."""
    share = 0.0
    for line in profile.splitlines()[1:-1]:
        if "group_conv2d" in line:
            share += float(line.split()[-1].rstrip("%")) / 100
    return share


def bench(name: str, args: argparse.Namespace) -> dict:
    torch.manual_seed(0)
    module, inputs = _vision(name)
    proto, _ = _export(module.eval(), inputs)
    g = tg.from_onnx(proto)
    row: dict = {"model": name}
    ours, row["build s"] = _build(g, None, None)  # untuned: fallback configs
    feeds = {info.name: t.numpy() for info, t in zip(ours.inputs, inputs)}
    with torch.no_grad():
        expected = module(*inputs).numpy()
    row["max err"] = float(np.abs(ours(**feeds)[0] - expected).max()
                           / max(np.abs(expected).max(), 1e-30))
    result = compare(lambda: ours(**feeds), _onnxruntime(proto, feeds, args.threads),
                     repeat=args.rounds)
    row["ours ms"] = result.ours * 1e3
    row["onnxruntime ms"] = result.reference * 1e3
    row["ours/onnxruntime"] = result.speedup
    profile = ours.profile(inputs=feeds)
    row["group conv share"] = _group_share(profile)
    if args.profile:
        lines = profile.splitlines()
        print(f"\n# {name}: the {args.profile} slowest kernel calls")
        print("\n".join([*lines[:args.profile + 1], lines[-1]]))
    return row


COLUMNS = ["model", "build s", "max err", "ours ms", "onnxruntime ms", "ours/onnxruntime",
           "group conv share"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--rounds", type=int, default=5, help="alternating timing rounds")
    parser.add_argument("--threads", type=int, default=tl.get_num_threads())
    parser.add_argument("--profile", type=int, default=8, help="slowest kernel calls to print")
    args = parser.parse_args()
    tl.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    rows = [bench(name, args) for name in args.models.split(",")]
    print(f"\n{_cpu_name()} ({tl.Target.current()}), {args.threads} threads, batch 1, fp32, "
          f"untuned; ours/onnxruntime: onnxruntime's time over ours (> 1: ours is faster)")
    print(_table(rows, COLUMNS))
    ratios = [r["ours/onnxruntime"] for r in rows]
    print(f"geomean ours/onnxruntime: {float(np.exp(np.mean(np.log(ratios)))):.2f}, "
          f"worst {min(ratios):.2f}")


if __name__ == "__main__":
    main()
