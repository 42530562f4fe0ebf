"""What the frontends share: a `GraphWriter` that adds graph ops for a model being imported.

Values known at import time stay numpy arrays: an op whose inputs are all such arrays is
evaluated at once with the graph op's own numpy reference (so shape arithmetic folds away and
attribute-like inputs are plain values), and an array becomes one graph constant the first time
an op reads it as a tensor.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from . import import_ops  # noqa: F401  (registers the ops the frontends emit)
from .graph import Graph, Node
from .ops import get_op, infer_output

Value = Node | np.ndarray


class UnsupportedError(NotImplementedError):
    """An op, attribute or attribute value that a frontend does not translate."""


def shape_of(value: Value) -> tuple[int, ...]:
    return tuple(value.shape)


def dtype_of(value: Value) -> str:
    return value.dtype if isinstance(value, Node) else str(value.dtype)


def require(ok: bool, message: str) -> None:
    """Raise UnsupportedError(message) unless `ok`."""
    if not ok:
        raise UnsupportedError(message)


def compact_padding(pads: tuple[int, int, int, int]) -> tuple[int, ...]:
    """(top, left, bottom, right) as (h, w) when symmetric: one form per padding, so that a conv
    has one tuning workload whichever frontend imported it."""
    top, left, bottom, right = pads
    return (top, left) if (top, left) == (bottom, right) else tuple(pads)


def node_name(text: str) -> str:
    """A source model's value name as a readable graph node name (an identifier)."""
    return re.sub(r"\W+", "_", text).strip("_") or "value"


class GraphWriter:
    """The graph being built, the name for the ops of the source node being converted, and one
    constant per numpy array."""

    def __init__(self) -> None:
        self.graph = Graph()
        self.name = "value"
        self._constants: dict[int, tuple[np.ndarray, Node]] = {}
        self._array_names: dict[int, tuple[np.ndarray, str]] = {}

    def named_array(self, array: np.ndarray, name: str) -> np.ndarray:
        """`array`, remembered under the source model's `name` (a weight's graph constant is
        named after it)."""
        self._array_names[id(array)] = (array, node_name(name))
        return array

    def as_node(self, value: Value) -> Node:
        """A graph node for `value` (an array becomes a constant, once)."""
        if isinstance(value, Node):
            return value
        if not isinstance(value, np.ndarray):
            raise TypeError(f"expected a tensor, got {type(value).__name__} {value!r}")
        cached = self._constants.get(id(value))  # the array is kept alive by the cache
        if cached is None:
            named = self._array_names.get(id(value))
            name = named[1] if named is not None else self.name + "_const"
            cached = (value, self.graph.constant(value, name=name))
            self._constants[id(value)] = cached
        return cached[1]

    def op(self, op_name: str, *inputs: Value, **attrs: Any) -> Value:
        """Graph op `op_name` on `inputs`; evaluated now with the op's numpy reference when every
        input is an array."""
        if all(isinstance(v, np.ndarray) for v in inputs):
            _, dtype = infer_output(op_name, [(v.shape, str(v.dtype)) for v in inputs], attrs)
            reference = get_op(op_name).reference
            if reference is None:
                raise UnsupportedError(f"graph op {op_name!r} on constants (it has no reference)")
            return np.asarray(reference(*inputs, **attrs)).astype(dtype)
        nodes = [self.as_node(v) for v in inputs]
        return self.graph.apply(op_name, *nodes, name=self.name, **attrs)

    def reshape(self, x: Value, shape: Any) -> Value:
        """`x` reshaped (itself when the shape does not change)."""
        shape = tuple(int(d) for d in shape)
        return x if shape == shape_of(x) else self.op("reshape", x, newshape=shape)

    def dense_rows(self, x: Value, weight: Value) -> Value:
        """x (..., K) times weight (N, K) transposed: the leading axes fold into the rows of one
        dense, the GEMM layout topi tunes (and batch 1 stays a matrix-vector product)."""
        sx = shape_of(x)
        rows = self.reshape(x, (-1, sx[-1])) if len(sx) != 2 else x
        y = self.op("dense", rows, weight)
        return self.reshape(y, (*sx[:-1], shape_of(weight)[0])) if len(sx) != 2 else y

    def matmul(self, a: Value, b: Value) -> Value:
        """numpy's a @ b for operands of 2 or more dimensions, in the forms topi is fast at: a
        2-D weight makes one dense over the folded leading axes; equal batch axes make one
        3-D batch_matmul (which reads its right operand as (batch, N, K), so a transpose of the
        last two axes in front of it cancels); anything else is a broadcasting matmul."""
        sa, sb = shape_of(a), shape_of(b)
        if len(sb) == 2 and isinstance(b, np.ndarray):
            return self.dense_rows(a, self.op("transpose", b, axes=(1, 0)))
        if len(sa) < 3 or sa[:-2] != sb[:-2]:
            return self.op("matmul", a, b)
        batch = math.prod(sa[:-2])
        (m, k), n = sa[-2:], sb[-1]
        swap = (*range(len(sb) - 2), len(sb) - 1, len(sb) - 2)
        if isinstance(b, Node) and b.op == "transpose" and tuple(b.attrs["axes"]) == swap:
            b_nk = b.inputs[0]
        else:
            b_nk = self.op("transpose", b, axes=swap)
        y = self.op("batch_matmul", self.reshape(a, (batch, m, k)),
                    self.reshape(b_nk, (batch, n, k)))
        return self.reshape(y, (*sa[:-1], n))
