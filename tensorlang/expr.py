"""Scalar expression nodes and the operator overloading that builds them.

The second layer of the data flow: `compute` bodies are DAGs of these nodes. Nodes are frozen,
hash by identity, and keep children in tuples, so passes can share unchanged subtrees. As in TVM and
numpy, `a == b` builds a comparison node; that node's `bool()` answers identity so that nodes still
work in `in` tests and as dict keys. Every other `bool()` raises, because Python's `and`, `or`,
`not` and `if` cannot be traced: use `&`, `|`, `~` and `tl.if_then_else` instead.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from .dtype import BOOL, FLOAT64, INT32, DType, as_dtype, promote, scalar_dtype_for

Scalar = Union[bool, int, float]
ExprLike = Union["Expr", "IterVar", Scalar]


class Node:
    """Base of every IR node (expressions, statements, buffers). Identity-hashed and immutable."""

    __slots__ = ()


_printers: list[Callable[[Node], str]] = []


def register_printer(printer: Callable[[Node], str]) -> None:
    """Make `printer` the text of `str(node)`. printer.py registers itself when tensorlang is
    imported; the nodes cannot import it, since it imports every node class."""
    _printers[:] = [printer]


def node_text(node: Node) -> str:
    """The registered printer's text of `node` (the class name before one is registered)."""
    return _printers[0](node) if _printers else f"<{type(node).__name__}>"


class ExprOps:
    """Python operators that build expression nodes; shared by `Expr` and `IterVar`."""

    __slots__ = ()

    def __add__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.ADD, self, other)

    def __radd__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.ADD, other, self)

    def __sub__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.SUB, self, other)

    def __rsub__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.SUB, other, self)

    def __mul__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.MUL, self, other)

    def __rmul__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.MUL, other, self)

    def __truediv__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.DIV, self, other)

    def __rtruediv__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.DIV, other, self)

    def __floordiv__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.FLOORDIV, self, other)

    def __rfloordiv__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.FLOORDIV, other, self)

    def __mod__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.FLOORMOD, self, other)

    def __rmod__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.FLOORMOD, other, self)

    def __pow__(self, other: ExprLike) -> Expr:
        return power(self, other)

    def __rpow__(self, other: ExprLike) -> Expr:
        return power(other, self)

    def __and__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.AND, self, other)

    def __rand__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.AND, other, self)

    def __or__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.OR, self, other)

    def __ror__(self, other: ExprLike) -> Expr:
        return binary(BinaryOp.OR, other, self)

    def __invert__(self) -> Expr:
        value = as_expr(self)
        if not (value.dtype.is_bool or value.dtype.is_integer):
            raise TypeError(f"~ needs a bool or integer expression, got {value.dtype}")
        return Not(value, value.dtype)

    def __neg__(self) -> Expr:
        value = as_expr(self)
        if value.dtype.is_bool:
            raise TypeError("unary - is not defined for bool expressions; use ~")
        return binary(BinaryOp.SUB, const(0, value.dtype), value)

    def __pos__(self) -> Expr:
        return as_expr(self)

    def __lt__(self, other: ExprLike) -> Expr:
        return compare(CompareOp.LT, self, other)

    def __le__(self, other: ExprLike) -> Expr:
        return compare(CompareOp.LE, self, other)

    def __gt__(self, other: ExprLike) -> Expr:
        return compare(CompareOp.GT, self, other)

    def __ge__(self, other: ExprLike) -> Expr:
        return compare(CompareOp.GE, self, other)

    def __eq__(self, other: object) -> Expr:  # type: ignore[override]
        return compare(CompareOp.EQ, self, other)  # type: ignore[arg-type]

    def __ne__(self, other: object) -> Expr:  # type: ignore[override]
        return compare(CompareOp.NE, self, other)  # type: ignore[arg-type]

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError(
            "the truth value of a tensorlang expression is unknown until it runs; "
            "use & and | instead of 'and'/'or', ~ instead of 'not', and "
            "tl.if_then_else(cond, a, b) instead of 'a if cond else b'"
        )

    def astype(self, dtype: str | DType) -> Expr:
        """Convert to `dtype` (numpy's `astype`)."""
        return cast(self, dtype)

    def __index__(self) -> int:
        raise TypeError(
            f"{self} has no value until the kernel runs, so it cannot be used as a Python int "
            "(only constants can; tl.get_const_tuple keeps symbolic entries as expressions)"
        )

    def __int__(self) -> int:
        return self.__index__()


