"""Dense layers at row counts that no register block divides (issue 23): ViT-B/16's 197 rows (196
patches + the class token), ViT-B/32's 50, ViT-L/14 at 336's 577, against the nearest round row
count and numpy, in one process.

Each shape is a model of one MatMul + Add (x (1, M, K) times a constant (K, N) weight, plus a
bias), built by `topi.graph` as a model runs it: the weight packed once at build time, the bias
fused into the product's register block. Two comparisons per shape, each alternated in blocks by
`tensorlang.benchmark.compare`: the kernel at M against the same kernel at the round count (the
multiple of 16 below M: a ratio of GFLOP/s, 1.0 = no penalty for the awkward rows), and against
numpy's `matmul(out=)` + bias at M.

    python benchmarks/bench_dense_rows.py
    python benchmarks/bench_dense_rows.py --rows 197,50 --shapes 768x2304 --threads 1
    python benchmarks/bench_dense_rows.py --target "llvm -mcpu=haswell"
"""

from __future__ import annotations

import argparse
import os
import warnings

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import tensorlang as tl
import topi.graph as tg
from tensorlang.benchmark import compare

#: ViT-B/16's products as K x N: the QKV projection, the attention output, the MLP's two.
SHAPES = ("768x2304", "768x768", "768x3072", "3072x768")
ROWS = (197, 50, 577, 7)


def _model(m: int, k: int, n: int, rng: np.random.Generator):
    weight = rng.standard_normal((k, n)).astype("float32")
    bias = rng.standard_normal(n).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, n])],
        [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return proto, weight, bias


def _runner(m: int, k: int, n: int, target: str, rng: np.random.Generator):
    """(our call, numpy's call) at M rows; checks ours against numpy first."""
    proto, weight, bias = _model(m, k, n, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned: the fallback config
        module = tg.build(tg.from_onnx(proto), target=target)
    x = rng.standard_normal((1, m, k)).astype("float32")
    np.testing.assert_allclose(module(x=x)[0], x @ weight + bias, rtol=1e-3, atol=1e-3)
    out = np.empty((1, m, n), "float32")

    def reference() -> None:
        np.matmul(x, weight, out=out)
        np.add(out, bias, out=out)

    return (lambda: module(x=x)), reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(map(str, ROWS)))
    parser.add_argument("--shapes", default=",".join(SHAPES), help="K x N, comma separated")
    parser.add_argument("--target", default="llvm")
    parser.add_argument("--threads", type=int, default=tl.get_num_threads())
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    tl.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    print(f"target {args.target!r}, {args.threads} threads, load average "
          f"{os.getloadavg()[0]:.1f}")
    print("| K x N | M | GFLOP/s | round M | GFLOP/s | M / round | numpy GFLOP/s | ours / numpy |")
    print("|---|---|---|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        k, n = (int(v) for v in shape.split("x"))
        for m in (int(v) for v in args.rows.split(",")):
            rounded = max(16, m // 16 * 16)
            ours, numpy_call = _runner(m, k, n, args.target, rng)
            round_ours, _ = _runner(rounded, k, n, args.target, rng)
            flop, round_flop = 2 * m * k * n, 2 * rounded * k * n
            against_round = compare(ours, round_ours, repeat=args.rounds)
            against_numpy = compare(ours, numpy_call, repeat=args.rounds)
            gflops = flop / against_round.ours / 1e9
            round_gflops = round_flop / against_round.reference / 1e9
            ratio = against_round.speedup * flop / round_flop
            print(f"| {shape} | {m} | {gflops:.0f} | {rounded} | {round_gflops:.0f} | "
                  f"{ratio:.2f} | {flop / against_numpy.reference / 1e9:.0f} | "
                  f"{against_numpy.speedup:.2f} |", flush=True)


if __name__ == "__main__":
    main()
