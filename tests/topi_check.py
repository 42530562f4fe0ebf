"""One way to check every topi op: build the default x86 schedule, run it, compare with numpy."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

import tensorlang as tl
import topi
from tensorlang.arith import const_value


def shape_of(t: tl.Tensor) -> tuple[int, ...]:
    return tuple(const_value(d) for d in t.shape)


def run_op(
    out: tl.Tensor,
    inputs: Sequence[tl.Tensor],
    arrays: Sequence[np.ndarray],
    schedule: Callable[[tl.Tensor], tl.Schedule] | None = None,
    s: tl.Schedule | None = None,
) -> np.ndarray:
    """Build `out` with `schedule([out])` (or the given schedule `s`) and return its value."""
    s = schedule([out]) if s is None else s
    f = tl.build(s, [*inputs, out])
    result = np.zeros(shape_of(out), out.dtype)
    f(*arrays, result)
    return result


def assert_close(actual: np.ndarray, expected: np.ndarray, reduction: int = 1) -> None:
    """float32 comparison whose absolute slack grows with the length of the summed dot products."""
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=2e-5 * math.sqrt(reduction))


def uniform(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype("float32")


def dense_case(rng: np.random.Generator, m: int, k: int, n: int, tail: str
               ) -> tuple[tl.Tensor, list[tl.Tensor], list[np.ndarray], np.ndarray]:
    """topi.nn.dense of (m, k) x (n, k) with the epilogue `tail` ("none", "bias" or "bias_relu"):
    (out, inputs, their arrays, numpy's result)."""
    from topi import nn
    from topi import testing as ref

    data = tl.placeholder((m, k), name="data")
    weight = tl.placeholder((n, k), name="weight")
    inputs, arrays = [data, weight], [uniform(rng, m, k), uniform(rng, n, k)]
    bias = None
    if tail != "none":
        bias = tl.placeholder((n,), name="bias")
        inputs.append(bias)
        arrays.append(uniform(rng, n))
    out = nn.dense(data, weight, bias)
    expected = ref.dense_python(*arrays)
    if tail == "bias_relu":
        out, expected = nn.relu(out), ref.relu_python(expected)
    return out, inputs, arrays, expected


def in_target(target: str | None, fn: Callable[[], np.ndarray]) -> np.ndarray:
    """`fn()` under `tl.Target(target)`, or under the current target when `target` is None."""
    if target is None:
        return fn()
    with tl.Target(target):
        return fn()



def assert_conv2d_nchw_matches(f: Callable[..., object], shape: tuple[int, ...],
                               kernel: tuple[int, ...], stride: int,
                               padding: int | tuple[int, int], seed: int) -> None:
    """The built conv2d_nchw `f(data, kernel, out)` against numpy on random normal inputs."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype("float32")
    w = rng.standard_normal(kernel).astype("float32")
    expected = topi.testing.conv2d_nchw_python(x, w, stride, padding)
    y = np.empty(expected.shape, "float32")
    f(x, w, y)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
