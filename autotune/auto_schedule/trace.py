"""Schedules as traces: the primitives a sketch applied, recorded so that they can be replayed.

Part of auto-scheduling, between sketch generation and the log. A `Tracer` wraps a
`tl.Schedule` and applies each primitive through it, recording a `TraceStep` that names its
stage by position in `schedule.stages` and its loops by position among the stage's current leaf
loops (tensor and axis names are not unique: every unnamed compute is called "compute"). A
`Trace` is a tuple of such steps; it prints as readable Python-like lines, goes to the log as
JSON, and `replay` applies it to a fresh schedule of the same compute, giving the same loop IR.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import tensorlang as tl
from tensorlang.expr import Expr, IterVar, Node, TensorRead
from tensorlang.schedule import Schedule, ScheduleError, Stage
from tensorlang.tensor import Tensor
from tensorlang.visitor import Mutator

#: Primitives whose arguments are (loop,) and that return nothing.
_ANNOTATIONS = ("vectorize", "parallel", "unroll")


@dataclass(frozen=True)
class TraceStep:
    """One primitive: its name, the stage's position, and its arguments (ints, strings,
    bools; loops as positions among the stage's leaf loops at that moment)."""

    primitive: str
    stage: int
    args: tuple[Any, ...] = ()

    def to_json(self) -> list[Any]:
        """`[primitive, stage, args...]`."""
        return [self.primitive, self.stage, *self.args]

    @staticmethod
    def from_json(item: Sequence[Any]) -> TraceStep:
        """The inverse of `to_json`."""
        primitive, stage, *args = item
        return TraceStep(str(primitive), int(stage),
                         tuple(tuple(a) if isinstance(a, list) else a for a in args))


@dataclass(frozen=True)
class Trace:
    """A replayable schedule: the steps in the order they were applied, plus the readable
    lines that name the stages and loops they touched."""

    steps: tuple[TraceStep, ...]
    lines: tuple[str, ...] = ()

    def to_json(self) -> list[list[Any]]:
        """The steps as JSON lists (what a log record holds)."""
        return [s.to_json() for s in self.steps]

    @staticmethod
    def from_json(items: Sequence[Sequence[Any]]) -> Trace:
        """The inverse of `to_json` (without the readable lines)."""
        return Trace(tuple(TraceStep.from_json(i) for i in items))

    def __len__(self) -> int:
        return len(self.steps)

    def __str__(self) -> str:
        if self.lines:
            return "\n".join(self.lines)
        return "\n".join(f"{s.primitive}(stage {s.stage}, {', '.join(map(repr, s.args))})"
                         for s in self.steps)


