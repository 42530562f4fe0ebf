"""What the graph passes and build-time weight packing buy, on the zoo models.

For each model (imported from its ONNX export): the ops of the imported graph, the kernels left
after the passes, the arena of the memory plan against one buffer per value, and two speedups
measured side by side in one process (median of pairwise ratios, > 1: the full build is faster):
the full pipeline against the same build without fusion (`fuse_ops` dropped: one kernel per op),
and build-time weight packing against packing the weights in every call. Untuned (fallback
configs). Needs the onnx and torch extras (the zoo).

    python benchmarks/bench_graph_passes.py                    # full-size models
    python benchmarks/bench_graph_passes.py --reduced          # a quick smoke run
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import topi.graph as tg
from tensorlang.benchmark import compare
from topi.graph import passes, zoo
from topi.graph.model_io import random_inputs

MODELS = ("resnet18", "mobilenet_v2", "bert_layer", "mlp")


def bench_model(name: str, reduced: bool, repeat: int) -> dict:
    sizes = zoo.REDUCED[name] if reduced else {}
    g = tg.from_onnx(zoo.get(name, **sizes).onnx())
    full = tg.build(g)
    unfused = tg.build(g, pipeline=[p for p in passes.PIPELINE if p[0] != "fuse_ops"])
    per_call_packing = tg.build(g, prepack=False)
    inputs = random_inputs(full.inputs)
    for other in (unfused, per_call_packing):
        for a, b in zip(full(**inputs), other(**inputs)):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)

    def run(m: tg.Module):
        return lambda: m(**inputs)

    return {
        "model": name,
        "ops": len(g.ops),
        "kernels": len(full.steps),
        "arena MiB": full.plan.arena_bytes / 2**20,
        "1 buffer/value MiB": full.plan.unplanned_bytes / 2**20,
        "fusion speedup": compare(run(full), run(unfused), repeat=repeat).speedup,
        "prepack speedup": compare(run(full), run(per_call_packing), repeat=repeat).speedup,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--reduced", action="store_true", help="small model sizes")
    parser.add_argument("--repeat", type=int, default=7, help="timed pairs per comparison")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # untuned workloads use fallback configs, as intended here
    rows = [bench_model(name, args.reduced, args.repeat) for name in args.models.split(",")]
    columns = list(rows[0])
    print(" | ".join(columns))
    print(" | ".join("---" for _ in columns))
    for row in rows:
        print(" | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row.values()))


if __name__ == "__main__":
    main()
