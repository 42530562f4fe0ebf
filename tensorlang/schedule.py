"""Schedules: how to loop over each compute. Every primitive is a recorded, frozen step.

The fourth layer of the data flow. A `Schedule` holds one `Stage` per operation. A stage starts
with one loop per axis of its op; split/fuse add loop variables related to the originals
(`Split`/`Fuse` relations), reorder permutes the loop order, annotations mark loops to vectorize,
parallelise or unroll, and attachment (compute_at/inline/root) says where the stage's loop nest is
placed. Only the loop-nest builder in `lower/` reads these fields. Illegal requests raise
`ScheduleError` immediately, naming the axis and the stage.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Union

from .expr import (
    BinaryOp,
    CompareOp,
    Const,
    Expr,
    IterKind,
    IterVar,
    Node,
    Range,
    Reduce,
    Select,
    TensorRead,
    Var,
    binary,
    compare,
    const,
)
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor, compute
from .tensor_intrin import IntrinMismatch, TensorIntrin, match_intrin
from .arith import simplify
from .visitor import Mutator, free_vars, structural_equal, substitute


class ScheduleError(ValueError):
    """An illegal schedule request (raised at the call that makes it, or by `lower` when only the
    lowered loops show it, e.g. an unroll of an extent with no constant bound)."""


MAX_UNROLL_COPIES = 1 << 16
"""An unroll into more copies than this is almost surely a mistake (and minutes of LLVM time)."""

PRAGMA_KEYS = {
    "auto_unroll_max_step": "unroll every loop inside whose copies hold at most this many "
                            "statements in all (an int >= 0)",
    "unroll_explicit": "True: unroll by copying the loop body; False: ask LLVM to unroll (a bool)",
    "scalar_loop": "True: the loop stays a loop: neither auto_unroll_max_step nor LLVM unrolls "
                   "it, nor does LLVM vectorize it (a bool)",
}
"""The loop pragmas `Stage.pragma` implements (TVM's names), with what each does."""


class LoopAnnotation(enum.Enum):
    """How a loop of a stage should run."""

    VECTORIZE = "vectorize"
    PARALLEL = "parallel"
    UNROLL = "unroll"


class AttachKind(enum.Enum):
    """Where a stage's loop nest goes."""

    ROOT = "root"
    INLINE = "inline"
    SCOPE = "compute_at"


@dataclass(frozen=True)
class Split:
    """parent = outer * inner_extent + inner (the inner extent is `factor`, or derived from
    `nparts`); points past the parent's extent are guarded."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: Expr | None
    nparts: Expr | None


@dataclass(frozen=True)
class Fuse:
    """fused = outer * extent(inner) + inner."""

    outer: IterVar
    inner: IterVar
    fused: IterVar


Relation = Union[Split, Fuse]


@dataclass(frozen=True)
class Tensorized:
    """A stage's loops from `axis` inwards (`inside`) replaced by `intrin`: `reads` maps each
    placeholder of the intrinsic to the stage's tensor and region base it stands for, and
    `axis_map` each original axis variable under `axis` to base + the intrinsic's variable."""

    axis: IterVar
    intrin: TensorIntrin
    inside: tuple[IterVar, ...]
    reads: dict
    axis_map: dict


@dataclass(frozen=True)
class Step:
    """One primitive as the user called it; `str(stage)` lists these."""

    primitive: str
    arguments: str

    def __str__(self) -> str:
        return f"{self.primitive}({self.arguments})"


def _ceildiv(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return const(-(-int(a.value) // int(b.value)), a.dtype)
    return binary(BinaryOp.FLOORDIV, binary(BinaryOp.ADD, a, binary(BinaryOp.SUB, b, 1)), b)


def _mul(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return const(int(a.value) * int(b.value), a.dtype)
    return binary(BinaryOp.MUL, a, b)


def _new_iter_var(name: str, extent: Expr, kind: IterKind) -> IterVar:
    return IterVar(Var(name), Range(const(0), extent), kind)


def _copy_iter_var(iv: IterVar) -> IterVar:
    """The same axis with its own variable, for a new stage that iterates like `iv`'s."""
    return IterVar(Var(iv.name, iv.var.dtype), iv.dom, iv.kind)


def _positive_factor(value: object, what: str, stage: Stage) -> Expr:
    if isinstance(value, bool) or not isinstance(value, (int, Expr)) and not hasattr(value, "__index__"):
        raise TypeError(f"stage {stage.name}: split {what} must be an int, got {value!r}")
    if isinstance(value, Expr):
        if not value.dtype.is_integer:
            raise TypeError(f"stage {stage.name}: split {what} must be an integer, got {value.dtype}")
        if isinstance(value, Const) and int(value.value) < 1:
            raise ScheduleError(f"stage {stage.name}: split {what} must be >= 1, got {value.value}")
        return value
    if int(value) < 1:
        raise ScheduleError(f"stage {stage.name}: split {what} must be >= 1, got {value}")
    return const(int(value))


class Stage:
    """The schedule of one operation: its loops, their order and kinds, and where it is placed."""

    def __init__(self, op: Operation, schedule: Schedule):
        self.schedule = schedule
        self.origin_op = op
        self.op = op
        self.relations: list[Relation] = []
        self.annotations: dict[IterVar, LoopAnnotation] = {}
        self.pragmas: dict[IterVar, list[tuple[str, object]]] = {}
        self.attach = AttachKind.ROOT
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.scope = "global"
        self.is_output = False
        self.steps: list[Step] = []
        self.tensorized: Tensorized | None = None
        self._reset_axes()

    def _reset_axes(self) -> None:
        if isinstance(self.op, ComputeOp):
            self.all_iter_vars: list[IterVar] = [*self.op.axis, *self.op.reduce_axis]
        else:
            self.all_iter_vars = []
        self.leaf_iter_vars: list[IterVar] = list(self.all_iter_vars)

    @property
    def name(self) -> str:
        """The name of the stage's operation."""
        return self.op.name

    @property
    def is_placeholder(self) -> bool:
        """Whether the stage is an input (it has no loops to schedule)."""
        return isinstance(self.op, PlaceholderOp)

    # -- checks -------------------------------------------------------------------------------

    def _require_compute(self, primitive: str) -> None:
        if not isinstance(self.op, ComputeOp):
            raise ScheduleError(f"{primitive}: stage {self.name} is a placeholder and has no loops")

    def _require_leaf(self, axis: object, primitive: str) -> IterVar:
        if not isinstance(axis, IterVar):
            raise TypeError(f"{primitive} on stage {self.name}: expected an axis, got {axis!r}")
        if not any(axis is leaf for leaf in self.leaf_iter_vars):
            if any(axis is iv for iv in self.all_iter_vars):
                raise ScheduleError(
                    f"{primitive}: axis {axis.name} of stage {self.name} has already been split or "
                    "fused; use the axes that primitive returned"
                )
            raise ScheduleError(f"{primitive}: axis {axis.name} is not an axis of stage {self.name}")
        return axis

    def _require_plain(self, axis: IterVar, primitive: str) -> None:
        """Loops are annotated after they are made: an annotation would not survive the split or
        fuse of its axis, so that is refused rather than dropped."""
        marks = [m.value for m in (self.annotations.get(axis),) if m] + [
            f"pragma {k}" for k, _ in self.pragmas.get(axis, ())]
        if marks:
            raise ScheduleError(f"{primitive}: axis {axis.name} of stage {self.name} is already "
                                f"marked {', '.join(marks)}; {primitive} first, then mark the "
                                "axes it returns")

    def _leaf_index(self, axis: IterVar) -> int:
        return next(k for k, leaf in enumerate(self.leaf_iter_vars) if leaf is axis)

    def _record(self, primitive: str, arguments: str) -> None:
        self.steps.append(Step(primitive, arguments))

    # -- loop structure -----------------------------------------------------------------------

    def split(
        self, parent: IterVar, factor: int | Expr | None = None, nparts: int | Expr | None = None
    ) -> tuple[IterVar, IterVar]:
        """Split `parent` into (outer, inner) with inner extent `factor`, or `nparts` outer
        iterations. A factor that does not divide the extent is fine: the tail is guarded."""
        self._require_compute("split")
        self._require_leaf(parent, "split")
        self._require_plain(parent, "split")
        if (factor is None) == (nparts is None):
            raise ScheduleError(
                f"split of {parent.name} in stage {self.name}: give exactly one of factor, nparts"
            )
        extent = parent.dom.extent
        if factor is not None:
            f = _positive_factor(factor, "factor", self)
            outer_extent, inner_extent, n = _ceildiv(extent, f), f, None
        else:
            n = _positive_factor(nparts, "nparts", self)
            f = None
            outer_extent, inner_extent = n, _ceildiv(extent, n)
        outer = _new_iter_var(f"{parent.name}.outer", outer_extent, parent.kind)
        inner = _new_iter_var(f"{parent.name}.inner", inner_extent, parent.kind)
        self.relations.append(Split(parent, outer, inner, f, n))
        position = self._leaf_index(parent)
        self.leaf_iter_vars[position : position + 1] = [outer, inner]
        self.all_iter_vars += [outer, inner]
        self._move_attachments(parent, inner)
        given = f"factor={factor}" if factor is not None else f"nparts={nparts}"
        self._record("split", f"{parent.name}, {given}")
        return outer, inner

    def _move_attachments(self, old: IterVar, new: IterVar) -> None:
        """Stages computed at a loop that is split or fused move to the loop that now runs once
        per iteration of the old one (the inner part of a split, the fused loop)."""
        for stage in self.schedule.stages:
            if stage.attach_stage is self and stage.attach_ivar is old:
                stage.attach_ivar = new

    def tile(
        self, x_parent: IterVar, y_parent: IterVar, x_factor: int | Expr, y_factor: int | Expr
    ) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split two axes and order the result as (xo, yo, xi, yi)."""
        xo, xi = self.split(x_parent, factor=x_factor)
        yo, yi = self.split(y_parent, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, *axes: IterVar) -> IterVar:
        """Fuse consecutive loops (outermost first) into one loop over their product."""
        self._require_compute("fuse")
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        if not axes:
            raise ScheduleError(f"fuse on stage {self.name}: needs at least one axis")
        for a in axes:
            self._require_leaf(a, "fuse")
            self._require_plain(a, "fuse")
        positions = [self._leaf_index(a) for a in axes]
        for (p, a), (q, b) in zip(zip(positions, axes), zip(positions[1:], axes[1:])):
            if q != p + 1:
                raise ScheduleError(
                    f"fuse on stage {self.name}: axes {a.name} and {b.name} are not adjacent "
                    "loops in that order; reorder them first"
                )
        kinds = {a.kind for a in axes}
        if len(kinds) > 1:
            raise ScheduleError(
                f"fuse on stage {self.name}: cannot fuse reduction and data-parallel axes "
                f"({', '.join(a.name for a in axes)})"
            )
        fused = axes[0]
        for inner in axes[1:]:
            extent = _mul(fused.dom.extent, inner.dom.extent)
            new = _new_iter_var(f"{fused.name}.{inner.name}.fused", extent, inner.kind)
            self.relations.append(Fuse(fused, inner, new))
            self.all_iter_vars.append(new)
            self._move_attachments(fused, new)
            self._move_attachments(inner, new)
            position = self._leaf_index(fused)
            self.leaf_iter_vars[position : position + 2] = [new]
            fused = new
        self._record("fuse", ", ".join(a.name for a in axes))
        return fused

    def reorder(self, *axes: IterVar) -> None:
        """Put the given loops in this order, in the positions they occupy now."""
        self._require_compute("reorder")
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        for a in axes:
            self._require_leaf(a, "reorder")
        if len({id(a) for a in axes}) != len(axes):
            raise ScheduleError(f"reorder on stage {self.name}: an axis is listed twice")
        positions = sorted(self._leaf_index(a) for a in axes)
        for position, a in zip(positions, axes):
            self.leaf_iter_vars[position] = a
        self._record("reorder", ", ".join(a.name for a in axes))

    # -- loop annotations ----------------------------------------------------------------------

    def _annotate(self, axis: IterVar, annotation: LoopAnnotation) -> None:
        self._require_compute(annotation.value)
        self._require_leaf(axis, annotation.value)
        if annotation is not LoopAnnotation.UNROLL and axis.kind is IterKind.REDUCE:
            raise ScheduleError(
                f"{annotation.value}: axis {axis.name} of stage {self.name} is a reduction axis; "
                "its iterations update the same output, so they cannot run side by side "
                "(s.rfactor makes a reduction axis a data axis of a new stage)"
            )
        self.annotations[axis] = annotation
        self._record(annotation.value, axis.name)

    def vectorize(self, axis: IterVar) -> None:
        """Run this loop as SIMD lanes. An extent above 64 or a symbolic one runs as vectors of
        the native width of the target it is lowered for (one register of the widest element
        type: 16 float32 lanes with AVX-512, 8 with AVX2) and one shorter or masked vector for
        the rest.

        Raises:
            ScheduleError: `axis` is a reduction axis (here, or from `lower` when the loop body
                cannot run lane by lane, e.g. a lane writes what another reads).
        """
        self._annotate(axis, LoopAnnotation.VECTORIZE)

    def parallel(self, axis: IterVar) -> None:
        """Run the iterations of this loop on several threads."""
        self._annotate(axis, LoopAnnotation.PARALLEL)

    def unroll(self, axis: IterVar) -> None:
        """Copy the loop body once per iteration. A symbolic extent needs a constant upper
        bound (each copy is then guarded); `lower` raises ScheduleError for one without."""
        self._annotate(axis, LoopAnnotation.UNROLL)

    def pragma(self, axis: IterVar, key: str, value: object = True) -> None:
        """Steer how the loops inside `axis` are unrolled, as TVM's pragmas of these names do:
        `auto_unroll_max_step` (int) unrolls every inner loop of constant extent whose copies
        hold at most that many statements in all; `unroll_explicit` (bool, default True) says
        whether unrolling copies the body (True) or asks LLVM to unroll the loop (False);
        `scalar_loop` (bool) keeps the loop `axis` itself a loop of one iteration at a time in
        LLVM too (a copy loop of strided accesses, on which LLVM's vectorizers spend long
        analyses and find nothing, or build scatters).

        Raises:
            ScheduleError: an unknown key, or a value of the wrong kind for the key.
        """
        self._require_compute("pragma")
        self._require_leaf(axis, "pragma")
        if not isinstance(key, str) or not key:
            raise TypeError(f"pragma on stage {self.name}: key must be a non-empty string")
        if key not in PRAGMA_KEYS:
            known = "; ".join(f"{k}: {what}" for k, what in PRAGMA_KEYS.items())
            raise ScheduleError(f"pragma on axis {axis.name} of stage {self.name}: unknown key "
                                f"{key!r}; the pragmas are {known}")
        if key == "auto_unroll_max_step" and (isinstance(value, bool) or not isinstance(
                value, int) or value < 0):
            raise ScheduleError(f"pragma auto_unroll_max_step on axis {axis.name} of stage "
                                f"{self.name} needs an int >= 0, got {value!r}")
        if key in ("unroll_explicit", "scalar_loop") and not isinstance(value, (bool, int)):
            raise ScheduleError(f"pragma {key} on axis {axis.name} of stage "
                                f"{self.name} needs a bool, got {value!r}")
        self.pragmas.setdefault(axis, []).append((key, value))
        self._record("pragma", f"{axis.name}, {key!r}, {value!r}")

    # -- placement ----------------------------------------------------------------------------

    def compute_at(self, parent: Stage, axis: IterVar) -> None:
        """Compute this stage inside loop `axis` of `parent`, only the part that one iteration
        of that loop needs. `parent` reads it, directly or through inlined stages, or runs its
        readers inside that loop (they are computed at `axis` or deeper: lowering checks)."""
        self._require_compute("compute_at")
        if not isinstance(parent, Stage):
            raise TypeError(f"compute_at on stage {self.name}: parent must be a Stage (s[T])")
        if parent is self:
            raise ScheduleError(f"compute_at: stage {self.name} cannot be computed at itself")
        if self.is_output:
            raise ScheduleError(
                f"compute_at: stage {self.name} is an output of the schedule; it must stay at root"
            )
        if not self.schedule._reads_through_inlined(parent, self):
            raise ScheduleError(
                f"compute_at: stage {parent.name} does not read stage {self.name}, so {self.name} "
                f"cannot be computed inside it"
            )
        parent._require_leaf(axis, "compute_at")
        self.attach, self.attach_stage, self.attach_ivar = AttachKind.SCOPE, parent, axis
        self._record("compute_at", f"{parent.name}, {axis.name}")

    def compute_inline(self) -> None:
        """Substitute this stage's expression into every reader instead of storing it."""
        self._require_compute("compute_inline")
        if self.is_output:
            raise ScheduleError(f"compute_inline: stage {self.name} is an output of the schedule")
        if self.op.reduce_axis:
            raise ScheduleError(
                f"compute_inline: stage {self.name} is a reduction and cannot be inlined"
            )
        self.attach, self.attach_stage, self.attach_ivar = AttachKind.INLINE, None, None
        self._record("compute_inline", "")

    def compute_root(self) -> None:
        """Compute this stage in full at the top level (the default)."""
        self._require_compute("compute_root")
        self.attach, self.attach_stage, self.attach_ivar = AttachKind.ROOT, None, None
        self._record("compute_root", "")

    def tensorize(self, axis: IterVar, intrin: TensorIntrin) -> None:
        """Replace the loops from `axis` inwards by the tensor intrinsic `intrin`.

        The loops under `axis` must compute exactly what the intrinsic's compute does: one loop
        per axis of it, with the same extents (data axes in order, then reduction axes), each
        the innermost part of an axis of this stage, and the same expression reading regions of
        this stage's inputs that move with those loops as the intrinsic's placeholders do.

        Raises:
            ScheduleError: naming what differs.
        """
        self._require_compute("tensorize")
        self._require_leaf(axis, "tensorize")
        if not isinstance(intrin, TensorIntrin):
            raise TypeError(f"tensorize on stage {self.name}: expected a tl.decl_tensor_intrin "
                            f"result, got {intrin!r}")
        op = self.op
        assert isinstance(op, ComputeOp)
        inside = self.leaf_iter_vars[self._leaf_index(axis):]
        fail = f"tensorize {intrin.name} at {axis.name} of stage {self.name}"
        data = [iv for iv in inside if iv.kind is IterKind.DATA_PAR]
        reduce = [iv for iv in inside if iv.kind is IterKind.REDUCE]
        theirs_data, theirs_reduce = intrin.op.axis, intrin.op.reduce_axis
        if len(data) != len(theirs_data) or len(reduce) != len(theirs_reduce):
            raise ScheduleError(
                f"{fail}: the loops inside are {len(data)} data and {len(reduce)} reduction "
                f"loops ({', '.join(iv.name for iv in inside)}); the intrinsic has "
                f"{len(theirs_data)} and {len(theirs_reduce)}")
        pairs = dict(zip([*data, *reduce], [*theirs_data, *theirs_reduce]))
        if inside != [*data, *reduce]:
            raise ScheduleError(f"{fail}: put the data loops before the reduction loops")
        for ours, theirs in pairs.items():
            if not structural_equal(ours.dom.extent, theirs.dom.extent):
                raise ScheduleError(f"{fail}: loop {ours.name} has extent {ours.dom.extent}, the "
                                    f"intrinsic's {theirs.name} {theirs.dom.extent}")
        values = self._axis_values()
        inside_vars = {iv.var: iv for iv in inside}
        axis_map: dict[Var, Expr] = {}
        moved: list[IterVar] = []
        for iv in (*op.axis, *op.reduce_axis):
            value = values[iv]
            used = [v for v in free_vars(value) if v in inside_vars]
            if not used:
                continue
            base = simplify(substitute(value, {v: const(0, v.dtype) for v in used}))
            offset = simplify(binary(BinaryOp.SUB, value, base))
            if len(used) != 1 or not structural_equal(offset, used[0]):
                raise ScheduleError(f"{fail}: axis {iv.name} is not the innermost part of one "
                                    "loop inside (split it so that its inner loop is)")
            theirs = pairs[inside_vars[used[0]]]
            axis_map[iv.var] = binary(BinaryOp.ADD, base, theirs.var)
            if iv.kind is IterKind.DATA_PAR:
                moved.append(iv)
        if moved != list(op.axis[len(op.axis) - len(moved):]):
            raise ScheduleError(f"{fail}: the tensorized data loops must be the output's "
                                "trailing axes, in order")
        try:
            reads = match_intrin(op.body[0], axis_map, intrin)
        except IntrinMismatch as exc:
            raise ScheduleError(f"{fail}: {exc}") from None
        self.tensorized = Tensorized(axis, intrin, tuple(inside), reads, axis_map)
        self._record("tensorize", f"{axis.name}, {intrin.name}")

    def _axis_values(self) -> dict[IterVar, Expr]:
        """Every axis's value as an expression of the leaf loop variables."""
        values: dict[IterVar, Expr] = {iv: iv.var for iv in self.leaf_iter_vars}
        for rel in reversed(self.relations):
            if isinstance(rel, Split):
                values[rel.parent] = binary(BinaryOp.ADD, binary(
                    BinaryOp.MUL, values[rel.outer], rel.inner.dom.extent), values[rel.inner])
            else:
                extent = rel.inner.dom.extent
                values[rel.outer] = binary(BinaryOp.FLOORDIV, values[rel.fused], extent)
                values[rel.inner] = binary(BinaryOp.FLOORMOD, values[rel.fused], extent)
        for iv in self.op.reduce_axis:
            if not (isinstance(iv.dom.min, Const) and iv.dom.min.value == 0):
                values[iv] = binary(BinaryOp.ADD, iv.dom.min, values[iv])
        return values

    def __str__(self) -> str:
        lines = [f"stage {self.name} ({self.scope}, {self.attach.value})"]
        lines.append("  loops: " + ", ".join(_loop_label(self, iv) for iv in self.leaf_iter_vars))
        lines += [f"  {step}" for step in self.steps]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Stage({self.name})"


def _loop_label(stage: Stage, iv: IterVar) -> str:
    mark = stage.annotations.get(iv)
    return f"{iv.name}[{mark.value}]" if mark else iv.name


class _Rebind(Mutator):
    """Rename index variables and redirect tensor reads (cache_read / cache_write rewrites)."""

    def __init__(
        self,
        variables: dict[Var, Var] | None = None,
        iter_vars: dict[IterVar, IterVar] | None = None,
        tensors: dict[Tensor, Tensor] | None = None,
    ):
        self.variables = variables or {}
        self.iter_vars = iter_vars or {}
        self.tensors = tensors or {}

    def visit_Var(self, node: Var) -> Node:
        return self.variables.get(node, node)

    def visit_IterVar(self, node: IterVar) -> Node:
        return self.iter_vars.get(node, node)

    def visit_TensorRead(self, node: TensorRead) -> Node:
        indices = tuple(self.visit(i) for i in node.indices)
        tensor = self.tensors.get(node.tensor, node.tensor)
        if tensor is node.tensor and all(a is b for a, b in zip(indices, node.indices)):
            return node
        return TensorRead(tensor, indices, node.dtype)


def _as_ops(items: object) -> list[Operation]:
    if isinstance(items, (Tensor, Operation)):
        items = [items]
    ops = []
    for item in items:  # type: ignore[union-attr]
        if isinstance(item, Tensor):
            ops.append(item.op)
        elif isinstance(item, Operation):
            ops.append(item)
        else:
            raise TypeError(f"expected a Tensor or an operation, got {type(item).__name__}")
    return ops


class Schedule:
    """The stages of a set of output operations and everything they read, in dependency order."""

    def __init__(self, outputs: Sequence[Operation]):
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        self._by_op: dict[Operation, Stage] = {}
        for op in _post_order(self.outputs):
            stage = Stage(op, self)
            self.stages.append(stage)
            self._by_op[op] = stage
        for op in self.outputs:
            self._by_op[op].is_output = True

    def __getitem__(self, key: Tensor | Operation) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        if not isinstance(op, Operation):
            raise TypeError(f"schedule index must be a Tensor or an operation, got {key!r}")
        try:
            return self._by_op[op]
        except KeyError:
            raise ScheduleError(f"{op.name} is not part of this schedule") from None

    def stage_of(self, op: Operation) -> Stage:
        """The stage of an operation (the same as `s[op]`)."""
        return self[op]

    def __str__(self) -> str:
        return "\n".join(str(s) for s in self.stages if not s.is_placeholder)

    def _readers(self, stage: Stage) -> list[Stage]:
        return [s for s in self.stages if self._consumes(s, stage)]

    def _consumes(self, reader: Stage, producer: Stage) -> bool:
        return any(self._by_op.get(t.op) is producer for t in reader.op.input_tensors)

    def _reads_through_inlined(self, reader: Stage, producer: Stage) -> bool:
        """Whether `reader` reads `producer` directly or through stages that are inlined (or may
        still be: inlining is checked again when the schedule is lowered)."""
        if self._consumes(reader, producer):
            return True
        return any(
            self._reads_through_inlined(reader, middle)
            for middle in self._readers(producer)
            if middle is not reader and not middle.is_output
        )

    def _insert_before(self, new: Stage, anchor: Stage) -> None:
        self.stages.insert(self.stages.index(anchor), new)
        self._by_op[new.op] = new

    def cache_read(self, tensor: Tensor, scope: str, readers: Iterable[Tensor | Operation]) -> Tensor:
        """Copy `tensor` into a new `scope` buffer that `readers` read instead of the original.

        Returns:
            The cache tensor; schedule it (e.g. compute_at) like any other stage.
        """
        if not isinstance(tensor, Tensor):
            raise TypeError(f"cache_read: expected a Tensor, got {type(tensor).__name__}")
        source = self[tensor]
        reader_stages = [self[op] for op in _as_ops(readers)]
        if not reader_stages:
            raise ScheduleError(f"cache_read of {tensor.name}: give at least one reader")
        for reader in reader_stages:
            if not self._consumes(reader, source):
                raise ScheduleError(f"cache_read: stage {reader.name} does not read {tensor.name}")
        cache = compute(
            tuple(tensor.shape),
            lambda *index: tensor[tuple(index)],
            name=f"{tensor.name}.{scope}",
        )
        assert isinstance(cache, Tensor)
        for reader in reader_stages:
            rebind = _Rebind(tensors={tensor: cache})
            self._replace_op(reader, tuple(rebind.visit(b) for b in reader.op.body))
        stage = Stage(cache.op, self)
        stage.scope = scope
        self._insert_before(stage, min(reader_stages, key=self.stages.index))
        source._record("cache_read", f"{scope!r} -> {cache.name}")
        return cache

    def cache_write(self, tensor: Tensor, scope: str,
                    layout: Sequence[int] | None = None) -> Tensor:
        """Compute `tensor` into a new `scope` buffer, then copy it to the original.

        Call it before splitting the stage. The original stage keeps its data axes (now a plain
        copy) and the cache stage gets fresh axes, including the reduction axes.

        Args:
            tensor: the tensor to compute through the cache.
            scope: the cache's storage scope ("local").
            layout: the cache's dimensions as positions of the tensor's, outermost first
                (default: the tensor's order). An NCHW output accumulated with its channels in
                vector lanes keeps them innermost with (0, 2, 3, 1): each vector of
                accumulators is then contiguous (registers), not strided.
        """
        if not isinstance(tensor, Tensor):
            raise TypeError(f"cache_write: expected a Tensor, got {type(tensor).__name__}")
        stage = self[tensor]
        stage._require_compute("cache_write")
        op = stage.op
        assert isinstance(op, ComputeOp)
        if op.num_outputs != 1:
            raise ScheduleError(f"cache_write: stage {stage.name} has several outputs")
        if stage.relations or stage.attach is not AttachKind.ROOT:
            raise ScheduleError(
                f"cache_write: stage {stage.name} is already scheduled; call cache_write first"
            )
        order = list(range(len(op.axis))) if layout is None else list(layout)
        if sorted(order) != list(range(len(op.axis))) or any(
                isinstance(k, bool) or not isinstance(k, int) for k in order):
            raise ScheduleError(f"cache_write: layout {layout!r} of stage {stage.name} is not a "
                                f"permutation of its {len(op.axis)} dimensions")
        axes = [op.axis[k] for k in order]
        iv_map: dict[IterVar, IterVar] = {}
        var_map: dict[Var, Var] = {}
        for iv in (*op.axis, *op.reduce_axis):
            fresh = _copy_iter_var(iv)
            iv_map[iv], var_map[iv.var] = fresh, fresh.var
        rebind = _Rebind(var_map, iv_map)
        body = tuple(rebind.visit(b) for b in op.body)
        cache_op = ComputeOp(
            f"{op.name}.{scope}", op.tag, op.attrs, tuple(iv_map[iv] for iv in axes), body
        )
        cache = cache_op.outputs[0]
        self._replace_op(stage, (cache[tuple(iv.var for iv in axes)],))
        cache_stage = Stage(cache_op, self)
        cache_stage.scope = scope
        self._insert_before(cache_stage, stage)
        shown = "" if layout is None else f", layout={tuple(order)}"
        stage._record("cache_write", f"{scope!r}{shown} -> {cache.name}")
        return cache

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
        """Split a reduction in two stages around `axis`.

        A new stage reduces over every reduction axis but `axis` and keeps `axis` as a data axis
        (at position `factor_axis` of its shape); `tensor` then only reduces that over `axis`.
        The partial results are independent, so the new stage can run `axis` in parallel or as
        SIMD lanes, which a reduction axis itself never can.

        `axis` is a reduction axis of the stage or one part of a `split` of one; call rfactor
        before any other step on the stage.

        Returns:
            The tensor of partial results; schedule it like any other stage.
        """
        if not isinstance(tensor, Tensor):
            raise TypeError(f"rfactor: expected a Tensor, got {type(tensor).__name__}")
        stage = self[tensor]
        stage._require_compute("rfactor")
        stage._require_leaf(axis, "rfactor")
        op = stage.op
        assert isinstance(op, ComputeOp)
        reduce = op.body[0]
        if op.num_outputs != 1 or not isinstance(reduce, Reduce) or len(reduce.source) != 1:
            raise ScheduleError(f"rfactor: stage {stage.name} is not a single reduction")
        if axis.kind is not IterKind.REDUCE:
            raise ScheduleError(f"rfactor: axis {axis.name} of stage {stage.name} is not a "
                                "reduction axis")
        if stage.attach is not AttachKind.ROOT or stage.annotations or stage.pragmas or any(
                not (isinstance(r, Split) and (axis is r.outer or axis is r.inner))
                for r in stage.relations):
            raise ScheduleError(f"rfactor: stage {stage.name} is already scheduled; call rfactor "
                                "first (after at most the split that makes its axis)")
        if isinstance(factor_axis, bool) or not isinstance(factor_axis, int) or not (
                0 <= factor_axis <= len(op.axis)):
            raise ScheduleError(f"rfactor: factor_axis must be an int in [0, {len(op.axis)}] for "
                                f"stage {stage.name}, got {factor_axis!r}")
        kept, rest, index_of, guard = _factored_axes(op, axis, stage.relations)
        data = [_copy_iter_var(iv) for iv in op.axis]
        mapping: dict[Var, Expr] = {iv.var: new.var for iv, new in zip(op.axis, data)}
        mapping.update(index_of)
        source = substitute(reduce.source[0], mapping)
        condition = substitute(reduce.condition, mapping)
        if guard is not None:
            condition = binary(BinaryOp.AND, condition, guard)
        if rest:
            partial = Reduce(reduce.combiner, (source,), tuple(rest), condition, 0, reduce.dtype)
        elif isinstance(condition, Const) and condition.value:
            partial = source
        else:
            partial = Select(condition, source, reduce.combiner.identity[0], reduce.dtype)
        data.insert(factor_axis, kept)
        factored = ComputeOp(f"{op.name}.rf", op.tag, op.attrs, tuple(data), (partial,))
        r = _new_iter_var(f"{axis.name}.v", kept.dom.extent, IterKind.REDUCE)
        indices = [iv.var for iv in op.axis]
        indices.insert(factor_axis, r.var)
        final = Reduce(reduce.combiner, (factored.outputs[0][tuple(indices)],), (r,),
                       const(True), 0, reduce.dtype)
        stage.relations.clear()
        self._replace_op(stage, (final,))
        self._insert_before(Stage(factored, self), stage)
        stage._record("rfactor", f"{axis.name}, factor_axis={factor_axis}")
        return factored.outputs[0]

    def _replace_op(self, stage: Stage, body: tuple[Expr, ...]) -> None:
        """Give `stage` a new op with the same data axes (so existing loop handles stay valid)."""
        old = stage.op
        assert isinstance(old, ComputeOp)
        new = ComputeOp(old.name, old.tag, old.attrs, old.axis, body)
        reduce_changed = tuple(old.reduce_axis) != tuple(new.reduce_axis)
        stage.op = new
        self._by_op[new] = stage
        if reduce_changed:
            stage._reset_axes()


def _factored_axes(op: ComputeOp, axis: IterVar, relations: Sequence[Relation]
                   ) -> tuple[IterVar, list[IterVar], dict[Var, Expr], Expr | None]:
    """For rfactor of `axis`: the new data axis, the remaining reduction axes (all fresh), how
    to compute the original reduction variables from them, and a guard for the points past the
    extent that a non-dividing split adds (None when there are none)."""

    def fresh(iv: IterVar, kind: IterKind) -> IterVar:
        return _new_iter_var(iv.name, iv.dom.extent, kind)

    split = relations[0] if relations else None
    parent = split.parent if isinstance(split, Split) else axis
    others = [iv for iv in op.reduce_axis if iv is not parent]
    rest = [fresh(iv, IterKind.REDUCE) for iv in others]
    index_of: dict[Var, Expr] = {
        iv.var: binary(BinaryOp.ADD, iv.dom.min, new.var) for iv, new in zip(others, rest)
    }
    if not isinstance(split, Split):
        kept = fresh(axis, IterKind.DATA_PAR)
        index_of[parent.var] = binary(BinaryOp.ADD, parent.dom.min, kept.var)
        return kept, rest, index_of, None
    outer = fresh(split.outer, IterKind.DATA_PAR if axis is split.outer else IterKind.REDUCE)
    inner = fresh(split.inner, IterKind.DATA_PAR if axis is split.inner else IterKind.REDUCE)
    kept, other = (outer, inner) if axis is split.outer else (inner, outer)
    offset = binary(BinaryOp.ADD, _mul(outer.var, split.inner.dom.extent), inner.var)
    index_of[parent.var] = binary(BinaryOp.ADD, parent.dom.min, offset)
    covered = _mul(split.outer.dom.extent, split.inner.dom.extent)
    exact = isinstance(covered, Const) and isinstance(parent.dom.extent, Const) and (
        int(covered.value) == int(parent.dom.extent.value))
    guard = None if exact else compare(CompareOp.LT, offset, parent.dom.extent)
    return kept, [other, *rest], index_of, guard


def _post_order(outputs: Sequence[Operation]) -> list[Operation]:
    order: list[Operation] = []
    seen: set[int] = set()

    def visit(op: Operation) -> None:
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in op.input_tensors:
            visit(t.op)
        order.append(op)

    for op in outputs:
        visit(op)
    return order


def create_schedule(ops: Tensor | Operation | Sequence[Tensor | Operation]) -> Schedule:
    """A schedule with default loops (one per axis, in order) for `ops` and all they read."""
    return Schedule(_as_ops(ops))
