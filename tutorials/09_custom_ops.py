"""A kernel of your own as a PyTorch op: a fused RMSNorm + scale, tuned and compiled in a model.

    python tutorials/09_custom_ops.py                        # 64 x 1024 rows, 40 trials
    python tutorials/09_custom_ops.py --rows 256 --dim 4096 --trials 100
    TL_TUTORIAL_SMALL=1 python tutorials/09_custom_ops.py    # 8 x 48, 4 trials (CI)

PyTorch computes an RMSNorm as five kernels (square, mean, add, rsqrt, two multiplies), each a
pass over memory. Written in the DSL, it is one kernel, and `topi.graph.custom_op` makes it an op
that every part of the stack understands:
1. `@custom_op("tutorial::rms_norm")` decorates a function of placeholders (one per input, with
   the shapes and dtypes of the call) that returns the output tensor. The reduction is its own
   stage; the row scale reads it.
2. `torch.ops.tutorial.rms_norm(x, w)` (or the decorated function itself) runs it eagerly on CPU
   tensors: one kernel built per shape and dtype, inputs read without a copy.
3. In a module, `torch.compile(backend="tensorlang")` imports it as a graph op: the residual add
   before it and the SiLU gate after it fuse into its kernel, `tg.extract_tasks` lists the fused
   kernel and `tg.tune` auto-schedules it with the model's budget; the compiled module calls the
   tuned kernel. Under inductor (or any other backend) it runs as an opaque op.
4. Its output shapes come from the compute, so `torch.export` and `torch.compile(dynamic=True)`
   trace it without running it.

ONNX models reach the same kernels: `tg.from_onnx(path, custom_ops={("my.domain", "RMSNorm"):
rms_norm})` maps a custom-domain node to it (docs/custom_ops.md).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import warnings

import numpy as np
import torch

import tensorlang as tl
import topi.graph as tg
from tensorlang.benchmark import compare

SMALL = os.environ.get("TL_TUTORIAL_SMALL") == "1"  # CI runs every tutorial at small sizes
EPS = 1e-6


# 1. The kernel: the sum of squares per row (a reduction stage), then each element scaled by
#    the row's reciprocal root mean square and by the learned weight. Dims may be symbolic:
#    `x.shape[-1]` is an expression when the row length is.
@tg.custom_op("tutorial::rms_norm")
def rms_norm(x: tl.Tensor, w: tl.Tensor) -> tl.Tensor:
    """x * rsqrt(mean(x * x, last axis) + eps) * w."""
    d = x.shape[-1]
    k = tl.reduce_axis((0, d), name="k")
    squares = tl.compute(x.shape[:-1], lambda *i: tl.sum(x[(*i, k)] * x[(*i, k)], axis=k),
                         name="squares")
    return tl.compute(x.shape, lambda *i: x[i] * tl.rsqrt(squares[i[:-1]] / d + EPS) * w[i[-1]],
                      name="rms_norm")


def rms_norm_torch(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The same in plain PyTorch (five kernels)."""
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w


class Block(torch.nn.Module):
    """A residual add, the norm, a SiLU gate: the shape of a transformer block's tail."""

    def __init__(self, dim: int, norm=rms_norm) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, dim))
        self.norm = norm

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = self.norm(x + residual, self.weight)
        return h * torch.sigmoid(h)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8 if SMALL else 64)
    parser.add_argument("--dim", type=int, default=48 if SMALL else 1024)
    parser.add_argument("--trials", type=int, default=4 if SMALL else 40)
    parser.add_argument("--log", default=os.path.join(tempfile.gettempdir(), "tutorial_rms.jsonl"))
    opts = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(opts.rows, opts.dim, generator=gen)
    residual = torch.randn(opts.rows, opts.dim, generator=gen)

    # 2. Eagerly, on tensors.
    w = torch.linspace(0.5, 1.5, opts.dim)
    torch.testing.assert_close(torch.ops.tutorial.rms_norm(x, w), rms_norm_torch(x, w))
    print("eager: torch.ops.tutorial.rms_norm matches PyTorch")

    # 3. In a model: the graph the backend sees, its tuning tasks, a few trials of tuning.
    ours = Block(opts.dim).eval()
    plain = Block(opts.dim, norm=rms_norm_torch).eval()
    g = tg.from_torch(ours, (x, residual))
    print("\n=== the kernels of the model (fused)")
    print(tg.optimize(g))
    for task, count in tg.extract_tasks(g):
        print(f"task {task.name} x{count}: {len(task.config_space)} configs")
    if os.path.exists(opts.log):
        os.remove(opts.log)  # a fresh run (tune would otherwise resume from it)
    tg.tune(g, trials=opts.trials, log_file=opts.log, progress=not SMALL)

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # the backend would warn if the graph ran eagerly
        fast = torch.compile(ours, backend="tensorlang", options={"log_file": opts.log})
        got = fast(x, residual)
    expected = plain(x, residual).detach()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    print("\ntorch.compile(backend='tensorlang') matches the plain PyTorch block")

    # 4. Side by side: eager PyTorch (five kernels), inductor, and the tuned fused kernel.
    #    (At CI's small size only eager: inductor's C++ compile alone takes a minute.)
    with torch.no_grad():
        repeat = 1 if SMALL else 7
        eager = compare(lambda: fast(x, residual), lambda: plain(x, residual), repeat=repeat)
        print(f"tensorlang vs eager PyTorch: {eager.speedup:.2f}x ({eager.ours * 1e6:.0f} us vs "
              f"{eager.reference * 1e6:.0f} us), {tl.get_num_threads()} threads")
        if not SMALL:
            inductor = torch.compile(plain, backend="inductor")
            torch.testing.assert_close(inductor(x, residual), expected, rtol=1e-5, atol=1e-5)
            versus = compare(lambda: fast(x, residual), lambda: inductor(x, residual),
                             repeat=repeat)
            print(f"tensorlang vs inductor: {versus.speedup:.2f}x ({versus.ours * 1e6:.0f} us "
                  f"vs {versus.reference * 1e6:.0f} us)")
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
    print("the fused custom kernel matches numpy")


if __name__ == "__main__":
    main()
