"""A/B of `fold_gemm_permutes`: each model of bench_wild's vision list built untuned with the
full pipeline and with the pass left out, timed in alternating blocks in one process (ratio =
time without / time with), and the share of the layout kernel groups in each build's profile
(median of --repeats profiles, as bench_layout_profile lists them).

    python benchmarks/bench_gemm_permutes.py --models vit_b_16,swin_t
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import torch
from bench_layout_profile import layout_groups
from bench_wild import _export, _vision
from layout_ab import block_seconds

import tensorlang as tl
import topi.graph as tg
from topi.graph.passes import PIPELINE


def _build(proto, fold: bool) -> tg.Module:  # noqa: ANN001
    pipeline = [p for p in PIPELINE if fold or p[0] != "fold_gemm_permutes"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the untuned build lists its fallback workloads
        return tg.build(tg.from_onnx(proto), pipeline=pipeline)


def _shares(m: tg.Module, number: int, repeats: int) -> str:
    runs = [layout_groups(m.profile(number=number)) for _ in range(repeats)]
    labels = {op for groups, _ in runs for op in groups}
    groups = {op: float(np.median([g.get(op, 0.0) for g, _ in runs])) for op in labels}
    pure = float(np.median([p for _, p in runs]))
    big = sorted(((s, op) for op, s in groups.items() if s > 0.01), reverse=True)
    return f"moves only {pure:.1%}; " + ("; ".join(f"{op} {s:.1%}" for s, op in big) or "-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="vit_b_16,swin_t")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--number", type=int, default=5, help="profiled runs per profile")
    parser.add_argument("--repeats", type=int, default=3, help="profiles per build (median)")
    args = parser.parse_args()
    for name in args.models.split(","):
        torch.manual_seed(0)
        module, inputs = _vision(name)
        proto, _ = _export(module.eval(), inputs)
        feed = {i.name: np.asarray(t) for i, t in zip(proto.graph.input, inputs)}
        with_, without = _build(proto, True), _build(proto, False)
        np.testing.assert_allclose(with_(**feed)[0], without(**feed)[0], rtol=1e-3, atol=1e-3)
        ratios = []
        for _ in range(args.rounds):
            b = block_seconds(lambda: without(**feed), args.calls)
            a = block_seconds(lambda: with_(**feed), args.calls)
            ratios.append(b / a)
        print(f"{name}: without / with fold, median of {args.rounds} blocks "
              f"{np.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); "
              f"threads {tl.get_num_threads()}", flush=True)
        for label, m in (("without", without), ("with", with_)):
            m.profile(number=1)
            print(f"  {label:<8} {_shares(m, args.number, args.repeats)}", flush=True)


if __name__ == "__main__":
    main()