class Tracer:
    """Applies primitives to a schedule and records them as a `Trace`.

    Every method takes stages and loops (IterVars) as objects, like `tl.Stage`'s own methods,
    and returns what the primitive returns (new loops, or the stage a cache_write or rfactor
    made).
    """

    def __init__(self, schedule: Schedule):
        self.schedule = schedule
        self.steps: list[TraceStep] = []
        self.lines: list[str] = []

    # -- bookkeeping ----------------------------------------------------------------------------

    def _stage_index(self, stage: Stage) -> int:
        return next(k for k, s in enumerate(self.schedule.stages) if s is stage)

    @staticmethod
    def _loop(stage: Stage, iv: IterVar) -> int:
        for k, leaf in enumerate(stage.leaf_iter_vars):
            if leaf is iv:
                return k
        raise ScheduleError(f"trace: {iv.name} is not a loop of stage {stage.name}")

    def _record(self, primitive: str, stage: Stage, args: tuple[Any, ...], text: str) -> None:
        self.steps.append(TraceStep(primitive, self._stage_index(stage), args))
        self.lines.append(f"{stage.name}.{primitive}({text})")

    def trace(self) -> Trace:
        """The steps recorded so far."""
        return Trace(tuple(self.steps), tuple(self.lines))

    # -- the primitives -------------------------------------------------------------------------

    def split(self, stage: Stage, iv: IterVar, factor: int | None = None,
              nparts: int | None = None) -> tuple[IterVar, IterVar]:
        """`stage.split` (exactly one of `factor`, `nparts`)."""
        loop = self._loop(stage, iv)
        by_factor = factor is not None
        amount = int(factor if by_factor else nparts)  # type: ignore[arg-type]
        self._record("split", stage, (loop, amount, by_factor),
                     f"{iv.name}, {'factor' if by_factor else 'nparts'}={amount}")
        if by_factor:
            return stage.split(iv, factor=amount)
        return stage.split(iv, nparts=amount)

    def fuse(self, stage: Stage, *ivs: IterVar) -> IterVar:
        """`stage.fuse` of adjacent loops, outermost first."""
        loops = tuple(self._loop(stage, iv) for iv in ivs)
        self._record("fuse", stage, loops, ", ".join(iv.name for iv in ivs))
        return stage.fuse(*ivs)

    def reorder(self, stage: Stage, *ivs: IterVar) -> None:
        """`stage.reorder`."""
        loops = tuple(self._loop(stage, iv) for iv in ivs)
        self._record("reorder", stage, loops, ", ".join(iv.name for iv in ivs))
        stage.reorder(*ivs)

    def annotate(self, stage: Stage, iv: IterVar, kind: str) -> None:
        """`stage.vectorize`, `stage.parallel` or `stage.unroll` (`kind` names it)."""
        if kind not in _ANNOTATIONS:
            raise ValueError(f"trace: unknown annotation {kind!r}")
        self._record(kind, stage, (self._loop(stage, iv),), iv.name)
        getattr(stage, kind)(iv)

    def pragma(self, stage: Stage, iv: IterVar, key: str, value: object) -> None:
        """`stage.pragma`."""
        self._record("pragma", stage, (self._loop(stage, iv), key, value),
                     f"{iv.name}, {key!r}, {value!r}")
        stage.pragma(iv, key, value)

    def compute_at(self, stage: Stage, parent: Stage, iv: IterVar) -> None:
        """`stage.compute_at(parent, iv)`."""
        self._record("compute_at", stage, (self._stage_index(parent), self._loop(parent, iv)),
                     f"{parent.name}, {iv.name}")
        stage.compute_at(parent, iv)

    def compute_inline(self, stage: Stage) -> None:
        """`stage.compute_inline()`."""
        self._record("compute_inline", stage, (), "")
        stage.compute_inline()

    def compute_root(self, stage: Stage) -> None:
        """`stage.compute_root()`."""
        self._record("compute_root", stage, (), "")
        stage.compute_root()

    def cache_write(self, stage: Stage, scope: str = "local",
                    layout: Sequence[int] | None = None) -> Stage:
        """`s.cache_write` of the stage's tensor (in `layout`, when given); returns the new
        (computing) stage."""
        if layout is None:
            self._record("cache_write", stage, (scope,), repr(scope))
        else:
            layout = tuple(int(k) for k in layout)
            self._record("cache_write", stage, (scope, layout), f"{scope!r}, layout={layout}")
        cache = self.schedule.cache_write(stage.op.output(0), scope, layout)
        return self.schedule[cache]

    def panel_read(self, stage: Stage, tensor: Tensor, width: int) -> Stage:
        """`panel_read` of input `tensor` of `stage` (by its position among the stage's
        inputs); returns the copy's stage."""
        position = next(k for k, t in enumerate(stage.op.input_tensors) if t == tensor)
        self._record("panel_read", stage, (position, width), f"{tensor.name}, width={width}")
        return panel_read(self.schedule, stage, tensor, width)

    def transpose_read(self, stage: Stage, tensor: Tensor, dim: int) -> Stage:
        """`transpose_read` of input `tensor` of `stage` (by its position among the stage's
        inputs); returns the copy's stage."""
        position = next(k for k, t in enumerate(stage.op.input_tensors) if t == tensor)
        self._record("transpose_read", stage, (position, dim), f"{tensor.name}, dim={dim}")
        return transpose_read(self.schedule, stage, tensor, dim)

    def rfactor(self, stage: Stage, iv: IterVar, factor_axis: int = 0) -> Stage:
        """`s.rfactor` of the stage's tensor around loop `iv`; returns the new partial stage."""
        self._record("rfactor", stage, (self._loop(stage, iv), factor_axis),
                     f"{iv.name}, factor_axis={factor_axis}")
        partial = self.schedule.rfactor(stage.op.output(0), iv, factor_axis)
        return self.schedule[partial]


class _RedirectReads(Mutator):
    """Redirect the reads of one tensor to a copy in another layout, mapping their indices."""

    def __init__(self, source: Tensor, copy: Tensor,
                 index_map: Callable[[tuple[Expr, ...]], tuple[Expr, ...]]):
        self.source, self.copy, self.index_map = source, copy, index_map

    def visit_TensorRead(self, node: TensorRead) -> Node:
        indices = tuple(self.visit(i) for i in node.indices)
        if node.tensor == self.source:
            return TensorRead(self.copy, self.index_map(indices), node.dtype)
        if all(a is b for a, b in zip(indices, node.indices)):
            return node
        return TensorRead(node.tensor, indices, node.dtype)


