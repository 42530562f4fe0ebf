"""Comparisons, logic and selection: computes whose results are bool, plus `where`.

The comparisons and the binary logic ops broadcast like numpy and are tagged "broadcast"; the
unary tests (isnan, isinf, logical_not) are "elemwise"; `where` broadcasts all three operands.
`any` and `all` are reductions over bools (tagged "reduce" like `reduction.py`'s), so the
default schedules inline the first kind into their readers and give the last one its own loops.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorlang as tl
from tensorlang.dtype import as_dtype
from tensorlang.expr import Expr

from .elemwise import BROADCAST, Operand, _binary, _unary, broadcast_read, broadcast_shape
from .reduction import AxisLike, _reduce
from .utils import check_tensor

_FALSE, _TRUE = tl.const(False, "bool"), tl.const(True, "bool")


def _compare(f: Callable[[Expr, Expr], Expr], name: str, doc: str) -> Callable:
    def op(a: Operand, b: Operand) -> tl.Tensor:
        return _binary(a, b, f, name)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


equal = _compare(lambda x, y: x == y, "equal", "a == b (bool) with numpy broadcasting.")
not_equal = _compare(lambda x, y: x != y, "not_equal", "a != b (bool) with numpy broadcasting.")
less = _compare(lambda x, y: x < y, "less", "a < b (bool) with numpy broadcasting.")
less_equal = _compare(lambda x, y: x <= y, "less_equal",
                      "a <= b (bool) with numpy broadcasting.")
greater = _compare(lambda x, y: x > y, "greater", "a > b (bool) with numpy broadcasting.")
greater_equal = _compare(lambda x, y: x >= y, "greater_equal",
                         "a >= b (bool) with numpy broadcasting.")


def truth(value: Expr | int | float) -> Expr:
    """`value` as a bool: itself when bool, else `value != 0` (numpy's truth of numbers)."""
    if isinstance(value, Expr) and value.dtype.is_bool:
        return value
    if not isinstance(value, Expr):
        return tl.const(bool(value), "bool")
    return value != tl.const(0, value.dtype)


logical_and = _compare(lambda x, y: truth(x) & truth(y), "logical_and",
                       "Both a and b are true (nonzero), with numpy broadcasting.")
logical_or = _compare(lambda x, y: truth(x) | truth(y), "logical_or",
                      "a or b is true (nonzero), with numpy broadcasting.")
logical_xor = _compare(lambda x, y: truth(x) != truth(y), "logical_xor",
                       "Exactly one of a and b is true (nonzero), with numpy broadcasting.")


def logical_not(x: tl.Tensor) -> tl.Tensor:
    """x is false (zero), as bool."""
    check_tensor(x, "logical_not: x")
    return _unary(x, lambda v: ~truth(v), "logical_not")


def isnan(x: tl.Tensor) -> tl.Tensor:
    """x is NaN (never, for integer and bool tensors)."""
    return _unary(x, lambda v: v != v, "isnan")  # only NaN differs from itself


def isinf(x: tl.Tensor) -> tl.Tensor:
    """x is +inf or -inf (never, for integer and bool tensors)."""
    if not as_dtype(x.dtype).is_float:  # false, written as a read of x so x stays an input
        return _unary(x, lambda v: v != v, "isinf")
    return _unary(x, lambda v: tl.abs(v) == tl.const(float("inf"), x.dtype), "isinf")


def where(cond: tl.Tensor, x: tl.Tensor, y: tl.Tensor) -> tl.Tensor:
    """x where the bool `cond` holds, else y; all three broadcast like numpy's `where`.

    Raises:
        TypeError: an operand is not a Tensor, `cond` is not bool, or x and y differ in dtype.
        ValueError: the shapes do not broadcast.
    """
    for label, t in (("cond", cond), ("x", x), ("y", y)):
        check_tensor(t, f"where: {label}")
    if cond.dtype != "bool":
        raise TypeError(f"where: cond must be a bool tensor, got {cond.dtype}")
    if x.dtype != y.dtype:
        raise TypeError(f"where: x and y must have one dtype, got {x.dtype} and {y.dtype}")
    shape = broadcast_shape(broadcast_shape(cond.shape, x.shape, "where"), y.shape, "where")
    return tl.compute(
        shape,
        lambda *i: tl.select(broadcast_read(cond, i), broadcast_read(x, i), broadcast_read(y, i)),
        name="where",
        tag=BROADCAST,
    )


_any = tl.comm_reducer(lambda a, b: a | b, lambda dtype: _FALSE, name="any")
_all = tl.comm_reducer(lambda a, b: a & b, lambda dtype: _TRUE, name="all")


def _bool_reduce(x: tl.Tensor, axis: AxisLike, keepdims: bool, reducer: Callable,
                 name: str) -> tl.Tensor:
    check_tensor(x, f"{name}: x")
    if x.dtype != "bool":  # numpy's truth of numbers: nonzero is true
        x = _unary(x, truth, f"{name}_truth")
    return _reduce(x, axis, keepdims, reducer, name)[0]


def any(x: tl.Tensor, axis: AxisLike = None, keepdims: bool = False) -> tl.Tensor:  # noqa: A001
    """Whether some element of `x` along `axis` (all axes when None) is true (nonzero), as bool."""
    return _bool_reduce(x, axis, keepdims, _any, "any")


def all(x: tl.Tensor, axis: AxisLike = None, keepdims: bool = False) -> tl.Tensor:  # noqa: A001
    """Whether every element of `x` along `axis` (all axes when None) is true (nonzero), as
    bool."""
    return _bool_reduce(x, axis, keepdims, _all, "all")
