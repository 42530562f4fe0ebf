"""Register-blocked kernels at dividing and awkward sizes, with their numpy references.

GEMM (dense, matmul, batch_matmul), conv2d (NCHW and NHWC, 1x1 and 3x3, strided), depthwise and
the auto-scheduler's GEMM sketch keep a block of accumulators in registers across their
reduction. Sizes that do not divide the block leave an edge block (primes, 1), which is where a
block used to stay in memory. The inner-loop check (`benchmarks/bench_targets.py --stack`) and
the cross-target tests build these on every target: each kernel is built under the current
target (`tl.Target`), its fallback schedule, and compared with its reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import tensorlang as tl

from .. import nn, x86
from .conv2d import conv2d_nchw_python, conv2d_nhwc_python, depthwise_conv2d_nchw_python
from .dense import batch_matmul_python, dense_python, matmul_python

Built = tuple[tl.Schedule, list[tl.Tensor]]


def _dense(m: int, n: int, k: int) -> Built:
    data, weight = tl.placeholder((m, k), name="data"), tl.placeholder((n, k), name="weight")
    out = nn.dense(data, weight)
    return x86.schedule_dense(out), [data, weight, out]


def _matmul(m: int, n: int, k: int) -> Built:
    a, b = tl.placeholder((m, k), name="a"), tl.placeholder((k, n), name="b")
    out = nn.matmul(a, b)
    return x86.schedule_matmul(out), [a, b, out]


def _batch_matmul(m: int, n: int, k: int) -> Built:
    x, y = tl.placeholder((2, m, k), name="x"), tl.placeholder((2, n, k), name="y")
    out = nn.batch_matmul(x, y)
    return x86.schedule_batch_matmul(out), [x, y, out]


def _auto_gemm(m: int, n: int, k: int) -> Built:
    """The auto-scheduler's untuned sketch of C = A @ B."""
    from autotune.auto_schedule import generate
    from autotune.space import FallbackConfig

    a, b = tl.placeholder((m, k), name="A"), tl.placeholder((k, n), name="B")
    r = tl.reduce_axis((0, k), name="k")
    c = tl.compute((m, n), lambda i, j: tl.sum(a[i, r] * b[r, j], axis=r), name="C")
    schedule, _ = generate([a, b, c], FallbackConfig())
    return schedule, [a, b, c]


def _conv2d_nchw(c: int, hw: int, k: int, r: int, stride: int) -> Built:
    data = tl.placeholder((1, c, hw, hw), name="data")
    kernel = tl.placeholder((k, c, r, r), name="kernel")
    out = nn.conv2d_nchw(data, kernel, stride, r // 2)
    return x86.schedule_conv2d_nchw(out), [data, kernel, out]


def _conv2d_nhwc(c: int, hw: int, k: int, r: int, stride: int) -> Built:
    data = tl.placeholder((1, hw, hw, c), name="data")
    kernel = tl.placeholder((r, r, c, k), name="kernel")
    out = nn.conv2d_nhwc(data, kernel, stride, r // 2)
    return x86.schedule_conv2d_nhwc(out), [data, kernel, out]


def _depthwise(c: int, hw: int, r: int, stride: int) -> Built:
    data = tl.placeholder((1, c, hw, hw), name="data")
    kernel = tl.placeholder((c, 1, r, r), name="kernel")
    out = nn.depthwise_conv2d_nchw(data, kernel, stride, r // 2)
    return x86.schedule_depthwise_conv2d_nchw(out), [data, kernel, out]


def _window(reference: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """The reference of a convolution family whose sizes end in (kernel size, stride)."""
    return lambda sizes, data, kernel: reference(data, kernel, sizes[-1], sizes[-2] // 2)


#: family -> (builder over the sizes, reference over (sizes, *inputs))
FAMILIES: dict[str, tuple[Callable[..., Built], Callable[..., np.ndarray]]] = {
    "dense": (_dense, lambda sizes, d, w: dense_python(d, w)),
    "matmul": (_matmul, lambda sizes, a, b: matmul_python(a, b)),
    "batch_matmul": (_batch_matmul, lambda sizes, x, y: batch_matmul_python(x, y)),
    "auto_gemm": (_auto_gemm, lambda sizes, a, b: matmul_python(a, b)),
    "conv2d_nchw": (_conv2d_nchw, _window(conv2d_nchw_python)),
    "conv2d_nhwc": (_conv2d_nhwc, _window(conv2d_nhwc_python)),
    "depthwise": (_depthwise, _window(depthwise_conv2d_nchw_python)),
}

#: (M, N, K) of the GEMMs: one that divides every block, then primes and 1
GEMM_SIZES = [(64, 64, 64), (1, 7, 13), (7, 13, 29), (29, 97, 13), (97, 257, 29),
              (13, 29, 257)]
#: (channels in, height = width, channels out, kernel size, stride) of the convolutions
CONV_SIZES = [(16, 14, 32, 3, 1), (3, 13, 17, 3, 1), (17, 7, 31, 3, 1), (31, 13, 17, 1, 1),
              (17, 13, 31, 3, 2), (31, 7, 3, 1, 2)]
#: (channels, height = width, kernel size, stride) of the depthwise convolutions
DEPTHWISE_SIZES = [(16, 14, 3, 1), (17, 13, 3, 1), (31, 7, 3, 2), (3, 29, 3, 1)]

_SIZES = {"dense": GEMM_SIZES, "matmul": GEMM_SIZES, "batch_matmul": GEMM_SIZES,
          "auto_gemm": GEMM_SIZES, "conv2d_nchw": CONV_SIZES, "conv2d_nhwc": CONV_SIZES,
          "depthwise": DEPTHWISE_SIZES}


@dataclass(frozen=True)
class BlockedKernel:
    """One kernel of a family at one size."""

    family: str
    sizes: tuple[int, ...]

    @property
    def label(self) -> str:
        return f"{self.family} {'x'.join(map(str, self.sizes))}"

    def build(self) -> Built:
        """The schedule and tensors (inputs first, the output last) on the current target."""
        return FAMILIES[self.family][0](*self.sizes)

    def reference(self, inputs: list[np.ndarray]) -> np.ndarray:
        """What the kernel computes from `inputs`, in numpy."""
        return FAMILIES[self.family][1](self.sizes, *inputs)


def blocked_kernels(families: str = "") -> list[BlockedKernel]:
    """Every kernel of the families named in `families` (comma-separated; all when empty)."""
    chosen = families.split(",") if families else list(FAMILIES)
    unknown = [f for f in chosen if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown kernel families {unknown}: use {', '.join(FAMILIES)}")
    return [BlockedKernel(f, sizes) for f in chosen for sizes in _SIZES[f]]
