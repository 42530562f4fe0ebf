"""ShuffleNet-V2 with and without the layout pass's own transform per channel gather (each half
of a shuffle reads the blocked concatenation through a layout transform fused into its take,
instead of one shared NCHW copy), against onnxruntime: built in one process, timed in
alternating blocks, ratios printed (> 1: the first is faster).

    python benchmarks/bench_shufflenet_layout.py --models shufflenet_v2_x0_5,shufflenet_v2_x1_0
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from bench_models import _onnxruntime
from bench_wild import _export, _torchvision
from layout_ab import alter_layout, block_seconds, build_with

import tensorlang as tl


class _SharedCopy(alter_layout._Rewriter):
    """The layout pass before: a take of a blocked value reads one shared NCHW copy of it."""

    def take(self, old, inputs):  # noqa: ANN001, ANN201
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="shufflenet_v2_x0_5,shufflenet_v2_x1_0")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    tl.set_num_threads(args.threads)
    models = _torchvision().models
    for name in args.models.split(","):
        x = torch.randn(1, 3, 224, 224)
        proto, _ = _export(getattr(models, name)(weights=None).eval(), (x,))
        new = build_with(proto, "_Rewriter", alter_layout._Rewriter)
        old = build_with(proto, "_Rewriter", _SharedCopy)
        feed = {new.inputs[0].name: x.numpy()}
        np.testing.assert_allclose(new(**feed)[0], old(**feed)[0], rtol=1e-4, atol=1e-4)
        runs = {"new": lambda: new(**feed), "old": lambda: old(**feed),
                "ort": _onnxruntime(proto, {proto.graph.input[0].name: x.numpy()},
                                    args.threads)}
        times: dict[str, list[float]] = {k: [] for k in runs}
        for fn in runs.values():
            fn()
        for r in range(args.rounds):
            order = list(runs) if r % 2 == 0 else list(runs)[::-1]
            for k in order:
                times[k].append(block_seconds(runs[k], args.calls))
        old_new = np.median(np.array(times["old"]) / np.array(times["new"]))
        print(f"{name}: median per round old/new {old_new:.3f}, "
              f"ort/new {np.median(np.array(times['ort']) / np.array(times['new'])):.3f}, "
              f"ort/old {np.median(np.array(times['ort']) / np.array(times['old'])):.3f}, "
              f"min ms new {min(times['new']) * 1e3:.2f} old {min(times['old']) * 1e3:.2f} "
              f"ort {min(times['ort']) * 1e3:.2f}")


if __name__ == "__main__":
    main()
