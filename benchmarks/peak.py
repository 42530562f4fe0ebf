"""The machine's peak fp32 FLOP/s, measured, and the FLOPs of a graph's products, counted.

The peak comes from a register-only loop: independent chains of vector FMAs (the target's widest
float32 vectors, more chains than FMA latency x FMA units) that touch no memory, run on every
thread at once. A model's FLOPs are its convolutions' and matrix products' multiply-adds x 2
(the elementwise rest is small next to them and runs far below peak anyway): the fraction of
peak a model reaches says how much of the machine its runtime uses.
"""

from __future__ import annotations

import ctypes
import math
import threading
import time

import tensorlang as tl
import topi.graph as tg
from tensorlang.runtime.jit import compile_ir

#: independent accumulators: enough to cover 4-cycle FMA latency on two FMA units with room.
_CHAINS = 12
_ITERATIONS = 20_000_000


def _fma_loop_ir(lanes: int) -> str:
    """`float fma_peak(i64 n, float m, float c)`: `_CHAINS` vectors of `lanes` floats, each
    updated as a = a * m + c n times (m < 1 and c > 0 keep them near 1: no overflow, no
    denormals); returns one lane of their sum so the loop cannot be removed."""
    vec = f"<{lanes} x float>"
    splat = (f"%m0 = insertelement {vec} undef, float %m, i32 0\n"
             f"  %mv = shufflevector {vec} %m0, {vec} undef, <{lanes} x i32> zeroinitializer\n"
             f"  %c0 = insertelement {vec} undef, float %c, i32 0\n"
             f"  %cv = shufflevector {vec} %c0, {vec} undef, <{lanes} x i32> zeroinitializer")
    phis = "\n".join(f"  %a{k} = phi {vec} [ %cv, %entry ], [ %b{k}, %loop ]"
                     for k in range(_CHAINS))
    fmas = "\n".join(f"  %b{k} = call {vec} @llvm.fma.v{lanes}f32({vec} %a{k}, {vec} %mv, "
                     f"{vec} %cv)" for k in range(_CHAINS))
    sums = "\n".join(f"  %s{k} = fadd {vec} %s{k - 1}, %b{k}" for k in range(1, _CHAINS))
    return f"""
declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})

define float @fma_peak(i64 %n, float %m, float %c) {{
entry:
  {splat}
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %loop ]
{phis}
{fmas}
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, %n
  br i1 %more, label %loop, label %exit
exit:
  %s0 = fadd {vec} %b0, zeroinitializer
{sums}
  %r = extractelement {vec} %s{_CHAINS - 1}, i32 0
  ret float %r
}}

define void @fma_peak_packed(i64* %args) {{
  ret void
}}
"""


def peak_gflops(threads: int, target: str = "llvm", repeat: int = 3) -> float:
    """GFLOP/s of the FMA loop run on `threads` threads at once (each its own loop; ctypes
    releases the GIL), over the slowest thread's time, best of `repeat` runs: the machine's
    fp32 peak when `threads` is its core count."""
    tgt = tl.Target(target)
    lanes = tgt.vector_lanes("float32")
    fn = compile_ir(_fma_loop_ir(lanes), "fma_peak", tgt)
    loop = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64, ctypes.c_float,
                            ctypes.c_float)(fn.address)
    loop(1000, 0.9999, 1e-4)  # page in, wake the core
    seconds = [0.0] * threads

    def worker(k: int) -> None:
        start = time.perf_counter()
        result = loop(_ITERATIONS, 0.9999, 1e-4)
        seconds[k] = time.perf_counter() - start
        assert math.isfinite(result)

    flop = 2.0 * _CHAINS * lanes * _ITERATIONS * threads
    best = 0.0
    for _ in range(repeat):
        pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        best = max(best, flop / max(seconds) / 1e9)
    return best


def _macs(node: tg.Node) -> int:
    """Multiply-adds of one product node (0 for other ops): output points x reduction length."""
    out = math.prod(node.shape)
    if node.op in ("conv2d", "conv2d_nhwc", "group_conv2d", "depthwise_conv2d"):
        weight = node.inputs[1].shape  # any layout: out channels x in channels/groups x window
        channels = node.shape[-1] if node.op == "conv2d_nhwc" else node.shape[1]
        return out * math.prod(weight) // channels
    if node.op == "conv2d_transpose":  # each input point scatters through the window
        data, weight = node.inputs[0].shape, node.inputs[1].shape
        return math.prod(data) * math.prod(weight) // data[1]
    if node.op in ("dense", "batch_matmul"):
        return out * node.inputs[0].shape[-1]
    if node.op == "matmul":
        a = node.inputs[0].shape
        return out * (a[-2] if node.attrs.get("transpose_a") else a[-1])
    return 0


def graph_flop(g: tg.Graph) -> int:
    """The FLOPs of `g`'s convolutions and matrix products (2 per multiply-add), counted on the
    imported graph (before fusion hides the products inside fused nodes)."""
    return 2 * sum(_macs(node) for node in g.nodes)
