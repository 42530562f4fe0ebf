"""Tensors and the operations that produce them: placeholder, compute, reduce_axis, reducers.

The third layer of the data flow: a `compute` turns a Python lambda over index variables into a
`ComputeOp` whose body is an expression DAG that reads other tensors. Nothing is evaluated here;
the schedule says how to loop over it and lowering turns it into loops.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Union

from .arith import const_value
from .dtype import BOOL, INT32, DType, as_dtype
from .expr import (
    BinaryOp,
    CommReducer,
    Const,
    Expr,
    ExprLike,
    IterKind,
    IterVar,
    Range,
    Reduce,
    TensorRead,
    Var,
    as_expr,
    binary,
    cast,
    const,
)
from .reduction_stages import split_reductions
from .visitor import post_order_visit

ShapeLike = Sequence[Union[int, Expr, IterVar]]


class Operation:
    """Something that produces tensors. Identity-hashed: one object per op."""

    name: str

    @property
    def num_outputs(self) -> int:
        """How many tensors the operation produces."""
        return 1

    def output(self, index: int = 0) -> Tensor:
        """The output tensor number `index`."""
        return self.outputs[index]

    outputs: tuple[Tensor, ...]

    @property
    def input_tensors(self) -> list[Tensor]:
        """The tensors this operation reads (none for a placeholder)."""
        return []


class PlaceholderOp(Operation):
    """An input tensor: data that the caller passes in."""

    def __init__(self, name: str, shape: tuple[Expr, ...], dtype: DType):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.outputs = (Tensor(self, 0, shape, dtype),)

    def __repr__(self) -> str:
        return f"PlaceholderOp({self.name})"


class ComputeOp(Operation):
    """A tensor defined pointwise: `body[k]` gives output k at the point `axis`."""

    def __init__(
        self,
        name: str,
        tag: str,
        attrs: dict,
        axis: tuple[IterVar, ...],
        body: tuple[Expr, ...],
    ):
        self.name = name
        self.tag = tag
        self.attrs = dict(attrs)
        self.axis = axis
        self.body = body
        first = body[0]
        self.reduce_axis: tuple[IterVar, ...] = first.axis if isinstance(first, Reduce) else ()
        shape = tuple(iv.dom.extent for iv in axis)
        self.outputs = tuple(Tensor(self, k, shape, b.dtype) for k, b in enumerate(body))

    @property
    def num_outputs(self) -> int:
        """How many tensors the compute produces (one per body expression)."""
        return len(self.body)

    @property
    def input_tensors(self) -> list[Tensor]:
        found: dict[int, Tensor] = {}

        def collect(node: object) -> None:
            if isinstance(node, TensorRead):
                found.setdefault(id(node.tensor), node.tensor)

        for b in self.body:
            post_order_visit(b, collect)
        return list(found.values())

    def __repr__(self) -> str:
        return f"ComputeOp({self.name})"


@dataclass(eq=False)
class Tensor:
    """Output `value_index` of `op`. Index it with expressions to read it inside a compute."""

    op: Operation
    value_index: int
    shape: tuple[Expr, ...]
    dtype_: DType = field(repr=False)

    @property
    def dtype(self) -> str:
        """The element type, as a string such as "float32"."""
        return str(self.dtype_)

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def name(self) -> str:
        """The operation's name (with `.vN` for output N of a multi-output compute)."""
        if self.op.num_outputs == 1:
            return self.op.name
        return f"{self.op.name}.v{self.value_index}"

    def __getitem__(self, indices: ExprLike | tuple[ExprLike, ...]) -> TensorRead:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise IndexError(
                f"tensor {self.name} has {self.ndim} dimensions but was indexed with {len(indices)}"
            )
        exprs = []
        for position, index in enumerate(indices):
            if isinstance(index, slice):
                raise TypeError(f"tensor {self.name}: slices are not supported in index {position}")
            e = as_expr(index)
            if not e.dtype.is_integer or e.dtype.lanes != 1:
                raise TypeError(
                    f"tensor {self.name}: index {position} must be a scalar integer, got {e.dtype}"
                )
            exprs.append(e)
        return TensorRead(self, tuple(exprs), self.dtype_)

    def __repr__(self) -> str:
        shape = ", ".join(str(s) for s in self.shape)
        return f"Tensor({self.name}, ({shape}), {self.dtype})"

    def __hash__(self) -> int:
        return hash((id(self.op), self.value_index))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Tensor)
            and other.op is self.op
            and other.value_index == self.value_index
        )


def var(name: str = "v", dtype: str | DType = "int32") -> Var:
    """A symbolic scalar, typically a dynamic dimension bound from argument shapes at call time."""
    t = as_dtype(dtype)
    if not t.is_integer:
        raise TypeError(f"tl.var {name!r}: symbolic dimensions are integers, got {t}")
    return Var(name, t)


