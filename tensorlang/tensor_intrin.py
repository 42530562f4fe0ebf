"""Tensor intrinsics and extern stages: computations the schedule hands to hand-written code.

Part of the tensor layer of the data flow. `decl_tensor_intrin(op, lower_fn)` says what a
hardware instruction computes (a small `compute`) and how to emit it; `Stage.tensorize` checks
that the loops under an axis compute exactly that (`match_intrin` here) and the loop-nest builder
then calls `lower_fn` instead of building those loops. `extern(...)` makes a stage whose loop IR
is written by a function, usually a call of a C function (`tl.call_extern`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .arith import simplify
from .dtype import DType, as_dtype
from .expr import Const, Expr, IterVar, Node, Reduce, TensorRead, Var, const
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor, _shape
from .visitor import children, structural_equal, substitute


@dataclass(eq=False)
class TensorIntrin:
    """A declared intrinsic: the compute `op` it performs and `lower_fn(ins, outs)`, which gets
    one `TensorRegion` per input placeholder of `op` (in the order `op` reads them) and per
    output, and returns the loop IR that updates the output region (for a reduction, adding to
    what it holds: the stage initialises it), or a tuple (body, reset, update) as TVM's do, of
    which the update is used."""

    op: ComputeOp
    lower_fn: Callable
    name: str

    @property
    def inputs(self) -> list[Tensor]:
        """The placeholders the intrinsic reads, in order of first read."""
        return self.op.input_tensors


def decl_tensor_intrin(op: Operation | Tensor, lower_fn: Callable, name: str | None = None
                       ) -> TensorIntrin:
    """Declare a tensor intrinsic computing `op` (a compute over placeholders only), emitted by
    `lower_fn(ins, outs)` (see `TensorIntrin`).

    Raises:
        TypeError: `op` is not a compute, or reads something other than placeholders.
    """
    if isinstance(op, Tensor):
        op = op.op
    if not isinstance(op, ComputeOp):
        raise TypeError(f"decl_tensor_intrin: expected a compute, got {op!r}")
    for t in op.input_tensors:
        if not isinstance(t.op, PlaceholderOp):
            raise TypeError(f"decl_tensor_intrin: {op.name} reads {t.name}, which is not a "
                            "placeholder")
    if not callable(lower_fn):
        raise TypeError("decl_tensor_intrin: lower_fn must be callable")
    return TensorIntrin(op, lower_fn, name or op.name)


class IntrinMismatch(ValueError):
    """The computation under a tensorized axis differs from the intrinsic's (says where)."""


def match_intrin(body: Expr, axis_map: dict[Var, Expr], intrin: TensorIntrin
                 ) -> dict[Tensor, tuple[Tensor, tuple[Expr, ...]]]:
    """Check that `body` (a stage's body, in which each original axis variable under the
    tensorized loop stands for `axis_map`'s base + the intrinsic's axis variable) computes the
    intrinsic's body.

    Returns:
        For each placeholder of the intrinsic, the tensor of the stage it stands for and the
        indices of the stage's read of it (in the stage's axis variables): the region starts
        where they are with the loops inside at 0.

    Raises:
        IntrinMismatch: naming the first difference.
    """
    theirs = intrin.op.body[0]
    ranges = {iv.var: (0.0, float(const_extent(iv) or 1) - 1.0)
              for iv in (*intrin.op.axis, *intrin.op.reduce_axis)}
    matcher = _Matcher(axis_map, ranges)
    matcher.match(body, theirs, "body")
    return matcher.bound


