"""Weight-quantized matrix-vector products on cold weights: bytes per second vs the stream read.

At batch 1 a language model's decode reads every weight once per token, from memory: the kernel
must keep enough reads in flight to stream. For each shape (N x K, the projections of SmolLM2-135M
and Qwen2-0.5B by default) and kind (int8 with a scale per output channel, int8 and int4 with a
scale per group of 32, int4 with zero points), the kernel a graph builds for one row of data
(`dense_quantized`, its weight pre-packed as `tg.build` packs a constant) is called on a cycle of
distinct weights far larger than the last-level cache (`--cold-mib`), each call timed on its own.
The bytes a call reads (weight, scales, zero points) over the 10th percentile and the median of
the call times are printed as GB/s, with the fraction of the machine's stream read (bench_llm's
multi-threaded sum, measured before and after) and a warm figure (one weight, in cache).

On a shared machine the 10th percentile is the figure to read: a call whose threads another
process holds off runs late, and the median shows how often that happens.

    python benchmarks/bench_dense_quantized.py
    python benchmarks/bench_dense_quantized.py --shapes 1536x576 --kinds int4 --threads 1
    python benchmarks/bench_dense_quantized.py --target "llvm -mcpu=haswell"
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable, Sequence

import numpy as np
from bench_llm import stream_bandwidth

import tensorlang as tl
import topi.graph as tg
from topi import x86
from topi.graph.aligned import aligned_empty
from topi.graph.kernel import kernel_spec
from topi.graph.llm import quantize_weights

#: (N, K) of SmolLM2-135M's (q/o, k/v, gate/up, down) and Qwen2-0.5B's (gate/up, down) projections.
SHAPES = ("576x576", "192x576", "1536x576", "576x1536", "4864x896", "896x4864")
#: name -> (bits, group size, zero points) of `quantize_weights`.
KINDS = {"int8": (8, None, False), "int8-g32": (8, 32, False), "int4": (4, 32, False),
         "int4-zp": (4, 32, True)}


def _kernel(n: int, k: int, bits: int, group: int | None, zero_points: bool
            ) -> tuple[Callable, list[Callable | None], list[tl.Tensor], list[tg.Node]]:
    """The graph's kernel of a 1-row product, the pack kernel of each of its inputs (None: read
    as it is), the kernel's parameters and the node's inputs."""
    g = tg.Graph()
    g.output(g.dense(g.input("x", (1, k)), g.constant(np.ones((n, k), np.float32), "w")))
    (node,) = quantize_weights(g, bits, group, zero_points).ops
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = kernel_spec(node)
        kernel = tl.build(spec.schedule(), spec.params)
        packs: list[Callable | None] = [None] * len(node.inputs)
        for pack in spec.packs:
            weight, packed, _ = pack.canonical()
            packs[pack.index] = tl.build(x86.schedule_injective([packed]), [weight, packed])
    return kernel, packs, spec.params, list(node.inputs)


def _random_inputs(node_inputs: Sequence[tg.Node], packs: Sequence[Callable | None],
                   params: Sequence[tl.Tensor], rng: np.random.Generator) -> list[np.ndarray]:
    """Random packed weights, scales and zero points, in the layouts the kernel reads."""
    out = []
    for source, pack, param in zip(node_inputs, packs, params):
        shape = tuple(int(d) for d in source.shape)
        value = rng.random(shape, np.float32) if source.dtype == "float32" else \
            rng.integers(0, 16, shape).astype(source.dtype)
        if pack is None:
            out.append(value)
            continue
        packed = aligned_empty(tuple(int(d) for d in param.shape), param.dtype)
        pack(value, packed)
        out.append(packed)
    return out


def _call_seconds(kernel: Callable, argument_sets: Sequence[Sequence[np.ndarray]],
                  seconds: float) -> np.ndarray:
    """Seconds of each call, cycling through `argument_sets` for about `seconds`."""
    for arguments in argument_sets:
        kernel(*arguments)
    times = []
    clock = time.perf_counter
    end = clock() + seconds
    while clock() < end:
        for arguments in argument_sets:
            start = clock()
            kernel(*arguments)
            times.append(clock() - start)
    return np.array(times)


def bench(n: int, k: int, kind: str, cold_bytes: int, seconds: float,
          rng: np.random.Generator) -> tuple[float, float, float, int]:
    """(cold GB/s at the 10th percentile, cold GB/s at the median, warm GB/s, bytes a call)."""
    kernel, packs, params, sources = _kernel(n, k, *KINDS[kind])
    data = rng.standard_normal((1, k)).astype(np.float32)
    out = np.empty((1, n), np.float32)
    first = _random_inputs(sources[1:], packs[1:], params[1:-1], rng)
    nbytes = sum(a.nbytes for a in first)
    copies = [first] + [_random_inputs(sources[1:], packs[1:], params[1:-1], rng)
                        for _ in range(max(8, cold_bytes // nbytes) - 1)]
    cold = _call_seconds(kernel, [[data, *c, out] for c in copies], seconds)
    warm = _call_seconds(kernel, [[data, *first, out]], seconds / 4)
    return (nbytes / np.percentile(cold, 10) / 1e9, nbytes / np.median(cold) / 1e9,
            nbytes / np.percentile(warm, 10) / 1e9, nbytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help="NxK,...")
    parser.add_argument("--kinds", default=",".join(KINDS), help=", ".join(KINDS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--target", default="llvm")
    parser.add_argument("--cold-mib", type=int, default=256, help="weights cycled through")
    parser.add_argument("--seconds", type=float, default=1.0, help="of calls per row")
    args = parser.parse_args()
    tl.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    before = stream_bandwidth(args.threads)
    time.sleep(0.3)  # torch's threads go idle
    print(f"stream read {before / 1e9:.1f} GB/s on {args.threads} threads; target {args.target}")
    print(f"{'N x K':>12s} {'kind':>9s} {'KB':>7s} {'cold p10':>9s} {'median':>7s} "
          f"{'of stream':>9s} {'warm':>6s}  (GB/s)")
    with tl.Target(args.target):
        for shape in args.shapes.split(","):
            n, k = (int(d) for d in shape.split("x"))
            for kind in args.kinds.split(","):
                cold, median, warm, nbytes = bench(n, k, kind, args.cold_mib << 20,
                                                   args.seconds, rng)
                print(f"{shape:>12s} {kind:>9s} {nbytes / 1e3:7.0f} {cold:9.1f} {median:7.1f} "
                      f"{cold * 1e9 / before:9.2f} {warm:6.1f}", flush=True)
    print(f"stream read after: {stream_bandwidth(args.threads) / 1e9:.1f} GB/s")


if __name__ == "__main__":
    main()