def get_const_tuple(shape: ShapeLike) -> tuple[int | Expr, ...]:
    """A shape as a tuple of Python ints, as TVM's `get_const_tuple`: every entry whose value is
    known (a constant, or an expression that simplifies to one) becomes an int; a symbolic entry
    (`tl.var`) stays the expression it is, since its value is known only at call time.

    Raises:
        TypeError: an entry is neither an int nor an integer expression.
    """
    out: list[int | Expr] = []
    for position, dim in enumerate(shape):
        if isinstance(dim, IterVar):
            dim = dim.var
        if isinstance(dim, bool) or not isinstance(dim, (int, Expr)):
            raise TypeError(f"get_const_tuple: entry {position} is {dim!r}, not an int or an "
                            "integer expression")
        if isinstance(dim, Expr) and not dim.dtype.is_integer:
            raise TypeError(f"get_const_tuple: entry {position} ({dim}) is {dim.dtype}")
        value = dim if isinstance(dim, int) else const_value(dim)
        out.append(dim if value is None else int(value))
    return tuple(out)


def _shape(shape: ShapeLike | int | Expr, what: str) -> tuple[Expr, ...]:
    if isinstance(shape, (int, Expr, IterVar)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"{what}: shape must be a tuple, got {type(shape).__name__}")
    dims = []
    for position, dim in enumerate(shape):
        if isinstance(dim, bool):
            raise TypeError(f"{what}: dimension {position} is a bool")
        if hasattr(dim, "__index__") and not isinstance(dim, (Expr, IterVar)):
            dim = int(dim)
        if isinstance(dim, int):
            if dim < 0:
                raise ValueError(f"{what}: dimension {position} is negative ({dim})")
            dims.append(const(dim, INT32))
            continue
        e = as_expr(dim)
        if not e.dtype.is_integer:
            raise TypeError(f"{what}: dimension {position} must be an integer, got {e.dtype}")
        dims.append(e)
    return tuple(dims)


