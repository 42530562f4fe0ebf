"""Compute-DAG analysis: what the sketch rules need to know about each stage.

Part of auto-scheduling, before sketch generation. For each compute of a workload it answers:
is it elementwise, a padding (a select over index bounds), a reduction, does it reuse data (an
input read that does not depend on every spatial axis, as GEMM's `A[i, k]` misses `j`: worth
multi-level tiling), which of its loops reads memory contiguously, and who reads it.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorlang.arith import const_value
from tensorlang.expr import Call, Expr, IterVar, Select, TensorRead, Var
from tensorlang.schedule import Schedule, Stage
from tensorlang.tensor import ComputeOp, Operation, Tensor
from tensorlang.visitor import contains, free_vars, nodes_below


def reads(op: ComputeOp) -> list[TensorRead]:
    """Every tensor read in the body of `op`, in order."""
    out: list[TensorRead] = []
    for body in op.body:
        out += [n for n in nodes_below(body, left_to_right=True) if isinstance(n, TensorRead)]
    return out


def _index_vars(read: TensorRead) -> set[Var]:
    found: set[Var] = set()
    for index in read.indices:
        found |= free_vars(index)
    return found


def is_elementwise(op: Operation) -> bool:
    """A compute without reduction (elementwise, broadcast or any injective index map)."""
    return isinstance(op, ComputeOp) and not op.reduce_axis


def is_padding(op: Operation) -> bool:
    """An injective compute whose body selects between an input read and a constant, the way a
    padded input is written (`if_then_else(in bounds, X[...], 0)`)."""
    return is_elementwise(op) and any(contains(b, Select) for b in op.body) and bool(
        op.input_tensors)  # type: ignore[union-attr]


def calls_math(expr: Expr) -> bool:
    """Whether `expr` calls a math function (exp, log, tanh, ...), dear to compute twice."""
    return contains(expr, Call)


def has_data_reuse(op: Operation) -> bool:
    """A reduction with an input read that misses some spatial axis (so one loaded value serves
    several outputs): the stages worth multi-level tiling (GEMM, convolution, batched products)."""
    if not isinstance(op, ComputeOp) or not op.reduce_axis:
        return False
    spatial = {iv.var for iv in op.axis if const_value(iv.dom.extent) != 1}
    return any(not spatial <= _index_vars(r) for r in reads(op))


def last_index_uses(op: ComputeOp, iv: IterVar) -> bool:
    """Whether some read of `op` indexes its last dimension with `iv` (so consecutive `iv`
    touch consecutive memory) and no read indexes another dimension with it."""
    found = False
    for r in reads(op):
        if not r.indices:
            continue
        if iv.var in free_vars(r.indices[-1]):
            found = True
        if any(iv.var in free_vars(i) for i in r.indices[:-1]):
            return False
    return found


def lane_dims(op: ComputeOp, iv: IterVar) -> dict[Tensor, int] | None:
    """For each tensor that `op` reads with `iv`, the one dimension it indexes with `iv` alone
    (a convolution's `W[k, c, ry, rx]`: 0 for `k`); None when some read indexes with `iv`
    inside arithmetic (`P[c, y + ry, ...]` for `y`), in two dimensions, or a tensor at two."""
    found: dict[Tensor, int] = {}
    for r in reads(op):
        dims = [k for k, i in enumerate(r.indices) if iv.var in free_vars(i)]
        if not dims:
            continue
        if len(dims) != 1:
            return None
        index = r.indices[dims[0]]
        if not (isinstance(index, (Var, IterVar)) and (index is iv.var or index is iv)) or \
                found.setdefault(r.tensor, dims[0]) != dims[0]:
            return None
    return found


def static_extent(iv: IterVar) -> int | None:
    """The extent of an axis when it is a constant, else None."""
    return const_value(iv.dom.extent)


def spatial_points(op: ComputeOp) -> int | None:
    """The number of output points of `op` (None when symbolic)."""
    total = 1
    for iv in op.axis:
        e = static_extent(iv)
        if e is None:
            return None
        total *= e
    return total


def readers(schedule: Schedule, stage: Stage) -> list[Stage]:
    """The stages that read `stage`'s output directly."""
    def made_by(t: Tensor) -> bool:
        try:
            return schedule[t.op] is stage  # also the tensors of ops a cache_write replaced
        except ValueError:
            return False

    return [s for s in schedule.stages
            if not s.is_placeholder and any(made_by(t) for t in s.op.input_tensors)]


def effective_readers(schedule: Schedule, stage: Stage) -> list[Stage]:
    """The stages that read `stage`'s output, looking through inlined stages."""
    out: list[Stage] = []
    for r in readers(schedule, stage):
        if r.attach.value == "inline":
            out += [x for x in effective_readers(schedule, r) if x not in out]
        elif r not in out:
            out.append(r)
    return out


def read_index(op: ComputeOp, tensor: Tensor) -> tuple[Expr, ...] | None:
    """The index of the first read of `tensor` in `op`'s body (None when it reads none)."""
    for r in reads(op):
        if r.tensor == tensor:
            return r.indices
    return None


def outputs_of(tensors: Sequence[Tensor]) -> list[Tensor]:
    """The computed tensors of a workload's list (inputs first, outputs last)."""
    return [t for t in tensors if isinstance(t.op, ComputeOp)]
