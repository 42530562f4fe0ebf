"""ConvNeXt with and without the layout pass's channels-last views (LayerNorm over the channels
of NCHW[x]c, Linear layers as 1x1 blocked convolutions, no permutes), against onnxruntime: both
built in one process, timed in alternating blocks (each after a discarded warm-up call), ratios
printed as medians of the per-round ratios (> 1: the first is faster).

    python benchmarks/bench_channels_last.py --models convnext_tiny,convnext_small --rounds 9
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from bench_models import _onnxruntime
from bench_wild import _export, _torchvision
from layout_ab import alter_layout, block_seconds, build_with

import tensorlang as tl


class _NoViews:
    """The views before: none, so each permute runs as a transpose through NCHW."""

    def __init__(self, rewriter) -> None:  # noqa: ANN001
        pass

    def visit(self, old, inputs) -> None:  # noqa: ANN001
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default="convnext_tiny")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    tl.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    models = _torchvision().models
    for name in args.models.split(","):
        torch.manual_seed(0)
        x = torch.randn(1, 3, 224, 224)
        module = getattr(models, name)(weights=None).eval()
        proto, _ = _export(module, (x,))
        new = build_with(proto, "ChannelsLastViews", alter_layout.ChannelsLastViews)
        old = build_with(proto, "ChannelsLastViews", _NoViews)
        feed = {new.inputs[0].name: x.numpy()}
        with torch.no_grad():
            expected = module(x).numpy()
        scale = np.abs(expected).max()
        errors = [np.abs(m(**feed)[0] - expected).max() / scale for m in (new, old)]
        runs = {"new": lambda: new(**feed), "old": lambda: old(**feed),
                "ort": _onnxruntime(proto, {proto.graph.input[0].name: x.numpy()},
                                    args.threads)}
        times: dict[str, list[float]] = {k: [] for k in runs}
        for r in range(args.rounds):
            order = list(runs) if r % 2 == 0 else list(runs)[::-1]
            for k in order:
                times[k].append(block_seconds(runs[k], args.calls))
        t = {k: np.array(v) for k, v in times.items()}
        print(f"{name}: max rel err vs PyTorch new {errors[0]:.1e} old {errors[1]:.1e}; "
              f"median per round old/new {np.median(t['old'] / t['new']):.3f}, "
              f"ort/new {np.median(t['ort'] / t['new']):.3f}, "
              f"ort/old {np.median(t['ort'] / t['old']):.3f}; "
              f"min ms new {t['new'].min() * 1e3:.1f} old {t['old'].min() * 1e3:.1f} ort {t['ort'].min() * 1e3:.1f}", flush=True)


if __name__ == "__main__":
    main()
