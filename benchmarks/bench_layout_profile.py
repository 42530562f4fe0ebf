"""Where the layout moves go: each model of bench_wild's vision list is built untuned and
profiled (`Module.profile`), and every kernel group that moves data between layouts (a kernel
whose ops include a layout_transform or a transpose, grouped by its op label; not a product's
kernel, which reads its permuted operands in place) taking more than
--share of the model's kernel time is listed, with the share of the pure moves (kernels that
compute nothing but layout_transform / transpose / reshape) in total. Each share is the median
over --repeats profiles: on a loaded machine one profile's kernel can read several times its
time.

    python benchmarks/bench_layout_profile.py
    python benchmarks/bench_layout_profile.py --models convnext_tiny,swin_t --number 20
"""

from __future__ import annotations

import argparse
import re
import warnings

import numpy as np
import torch
from bench_wild import VISION, _export, _vision

import tensorlang as tl
import topi.graph as tg

MOVES = {"layout_transform", "transpose"}
PURE = MOVES | {"reshape"}
#: Products whose kernels read a permuted operand through their index map
#: (`fold_gemm_permutes`): no data moves between layouts there.
PRODUCTS = {"dense", "matmul", "batch_matmul"}
ROW = re.compile(r"^(\S+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)%$")


def layout_groups(profile: str) -> tuple[dict[str, float], float]:
    """({op label: share} of the kernels that move data between layouts, summed per label;
    the share of the kernels that only move data) from a `Module.profile` table."""
    groups: dict[str, float] = {}
    pure = 0.0
    for line in profile.splitlines():
        match = ROW.match(line)
        if match is None:
            continue
        ops = match.group(2).split("+")
        share = float(match.group(4)) / 100
        if MOVES & set(ops) and not PRODUCTS & set(ops):
            groups[match.group(2)] = groups.get(match.group(2), 0.0) + share
            pure += share if set(ops) <= PURE else 0.0
    return groups, pure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(VISION))
    parser.add_argument("--number", type=int, default=10, help="profiled runs per model")
    parser.add_argument("--share", type=float, default=0.02, help="smallest group listed")
    parser.add_argument("--repeats", type=int, default=3, help="profiles per model (median)")
    parser.add_argument("--threads", type=int, default=tl.get_num_threads())
    args = parser.parse_args()
    tl.set_num_threads(args.threads)
    print(f"{'model':<28} {'moves only':>10}  layout kernel groups above {args.share:.0%}")
    for name in args.models.split(","):
        torch.manual_seed(0)
        module, inputs = _vision(name)
        proto, _ = _export(module.eval(), inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the untuned build lists its fallback workloads
            m = tg.build(tg.from_onnx(proto))
        m.profile(number=2)  # warm-up
        runs = [layout_groups(m.profile(number=args.number)) for _ in range(args.repeats)]
        labels = {op for groups, _ in runs for op in groups}
        groups = {op: float(np.median([g.get(op, 0.0) for g, _ in runs])) for op in labels}
        pure = float(np.median([p for _, p in runs]))
        big = sorted(((s, op) for op, s in groups.items() if s > args.share), reverse=True)
        listed = "; ".join(f"{op} {s:.1%}" for s, op in big) or "-"
        print(f"{name:<28} {pure:>10.1%}  {listed}", flush=True)


if __name__ == "__main__":
    main()
