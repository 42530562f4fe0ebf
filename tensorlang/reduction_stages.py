"""Reductions inside expressions: each becomes a stage of its own, read by the expression.

Part of the second layer of the data flow (`compute`). Lowering computes a reduction as the
whole body of a stage (an init, then an update inside the reduction loops), so a body such as
`tl.sum(X[i, k], axis=k) / D` is split the way Halide splits its inline reductions: the
reduction moves into a new compute, named `<compute>.red<N>` (N counts the compute's
reductions from 0, inner ones first), and the expression reads that tensor at its own point.

The new stage's axes are those of the enclosing compute that the reduction uses, in their
order, followed by the axes of enclosing reductions it uses (a reduction nested in the source
of another one, which it depends on); its reduction axes are its own. A mean over `k` inside
`C[i, j]` is thus computed once per `i`, not once per `(i, j)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .arith import const_value
from .dtype import INT32
from .expr import (
    BinaryOp,
    Expr,
    IterKind,
    IterVar,
    Range,
    Reduce,
    TensorRead,
    Var,
    binary,
    const,
)
from .visitor import Mutator, free_vars, nodes_below, substitute

MakeStage = Callable[[str, tuple[IterVar, ...], tuple[Expr, ...]], Sequence]
"""Builds a compute from (name, data axes, body) and returns its output tensors."""


def is_whole_reduction(body: Sequence[Expr]) -> bool:
    """Whether `body` is what a reduction stage computes: every output a reduction, all of
    them from one reducer call (one combiner), as `tl.sum(...)` or an argmax's tuple."""
    first = body[0]
    return isinstance(first, Reduce) and all(
        isinstance(b, Reduce) and b.combiner is first.combiner for b in body)


def split_reductions(name: str, axis: Sequence[IterVar], body: tuple[Expr, ...],
                     make_stage: MakeStage) -> tuple[Expr, ...]:
    """`body` with every reduction that is not the whole body moved into its own stage.

    When the body is a whole reduction, it stays, and only the reductions nested in its
    sources and condition move out.

    Raises:
        ValueError: a reduction axis is used outside the reduction over it, or a nested
            reduction depends on an enclosing reduction axis whose range is not constant.
    """
    reductions = [n for b in body for n in nodes_below(b) if isinstance(n, Reduce)]
    if not reductions:
        return body
    reduce_axes = {iv.var for r in reductions for iv in r.axis}
    splitter = _Splitter(name, tuple(axis), reduce_axes, make_stage)
    if is_whole_reduction(body):
        new_body = tuple(splitter.inside(b) for b in body)
    else:
        new_body = tuple(splitter.visit(b) for b in body)
    splitter.check_outside(new_body)
    return new_body


class _Splitter(Mutator):
    """Replaces each reduction by a read of its stage (reductions below it first)."""

    def __init__(self, name: str, axis: tuple[IterVar, ...], reduce_axes: set[Var],
                 make_stage: MakeStage):
        self.name = name
        self.axis = axis
        self.reduce_axes = reduce_axes  # the variables of every reduction axis in the body
        self.make_stage = make_stage
        self.enclosing: list[IterVar] = []  # reduction axes around the node being visited
        self.stages: dict[tuple, Sequence] = {}  # one stage per reducer call

    def inside(self, node: Reduce) -> Reduce:
        """`node` with the reductions in its sources and condition moved out."""
        self.enclosing += node.axis
        try:
            sources = tuple(self.visit(s) for s in node.source)
            condition = self.visit(node.condition)
        finally:
            del self.enclosing[len(self.enclosing) - len(node.axis):]
        if all(a is b for a, b in zip(sources, node.source)) and condition is node.condition:
            return node
        return Reduce(node.combiner, sources, node.axis, condition, node.value_index,
                      node.dtype)

    def visit_Reduce(self, node: Reduce) -> Expr:
        key = (id(node.combiner), tuple(map(id, node.source)), tuple(map(id, node.axis)),
               id(node.condition))
        if key not in self.stages:
            self.stages[key] = self._stage_of(node)
        outputs, indices = self.stages[key]
        return TensorRead(outputs[node.value_index], indices, node.dtype)

    def _stage_of(self, node: Reduce) -> tuple[Sequence, tuple[Expr, ...]]:
        """The stage computing `node` (every value of its reducer call) and the index at which
        the enclosing expression reads it."""
        reduce = self.inside(node)
        own = {iv.var for iv in reduce.axis}
        used = set().union(*(free_vars(e) for e in (*reduce.source, reduce.condition)),
                           *(free_vars(iv.dom) for iv in reduce.axis)) - own
        data = [iv for iv in self.axis if iv.var in used]
        data += [iv for iv in self.enclosing if iv.var in used]
        self._check_unbound(used - {iv.var for iv in data})
        fresh: list[IterVar] = []
        mapping: dict[Var, Expr] = {}
        indices: list[Expr] = []
        for iv in data:
            start, extent = self._constant_range(iv)
            new = IterVar(Var(iv.name, iv.var.dtype), Range(const(0, INT32), extent),
                          IterKind.DATA_PAR)
            fresh.append(new)
            at_zero = const_value(start) == 0
            mapping[iv.var] = new.var if at_zero else binary(BinaryOp.ADD, new.var, start)
            indices.append(iv.var if at_zero else binary(BinaryOp.SUB, iv.var, start))
        count = len(reduce.combiner.identity)
        values = tuple(
            substitute(Reduce(reduce.combiner, reduce.source, reduce.axis, reduce.condition, k,
                              reduce.combiner.identity[k].dtype), mapping)
            for k in range(count))
        stage_name = f"{self.name}.red{len(self.stages)}"
        return self.make_stage(stage_name, tuple(fresh), values), tuple(indices)

    def _constant_range(self, iv: IterVar) -> tuple[Expr, Expr]:
        """The (start, extent) of an axis the new stage iterates over as a data axis, which
        must not depend on another axis (symbolic sizes are fine)."""
        dom = iv.dom
        assert dom is not None
        axis_vars = self.reduce_axes | {a.var for a in self.axis}
        if (free_vars(dom.min) | free_vars(dom.extent)) & axis_vars:
            raise ValueError(
                f"compute {self.name!r}: a reduction inside the reduction over {iv.name} uses "
                f"{iv.name}, whose range {dom} depends on other axes; compute the inner "
                "reduction in a stage of its own")
        return dom.min, dom.extent

    def check_outside(self, body: tuple[Expr, ...]) -> None:
        """Raise when the expression left around the reductions uses one of their axes."""
        for b in body:
            roots = b.source + (b.condition,) if isinstance(b, Reduce) else (b,)
            allowed = {iv.var for iv in b.axis} if isinstance(b, Reduce) else set()
            for root in roots:
                self._check_unbound(free_vars(root) - allowed)

    def _check_unbound(self, variables: set[Var]) -> None:
        unbound = sorted(v.name for v in variables & self.reduce_axes)
        if unbound:
            raise ValueError(f"compute {self.name!r}: reduction axis {unbound[0]} is used "
                             "outside the reduction over it")
