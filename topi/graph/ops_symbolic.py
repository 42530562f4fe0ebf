"""Graph ops whose output shape comes from symbolic sizes (the shape subgraphs of transformer
exports): `arange` (ONNX Range with a symbolic limit: position ids), `full` (ConstantOfShape),
`broadcast_dims` (Expand to a symbolic shape) and `slice_dims` (Slice with a symbolic end, e.g.
a position table cut to the sequence length), and `dims_tensor` (an int64 tensor of sizes, to
compute with: the row stride of a 2-D index into a (batch, seq) mask). Their sizes are attrs
holding ints or symbolic dims; each has a numpy reference taking the sizes as ints (bound by
`reference.run_reference`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import tensorlang as tl
from tensorlang.expr import Expr

from .. import x86
from ..nn.elemwise import broadcast_read
from ..symbolic import canon
from .ops import OpPattern, register_op

_INJ = x86.schedule_injective


def _arange(start: tl.Tensor, count: Any, delta: Any = 1) -> tl.Tensor:
    return tl.compute((canon(count),), lambda i: start[()] + (i * delta).astype(start.dtype),
                      name="arange", tag="injective")


def _arange_ref(start: np.ndarray, count: int, delta: Any = 1) -> np.ndarray:
    return (start + np.arange(count) * delta).astype(start.dtype)


def _full(value: tl.Tensor, shape: Sequence[Any]) -> tl.Tensor:
    return tl.compute(tuple(canon(d) for d in shape), lambda *i: value[()], name="full",
                      tag="injective")


def _full_ref(value: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    return np.full(tuple(shape), value, value.dtype)


def _broadcast(x: tl.Tensor, shape: Sequence[Any]) -> tl.Tensor:
    return tl.compute(tuple(canon(d) for d in shape), lambda *i: broadcast_read(x, i),
                      name="broadcast_dims", tag="injective")


def _broadcast_ref(x: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    return np.broadcast_to(x, tuple(shape)).copy()


def _slice(x: tl.Tensor, axes: Sequence[int], begin: Sequence[Any],
           size: Sequence[Any]) -> tl.Tensor:
    shape = list(x.shape)
    for a, n in zip(axes, size):
        shape[a] = canon(n)

    def f(*i: Expr) -> Expr:
        index = list(i)
        for a, b in zip(axes, begin):
            index[a] = index[a] + b
        return x[tuple(index)]

    return tl.compute(tuple(shape), f, name="slice_dims", tag="injective")


def _slice_ref(x: np.ndarray, axes: Sequence[int], begin: Sequence[int],
               size: Sequence[int]) -> np.ndarray:
    index = [slice(None)] * x.ndim
    for a, b, n in zip(axes, begin, size):
        index[a] = slice(b, b + n)
    return x[tuple(index)]


def _dims_tensor(*carriers: tl.Tensor, values: Sequence[Any],
                 shape: Sequence[int]) -> tl.Tensor:
    """The sizes `values` (row-major) as an int64 tensor of `shape`. The `carriers` are tensors
    whose shapes hold the sizes' variables: a kernel takes its variables from its arguments'
    shapes, so they are its arguments, read only in a branch never taken (a schedule holds the
    tensors that its computes read)."""
    entries = [tl.cast(canon(v), "int64") if not isinstance(canon(v), int)
               else tl.const(canon(v), "int64") for v in values]

    def f(*i: Expr) -> Expr:
        flat: Expr | int = 0
        for k, n in zip(i, shape):
            flat = flat * n + k
        out = entries[-1]
        for j in range(len(entries) - 2, -1, -1):
            out = tl.if_then_else(flat == j, entries[j], out)
        for c in carriers:
            out = tl.if_then_else(flat < 0, c[(0,) * c.ndim].astype("int64"), out)
        return out

    return tl.compute(tuple(shape), f, name="dims_tensor", tag="injective")


def _dims_tensor_ref(*carriers: np.ndarray, values: Sequence[int],
                     shape: Sequence[int]) -> np.ndarray:
    return np.array(values, "int64").reshape(tuple(shape))


register_op("arange", _arange, _INJ, OpPattern.INJECTIVE, reference=_arange_ref)
register_op("full", _full, _INJ, OpPattern.INJECTIVE, reference=_full_ref)
register_op("broadcast_dims", _broadcast, _INJ, OpPattern.BROADCAST, reference=_broadcast_ref)
register_op("slice_dims", _slice, _INJ, OpPattern.INJECTIVE, reference=_slice_ref)
register_op("dims_tensor", _dims_tensor, _INJ, OpPattern.INJECTIVE, variadic=True,
            reference=_dims_tensor_ref)