def _read_through(schedule: Schedule, stage: Stage, tensor: Tensor, copy: Tensor,
                  index_map: Callable[[tuple[Expr, ...]], tuple[Expr, ...]]) -> Stage:
    """Make `stage` read `copy` where it read `tensor`. Schedule has no public primitive for a
    layout change: the op is rebuilt in place, as its cache_read does, and the copy's stage
    goes before the reader (computed at root)."""
    mutator = _RedirectReads(tensor, copy, index_map)
    schedule._replace_op(stage, tuple(mutator.visit(b) for b in stage.op.body))
    new = Stage(copy.op, schedule)
    schedule._insert_before(new, stage)
    return new


def transpose_read(schedule: Schedule, stage: Stage, tensor: Tensor, dim: int) -> Stage:
    """Make `stage` read a copy of `tensor` whose dimension `dim` is moved innermost, so that
    the loop indexing that dimension walks memory contiguously (attention's `K[b, h, j, d]`
    read along `j`). A layout rewrite of the compute, as Ansor's for constant weights.

    Returns:
        The stage of the copy.
    """
    n = tensor.ndim
    if not 0 <= dim < n - 1:
        raise ScheduleError(f"transpose_read: dimension {dim} of {tensor.name} is not an outer "
                            "one")
    perm = [k for k in range(n) if k != dim] + [dim]
    inverse = [perm.index(k) for k in range(n)]
    copy = tl.compute(tuple(tensor.shape[k] for k in perm),
                      lambda *idx: tensor[tuple(idx[inverse[k]] for k in range(n))],
                      name=f"{tensor.name}.T")
    return _read_through(schedule, stage, tensor, copy,
                         lambda idx: tuple(idx[k] for k in perm))


def panel_read(schedule: Schedule, stage: Stage, tensor: Tensor, width: int) -> Stage:
    """Make `stage` read a copy of `tensor` in panels `width` elements wide along its last
    dimension: `P[c // width, ..., c % width]` holds `tensor[..., c]` (zeros past its end), so
    that a register block `width` columns wide reads one run of memory as it steps along the
    other dimensions (a GEMM's right operand, whose rows lie a page apart at 1024 columns). The
    reader's column index must split at multiples of `width` for its reads to stay vectors.

    Returns:
        The stage of the copy.
    """
    *rows, columns = (int(d) for d in tensor.shape)
    if width < 1 or not rows:
        raise ScheduleError(f"panel_read: {tensor.name} of shape {tuple(tensor.shape)} in "
                            f"panels of {width} columns")
    panels = -(-columns // width)

    def element(*idx: Any) -> Expr:
        p, *row, c = idx
        column = p * width + c
        if panels * width == columns:
            return tensor[(*row, column)]
        return tl.if_then_else(column < columns,
                               tensor[(*row, tl.minimum(column, columns - 1))],
                               tl.const(0, tensor.dtype))

    copy = tl.compute((panels, *rows, width), element, name=f"{tensor.name}.P")
    return _read_through(schedule, stage, tensor, copy,
                         lambda idx: (idx[-1] // width, *idx[:-1], idx[-1] % width))


def replay(trace: Trace, schedule: Schedule) -> Schedule:
    """Apply `trace` to `schedule` (fresh, of the compute the trace was recorded on).

    Raises:
        ScheduleError: a step does not fit this schedule (another compute, or a bad trace).
    """
    tracer = Tracer(schedule)
    for step in trace.steps:
        try:
            stage = schedule.stages[step.stage]
            leaves = stage.leaf_iter_vars
            args = step.args
            p = step.primitive
            if p == "split":
                loop, amount, by_factor = args
                if by_factor:
                    tracer.split(stage, leaves[loop], factor=amount)
                else:
                    tracer.split(stage, leaves[loop], nparts=amount)
            elif p in ("fuse", "reorder"):
                getattr(tracer, p)(stage, *(leaves[k] for k in args))
            elif p in _ANNOTATIONS:
                tracer.annotate(stage, leaves[args[0]], p)
            elif p == "pragma":
                tracer.pragma(stage, leaves[args[0]], args[1], args[2])
            elif p == "compute_at":
                parent = schedule.stages[args[0]]
                tracer.compute_at(stage, parent, parent.leaf_iter_vars[args[1]])
            elif p in ("compute_inline", "compute_root"):
                getattr(tracer, p)(stage)
            elif p == "cache_write":
                tracer.cache_write(stage, *args)
            elif p == "transpose_read":
                tracer.transpose_read(stage, stage.op.input_tensors[args[0]], args[1])
            elif p == "panel_read":
                tracer.panel_read(stage, stage.op.input_tensors[args[0]], args[1])
            elif p == "rfactor":
                tracer.rfactor(stage, leaves[args[0]], args[1])
            else:
                raise ScheduleError(f"unknown primitive {p!r}")
        except (IndexError, ValueError, TypeError) as err:
            if isinstance(err, ScheduleError):
                raise
            raise ScheduleError(f"trace step {step.to_json()} does not fit this schedule: "
                                f"{err}") from None
    return schedule
