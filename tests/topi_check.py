"""One way to check every topi op: build the default x86 schedule, run it, compare with numpy."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np

import tensorlang as tl
import topi
from tensorlang.arith import const_value
from topi import nn
from topi import testing as ref


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


def assert_conv2d_NCHWc_fallback_matches(rng: np.random.Generator, target: str | None,
                                         c: int, h: int, w: int, k: int, r: int, s: int,
                                         stride: int, padding: int) -> None:
    """topi.x86's conv2d_NCHWc fallback on c -> k channels (blocked by the target's lanes where
    they divide, else one block per channel) against the numpy reference."""
    def run():
        lanes = tl.Target.current().vector_lanes("float32")
        shape = (1, c // lanes, h, w, lanes) if c % lanes == 0 else (1, c, h, w)
        bo = lanes if k % lanes == 0 else 1
        arrays = [uniform(rng, *shape), uniform(rng, k // bo, c, r, s, bo)]
        data = tl.placeholder(shape, name="data")
        kernel = tl.placeholder(arrays[1].shape, name="kernel")
        out = nn.conv2d_NCHWc(data, kernel, stride, padding, 1)
        got = run_op(out, [data, kernel], arrays, topi.x86.schedule_conv2d_NCHWc)
        return got, ref.conv2d_NCHWc_python(*arrays, stride, padding, 1)

    got, expected = in_target(target, run)
    assert_close(got, expected, c * r * s)


def fallback_conv2d_nchw(shape: tuple[int, ...], kernel: tuple[int, ...], stride: int,
                         padding: int | tuple[int, int]) -> tuple[tl.Schedule, list[tl.Tensor]]:
    """topi's conv2d_nchw with the x86 template's fallback schedule, under the current target."""
    data = tl.placeholder(shape, name="data")
    weight = tl.placeholder(kernel, name="kernel")
    out = topi.nn.conv2d_nchw(data, weight, stride, padding, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback config's warning
        return topi.x86.schedule_conv2d_nchw(out), [data, weight, out]
