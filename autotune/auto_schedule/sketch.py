"""Sketch rules: how the auto-scheduler turns a compute DAG into a schedule with knobs.

The core of auto-scheduling. The stages are visited from the outputs back to the inputs; for
each, the first rule of `SKETCH_RULES` whose `condition` holds applies its primitives through a
`Tracer` (so the schedule is recorded as a replayable trace) and declares its open choices
(tile sizes, unroll depth, whether the outer loops run in parallel, where a producer is
computed) as knobs of the config, exactly as a hand-written template does. The sketch's random
annotation is thus a point of a `ConfigSpace`, and the tuners, cost model, features and log
of templates serve auto-scheduled tasks unchanged. A combination the register file cannot hold
is rejected with `cfg.raise_error` before anything is built.

The rules (Ansor's, for CPUs): inline elementwise stages; multi-level tiling in the SSRSRS
shape for stages with data reuse, with the accumulator in a `cache_write` stage or the
elementwise consumer fused around the tile, its lanes along the innermost axis or, when that
wastes lanes, along an outer axis of whole vectors (a convolution's output channels); rfactor
of reductions whose inner reduction is contiguous (vector lanes) or whose outer parallelism is
too small (threads), computed per row of their reader or per vector block of the expression
that reads them; parallel outer loops, vectorized innermost spatial loops,
`auto_unroll_max_step` pragmas; padded inputs inlined, computed at the consumer's tile or in
full. Append a `SketchRule` to `SKETCH_RULES` (before creating a task) to add one; rules
earlier in the list take precedence.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import tensorlang as tl
from tensorlang.arith import const_value
from tensorlang.dtype import as_dtype
from tensorlang.expr import IterVar, Var
from tensorlang.schedule import LoopAnnotation, Schedule, Stage
from tensorlang.tensor import ComputeOp, PlaceholderOp, Tensor
from tensorlang.visitor import free_vars

from . import dag
from .trace import Trace, Tracer

#: The values of the `auto_unroll_max_step` pragma a sketch may pick (Ansor's CPU set).
UNROLL_STEPS = (0, 16, 64, 512)
#: The untuned one.
UNTUNED_UNROLL = 64
#: Output points below which a reduction is split across threads by rfactor.
MIN_PARALLEL_POINTS = 64
#: Vectors a register block may span along its vectorized axis.
MAX_BLOCK_VECTORS = 4
#: Rows a register block may span along an axis other than the vectorized one.
MAX_BLOCK_ROWS = 8
#: Row blocks a divisor of the extent must give for blocks to stay whole: the heights that
#: fit in the vector registers beside a few vectors of columns (4 x 4 .. 6 x 4 with 32
#: registers, 4 x 2 .. 6 x 2 with 16). Without one, blocks of up to MAX_BLOCK_ROWS rows leave a
#: partial last block (a prime extent's 1-row block loads every vector of the right operand
#: for a single row: an untuned GEMM 197 x 768 x 768 ran 3.7x slower, 77 x 64 scores too).
DIVIDING_ROWS = range(4, 7)
#: Panel reads (`_panel_reads`) are offered for input rows of at least this many bytes, read
#: by at least this many rows of the output, and taken untuned from PANEL_ROW_BYTES.
MIN_PANEL_ROW_BYTES = 1024
MIN_PANEL_REUSE = 16
PANEL_ROW_BYTES = 4096
#: The longest inner reduction loop (r1) a tile may run its register block over.
MAX_INNER_REDUCTION = 512
#: The untuned r1: long enough that loading and storing the accumulators costs little.
FALLBACK_INNER_REDUCTION = 128
#: Elements of the untuned accumulator tile (16 KB of float32: it stays in L1).
FALLBACK_TILE_ELEMENTS = 4096
#: Multiply-adds per element copied below which the untuned lanes stay on the innermost axis
#: rather than read inputs through a transposed copy (a 3x3 convolution at 14 x 14 has 196).
MIN_WORK_PER_COPIED = 512
#: The size a symbolic extent is assumed to have when its tile sizes are enumerated.
SYMBOLIC_EXTENT = 256


@dataclass
class Anchor:
    """Where producers of a scheduled stage can be computed: `loop` of `stage`, inside which
    the first `prefix` spatial axes of the stage are fixed (one row of a softmax, one tile of a
    GEMM's output)."""

    stage: Stage
    loop: IterVar
    prefix: int
    tile: bool = False


@dataclass
class SketchState:
    """What the rules share while one sketch is built.

    Attributes:
        schedule: the schedule being built.
        tracer: applies and records the primitives.
        cfg: the config (a ConfigSpace while the space is defined, a ConfigEntity or
            FallbackConfig when instantiated).
        outputs: the workload's computed tensors.
        anchors: per scheduled stage, where its producers may be computed.
    """

    schedule: Schedule
    tracer: Tracer
    cfg: Any
    outputs: list[Tensor]
    anchors: dict[Stage, Anchor] = field(default_factory=dict)
    _names: dict[Stage, str] = field(default_factory=dict)

    # -- target facts ----------------------------------------------------------------------

    @staticmethod
    def lanes(dtype: str) -> int:
        """Lanes of one vector register of `dtype` on the current target."""
        return tl.Target.current().vector_lanes(dtype)

    @staticmethod
    def registers() -> int:
        """Vector registers of the current target."""
        return tl.Target.current().vector_registers

    @staticmethod
    def threads() -> int:
        """Threads parallel loops run on."""
        return int(os.environ.get("TL_NUM_THREADS") or os.cpu_count() or 1)

    # -- knobs -----------------------------------------------------------------------------

    def name(self, stage: Stage) -> str:
        """A knob prefix unique to `stage` ("C", "C#2" for a second stage called C)."""
        if stage not in self._names:
            base = stage.name
            taken = set(self._names.values())
            name, k = base, 1
            while name in taken:
                k += 1
                name = f"{base}#{k}"
            self._names[stage] = name
        return self._names[stage]

    def knob(self, name: str, candidates: Sequence[Any], fallback: Any = None) -> Any:
        """Define knob `name` and return its value in this config (`fallback`, when given,
        is what the untuned config takes)."""
        self.cfg.define_knob(name, list(candidates))
        if self.cfg.is_fallback and fallback is not None:
            self.cfg.fallback_knob(name, fallback)
        return self.cfg[name].val

    def split_knob(self, name: str, extent: int, candidates: Sequence[Sequence[int]],
                   fallback: Sequence[int] | None = None) -> list[int]:
        """Define a split knob over `candidates` (outermost first, the first part -1) and
        return its sizes in this config."""
        self.cfg.define_split(name, extent, num_outputs=len(candidates[0]), policy="candidate",
                              candidate=[list(c) for c in candidates])
        if self.cfg.is_fallback and fallback is not None:
            self.cfg.fallback_split(name, list(fallback))
        return list(self.cfg[name].size)

    def reject(self, message: str) -> None:
        """Reject this config as invalid (before it is built)."""
        self.cfg.raise_error(message)


SketchCondition = Callable[[SketchState, Stage], bool]
SketchApply = Callable[[SketchState, Stage], None]


@dataclass(frozen=True)
class SketchRule:
    """A rule: when `condition(state, stage)` holds, `apply(state, stage)` schedules the stage
    (through `state.tracer`, declaring knobs through `state`); later rules are not tried."""

    name: str
    condition: SketchCondition
    apply: SketchApply


# -- helpers ---------------------------------------------------------------------------------------


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _extent(iv: IterVar) -> int:
    e = dag.static_extent(iv)
    return SYMBOLIC_EXTENT if e is None else e


def _is_output(state: SketchState, stage: Stage) -> bool:
    return stage.is_output


def _vector_axis(op: ComputeOp) -> IterVar | None:
    """The innermost spatial axis, the one vector lanes run along (None for a scalar)."""
    for iv in reversed(op.axis):
        if dag.static_extent(iv) != 1:
            return iv
    return None


def _vectorize_inner(state: SketchState, stage: Stage, iv: IterVar, lanes: int,
                     extent: int | None) -> None:
    """Vectorize loop `iv` (of `extent` points): one vector, or whole vectors with the loop
    over them unrolled when it spans several."""
    tr = state.tracer
    if extent is not None and extent > lanes and extent % lanes == 0 and extent <= 4 * lanes:
        outer, inner = tr.split(stage, iv, factor=lanes)
        tr.annotate(stage, outer, "unroll")
        tr.annotate(stage, inner, "vectorize")
    else:
        tr.annotate(stage, iv, "vectorize")


def _fuse_parallel(state: SketchState, stage: Stage, loops: Sequence[IterVar],
                   parallel: bool = True) -> IterVar | None:
    loops = list(loops)
    if not loops:
        return None
    fused = state.tracer.fuse(stage, *loops) if len(loops) > 1 else loops[0]
    if parallel:
        state.tracer.annotate(stage, fused, "parallel")
    return fused


# -- rule: inline elementwise stages ---------------------------------------------------------------


def _inlinable(state: SketchState, stage: Stage) -> bool:
    return (dag.is_elementwise(stage.op) and not stage.is_output
            and not dag.is_padding(stage.op))


def _inline(state: SketchState, stage: Stage) -> None:
    """Inline, unless the stage computes a math function (exp, tanh) for several readers that
    all run row by row (a softmax's exp for its sum and its output): then a knob may instead
    compute each row once, into a buffer the readers share."""
    readers = dag.effective_readers(state.schedule, stage)
    costly = any(dag.calls_math(b) for b in stage.op.body)
    anchor = _row_anchor(state, stage, strict=False) if costly and len(readers) > 1 else None
    if anchor is not None and not state.knob(f"{state.name(stage)}.inline", [True, False],
                                             fallback=False):
        anchor = _row_anchor(state, stage)
        if anchor is not None:
            state.tracer.compute_at(stage, anchor.stage, anchor.loop)
            state.anchors[stage] = anchor
            axes = stage.op.axis
            _vectorize_inner(state, stage, axes[-1], state.lanes(stage.op.output(0).dtype),
                             None)
            return
    state.tracer.compute_inline(stage)


# -- rule: padded inputs ---------------------------------------------------------------------------


def _padded(state: SketchState, stage: Stage) -> bool:
    return dag.is_padding(stage.op) and not stage.is_output


def _place_padding(state: SketchState, stage: Stage) -> None:
    """A padded input is inlined (bounds checks in the reader's loops), computed per tile of
    its reader (a small buffer that stays in cache) or computed in full before it."""
    anchor = next((state.anchors[r] for r in dag.effective_readers(state.schedule, stage)
                   if r in state.anchors and state.anchors[r].tile), None)
    places = ["root", "inline"] + (["tile"] if anchor is not None else [])
    where = state.knob(f"{state.name(stage)}.place", places, fallback="root")
    if where == "inline":
        state.tracer.compute_inline(stage)
    elif where == "tile":
        assert anchor is not None
        state.tracer.compute_at(stage, anchor.stage, anchor.loop)
        _vector_rows(state, stage, parallel=False)
    else:
        _vector_rows(state, stage, parallel=True)


def _vector_rows(state: SketchState, stage: Stage, parallel: bool) -> None:
    """Vectorize the innermost axis, run the outer ones (all but the row loop) in parallel."""
    op = stage.op
    axes = list(op.axis)
    if not axes:
        return
    lanes = state.lanes(op.output(0).dtype)
    inner = axes[-1]
    _, vec = state.tracer.split(stage, inner, factor=lanes)
    state.tracer.annotate(stage, vec, "vectorize")
    if parallel and len(axes) > 1:
        _fuse_parallel(state, stage, axes[:-1] if len(axes) > 2 else axes[:1])


# -- rule: multi-level tiling (SSRSRS) -------------------------------------------------------------


def _needs_tiling(state: SketchState, stage: Stage) -> bool:
    return dag.has_data_reuse(stage.op) and stage.op.num_outputs == 1


def _fusable_consumer(state: SketchState, stage: Stage, pending: bool = False) -> Stage | None:
    """The elementwise output stage that is `stage`'s only reader and reads it at its own
    point (bias + relu after a GEMM): it can be computed around the tile instead of a
    cache_write. `pending`: the elementwise stages in between are not inlined yet."""
    found = _readers_through_elementwise(state, stage) if pending else \
        dag.effective_readers(state.schedule, stage)
    if len(found) != 1:
        return None
    (consumer,) = found
    op = consumer.op
    if not (dag.is_elementwise(op) and consumer.is_output and consumer not in state.anchors
            and len(op.axis) == len(stage.op.axis)):
        return None
    if any(dag.static_extent(a) != dag.static_extent(b) for a, b in zip(op.axis, stage.op.axis)):
        return None
    for r in dag.reads(op):
        if state.schedule[r.tensor.op] is stage:
            if len(r.indices) != len(op.axis) or any(
                    not (isinstance(i, (Var, IterVar)) and (i is a.var or i is a))
                    for i, a in zip(r.indices, op.axis)):
                return None
    return consumer


def _readers_through_elementwise(state: SketchState, stage: Stage) -> list[Stage]:
    out: list[Stage] = []
    for r in dag.readers(state.schedule, stage):
        if dag.is_elementwise(r.op) and not r.is_output and not dag.is_padding(r.op):
            out += [x for x in _readers_through_elementwise(state, r) if x not in out]
        elif r not in out:
            out.append(r)
    return out


def _space_candidates(extent: int, inner_choices: Sequence[int]) -> list[list[int]]:
    """[-1, s1, s2, s3] with s3 from `inner_choices` and s1 * s2 * s3 dividing `extent` (or,
    for an s3 that does not divide it, s1 * s2 dividing the number of s3-blocks)."""
    out = []
    for s3 in inner_choices:
        blocks = extent // s3 if extent % s3 == 0 else -(-extent // s3)
        for s2 in _divisors(blocks):
            if s2 * s3 > 1024:
                continue
            for s1 in _divisors(blocks // s2):
                out.append([-1, s1, s2, s3])
    return out


def _partial_rows(extent: int) -> bool:
    """Whether row blocks along an axis of this extent may leave a partial last block: no
    divisor gives a block of DIVIDING_ROWS rows."""
    return extent > MAX_BLOCK_ROWS and not any(extent % d == 0 for d in DIVIDING_ROWS)


def _inner_choices(extent: int, vector: bool, lanes: int) -> list[int]:
    """Register-block sizes of an axis: whole vectors along the vectorized axis (the last block
    partial where they do not divide it; one short vector for an axis shorter than a vector),
    up to MAX_BLOCK_ROWS rows along the others, with a partial last block where no divisor
    gives a block of DIVIDING_ROWS."""
    if not vector:
        if _partial_rows(extent):
            return list(range(1, MAX_BLOCK_ROWS + 1))
        return [d for d in _divisors(extent) if d <= MAX_BLOCK_ROWS]
    most = MAX_BLOCK_VECTORS if SketchState.registers() >= 32 else 2
    if extent <= lanes:
        return [extent]
    return [v * lanes for v in range(1, most + 1) if (v - 1) * lanes < extent]


def _inner_reductions(extent: int) -> list[int]:
    """Lengths of the inner reduction loop (r1): the divisors of the extent up to
    MAX_INNER_REDUCTION, and FALLBACK_INNER_REDUCTION with a partial last step where no divisor
    comes near it (a prime extent above MAX_INNER_REDUCTION: its one divisor there, 1, would
    load and store the accumulators at every step)."""
    steps = [d for d in _divisors(extent) if d <= MAX_INNER_REDUCTION]
    if extent > MAX_INNER_REDUCTION and max(steps) < FALLBACK_INNER_REDUCTION // 8:
        steps.append(FALLBACK_INNER_REDUCTION)
    return steps


def _fallback_inner_reduction(extent: int, steps: Sequence[int]) -> int:
    """The untuned r1: the longest step up to FALLBACK_INNER_REDUCTION, unless that is short
    (a prime extent's 1, which loads and stores the register block at every step): then the
    whole reduction (up to MAX_INNER_REDUCTION) or the longest step."""
    near = max(d for d in steps if d <= FALLBACK_INNER_REDUCTION)
    return near if near >= FALLBACK_INNER_REDUCTION // 8 or near == extent else max(steps)


def _inner_reduction_copies(spatial: Sequence[IterVar], vec_axis: IterVar | None,
                            sizes: Sequence[Sequence[int]], r_sizes: Sequence[Sequence[int]],
                            lanes: int) -> tuple[int, int, int]:
    """(steps, vectors loaded per step, register-block vectors) of the inner reduction loop:
    its copies hold steps x block statements and load steps x vectors."""
    rows = vectors = steps = 1
    for iv, sz in zip(spatial, sizes):
        if iv is vec_axis:
            vectors = -(-sz[3] // lanes)
        else:
            rows *= sz[3]
    for sz in r_sizes:
        steps *= sz[1]
    return steps, vectors, rows * vectors


def _unrolled_loads_spill(state: SketchState, copies: tuple[int, int, int]) -> bool:
    """Whether the inner reduction loop, unrolled, loads more vectors than the registers hold
    beside the block. The loop over the tile's blocks around it reads the same vectors in
    every block, so LLVM hoists them out of that loop and spills them (a 1-row block of 4
    vectors over 13 steps: 52 vectors of the right operand, 21 reloads per row on NEON)."""
    steps, vectors, block = copies
    return steps * vectors + block > state.registers()


def _fallback_unroll(state: SketchState, copies: tuple[int, int, int]) -> int:
    """The untuned auto_unroll_max_step: UNTUNED_UNROLL, or where that unrolls an inner
    reduction loop whose loads would spill (`_unrolled_loads_spill`), the largest step that
    leaves it rolled."""
    steps, _, block = copies
    if not _unrolled_loads_spill(state, copies):
        return UNTUNED_UNROLL
    return min(UNTUNED_UNROLL, max(u for u in UNROLL_STEPS if u < steps * block))


def _multi_level_tiling(state: SketchState, stage: Stage) -> None:
    """SSRSRS: the spatial loops split in four levels (parallel tile, tile, block, register
    block) and the reductions in two, as s0 s1 | r0 s2 r1 s3 with the accumulating stage
    computed at the end of the s1 loops of the output tile and its register block (s3)
    unrolled and vectorized."""
    tr = state.tracer
    name = state.name(stage)
    ndim = len(stage.op.axis)
    lane, lane_choices = _lane_axis(state, stage)
    _contiguous_layouts(state, stage, lane)
    consumer = _fusable_consumer(state, stage)
    inner = _vector_axis(stage.op)
    # Accumulators vectorized along an outer axis live in a cache with that axis innermost.
    layout = None if lane is None or stage.op.axis[lane] is inner else \
        [k for k in range(ndim) if k != lane] + [lane]
    if layout is not None:
        compute = tr.cache_write(stage, "local", layout)
        owner = stage
        if consumer is not None:  # its copy back is read at the consumer's own point
            tr.compute_inline(stage)
            owner = consumer
    elif consumer is not None:
        owner, compute = consumer, stage
    else:
        compute = tr.cache_write(stage, "local")
        owner = stage
    op = compute.op
    dtype = op.output(0).dtype
    lanes = state.lanes(dtype)
    order = layout or list(range(ndim))
    # The accumulating stage's axes in the output's order (the knobs are named by it).
    spatial = [op.axis[order.index(k)] for k in range(ndim)]
    vec_axis = None if lane is None else spatial[lane]
    reduce_axes = list(op.reduce_axis)

    # The knobs: four spatial levels per axis, two reduction levels, unroll, parallel.
    sizes = []
    fallbacks = _fallback_tiles(state, op, spatial, vec_axis, lanes)
    for k, iv in enumerate(spatial):
        extent = _extent(iv)
        vector = iv is vec_axis
        if extent == 1:
            sizes.append([1, 1, 1, 1])
            continue
        # An axis that may carry the lanes or not has a knob per role (a knob's candidates
        # cannot depend on another knob's value): `tile<k>` for its default role and
        # `tile<k>.lanes` / `.rows` for the other, which idles while the default holds.
        roles = [vector]
        if len(lane_choices) > 1 and k in lane_choices:
            roles = [k == lane_choices[0], k != lane_choices[0]]
        for role in roles:
            knob = f"{name}.tile{k}" if role is roles[0] else \
                f"{name}.tile{k}.{'lanes' if role else 'rows'}"
            choices = _inner_choices(extent, role, lanes)
            fallback = fallbacks[k] if role is vector else [-1, 1, 1, choices[0]]
            size = state.split_knob(knob, extent, _space_candidates(extent, choices), fallback)
            if role is vector:
                sizes.append(size)
    r_sizes = []
    for k, iv in enumerate(reduce_axes):
        extent = _extent(iv)
        # The register block lives across the inner reduction loop (r1) only: a short one
        # loads and stores the accumulators every few steps.
        steps = _inner_reductions(extent)
        r_sizes.append(state.split_knob(f"{name}.rtile{k}", extent, [[-1, d] for d in steps],
                                        [-1, _fallback_inner_reduction(extent, steps)]))
    copies = _inner_reduction_copies(spatial, vec_axis, sizes, r_sizes, lanes)
    unroll = state.knob(f"{name}.unroll", list(UNROLL_STEPS),
                        fallback=_fallback_unroll(state, copies))
    parallel = state.knob(f"{name}.parallel", [True, False], fallback=True)
    vectors = 1
    block = 1
    for iv, sz in zip(spatial, sizes):
        if iv is vec_axis:
            vectors = max(1, -(-sz[3] // lanes))
        else:
            block *= sz[3]
    if block * vectors > state.registers() - tl.Target.current().operand_registers(vectors):
        state.reject(f"register block of {block} x {vectors} vectors exceeds the register file")

    if vec_axis is not None and layout is None:
        _panel_reads(state, compute, vec_axis, sizes[lane][3], lanes)

    # The output tile (owner): s0 (fused, parallel) s1 | t = s2 * s3.
    o_axes = list(owner.op.axis)
    outer, middle, tiles = [], [], []
    for iv, sz in zip(o_axes, sizes):
        if sz[1:] == [1, 1, 1] and _extent(iv) == 1:
            outer.append(iv)
            continue
        o, rest = tr.split(owner, iv, factor=sz[1] * sz[2] * sz[3])
        m, t = tr.split(owner, rest, factor=sz[2] * sz[3])
        outer.append(o)
        middle.append(m)
        tiles.append(t)
    # The parallel loop fuses at most the two outermost tile loops that have more than one
    # iteration: the bounds of the stage computed inside are exact through one fused index
    # (a division and a remainder) but not through nested ones, where the accumulator would
    # grow to the whole output. The other tile loops run serially inside it.
    counts = [-(-_extent(iv) // (sz[1] * sz[2] * sz[3])) for iv, sz in zip(o_axes, sizes)]
    trivial = [o for o, n in zip(outer, counts) if n == 1]
    busy = [o for o, n in zip(outer, counts) if n > 1]
    tr.reorder(owner, *trivial, *busy, *middle, *tiles)
    parallel = bool(busy) and parallel
    fused = _fuse_parallel(state, owner, busy[:2], parallel)
    if tiles and _vector_axis(owner.op) is o_axes[-1]:
        tr.annotate(owner, tiles[-1], "vectorize")
    attach = middle[-1] if middle else fused
    if attach is None:
        attach = owner.leaf_iter_vars[0]
    tr.compute_at(compute, owner, attach)
    state.anchors[owner] = Anchor(owner, fused if fused is not None else attach, 0, tile=True)
    state.anchors[compute] = state.anchors[owner]

    # The accumulating stage: r0 s2 r1 s3, the register block s3 unrolled and vectorized.
    blocks_outer, blocks_inner = [], []
    for iv, sz in zip(spatial, sizes):
        if sz[3] == 1 or _extent(iv) == 1:
            blocks_outer.append(iv)
            continue
        a2, a3 = tr.split(compute, iv, factor=sz[3])
        blocks_outer.append(a2)
        blocks_inner.append((iv, a3, sz[3]))
    r_outer, r_inner = [], []
    for iv, sz in zip(reduce_axes, r_sizes):
        r0, r1 = tr.split(compute, iv, factor=sz[1])
        r_outer.append(r0)
        r_inner.append(r1)
    blocks_inner.sort(key=lambda block: block[0] is vec_axis)  # the lanes innermost
    tr.reorder(compute, *r_outer, *blocks_outer, *r_inner, *(a3 for _, a3, _ in blocks_inner))
    for iv, a3, size in blocks_inner:
        if iv is vec_axis:
            _vectorize_inner(state, compute, a3, lanes, size)
        else:
            tr.annotate(compute, a3, "unroll")
    if unroll:
        tr.pragma(compute, compute.leaf_iter_vars[0], "auto_unroll_max_step", unroll)
    if (r_inner and unroll < copies[0] * copies[2] <= max(UNROLL_STEPS)
            and _unrolled_loads_spill(state, copies)):
        # Rolled here, and for LLVM too, whose unroller copies a loop this short in full (the
        # partial block of an edge, fewer accumulators than the block, included).
        tr.pragma(compute, r_inner[0], "scalar_loop", True)


def _panel_reads(state: SketchState, stage: Stage, vec_axis: IterVar, width: int,
                 lanes: int) -> None:
    """A knob per input that the register block reads a row of per reduction step (a GEMM's
    right operand `B[k, j]`) has the stage read it in panels of the block's width instead
    (`Tracer.panel_read`): each block then streams one run of memory rather than rows a whole
    row of the input apart, a page at 1024 float32 columns, where the copy, once per call, is
    paid back by the rows that reuse each panel. On by default for rows of PANEL_ROW_BYTES:
    untuned GEMMs with panels against without, side by side on a Zen 4: 1024^3 1.03-1.05x
    (1.05x numpy), 512 x 2048 x 1024 1.06-1.09x, 768 x 3072 x 768 1.02x."""
    op = stage.op
    name = state.name(stage)
    reduced = {iv.var for iv in op.reduce_axis}
    rows = [iv for iv in op.axis if iv is not vec_axis]
    reads = dag.reads(op)
    for tensor in list(op.input_tensors):
        tensor_reads = [r for r in reads if r.tensor == tensor]
        if tensor.ndim < 2 or not tensor_reads or not all(
                r.indices[-1] is vec_axis.var for r in tensor_reads):
            continue
        inside = [free_vars(i) for r in tensor_reads for i in r.indices[:-1]]
        if any(vec_axis.var in v for v in inside) or not any(reduced & v for v in inside):
            continue
        reuse = math.prod(_extent(iv) for iv in rows
                          if not any(iv.var in v for v in inside))
        row_bytes = _extent(vec_axis) * as_dtype(tensor.dtype).itemsize
        if reuse < MIN_PANEL_REUSE or row_bytes < MIN_PANEL_ROW_BYTES:
            continue
        # (the knob exists whatever the block's width: a knob's candidates may not depend on
        # another knob's value; panels of a part of a vector would leave its reads gathers)
        if state.knob(f"{name}.panel.{tensor.name}", [True, False],
                      fallback=row_bytes >= PANEL_ROW_BYTES) and width % lanes == 0:
            copy = state.tracer.panel_read(stage, tensor, width)
            _vector_rows(state, copy, parallel=True)


def _lane_axis(state: SketchState, stage: Stage) -> tuple[int | None, list[int]]:
    """The position of the spatial axis whose register block runs in vector lanes, and the
    positions it could take: the innermost axis (contiguous in the output), or, when its
    extent wastes lanes (56 columns are 3.5 AVX-512 vectors), a knob may pick an axis of whole
    vectors that every input misses or indexes alone in one dimension (a convolution's output
    channels, `W[k, c, ry, rx]`, then read through a copy with `k` innermost). None for a
    stage without one."""
    op = stage.op
    inner = _vector_axis(op)
    if inner is None:
        return None, []
    default = list(op.axis).index(inner)
    lanes = state.lanes(op.output(0).dtype)
    extent = dag.static_extent(inner)
    if extent is None or extent % lanes == 0:
        return default, [default]
    choices = [default]
    for k, iv in enumerate(op.axis):
        size = dag.static_extent(iv)
        dims = dag.lane_dims(op, iv) if iv is not inner and size and size % lanes == 0 \
            else None
        if dims is not None and all(d == t.ndim - 1 or isinstance(t.op, PlaceholderOp)
                                    for t, d in dims.items()):
            choices.append(k)
    if len(choices) == 1:
        return default, choices
    # Untuned: the outer axis (whole vectors beat a masked tail in every block) unless the
    # copies it reads through cost too much next to the work.
    copied = sum(_elements(t) for t, d in (dag.lane_dims(op, op.axis[choices[1]]) or {}).items()
                 if d != t.ndim - 1)
    work = (dag.spatial_points(op) or 0) * math.prod(_extent(iv) for iv in op.reduce_axis)
    fallback = choices[1] if copied * MIN_WORK_PER_COPIED <= work else default
    return state.knob(f"{state.name(stage)}.lanes", choices, fallback=fallback), choices


def _elements(tensor: Tensor) -> int:
    dims = [const_value(d) for d in tensor.shape]
    return math.prod(SYMBOLIC_EXTENT if d is None else d for d in dims)


def _contiguous_layouts(state: SketchState, stage: Stage, lane: int | None) -> None:
    """Inputs read across the vector lanes in an outer dimension would be read by gathers.
    Along the innermost axis, a knob may have the stage read a transposed copy of an input
    whose last dimension a reduction runs along (attention's `K[b, h, j, d]`); along another
    axis (`_lane_axis`), every such input is read through a copy with that dimension
    innermost."""
    op = stage.op
    inner = _vector_axis(op)
    if inner is None:
        return
    copies = []
    for tensor in list(op.input_tensors):
        dims = {k for r in dag.reads(op) if r.tensor == tensor
                for k, i in enumerate(r.indices) if inner.var in free_vars(i)}
        last_reduced = any(r.tensor == tensor and r.indices and any(
            iv.var in free_vars(r.indices[-1]) for iv in op.reduce_axis) for r in dag.reads(op))
        if len(dims) != 1 or not last_reduced or max(dims) == tensor.ndim - 1:
            continue
        name = f"{state.name(stage)}.transpose.{tensor.name}"
        if state.knob(name, [True, False], fallback=True) and op.axis[lane] is inner:
            copies.append((tensor, dims.pop()))
    if lane is not None and op.axis[lane] is not inner:
        lane_dims = dag.lane_dims(op, op.axis[lane]) or {}
        copies = [(t, d) for t, d in lane_dims.items() if d != t.ndim - 1]
    for tensor, dim in copies:
        copy = state.tracer.transpose_read(stage, tensor, dim)
        if op.axis[lane] is inner:
            _vector_rows(state, copy, parallel=True)
        else:
            _transposed_blocks(state, copy)


def _transposed_blocks(state: SketchState, copy: Stage) -> None:
    """A transposed copy in blocks of lanes x lanes elements: each reads `lanes` rows of the
    source (cache lines that stay in L1 across the block) and stores runs of `lanes`
    contiguous elements; the blocks in parallel. Weights 256 x 256 x 3 x 3 read by 16-lane
    gathers along the output channels took 500-600 us on a Zen 4 core, in blocks 225 us."""
    tr = state.tracer
    axes = list(copy.op.axis)
    lanes = state.lanes(copy.op.output(0).dtype)
    rows = tr.fuse(copy, *axes[:-1]) if len(axes) > 2 else axes[0]
    row_blocks, row = tr.split(copy, rows, factor=lanes)
    column_blocks, column = tr.split(copy, axes[-1], factor=lanes)
    tr.reorder(copy, row_blocks, column_blocks, row, column)
    tr.annotate(copy, column, "unroll")
    tr.annotate(copy, row_blocks, "parallel")


def _rows_axis(op: ComputeOp, spatial: Sequence[IterVar],
               vec_axis: IterVar | None) -> IterVar | None:
    """The axis whose points are the rows of the untuned register block: the innermost other
    axis that the reads along the lanes miss, so that each loaded vector serves every row (a
    convolution's output channels when its lanes run along the width); else the innermost
    other axis."""
    others = [iv for iv in reversed(spatial) if iv is not vec_axis and _extent(iv) > 1]
    along = [r for r in dag.reads(op) if vec_axis is not None and r.indices
             and vec_axis.var in free_vars(r.indices[-1])]
    missed = [iv for iv in others
              if not any(iv.var in free_vars(i) for r in along for i in r.indices)]
    return (missed or others or [None])[0]


def _fallback_tiles(state: SketchState, op: ComputeOp, spatial: Sequence[IterVar],
                    vec_axis: IterVar | None, lanes: int) -> list[list[int]]:
    """The untuned tile of each axis: a register block of rows of `_rows_axis` by vectors
    (blocks that divide the extents first, then the most vectors up to MAX_BLOCK_VECTORS, then
    the most rows the vector registers hold beside them: each row costs a broadcast per step),
    an accumulator tile of up to 4 vectors by rows up to about FALLBACK_TILE_ELEMENTS in all
    (L1-resident), the rest of each axis in parallel. On one Zen 4 core against OpenBLAS: GEMM
    512^3 in 4 rows x 4 vectors, 64 x 64 tiles 1.05x (4 x 2 in 8 x 128 tiles: 0.94x); 128 x
    3072 x 768 in 4 x 4 1.09x, 8 x 3 0.92x, 8 x 2 0.77x."""
    tiles = [[-1, 1, 1, 1] for _ in spatial]
    rows = _rows_axis(op, spatial, vec_axis)
    if vec_axis is None:
        return tiles
    target = tl.Target.current()
    vec_choices = _inner_choices(_extent(vec_axis), True, lanes)
    row_choices = _inner_choices(_extent(rows), False, lanes) if rows is not None else [1]

    def vectors(v: int) -> int:
        return -(-v // lanes)

    def whole(r: int, v: int) -> bool:  # no partial block at the edges (where rows have one)
        return _extent(vec_axis) % v == 0 and (
            rows is None or _extent(rows) % r == 0 or _partial_rows(_extent(rows)))

    fitting = [(r, v) for r in row_choices for v in vec_choices
               if r * vectors(v) + target.operand_registers(vectors(v)) <= state.registers()]
    r3, v3 = max(fitting, key=lambda rv: (whole(*rv), vectors(rv[1]), rv[0]),
                 default=(row_choices[0], vec_choices[0]))

    def blocks(iv: IterVar, size: int) -> list[int]:
        return _divisors(-(-_extent(iv) // size))

    v2 = max(d for d in blocks(vec_axis, v3) if d * v3 <= MAX_BLOCK_VECTORS * lanes or d == 1)
    tiles[list(spatial).index(vec_axis)] = [-1, 1, v2, v3]
    if rows is not None:
        r2 = max(d for d in blocks(rows, r3)
                 if d * r3 * v2 * v3 <= FALLBACK_TILE_ELEMENTS or d == 1)
        tiles[list(spatial).index(rows)] = [-1, 1, r2, r3]
    return tiles


# -- rule: reductions without reuse ----------------------------------------------------------------


def _is_reduction(state: SketchState, stage: Stage) -> bool:
    return isinstance(stage.op, ComputeOp) and bool(stage.op.reduce_axis) and \
        stage.op.num_outputs == 1


def _row_anchor(state: SketchState, stage: Stage, strict: bool = True) -> Anchor | None:
    """The anchor of a reader that fixes this stage's whole output per iteration (a softmax's
    output row for its max and sum), when every other reader is computed there too (with
    `strict`; without, whether there could be one: what the knobs depend on)."""
    ndim = len(stage.op.axis)
    found = dag.effective_readers(state.schedule, stage)
    for r in found:
        anchor = state.anchors.get(r)
        if anchor is None or anchor.tile or not 0 < anchor.prefix <= ndim:
            continue
        lead = anchor.prefix
        if len(r.op.axis) < ndim or not all(
                dag.static_extent(a) == dag.static_extent(b)
                for a, b in zip(r.op.axis[:ndim], stage.op.axis)):
            continue
        if ndim > lead and not _reads_rows(r.op, stage, lead):
            continue
        if not strict or all(
                x is r or (x.attach_stage is anchor.stage and x.attach_ivar is anchor.loop)
                for x in found):
            return anchor
    return None


def _reads_rows(reader: ComputeOp, stage: Stage, lead: int) -> bool:
    """Whether every read of `stage` in `reader` indexes its first `lead` dimensions with the
    reader's first `lead` axes (so a row of the reader needs only that row of the stage)."""
    found = False
    for r in dag.reads(reader):
        if r.tensor.op is not stage.op and r.tensor.op is not stage.origin_op:
            continue
        found = True
        if not all(isinstance(i, (Var, IterVar)) and free_vars(i) == {a.var}
                   for i, a in zip(r.indices[:lead], reader.axis[:lead])):
            return False
    return found


def _reduction(state: SketchState, stage: Stage) -> None:
    """A reduction without data reuse (row max and sum, means, pooling, a total): computed per
    row of its reader when that reader runs row by row, else on its own with the outer loops in
    parallel. Its innermost reduction runs in vector lanes through rfactor when it reads
    memory contiguously; a reduction with too few outputs to keep the threads busy is split
    across them through rfactor."""
    tr = state.tracer
    name = state.name(stage)
    op = stage.op
    dtype = op.output(0).dtype
    lanes = state.lanes(dtype)
    last_r = op.reduce_axis[-1]
    vec_axis = _vector_axis(op)
    spatial_contiguous = vec_axis is not None and dag.last_index_uses(op, vec_axis)
    reduce_contiguous = dag.last_index_uses(op, last_r) and not spatial_contiguous
    points = dag.spatial_points(op)
    few = not op.axis or points is not None and points < MIN_PARALLEL_POINTS and \
        not spatial_contiguous
    # Every knob is defined whatever the others say: a config space is one fixed product.
    anchor = None
    consumer = _fusable_consumer(state, stage)
    if _row_anchor(state, stage, strict=False) is not None and state.knob(
            f"{name}.at_reader", [True, False], fallback=True):
        anchor = _row_anchor(state, stage)
    elif consumer is not None and state.knob(f"{name}.at_consumer", [False, True],
                                             fallback=False):
        # An expression of the reduction at its own point (a mean's division, a scaling):
        # computed per vector block of it, the reduction needs no buffer of its own.
        anchor = _vector_block_anchor(consumer)
    width = 0
    if reduce_contiguous and _extent(last_r) >= lanes:
        # Always in vector lanes (a scalar loop over contiguous memory never wins; offered,
        # it only gives timing noise a bad config to pick): one or two vectors of partials.
        widths = [w for w in (lanes, 2 * lanes) if w <= _extent(last_r)]
        width = state.knob(f"{name}.rfactor", widths, fallback=lanes)
    parts = _parts_knob(state, stage) if few else 1

    if anchor is None and few and parts > 1:
        _parallel_rfactor(state, stage, parts)
        return
    if width:
        _, kv = tr.split(stage, last_r, factor=width)
        partial = tr.rfactor(stage, kv, factor_axis=len(op.axis))
        p_axes = list(partial.op.axis)
        tr.reorder(partial, *p_axes[:-1], *partial.op.reduce_axis, p_axes[-1])
        tr.annotate(partial, p_axes[-1], "vectorize")
        if anchor is not None:
            tr.compute_at(partial, anchor.stage, anchor.loop)
            tr.compute_at(stage, anchor.stage, anchor.loop)
        else:
            fused = _fuse_parallel(state, stage, list(stage.op.axis),
                                   parallel=points is None or points > 1)
            if fused is not None:
                tr.compute_at(partial, stage, fused)
        return
    if anchor is not None:
        tr.compute_at(stage, anchor.stage, anchor.loop)
        state.anchors[stage] = anchor
        if spatial_contiguous and anchor.stage is consumer:
            _lane_loop_inside(state, stage, lanes)
        return
    _spatial_vector_reduction(state, stage, lanes, spatial_contiguous)


def _vector_block_anchor(consumer: Stage) -> Anchor | None:
    """The loop of an elementwise `consumer` just outside its vector loop: one block of its
    innermost axis, all outer axes fixed (None when the vector loop is outermost)."""
    leaves = consumer.leaf_iter_vars
    vector = [k for k, iv in enumerate(leaves)
              if consumer.annotations.get(iv) is LoopAnnotation.VECTORIZE]
    if not vector or vector[0] == 0:
        return None
    return Anchor(consumer, leaves[vector[0] - 1], len(consumer.op.axis) - 1)


def _lane_loop_inside(state: SketchState, stage: Stage, lanes: int) -> None:
    """A reduction computed per block of its consumer's vector axis: that axis inside the
    reduction loops, in vector lanes (each lane accumulates its own output)."""
    tr = state.tracer
    axes = list(stage.op.axis)
    outer, lane_loop = tr.split(stage, axes[-1], factor=lanes)
    tr.reorder(stage, *axes[:-1], outer, *stage.op.reduce_axis, lane_loop)
    tr.annotate(stage, lane_loop, "vectorize")


def _spatial_vector_reduction(state: SketchState, stage: Stage, lanes: int,
                              vectorize: bool) -> None:
    """Parallel outer axes; the innermost spatial axis inside the reduction loops, in vector
    lanes (each lane accumulates its own output)."""
    tr = state.tracer
    op = stage.op
    axes = list(op.axis)
    vec_axis = _vector_axis(op)
    if not vectorize or vec_axis is None:
        _fuse_parallel(state, stage, axes)
        return
    pos = axes.index(vec_axis)
    outer_axes = axes[:pos]
    if _extent(vec_axis) > lanes:
        o, lane_loop = tr.split(stage, vec_axis, factor=lanes)
        outer_axes.append(o)
    else:
        lane_loop = vec_axis
    rest = axes[pos + 1:]
    tr.reorder(stage, *outer_axes, *op.reduce_axis, lane_loop, *rest)
    tr.annotate(stage, lane_loop, "vectorize")
    _fuse_parallel(state, stage, outer_axes)


def _parts_knob(state: SketchState, stage: Stage) -> int:
    """How many chunks threads reduce side by side (1: none)."""
    extent = _extent(stage.op.reduce_axis[0])
    threads = state.threads()
    choices = sorted({p for p in (threads, 2 * threads, 4 * threads, 8 * threads, 16 * threads)
                      if 1 < p <= extent}) or [1]
    return state.knob(f"{state.name(stage)}.parts", choices, fallback=choices[0])


def _parallel_rfactor(state: SketchState, stage: Stage, parts: int) -> None:
    """A reduction with too little outer parallelism: its first reduction axis is split in
    `parts` chunks that threads reduce side by side (rfactor), the partial results reduced at
    the end."""
    tr = state.tracer
    kp, _ = tr.split(stage, stage.op.reduce_axis[0], nparts=parts)
    partial = tr.rfactor(stage, kp, factor_axis=0)
    tr.annotate(partial, partial.op.axis[0], "parallel")


# -- rule: everything else (outputs and stages that cannot be inlined) -----------------------------


def _any_compute(state: SketchState, stage: Stage) -> bool:
    return isinstance(stage.op, ComputeOp)


def _reads_reduction(op: Any, depth: int = 0) -> bool:
    """Whether `op` is a reduction or an elementwise stage computed from one."""
    if not isinstance(op, ComputeOp) or depth > 8:
        return False
    if op.reduce_axis:
        return True
    return any(_reads_reduction(t.op, depth + 1) for t in op.input_tensors)


def _rows_of_producers(state: SketchState, stage: Stage) -> int:
    """How many leading axes of `stage` index the reductions it reads (directly or through
    elementwise stages: a layer norm's mean), so that they can be computed per row of
    `stage`; 0 when none."""
    best = 0
    axes = stage.op.axis
    for r in dag.reads(stage.op):
        n = len(r.indices)
        if n >= len(axes) or not _reads_reduction(r.tensor.op):
            continue
        if all(free_vars(i) == {a.var} and isinstance(i, (Var, IterVar))
               for i, a in zip(r.indices, axes[:n])):
            best = max(best, n)
    return best


def _tiled_producer(state: SketchState, stage: Stage) -> bool:
    """Whether `stage` is the elementwise output that a multi-level tiled producer (GEMM,
    convolution) will be fused into: the tiling rule then schedules it around the tile."""
    if not (stage.is_output and dag.is_elementwise(stage.op)):
        return False
    shape = [dag.static_extent(a) for a in stage.op.axis]
    stack = [t.op for t in stage.op.input_tensors]
    while stack:
        op = stack.pop()
        if not isinstance(op, ComputeOp):
            continue
        if dag.has_data_reuse(op):
            return [dag.static_extent(a) for a in op.axis] == shape and op.num_outputs == 1 \
                and _fusable_consumer(state, state.schedule[op], pending=True) is stage
        if dag.is_elementwise(op) and not state.schedule[op].is_output:
            stack += [t.op for t in op.input_tensors]
    return False


def _defer(state: SketchState, stage: Stage) -> None:
    """Leave the stage to the rule of its producer."""


def _elementwise_root(state: SketchState, stage: Stage) -> None:
    """Vectorize the innermost axis, parallelise the outer ones. When the stage reads
    row reductions (softmax, layer_norm), its leading axes are kept as a row loop (split in
    `rows`-sized chunks per thread) at which they are computed."""
    tr = state.tracer
    name = state.name(stage)
    op = stage.op
    axes = list(op.axis)
    if not axes:
        return
    dtype = op.output(0).dtype
    lanes = state.lanes(dtype)
    rows = _rows_of_producers(state, stage) if not op.reduce_axis else 0
    inner = axes[-1]
    extent = _extent(inner)
    widths = [w for w in (lanes, 2 * lanes, 4 * lanes) if w <= max(extent, lanes)]
    width = state.knob(f"{name}.vector", widths, fallback=widths[min(1, len(widths) - 1)])
    points = dag.spatial_points(op)
    big = points is None or points * 4 >= 64 * 1024
    parallel = state.knob(f"{name}.parallel", [True, False], fallback=big)
    if rows:
        lead = axes[:rows]
        row = tr.fuse(stage, *lead) if len(lead) > 1 else lead[0]
        count = 1
        for iv in lead:
            count *= _extent(iv)
        chunk_choices = [d for d in _divisors(count) if d <= 64] if dag.spatial_points(op) \
            else [1]
        chunk = state.knob(f"{name}.rows", chunk_choices, fallback=1)
        row_outer, row_inner = tr.split(stage, row, factor=chunk)
        if parallel:
            tr.annotate(stage, row_outer, "parallel")
        if extent > width:
            vo, vi = tr.split(stage, inner, factor=width)
        else:
            vi = inner
        tr.annotate(stage, vi, "vectorize")
        state.anchors[stage] = Anchor(stage, row_inner, rows)
        return
    if extent > width:
        vo, vi = tr.split(stage, inner, factor=width)
        outer = axes[:-1] + [vo]
    else:
        vi = inner
        outer = axes[:-1]
    tr.annotate(stage, vi, "vectorize")
    if len(outer) > 1:
        # keep the row loop separate from the vector-block loop: no division per vector
        outer = outer[:-1]
    _fuse_parallel(state, stage, outer, parallel)


SKETCH_RULES: list[SketchRule] = [
    SketchRule("inline_elementwise", _inlinable, _inline),
    SketchRule("padded_input", _padded, _place_padding),
    SketchRule("multi_level_tiling", _needs_tiling, _multi_level_tiling),
    SketchRule("fuse_into_tiled_producer", _tiled_producer, _defer),
    SketchRule("reduction", _is_reduction, _reduction),
    SketchRule("elementwise_root", _any_compute, _elementwise_root),
]
"""The sketch rules, tried in order for each stage (outputs first); extend it with your own."""


def generate(tensors: Sequence[Tensor], cfg: Any,
             rules: Sequence[SketchRule] | None = None) -> tuple[Schedule, Trace]:
    """Schedule the computes of `tensors` (a workload's list: inputs first, outputs last) by the
    sketch rules, taking every open choice from `cfg`.

    Returns:
        The schedule and the trace of primitives that made it.
    """
    rules = SKETCH_RULES if rules is None else rules
    outputs = dag.outputs_of(tensors)
    if not outputs:
        raise ValueError("a workload must return at least one computed tensor (its outputs)")
    s = tl.create_schedule([t.op for t in outputs])
    state = SketchState(s, Tracer(s), cfg, outputs)
    for stage in reversed(list(s.stages)):
        if stage.is_placeholder or stage.attach.value != "root" or stage.relations \
                or stage in state.anchors:
            continue
        for rule in rules:
            if rule.condition(state, stage):
                rule.apply(state, stage)
                break
    return s, state.tracer.trace()