def placeholder(shape: ShapeLike, dtype: str | DType = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of `shape` (ints or symbolic `tl.var`s) and `dtype`."""
    return PlaceholderOp(name, _shape(shape, f"placeholder {name!r}"), as_dtype(dtype)).outputs[0]


def _axis_names(fcompute: Callable, ndim: int) -> list[str]:
    try:
        params = [
            p
            for p in inspect.signature(fcompute).parameters.values()
            if p.default is inspect.Parameter.empty  # defaulted ones are captures, not indices
        ]
    except (TypeError, ValueError):
        params = []
    if len(params) == 1 and params[0].kind is inspect.Parameter.VAR_POSITIONAL:
        return [f"i{k}" for k in range(ndim)]
    if len(params) != ndim:
        raise TypeError(
            f"compute: the lambda takes {len(params)} index arguments but the shape has {ndim} "
            "dimensions"
        )
    return [p.name for p in params]


def compute(
    shape: ShapeLike,
    fcompute: Callable[..., ExprLike | tuple[ExprLike, ...]],
    name: str = "compute",
    tag: str = "",
    attrs: dict | None = None,
) -> Tensor | list[Tensor]:
    """A tensor whose element at index (i, j, ...) is `fcompute(i, j, ...)`.

    `fcompute` may return a tuple for several outputs of the same shape (returned as a list).
    A reduction (`tl.sum`, ...) inside a larger expression (`tl.sum(X[i, k], axis=k) / n`)
    becomes a stage of its own, named `<name>.red0`, `<name>.red1`, ... (inner reductions
    first), which the compute reads: find it in `C.op.input_tensors` and schedule it like any
    stage.

    Raises:
        ValueError: the lambda returns nothing, or uses a reduction axis outside its reduction.
    """
    dims = _shape(shape, f"compute {name!r}")
    names = _axis_names(fcompute, len(dims))
    axis = tuple(
        IterVar(Var(n, INT32), Range(const(0, INT32), d), IterKind.DATA_PAR)
        for n, d in zip(names, dims)
    )
    result = fcompute(*axis)
    values = result if isinstance(result, (tuple, list)) else (result,)
    body = tuple(as_expr(v) for v in values)
    if not body:
        raise ValueError(f"compute {name!r}: the lambda returned no value")
    body = split_reductions(name, axis, body, _reduction_stage)
    op = ComputeOp(name, tag, attrs or {}, axis, body)
    return op.outputs[0] if len(body) == 1 else list(op.outputs)


def _reduction_stage(name: str, axis: tuple[IterVar, ...], body: tuple[Expr, ...]
                     ) -> tuple[Tensor, ...]:
    """The stage of a reduction that stood inside an expression (see reduction_stages)."""
    return ComputeOp(name, "", {}, axis, body).outputs


def reduce_axis(dom: tuple[ExprLike, ExprLike] | Range, name: str = "rv") -> IterVar:
    """A reduction axis over the half-open range `dom` = (begin, end)."""
    if isinstance(dom, Range):
        rng = dom
    else:
        if not isinstance(dom, (tuple, list)) or len(dom) != 2:
            raise TypeError(f"reduce_axis {name!r}: dom must be a (begin, end) pair, got {dom!r}")
        rng = Range.from_bounds(dom[0], dom[1])
    return IterVar(Var(name, INT32), rng, IterKind.REDUCE)


def _axes(axis: IterVar | Sequence[IterVar], what: str) -> tuple[IterVar, ...]:
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
    if not axes:
        raise ValueError(f"{what}: needs at least one reduction axis")
    for a in axes:
        if not isinstance(a, IterVar) or a.kind is not IterKind.REDUCE:
            raise TypeError(f"{what}: axis {a!r} is not a reduce_axis")
    return axes


def comm_reducer(
    fcombine: Callable[..., ExprLike | Sequence[ExprLike]],
    fidentity: Callable[..., ExprLike | Sequence[ExprLike]],
    name: str = "reduce",
) -> Callable[..., Expr | tuple[Expr, ...]]:
    """Make a reducer like `tl.sum` from a commutative, associative `fcombine(x, y)` and its
    identity element `fidentity(dtype)`.

    The returned function is called as `reducer(expr, axis, where=None)`. Given a tuple of
    expressions instead of one, it reduces them together (TVM's multi-output reductions, e.g.
    argmax over (index, value) pairs): `fcombine(x, y)` then receives two tuples and returns a
    tuple, `fidentity(*dtypes)` returns a tuple, and the reducer returns one reduction per element,
    which a `compute` lambda returns as a tuple to get one output tensor each.

    Raises:
        ValueError: fcombine or fidentity return a different number of values than the sources.
    """

    def reducer(expr: ExprLike | Sequence[ExprLike], axis: IterVar | Sequence[IterVar],
                where: ExprLike | None = None) -> Expr | tuple[Expr, ...]:
        several = isinstance(expr, (tuple, list))
        items = tuple(expr) if several else (expr,)  # type: ignore[arg-type]
        sources = tuple(as_expr(e) for e in items)
        types = tuple(source.dtype for source in sources)
        axes = _axes(axis, name)
        lhs = tuple(Var(f"x{k}", t) for k, t in enumerate(types))
        rhs = tuple(Var(f"y{k}", t) for k, t in enumerate(types))
        if several:
            combined = _as_tuple(fcombine(lhs, rhs), len(types), f"{name}: fcombine")
            identity = _as_tuple(fidentity(*map(str, types)), len(types), f"{name}: fidentity")
        else:
            combined, identity = (fcombine(lhs[0], rhs[0]),), (fidentity(str(types[0])),)
        combined = tuple(cast(as_expr(c, t), t) for c, t in zip(combined, types))
        identity = tuple(cast(as_expr(i, t), t) for i, t in zip(identity, types))
        condition = const(True, BOOL) if where is None else as_expr(where)
        if not condition.dtype.is_bool:
            raise TypeError(f"{name}: where= must be a bool expression, got {condition.dtype}")
        combiner = CommReducer(lhs, rhs, combined, identity, name)
        reduces = tuple(Reduce(combiner, sources, axes, condition, k, t)
                        for k, t in enumerate(types))
        return reduces if several else reduces[0]

    reducer.__name__ = name
    return reducer


def _as_tuple(values: object, count: int, what: str) -> tuple:
    if not isinstance(values, (tuple, list)) or len(values) != count:
        raise ValueError(f"{what} must return a tuple of {count} values (one per reduced "
                         f"expression), got {values!r}")
    return tuple(values)


def _lowest(dtype: str) -> Const:
    t = as_dtype(dtype)
    return const(t.min_value(), t)


def _highest(dtype: str) -> Const:
    t = as_dtype(dtype)
    return const(t.max_value(), t)


def _sum_source(expr: ExprLike) -> Expr:
    source = as_expr(expr)
    if source.dtype.is_bool:
        return cast(source, "int64")  # numpy sums bools as integers
    return source


_sum = comm_reducer(lambda x, y: binary(BinaryOp.ADD, x, y), lambda t: const(0, t), "sum")
_max = comm_reducer(lambda x, y: binary(BinaryOp.MAX, x, y), _lowest, "max")
_min = comm_reducer(lambda x, y: binary(BinaryOp.MIN, x, y), _highest, "min")


def sum(expr: ExprLike, axis: IterVar | Sequence[IterVar], where: ExprLike | None = None) -> Expr:  # noqa: A001
    """Sum of `expr` over `axis` (an IterVar or a list), counting only where `where` holds."""
    return _sum(_sum_source(expr), axis, where)


def max(expr: ExprLike, axis: IterVar | Sequence[IterVar], where: ExprLike | None = None) -> Expr:  # noqa: A001
    """Maximum of `expr` over `axis`; the identity is the dtype's lowest value (-inf for floats)."""
    return _max(expr, axis, where)


def min(expr: ExprLike, axis: IterVar | Sequence[IterVar], where: ExprLike | None = None) -> Expr:  # noqa: A001
    """Minimum of `expr` over `axis`; the identity is the dtype's highest value (inf for floats)."""
    return _min(expr, axis, where)