class _Matcher:
    def __init__(self, axis_map: dict[Var, Expr], ranges: dict[Var, tuple[float, float]]):
        self.axis_map = axis_map
        self.ranges = ranges
        self.bound: dict[Tensor, tuple[Tensor, tuple[Expr, ...]]] = {}

    def match(self, ours: object, theirs: object, where: str) -> None:
        if isinstance(ours, TensorRead) and isinstance(theirs, TensorRead):
            self.match_read(ours, theirs, where)
            return
        if isinstance(ours, Var) and isinstance(theirs, Var):
            mapped = self.axis_map.get(ours, ours)
            if mapped is not theirs and not structural_equal(simplify(mapped), theirs):
                raise IntrinMismatch(f"{where}: variable {ours.name} where the intrinsic has "
                                     f"{theirs.name}")
            return
        if type(ours) is not type(theirs):
            raise IntrinMismatch(f"{where}: {_describe(ours)} where the intrinsic has "
                                 f"{_describe(theirs)}")
        if isinstance(ours, Reduce):
            assert isinstance(theirs, Reduce)
            if ours.combiner.name != theirs.combiner.name or not all(
                    structural_equal(a, b) for a, b in zip(ours.combiner.identity,
                                                           theirs.combiner.identity)):
                raise IntrinMismatch(f"{where}: reduction {ours.combiner.name} where the "
                                     f"intrinsic has {theirs.combiner.name}")
            for k, (a, b) in enumerate(zip(ours.source, theirs.source)):
                self.match(a, b, f"{where}: reduced value {k}")
            return
        if isinstance(ours, Node):
            for field in ("dtype", "op", "func", "value"):
                a, b = getattr(ours, field, None), getattr(theirs, field, None)
                if not isinstance(a, Node) and a != b:
                    raise IntrinMismatch(f"{where}: {_describe(ours)} where the intrinsic has "
                                         f"{_describe(theirs)}")
            for a, b in zip(children(ours), children(theirs)):  # type: ignore[arg-type]
                self.match(a, b, where)

    def match_read(self, ours: TensorRead, theirs: TensorRead, where: str) -> None:
        placeholder = theirs.tensor
        if ours.dtype != theirs.dtype:
            raise IntrinMismatch(f"{where}: {ours.tensor.name} is {ours.dtype} but the "
                                 f"intrinsic reads {placeholder.name} as {theirs.dtype}")
        if len(theirs.indices) > len(ours.indices):
            raise IntrinMismatch(f"{where}: {ours.tensor.name} has fewer dimensions than the "
                                 f"intrinsic's {placeholder.name}")
        zero = {v: const(0, v.dtype) for v in self.ranges}
        lead = len(ours.indices) - len(theirs.indices)
        for d, index in enumerate(ours.indices):
            moved = substitute(index, self.axis_map)
            start = simplify(substitute(moved, zero), self.ranges)
            offset = simplify(moved - start, self.ranges)
            expected = const(0) if d < lead else theirs.indices[d - lead]
            if not structural_equal(offset, simplify(expected, self.ranges)):
                raise IntrinMismatch(
                    f"{where}: {ours.tensor.name} index {d} moves by {offset} inside the "
                    f"tensorized loops where the intrinsic's {placeholder.name} moves by "
                    f"{expected}")
        previous = self.bound.get(placeholder)
        if previous is None:
            self.bound[placeholder] = (ours.tensor, ours.indices)
        elif previous[0] != ours.tensor:
            raise IntrinMismatch(f"{where}: the intrinsic reads {placeholder.name} where the "
                                 f"stage reads both {previous[0].name} and {ours.tensor.name}")


def _describe(node: object) -> str:
    if isinstance(node, Node):
        op = getattr(node, "op", None) or getattr(node, "func", None)
        kind = f"{type(node).__name__}{f' {op.value}' if op is not None else ''}"
        return f"{kind} ({node}, {getattr(node, 'dtype', '')})"
    return repr(node)


class ExternOp(Operation):
    """A stage whose loop IR `fcompute(ins, outs)` writes (regions of whole buffers)."""

    def __init__(self, name: str, tag: str, inputs: Sequence[Tensor],
                 shapes: Sequence[tuple[Expr, ...]], dtypes: Sequence[DType], fcompute: Callable):
        self.name = name
        self.tag = tag
        self.attrs: dict = {}
        self.inputs = list(inputs)
        self.fcompute = fcompute
        self.outputs = tuple(Tensor(self, k, s, t) for k, (s, t) in enumerate(zip(shapes, dtypes)))

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self.inputs)

    def __repr__(self) -> str:
        return f"ExternOp({self.name})"


def extern(shape: Sequence | Sequence[Sequence], inputs: Sequence[Tensor], fcompute: Callable,
           name: str = "extern", dtype: str | Sequence[str] | None = None, tag: str = ""
           ) -> Tensor | list[Tensor]:
    """A stage computed by `fcompute(ins, outs)`, which gets a `TensorRegion` per input and per
    output (whole tensors) and returns loop IR, typically `tl.call_extern(...)` of a C function
    that fills the outputs (a call expression is wrapped in an `Evaluate` statement).

    `shape` is one shape or a list of shapes (one output each); `dtype` defaults to the first
    input's.
    """
    several = bool(shape) and isinstance(shape[0], (list, tuple))
    shapes = [_shape(s, f"extern {name!r}") for s in (shape if several else [shape])]
    if dtype is None:
        if not inputs:
            raise ValueError(f"extern {name!r}: give dtype= when there are no inputs")
        dtype = inputs[0].dtype
    dtypes = [as_dtype(d) for d in (dtype if isinstance(dtype, (list, tuple)) else
                                    [dtype] * len(shapes))]
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"extern {name!r}: inputs must be tensors, got {t!r}")
    op = ExternOp(name, tag, inputs, shapes, dtypes, fcompute)
    return op.outputs[0] if len(shapes) == 1 else list(op.outputs)


def const_extent(iv: IterVar) -> int | None:
    """The constant extent of an axis, or None."""
    extent = iv.dom.extent if iv.dom is not None else None
    return int(extent.value) if isinstance(extent, Const) else None
