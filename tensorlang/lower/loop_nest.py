"""The loop-nest builder: turns a Schedule into loop IR (the only pass that reads a Schedule).

For every stage that is not inlined it (1) infers the region to compute: the whole tensor at the
root, or, for a stage computed at a loop of its consumer, the part that one iteration of that loop
reads; (2) builds one loop per leaf axis with the annotations of the schedule; (3) guards points
that a non-dividing split or a region at the tensor's edge would compute in excess; and (4) places
attached stages and their buffers at the start of the loop they are attached to. Accesses stay
multi-dimensional (`ProducerLoad`/`ProducerStore`); buffer flattening comes later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..arith import INF, Simplifier, simplify, symbolic_bounds, upper_bound
from ..dtype import HANDLE
from ..expr import (
    Binary,
    BinaryOp,
    Const,
    Expr,
    IterVar,
    Reduce,
    TensorRead,
    Var,
    binary,
    const,
)
from ..ir import (
    Allocate,
    Buffer,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    PrimFunc,
    ProducerLoad,
    ProducerStore,
    Scope,
    Stmt,
    seq,
)
from ..schedule import (
    MAX_UNROLL_COPIES,
    AttachKind,
    LoopAnnotation,
    Schedule,
    ScheduleError,
    Stage,
)
from ..calls import TensorRegion
from ..tensor import ComputeOp, PlaceholderOp, Tensor
from ..tensor_intrin import ExternOp
from ..visitor import (
    Mutator,
    contains,
    free_vars,
    nodes_below,
    substitute,
    uses_var,
)
from .copy_box import copy_box, copy_call
from .inline import inline_bodies
from .stage_loops import StageLoops, _descendants

_FOR_KIND = {
    LoopAnnotation.VECTORIZE: ForKind.VECTORIZED,
    LoopAnnotation.PARALLEL: ForKind.PARALLEL,
    LoopAnnotation.UNROLL: ForKind.UNROLLED,
}


_DIVISIONS = (BinaryOp.DIV, BinaryOp.FLOORDIV, BinaryOp.FLOORMOD)


@dataclass
class _Region:
    """Per data axis of a stage: where its buffer starts in tensor coordinates, how many points
    are needed, and how many the loops run over (a constant bound when one exists)."""

    offsets: list[Expr]
    extents: list[Expr]
    loop_extents: list[Expr]
    attached: bool


def _is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


def _check_args(schedule: Schedule, args: Sequence[Tensor]) -> list[Tensor]:
    if isinstance(args, Tensor) or not isinstance(args, (list, tuple)):
        raise TypeError("args must be a list of tensors, e.g. [A, B, C]")
    seen: set[Tensor] = set()
    for position, t in enumerate(args):
        if not isinstance(t, Tensor):
            raise TypeError(f"args[{position}] is a {type(t).__name__}, not a Tensor")
        if t in seen:
            raise ValueError(f"args[{position}]: tensor {t.name} is listed twice")
        seen.add(t)
        stage = schedule[t.op]
        if stage.attach is AttachKind.INLINE:
            raise ValueError(f"args[{position}]: tensor {t.name} is inlined and has no memory")
    for op in schedule.outputs:
        for t in op.outputs:
            if t not in seen and not any(a.op is schedule[op].op for a in seen):
                raise ValueError(f"output tensor {t.name} is not in args")
    return list(args)


class LoopNestBuilder:
    """Builds the loop IR of a schedule; see the module docstring."""

    def __init__(self, schedule: Schedule, args: Sequence[Tensor], name: str):
        self.schedule = schedule
        self.args = _check_args(schedule, args)
        self.name = name
        self.bodies = inline_bodies(schedule)
        self.buffers: dict[tuple[Stage, int], Buffer] = {}
        self.regions: dict[Stage, _Region] = {}
        self.loops: dict[Stage, StageLoops] = {}
        self.root_values: dict[Stage, dict[IterVar, Expr]] = {}
        self.ranges: dict[Var, tuple[float, float]] = {}
        self.attached: dict[IterVar, list[Stage]] = {}
        self._past_edges: dict[Stage, bool] = {}
        self.compute_stages = [
            s
            for s in schedule.stages
            if isinstance(s.op, (ComputeOp, ExternOp)) and s.attach is not AttachKind.INLINE
        ]

    # -- buffers ------------------------------------------------------------------------------

    def _param_buffers(self) -> list[Buffer]:
        params = []
        for t in self.args:
            stage = self.schedule[t.op]
            buf = Buffer(t.name, t.dtype_, tuple(t.shape), Var(f"{t.name}_data", HANDLE))
            self.buffers[(stage, t.value_index)] = buf
            params.append(buf)
        return params

    def _local_buffer(self, stage: Stage, index: int) -> Buffer:
        key = (stage, index)
        if key not in self.buffers:
            t = stage.op.outputs[index]
            shape = tuple(t.shape if isinstance(stage.op, ExternOp)
                          else self.regions[stage].loop_extents)
            self.buffers[key] = Buffer(
                t.name, t.dtype_, shape, Var(f"{t.name}_data", HANDLE), Scope.LOCAL
            )
        return self.buffers[key]

    # -- bound inference -----------------------------------------------------------------------

    def _infer_region(self, stage: Stage) -> _Region:
        op = stage.op
        assert isinstance(op, ComputeOp)
        full = [iv.dom.extent for iv in op.axis]
        zeros = [const(0) for _ in op.axis]
        if stage.attach is not AttachKind.SCOPE:
            return _Region(zeros, full, full, attached=False)
        consumer, at = stage.attach_stage, stage.attach_ivar
        assert consumer is not None and at is not None
        lows: list[list[Expr]] = [[] for _ in op.axis]
        highs: list[list[Expr]] = [[] for _ in op.axis]
        understood = [True for _ in op.axis]
        relax_all: dict[Var, tuple[Expr, Expr]] = {}
        for reader, reads in self._reads_of(stage):
            relax = self._relaxed_inside(reader, consumer, at)
            if relax is None:
                raise ValueError(
                    f"stage {stage.name} is computed at {consumer.name} but {reader.name} reads "
                    f"it too outside that loop; compute it at root, cache it per reader or "
                    f"compute {reader.name} inside loop {at.name} of {consumer.name}"
                )
            relax_all.update(relax)
            values = {iv.var: v for iv, v in self.root_values[reader].items()}
            for read in reads:
                for d, index in enumerate(read.indices):
                    b = symbolic_bounds(simplify(substitute(index, values)), relax)
                    if b is None:
                        understood[d] = False
                    else:
                        lows[d].append(b[0])
                        highs[d].append(b[1])
        offsets, extents, loop_extents = [], [], []
        for d, iv in enumerate(op.axis):
            if not understood[d] or not lows[d]:
                offsets.append(const(0))
                extents.append(full[d])
                loop_extents.append(full[d])
                continue
            lo, hi = lows[d][0], highs[d][0]
            for other_lo, other_hi in zip(lows[d][1:], highs[d][1:]):
                lo = binary(BinaryOp.MIN, lo, other_lo)
                hi = binary(BinaryOp.MAX, hi, other_hi)
            lo, hi = simplify(lo, self.ranges), simplify(hi, self.ranges)
            extent = simplify(binary(BinaryOp.ADD, binary(BinaryOp.SUB, hi, lo), 1), self.ranges)
            bound = upper_bound(extent, {**self.ranges, **self._relax_ranges(relax_all)})
            offsets.append(lo)
            extents.append(extent)
            loop_extents.append(const(bound) if bound is not None else extent)
        return _Region(offsets, extents, loop_extents, attached=True)

    def _reads_of(self, stage: Stage) -> list[tuple[Stage, list[TensorRead]]]:
        """The stages with loops of their own that read `stage` (directly or through stages
        inlined into them), each with its reads of it."""
        found = []
        for reader in self.compute_stages:
            reads = [node for body in self.bodies.get(reader, ()) for node in nodes_below(body)
                     if isinstance(node, TensorRead) and self.schedule[node.tensor.op] is stage]
            if reads:
                found.append((reader, reads))
        return found

    def _relaxed_inside(self, reader: Stage, consumer: Stage,
                        at: IterVar) -> dict[Var, tuple[Expr, Expr]] | None:
        """The loops to relax over for the part of a producer that `reader` reads during one
        iteration of loop `at` of `consumer`: every loop below `at` around the reads, i.e. the
        loops of `consumer` inside `at` and, when `reader` is computed inside that loop (at any
        depth of compute_at), all loops of the stages in between and of `reader` itself. None
        when `reader` runs outside that loop."""
        relax: dict[Var, tuple[Expr, Expr]] = {}
        stage = reader
        while stage is not consumer:
            if stage.attach is not AttachKind.SCOPE:
                return None
            relax.update(self._loop_ranges(stage, stage.leaf_iter_vars))
            parent = stage.attach_stage
            assert parent is not None and stage.attach_ivar is not None
            if parent is consumer:
                leaves = consumer.leaf_iter_vars
                if leaves.index(stage.attach_ivar) < leaves.index(at):
                    return None
            stage = parent
        position = consumer.leaf_iter_vars.index(at)
        relax.update(self._loop_ranges(consumer, consumer.leaf_iter_vars[position + 1 :]))
        return relax

    def _loop_ranges(self, stage: Stage,
                     leaves: Sequence[IterVar]) -> dict[Var, tuple[Expr, Expr]]:
        loops = self.loops[stage]
        return {iv.var: (const(0), simplify(binary(BinaryOp.SUB, loops.leaf_extent(iv), 1)))
                for iv in leaves}

    def _relax_ranges(self, relax: dict[Var, tuple[Expr, Expr]]) -> dict[Var, tuple[float, float]]:
        out = {}
        for v, (lo, hi) in relax.items():
            if isinstance(lo, Const) and isinstance(hi, Const):
                out[v] = (float(lo.value), float(hi.value))
        return out

    def _analyse(self) -> None:
        for stage in self.compute_stages:
            if stage.attach is AttachKind.SCOPE:
                self.attached.setdefault(stage.attach_ivar, []).append(stage)
        for stage in reversed(self.compute_stages):
            op = stage.op
            if isinstance(op, ExternOp):  # whole tensors, no loops of its own
                shape = list(op.outputs[0].shape)
                self.regions[stage] = _Region([const(0) for _ in shape], shape, shape, False)
                continue
            assert isinstance(op, ComputeOp)
            region = self._infer_region(stage)
            self.regions[stage] = region
            root_extents = dict(zip(op.axis, region.loop_extents))
            root_extents.update({iv: iv.dom.extent for iv in op.reduce_axis})
            loops = StageLoops.build(stage, root_extents)
            self.loops[stage] = loops
            values: dict[IterVar, Expr] = {}
            for d, iv in enumerate(op.axis):
                rel = loops.relative_values[iv]
                values[iv] = rel if _is_zero(region.offsets[d]) else binary(
                    BinaryOp.ADD, region.offsets[d], rel
                )
            for iv in op.reduce_axis:
                rel = loops.relative_values[iv]
                values[iv] = rel if _is_zero(iv.dom.min) else binary(BinaryOp.ADD, iv.dom.min, rel)
            self.root_values[stage] = {iv: simplify(v) for iv, v in values.items()}
            for iv in stage.leaf_iter_vars:
                extent = simplify(loops.leaf_extent(iv))
                if isinstance(extent, Const):
                    self.ranges[iv.var] = (0.0, float(int(extent.value) - 1))

    # -- guards --------------------------------------------------------------------------------

    def _guards(self, stage: Stage, include_reduce: bool) -> list[Expr]:
        op = stage.op
        assert isinstance(op, ComputeOp)
        loops, region = self.loops[stage], self.regions[stage]
        conditions: list[Expr] = []
        prover = Simplifier(self.ranges)

        def need(cond: Expr) -> None:
            if prover.prove(cond) is not True:
                conditions.append(cond)

        for cond in loops.inner_guards:
            if include_reduce or not _mentions_reduce(stage, cond):
                need(simplify(cond))
        for d, iv in enumerate(op.axis):
            rel = simplify(loops.relative_values[iv])
            exact_extent, loop_extent = region.extents[d], region.loop_extents[d]
            if not (loops.exact[iv] and loop_extent is exact_extent):
                need(rel < exact_extent)
            if region.attached and not self._computes_past_edges(stage):
                absolute = self.root_values[stage][iv]
                need(absolute >= 0)
                need(absolute < iv.dom.extent)
        if include_reduce:
            for iv in op.reduce_axis:
                if not loops.exact[iv]:
                    need(simplify(loops.relative_values[iv]) < iv.dom.extent)
        return conditions

    def _computes_past_edges(self, stage: Stage) -> bool:
        """Whether a stage computed at a loop may fill its whole allocation, also the points
        past the edges of its tensor, instead of guarding each point against them.

        Its readers read only points inside the tensor, so values past its edges are never
        used; filling them is safe when every read of its body stays inside its buffer at every
        point of the allocation and nothing in the body can trap (an integer division by a
        variable). Without the guard a partial last block runs the same code as the others: a
        register block over a padded row panel needs no copy of its own for the last rows,
        which was the larger part of a register-blocked GEMM's code."""
        if stage not in self._past_edges:
            self._past_edges[stage] = self._body_stays_inside(stage)
        return self._past_edges[stage]

    def _body_stays_inside(self, stage: Stage) -> bool:
        values = {iv.var: v for iv, v in self.root_values[stage].items()}
        parts = [part for value in self.bodies[stage] for part in (
            [*value.source, value.condition] if isinstance(value, Reduce) else [value])]
        prover = Simplifier(self.ranges)  # the reads share their index arithmetic
        return all(self._safe_past_edges(node, prover) for part in parts
                   for node in nodes_below(self._rewrite_reads(substitute(part, values))))

    @staticmethod
    def _safe_past_edges(node: object, prover: Simplifier) -> bool:
        if isinstance(node, ProducerLoad):
            return all(prover.prove(index >= 0) is True and prover.prove(index < dim) is True
                       for index, dim in zip(node.indices, node.buffer.shape))
        return not (isinstance(node, Binary) and node.dtype.is_integer
                    and node.op in _DIVISIONS and not isinstance(node.b, Const))

    @staticmethod
    def _guarded(stmt: Stmt, conditions: list[Expr]) -> Stmt:
        if not conditions:
            return stmt
        cond = conditions[0]
        for c in conditions[1:]:
            cond = binary(BinaryOp.AND, cond, c)
        return IfThenElse(cond, stmt, None, likely=True)

    # -- reads ---------------------------------------------------------------------------------

    def _rewrite_reads(self, expr: Expr) -> Expr:
        return _ReadRewriter(self).visit(expr)

    def buffer_access(self, tensor: Tensor, indices: Sequence[Expr]) -> ProducerLoad:
        stage = self.schedule[tensor.op]
        key = (stage, tensor.value_index)
        if key not in self.buffers:
            if isinstance(stage.op, PlaceholderOp):
                raise ValueError(
                    f"tensor {tensor.name} is read by the computation but is not in args"
                )
            self._local_buffer(stage, tensor.value_index)
        buf = self.buffers[key]
        region = self.regions.get(stage)
        if region is not None and region.attached:
            indices = [simplify(binary(BinaryOp.SUB, i, o)) for i, o in zip(indices, region.offsets)]
        return ProducerLoad(buf, tuple(indices), buf.dtype)

    # -- loop nests ----------------------------------------------------------------------------

    def _loop(self, stage: Stage, iv: IterVar, body: Stmt) -> For:
        extent = simplify(self.loops[stage].leaf_extent(iv))
        kind = _FOR_KIND.get(stage.annotations.get(iv), ForKind.SERIAL)  # type: ignore[arg-type]
        if kind is ForKind.UNROLLED:
            _check_unroll(stage, iv, extent)
        pragmas = tuple(stage.pragmas.get(iv, ()))
        return For(iv.var, const(0), extent, kind, body, pragmas)

    def _wrap_loops(self, stage: Stage, leaves: Sequence[IterVar], body: Stmt, attach: bool) -> Stmt:
        for iv in reversed(leaves):
            if attach and iv in self.attached:
                inner = [self._stage_nest(child) for child in self.attached[iv]]
                body = seq(*inner, body)
                for child in reversed(self.attached[iv]):
                    for k in range(child.op.num_outputs):
                        body = Allocate(self._local_buffer(child, k), body)
            body = self._loop(stage, iv, body)
        return body

    def _stage_nest(self, stage: Stage) -> Stmt:
        if isinstance(stage.op, ExternOp):
            return self._extern_nest(stage)
        copy = self._runtime_copy(stage)
        if copy is not None:
            return copy
        op = stage.op
        assert isinstance(op, ComputeOp)
        loops = self.loops[stage]
        values = {iv.var: v for iv, v in self.root_values[stage].items()}
        store_index = tuple(simplify(loops.relative_values[iv]) for iv in op.axis)
        outputs = [self._local_buffer(stage, k) for k in range(op.num_outputs)]
        body = self.bodies[stage]
        if not op.reduce_axis:
            stores = [
                ProducerStore(buf, store_index, self._rewrite_reads(substitute(value, values)))
                for buf, value in zip(outputs, body)
            ]
            leaves = stage.leaf_iter_vars
            if stage.tensorized is not None:
                at = leaves.index(stage.tensorized.axis)
                inner, leaves = self._tensorized(stage, outputs, store_index), leaves[:at]
            else:
                inner = self._guarded(seq(*stores), self._guards(stage, include_reduce=False))
            return self._wrap_loops(stage, leaves, inner, attach=True)
        reduce = body[0]
        assert isinstance(reduce, Reduce)
        reduce_leaves: set[IterVar] = set()
        for iv in op.reduce_axis:
            reduce_leaves.update(_descendants(stage, iv))
        leaves = stage.leaf_iter_vars
        split_at = next((k for k, iv in enumerate(leaves) if iv in reduce_leaves), len(leaves))
        combiner = reduce.combiner
        init = self._guarded(
            seq(*(ProducerStore(buf, store_index, identity)
                  for buf, identity in zip(outputs, combiner.identity))),
            self._guards(stage, include_reduce=False),
        )
        init_leaves = [iv for iv in leaves[split_at:] if iv not in reduce_leaves]
        init_nest = self._wrap_loops(stage, init_leaves, init, attach=False)
        mapping: dict[Var, Expr] = {}
        for buf, lhs, rhs, source in zip(outputs, combiner.lhs, combiner.rhs, reduce.source):
            mapping[lhs] = ProducerLoad(buf, store_index, buf.dtype)
            mapping[rhs] = self._rewrite_reads(substitute(source, values))
        combined = [substitute(result, mapping) for result in combiner.result]
        update = _update(outputs, store_index, combined)
        condition = simplify(self._rewrite_reads(substitute(reduce.condition, values)))
        if not (isinstance(condition, Const) and condition.value):
            # A condition on indices alone (like the bound that rfactor adds for a split that
            # does not divide) usually holds on a range of the loop: let partitioning remove it
            # from the main iterations.
            likely = not contains(condition, ProducerLoad)
            update = IfThenElse(condition, update, None, likely=likely)
        update = self._guarded(update, self._guards(stage, include_reduce=True))
        inner_leaves = leaves[split_at:]
        if stage.tensorized is not None:
            at = leaves.index(stage.tensorized.axis)
            if at < split_at:  # the whole reduction is inside: initialise, then the intrinsic
                inside_data = [iv for iv in leaves[at:] if iv not in reduce_leaves]
                reset = self._wrap_loops(stage, inside_data, init, attach=False)
                whole = self._tensorized(stage, outputs, store_index, reset)
                return self._wrap_loops(stage, leaves[:at], whole, attach=True)
            update, inner_leaves = self._tensorized(stage, outputs, store_index), leaves[split_at:at]
        update_nest = self._wrap_loops(stage, inner_leaves, update, attach=True)
        return self._wrap_loops(stage, leaves[:split_at], seq(init_nest, update_nest), attach=True)

    def _tensorized(self, stage: Stage, outputs: Sequence[Buffer],
                    store_index: tuple[Expr, ...], reset: Stmt | None = None) -> Stmt:
        """The statement of a tensor intrinsic standing for the loops under its axis: its
        `lower_fn` on the regions of the stage's inputs and outputs those loops cover. With
        `reset` (the region's initialisation) the loops hold the whole reduction: the
        intrinsic's own body when `lower_fn` gives (body, reset, update), else reset + update."""
        t = stage.tensorized
        assert t is not None
        what = f"tensorize {t.intrin.name} at {t.axis.name} of stage {stage.name}"
        inside = {iv.var for iv in t.inside}
        zero = {v: const(0, v.dtype) for v in inside}
        values = {iv.var: v for iv, v in self.root_values[stage].items()}
        ins = []
        for placeholder in t.intrin.inputs:
            tensor, base = self._through_copies(*t.reads[placeholder])
            if self.schedule[tensor.op].attach is AttachKind.INLINE:
                raise ScheduleError(f"{what}: it reads {tensor.name}, which is inlined; a "
                                    "tensor intrinsic reads memory")
            start = [simplify(substitute(substitute(i, values), zero), self.ranges) for i in base]
            access = self.buffer_access(tensor, start)
            ins.append(TensorRegion(access.buffer, access.indices, len(placeholder.shape)))
        out_base = [simplify(substitute(i, zero)) for i in store_index]
        outs = [TensorRegion(buf, out_base, len(t.intrin.op.axis)) for buf in outputs]
        result = t.intrin.lower_fn(ins, outs)
        if isinstance(result, tuple):
            result = result[2] if stage.op.reduce_axis and reset is None else result[0]
            reset = None
        stmt = Evaluate(result) if isinstance(result, Expr) else result
        if reset is not None:
            stmt = seq(reset, stmt)
        guards = self._guards(stage, include_reduce=bool(stage.op.reduce_axis))
        if any(uses_var(g, inside) for g in guards):
            raise ScheduleError(f"{what}: the tensorized loops reach past the tensor's edge (a "
                                "split that does not divide); split by a divisor")
        return self._guarded(stmt, guards)

    def _through_copies(self, tensor: Tensor, indices: Sequence[Expr]
                        ) -> tuple[Tensor, Sequence[Expr]]:
        """The tensor a tensorized read reads in memory: through inlined stages that only copy
        another tensor element for element (a weight the graph packed beforehand)."""
        while self.schedule[tensor.op].attach is AttachKind.INLINE:
            op = tensor.op
            body = op.body[tensor.value_index] if isinstance(op, ComputeOp) else None
            if not (isinstance(body, TensorRead) and len(body.indices) == len(op.axis) and all(
                    i is iv.var for i, iv in zip(body.indices, op.axis))):
                break
            tensor = body.tensor
        return tensor, indices

    def _runtime_copy(self, stage: Stage) -> Stmt | None:
        """One call of the runtime's box copy for a copy stage that the kernel keeps to itself
        (`copy_box`): at the root, with nothing computed inside its loops; its reads of a
        tensor that is stored whole. A kernel's outputs keep the loops their schedule asks for."""
        op = stage.op
        if (op.reduce_axis or op.num_outputs != 1 or stage.attach is not AttachKind.ROOT
                or stage.tensorized is not None or op.outputs[0] in self.args
                or any(iv in self.attached for iv in stage.leaf_iter_vars)):
            return None
        axes = [iv.var for iv in op.axis]
        box = copy_box(self.bodies[stage][0], axes, op.outputs[0].dtype_)
        if box is None:
            return None
        source = self.schedule[box.read.tensor.op]
        if not (isinstance(source.op, PlaceholderOp) or source.attach is AttachKind.ROOT):
            return None
        parallel = any(stage.annotations.get(iv) is LoopAnnotation.PARALLEL
                       for iv in stage.leaf_iter_vars)
        read = self.buffer_access(box.read.tensor, box.read.indices)
        return copy_call(box, read.buffer, self._local_buffer(stage, 0), axes,
                         self.regions[stage].extents, parallel)

    def _extern_nest(self, stage: Stage) -> Stmt:
        """The loop IR an extern stage's `fcompute` writes, on whole-buffer regions."""
        op = stage.op
        assert isinstance(op, ExternOp)
        ins = []
        for tensor in op.inputs:
            access = self.buffer_access(tensor, [const(0) for _ in tensor.shape])
            ins.append(TensorRegion(access.buffer, access.indices))
        outs = [TensorRegion(buf, [const(0) for _ in buf.shape]) for buf in
                (self._local_buffer(stage, k) for k in range(op.num_outputs))]
        result = op.fcompute(ins, outs)
        return Evaluate(result) if isinstance(result, Expr) else result

    def build(self) -> PrimFunc:
        params = self._param_buffers()
        for buf in params:
            for dim in buf.shape:
                for v in free_vars(dim):
                    self.ranges[v] = (0.0, INF)  # sizes are never negative
        self._analyse()
        nests = [self._stage_nest(s) for s in self.compute_stages if s.attach is AttachKind.ROOT]
        body = seq(*nests)
        param_set = set(params)
        for stage in reversed(self.compute_stages):
            if stage.attach is not AttachKind.ROOT:
                continue
            for k in range(stage.op.num_outputs):
                buf = self._local_buffer(stage, k)
                if buf not in param_set:
                    body = Allocate(buf, body)
        shape_vars: list[Var] = []
        for buf in params:
            for dim in buf.shape:
                for v in sorted(free_vars(dim), key=lambda v: v.name):
                    if v not in shape_vars:
                        shape_vars.append(v)
        return PrimFunc(self.name, tuple(params), tuple(shape_vars), body)


