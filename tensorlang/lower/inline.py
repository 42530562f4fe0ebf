"""compute_inline: substitute inlined stages' expressions into the stages that read them.

Part of the loop-nest builder's input preparation. The result maps every stage to its body with
reads of inlined tensors replaced by their defining expressions, so inlined stages get no loops
and no memory.
"""

from __future__ import annotations

from ..expr import Expr, TensorRead, cast
from ..schedule import AttachKind, Schedule, Stage
from ..tensor import ComputeOp
from ..visitor import Mutator, substitute


class _Inliner(Mutator):
    def __init__(self, schedule: Schedule, bodies: dict[Stage, tuple[Expr, ...]]):
        self.schedule = schedule
        self.bodies = bodies

    def visit_TensorRead(self, node: TensorRead) -> Expr:
        indices = tuple(self.visit(i) for i in node.indices)
        stage = self.schedule[node.tensor.op]
        if stage.attach is AttachKind.INLINE:
            op = stage.op
            assert isinstance(op, ComputeOp)
            body = self.bodies[stage][node.tensor.value_index]
            # An index of another integer type (a gather's int64 position) takes the type of
            # the variable it replaces, which the inlined body's arithmetic and bounds are in.
            return substitute(body, {iv.var: cast(i, iv.var.dtype)
                                     for iv, i in zip(op.axis, indices)})
        if all(a is b for a, b in zip(indices, node.indices)):
            return node
        return TensorRead(node.tensor, indices, node.dtype)


def inline_bodies(schedule: Schedule) -> dict[Stage, tuple[Expr, ...]]:
    """Every compute stage's body with inlined producers substituted (producers first)."""
    bodies: dict[Stage, tuple[Expr, ...]] = {}
    inliner = _Inliner(schedule, bodies)
    for stage in schedule.stages:
        if isinstance(stage.op, ComputeOp):
            bodies[stage] = tuple(inliner.visit(b) for b in stage.op.body)
    return bodies
