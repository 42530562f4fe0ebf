"""One symbolic module serving a sweep of sequence lengths, against onnxruntime and against our
static builds of each length (ratios > 1: the symbolic module is slower).

    python benchmarks/bench_symbolic.py [--seqs 8,32,64,128] [--batch 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import topi.graph as tg  # noqa: E402
from test_graph_symbolic import Encoder  # noqa: E402


def _time(fn, repeat: int = 20, rounds: int = 7) -> float:
    """The best of `rounds` mean times of `repeat` calls (the machine is shared: the best round
    is the one least disturbed)."""
    fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seqs", default="8,32,64,128")
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    seqs = [int(s) for s in args.seqs.split(",")]
    torch.manual_seed(0)
    model = Encoder(max_len=max(seqs)).eval()
    path = str(Path(tempfile.mkdtemp()) / "encoder.onnx")
    example = (torch.zeros(1, 8, dtype=torch.int64), torch.ones(1, 8, dtype=torch.int64))
    axes = {0: "batch", 1: "seq"}
    torch.onnx.export(model, example, path, input_names=["ids", "attn"], output_names=["out"],
                      dynamic_axes={"ids": axes, "attn": axes, "out": axes}, dynamo=False,
                      opset_version=17)
    symbolic = tg.build(tg.from_onnx(path), bounds={"batch": (1, 8), "seq": (1, max(seqs))})
    session = ort.InferenceSession(path)
    print(f"{'seq':>5} {'symbolic ms':>12} {'static ms':>10} {'ort ms':>8} "
          f"{'sym/static':>10} {'sym/ort':>8}")
    for n in seqs:
        b = args.batch
        inputs = {"ids": np.random.randint(0, 50, (b, n)).astype("int64"),
                  "attn": np.ones((b, n), "int64")}
        static = tg.build(tg.from_onnx(path, shapes={k: (b, n) for k in inputs}))
        t_sym = _time(lambda: symbolic(**inputs))
        t_static = _time(lambda: static(**inputs))
        t_ort = _time(lambda: session.run(None, inputs))
        print(f"{n:>5} {t_sym * 1e3:>12.3f} {t_static * 1e3:>10.3f} {t_ort * 1e3:>8.3f} "
              f"{t_sym / t_static:>10.2f} {t_sym / t_ort:>8.2f}")


if __name__ == "__main__":
    main()