def _update(outputs: Sequence[Buffer], index: tuple[Expr, ...], combined: Sequence[Expr]) -> Stmt:
    """Store the combined values of a reduction. With several outputs every value is computed
    (bound by a let) before any is stored, since each may read all the old ones."""
    if len(outputs) == 1:
        return ProducerStore(outputs[0], index, combined[0])
    temps = [Var(f"{buf.name}.next", buf.dtype) for buf in outputs]
    stmt: Stmt = seq(*(ProducerStore(buf, index, t) for buf, t in zip(outputs, temps)))
    for temp, value in reversed(list(zip(temps, combined))):
        stmt = LetStmt(temp, value, stmt)
    return stmt


def _check_unroll(stage: Stage, iv: IterVar, extent: Expr) -> None:
    copies = upper_bound(extent, {})
    if copies is None:
        raise ScheduleError(f"unroll: axis {iv.name} of stage {stage.name} has extent {extent}, "
                            "which has no constant upper bound; split it by a constant and "
                            "unroll the inner loop")
    if copies > MAX_UNROLL_COPIES:
        raise ScheduleError(f"unroll: axis {iv.name} of stage {stage.name} has {copies} "
                            f"iterations, more than {MAX_UNROLL_COPIES} copies of its body; "
                            "split it and unroll a part")


def _mentions_reduce(stage: Stage, cond: Expr) -> bool:
    reduce_vars = {iv.var for root in stage.op.reduce_axis for iv in _descendants(stage, root)}
    return uses_var(cond, reduce_vars)


class _ReadRewriter(Mutator):
    def __init__(self, builder: LoopNestBuilder):
        self.builder = builder

    def visit_TensorRead(self, node: TensorRead) -> Expr:
        indices = [self.visit(i) for i in node.indices]
        return self.builder.buffer_access(node.tensor, indices)

    def visit_Reduce(self, node: Reduce) -> Expr:
        raise ValueError("a reduction may only be the whole body of a compute")


def build_loop_nest(schedule: Schedule, args: Sequence[Tensor], name: str) -> PrimFunc:
    """Loop IR for `schedule` with `args` as the kernel's buffer parameters, in order."""
    return LoopNestBuilder(schedule, args, name).build()