class Expr(ExprOps, Node):
    """A scalar (or, after vectorization, vector) expression with a `dtype`."""

    __slots__ = ()
    dtype: DType

    def __str__(self) -> str:
        return node_text(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


def _frozen(cls: type) -> type:
    """Freeze an IR node class: immutable fields, identity equality and hashing."""
    return dataclass(frozen=True, slots=True, eq=False, repr=False)(cls)


@_frozen
class Var(Expr):
    """A named scalar variable: a loop variable, a symbolic dimension or a pointer."""

    name: str
    dtype: DType = INT32


@_frozen
class Const(Expr):
    """A literal of a given dtype. An integer one is a Python int wherever one is expected
    (`int(c)`, `range(c)`, `operator.index(c)`), like TVM's IntImm; its `bool()` still raises,
    as every expression's does (see the module docstring)."""

    value: Scalar
    dtype: DType

    def __index__(self) -> int:
        if not (self.dtype.is_integer or self.dtype.is_bool) or self.dtype.lanes != 1:
            raise TypeError(f"{self} is a {self.dtype} constant, not an integer")
        return int(self.value)

    def __int__(self) -> int:
        if self.dtype.lanes != 1:
            raise TypeError(f"{self} is a vector constant")
        return int(self.value)

    def __float__(self) -> float:
        if self.dtype.lanes != 1:
            raise TypeError(f"{self} is a vector constant")
        return float(self.value)


class BinaryOp(enum.Enum):
    """Binary arithmetic; FLOORDIV and FLOORMOD round towards minus infinity like Python."""

    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    FLOORDIV = "//"
    FLOORMOD = "%"
    MIN = "min"
    MAX = "max"
    AND = "&"
    OR = "|"


class CompareOp(enum.Enum):
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="
    NE = "!="


@_frozen
class Binary(Expr):
    """`a op b`; both operands have the result's dtype (constructors insert the casts)."""

    op: BinaryOp
    a: Expr
    b: Expr
    dtype: DType


@_frozen
class Compare(Expr):
    """`a op b` giving bool; both operands share one dtype."""

    op: CompareOp
    a: Expr
    b: Expr
    dtype: DType

    def __bool__(self) -> bool:
        # Lets nodes live in lists, sets and dicts: `x == y` on nodes asks "same node?".
        if self.op is CompareOp.EQ:
            return self.a is self.b
        if self.op is CompareOp.NE:
            return self.a is not self.b
        return ExprOps.__bool__(self)


@_frozen
class Not(Expr):
    """Logical not for bool, bitwise not for integers."""

    value: Expr
    dtype: DType


@_frozen
class Select(Expr):
    """`true_value if cond else false_value`. Only the chosen branch is evaluated, so a
    branch may read memory that is out of bounds when it is not chosen (padding)."""

    cond: Expr
    true_value: Expr
    false_value: Expr
    dtype: DType


@_frozen
class Cast(Expr):
    value: Expr
    dtype: DType


class MathFunc(enum.Enum):
    """Intrinsic functions; the codegen maps each to LLVM intrinsics or libm."""

    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    TANH = "tanh"
    SIGMOID = "sigmoid"
    ERF = "erf"
    ABS = "abs"
    POW = "pow"
    FLOOR = "floor"
    CEIL = "ceil"
    FMA = "fma"
    SIN = "sin"
    COS = "cos"


@_frozen
class Call(Expr):
    func: MathFunc
    args: tuple[Expr, ...]
    dtype: DType


@_frozen
class TensorRead(Expr):
    """`tensor[indices]` inside a compute body, before buffers exist."""

    tensor: Any  # tensorlang.tensor.Tensor (a later layer)
    indices: tuple[Expr, ...]
    dtype: DType


@_frozen
class Range(Node):
    """The half-open interval [min, min + extent)."""

    min: Expr
    extent: Expr

    @staticmethod
    def from_bounds(lo: ExprLike, hi: ExprLike) -> Range:
        lo_e, hi_e = as_expr(lo), as_expr(hi)
        if isinstance(lo_e, Const) and isinstance(hi_e, Const):
            return Range(lo_e, const(int(hi_e.value) - int(lo_e.value), lo_e.dtype))
        return Range(lo_e, binary(BinaryOp.SUB, hi_e, lo_e))

    def __str__(self) -> str:
        return f"range({self.min}, {self.min} + {self.extent})"


class IterKind(enum.Enum):
    """What an iteration variable iterates over."""

    DATA_PAR = "data_par"
    REDUCE = "reduce"


@_frozen
class IterVar(ExprOps, Node):
    """An axis of a compute or a loop produced by a schedule primitive.

    Used in expressions, it stands for its variable `var`.
    """

    var: Var
    dom: Range | None
    kind: IterKind = IterKind.DATA_PAR

    @property
    def name(self) -> str:
        """The name of the loop variable."""
        return self.var.name

    @property
    def dtype(self) -> DType:
        """The dtype of the loop variable."""
        return self.var.dtype

    def __str__(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        dom = f", {self.dom}" if self.dom is not None else ""
        return f"IterVar({self.var.name}{dom}, {self.kind.value})"


@_frozen
class CommReducer(Node):
    """A commutative reducer: `result(lhs, rhs)` combines, `identity` starts the reduction."""

    lhs: tuple[Var, ...]
    rhs: tuple[Var, ...]
    result: tuple[Expr, ...]
    identity: tuple[Expr, ...]
    name: str = "reduce"


@_frozen
class Reduce(Expr):
    """A reduction of `source` over `axis`, counting only points where `condition` holds."""

    combiner: CommReducer
    source: tuple[Expr, ...]
    axis: tuple[IterVar, ...]
    condition: Expr
    value_index: int
    dtype: DType


def const(value: Scalar, dtype: str | DType | None = None) -> Const:
    """A literal. Without `dtype`: bool, int32 (int64 when it does not fit) or float64.

    Raises:
        ValueError: the value does not fit in an integer `dtype`.
    """
    if isinstance(value, Const):
        return value if dtype is None else Const(value.value, as_dtype(dtype))
    if hasattr(value, "item") and not isinstance(value, (bool, int, float)):
        value = value.item()  # numpy scalar
    if not isinstance(value, (bool, int, float)):
        raise TypeError(f"const() takes a bool, int or float, got {type(value).__name__}")
    t = scalar_dtype_for(value, None) if dtype is None else as_dtype(dtype)
    if t.is_bool:
        return Const(bool(value), t)
    if t.is_integer:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{value!r} is not an integer but the dtype is {t}")
        v = int(value)
        if not t.min_value() <= v <= t.max_value():
            raise ValueError(f"constant {v} does not fit in {t}")
        return Const(v, t)
    return Const(float(value), t)


def as_expr(value: ExprLike, like: DType | None = None) -> Expr:
    """Turn a Python scalar or IterVar into an expression; scalars take a dtype fitting `like`."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, IterVar):
        return value.var
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        value = value.item()  # numpy scalars
    if isinstance(value, (bool, int, float)):
        return const(value, scalar_dtype_for(value, like))
    raise TypeError(f"cannot use {type(value).__name__} {value!r} in a tensorlang expression")


def cast(value: ExprLike, dtype: str | DType) -> Expr:
    """Convert `value` to `dtype` (float to int truncates towards zero, as numpy's astype)."""
    e = as_expr(value)
    t = as_dtype(dtype).with_lanes(e.dtype.lanes)
    if e.dtype == t:
        return e
    if isinstance(e, Const) and e.dtype.lanes == 1:
        if t.is_bool:
            return Const(bool(e.value), t)
        if t.is_integer and (t.min_value() <= int(e.value) <= t.max_value()):
            return Const(int(e.value), t)
        if t.is_float:
            return Const(float(e.value), t)
    return Cast(e, t)


def _operands(a: ExprLike, b: ExprLike) -> tuple[Expr, Expr]:
    """Convert both operands, giving Python scalars the dtype of the other side (NEP 50)."""
    a_is_node = isinstance(a, (Expr, IterVar))
    b_is_node = isinstance(b, (Expr, IterVar))
    if a_is_node:
        ea = as_expr(a)
        eb = as_expr(b, ea.dtype)
    elif b_is_node:
        eb = as_expr(b)
        ea = as_expr(a, eb.dtype)
    else:
        ea, eb = as_expr(a), as_expr(b)
    return ea, eb


def _unify(a: Expr, b: Expr, result: DType | None = None) -> tuple[Expr, Expr, DType]:
    t = result if result is not None else promote(a.dtype, b.dtype)
    return cast(a, t), cast(b, t), t


def binary(op: BinaryOp, a: ExprLike, b: ExprLike) -> Expr:
    """Build `a op b` with numpy's promotion (see `tensorlang.dtype`)."""
    ea, eb = _operands(a, b)
    t = promote(ea.dtype, eb.dtype)
    if op is BinaryOp.DIV and not t.is_float:
        t = FLOAT64.with_lanes(t.lanes)  # numpy: true division of integers gives float64
    if op in (BinaryOp.AND, BinaryOp.OR):
        if t.is_float:
            raise TypeError(f"{op.value} needs bool or integer operands, got {ea.dtype} and {eb.dtype}")
    elif t.is_bool:
        if op in (BinaryOp.MIN, BinaryOp.MAX):
            pass
        else:
            t = INT32.with_lanes(t.lanes)  # arithmetic on bools counts them, as numpy does
    ea, eb, t = _unify(ea, eb, t)
    return Binary(op, ea, eb, t)


def compare(op: CompareOp, a: ExprLike, b: ExprLike) -> Expr:
    ea, eb = _operands(a, b)
    ea, eb, t = _unify(ea, eb)
    return Compare(op, ea, eb, BOOL.with_lanes(t.lanes))


def select(cond: ExprLike, true_value: ExprLike, false_value: ExprLike) -> Expr:
    """`true_value` where `cond` holds, else `false_value`; only the chosen side is evaluated."""
    c = as_expr(cond)
    if not c.dtype.is_bool:
        raise TypeError(f"if_then_else condition must be bool, got {c.dtype} ({c})")
    tv, fv = _operands(true_value, false_value)
    tv, fv, t = _unify(tv, fv)
    return Select(c, tv, fv, t)


def maximum(a: ExprLike, b: ExprLike) -> Expr:
    """The larger of `a` and `b`, elementwise (dtypes promoted as for `+`)."""
    return binary(BinaryOp.MAX, a, b)


def minimum(a: ExprLike, b: ExprLike) -> Expr:
    """The smaller of `a` and `b`, elementwise (dtypes promoted as for `+`)."""
    return binary(BinaryOp.MIN, a, b)


def power(base: ExprLike, exponent: ExprLike) -> Expr:
    """`base ** exponent`. Integer powers by a small constant become multiplications; other
    integer powers go through float64 and back, like numpy for values that fit."""
    b, e = _operands(base, exponent)
    t = promote(b.dtype, e.dtype)
    if t.is_float:
        return Call(MathFunc.POW, (cast(b, t), cast(e, t)), t)
    if isinstance(e, Const) and 0 <= int(e.value) <= 16:
        result: Expr = const(1, t)
        for _ in range(int(e.value)):
            result = binary(BinaryOp.MUL, result, b)
        return result
    as_float = Call(MathFunc.POW, (cast(b, FLOAT64), cast(e, FLOAT64)), FLOAT64)
    return cast(as_float, t)
