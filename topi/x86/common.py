"""What every x86 schedule shares: walking the op graph, inlining injective stages, the
default loop structure of an injective or reduction stage (parallel outer loop, one-register
vectors), and what the current target (`tl.Target.current()`) allows: vector lanes, the
registers a register block may fill and the cache sizes that tiles should stay within.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import tensorlang as tl
from tensorlang.arith import const_value
from tensorlang.codegen.cpuinfo import CacheSizes
from tensorlang.dtype import as_dtype
from tensorlang.expr import IterVar

#: Tags of stages that only move or combine values elementwise and can be inlined into readers.
INLINE_TAGS = ("elemwise", "broadcast", "injective", "injective,pad")


def vector_lanes(dtype: str) -> int:
    """Lanes of one `dtype` vector register of the current target (16 float32 with AVX-512, 8
    with AVX2, 4 with SSE)."""
    return tl.Target.current().vector_lanes(dtype)


def accumulator_budget(loaded_vectors: int) -> int:
    """Vector accumulators a register block may hold on the current target when each step
    loads `loaded_vectors` vectors and broadcasts scalars to multiply them with: the target's
    vector registers (32 with AVX-512, aarch64 and RVV, 16 with AVX2/SSE) minus those its inner
    loop needs for operands (`Target.operand_registers`: more on load/store ISAs)."""
    target = tl.Target.current()
    return target.vector_registers - target.operand_registers(loaded_vectors)


def vectors_assembled_in_memory() -> bool:
    """Whether LLVM builds a vector of loaded scalars on the current target by storing them to
    the stack and loading the vector back: fixed-length vectors lowered with SVE (aarch64 wider
    than NEON's 128 bits), as LLVM lowers them."""
    target = tl.Target.current()
    return target.arch == "aarch64" and target.vector_bits > 128


def cache_sizes() -> CacheSizes:
    """L1d / L2 / L3 bytes of the current target (the host's own, or the typical sizes of the
    family named with `-mcpu`)."""
    return tl.Target.current().caches


def as_tensor_list(outs: tl.Tensor | Sequence[tl.Tensor]) -> list[tl.Tensor]:
    """`outs` as a list of tensors (a schedule function accepts one tensor or several)."""
    items = [outs] if isinstance(outs, tl.Tensor) else list(outs)
    for t in items:
        if not isinstance(t, tl.Tensor):
            raise TypeError(f"schedule: outs must be tensors, got {type(t).__name__}")
    return items


def is_inlinable(op: tl.Operation) -> bool:
    return isinstance(op, tl.ComputeOp) and op.tag in INLINE_TAGS and not op.reduce_axis


def compute_ops(outs: Sequence[tl.Tensor]) -> list[tl.ComputeOp]:
    """The compute ops under `outs` (themselves included), each once, producers first."""
    found: list[tl.ComputeOp] = []
    seen: set[int] = set()

    def walk(op: tl.Operation) -> None:
        if id(op) in seen or not isinstance(op, tl.ComputeOp):
            return
        seen.add(id(op))
        for t in op.input_tensors:
            walk(t.op)
        found.append(op)

    for t in outs:
        walk(t.op)
    return found


def traverse(
    s: tl.Schedule, outs: Sequence[tl.Tensor], visit: Callable[[tl.ComputeOp], None]
) -> None:
    """Inline every injective stage that is not an output, and call `visit` on every compute op,
    producers first."""
    out_ops = {id(t.op) for t in outs}
    for op in compute_ops(outs):
        if is_inlinable(op) and id(op) not in out_ops:
            s[op].compute_inline()
        visit(op)


def static_extent(iv: IterVar) -> int | None:
    return const_value(iv.dom.extent)


def fuse_parallel(s: tl.Schedule, stage_tensor: tl.Tensor | tl.Operation,
                  axes: Sequence[IterVar]) -> IterVar | None:
    """Fuse adjacent `axes` into one loop and run it in parallel; returns the fused loop."""
    axes = list(axes)
    if not axes:
        return None
    fused = s[stage_tensor].fuse(*axes) if len(axes) > 1 else axes[0]
    s[stage_tensor].parallel(fused)
    return fused


_SYMBOLIC_LARGE = [True]


@contextlib.contextmanager
def symbolic_outputs_small() -> Iterator[None]:
    """Within: outputs of symbolic size count as small for `parallel_pays` (the serial variant
    of a kernel, which a symbolic module runs at sizes below the L2 size)."""
    _SYMBOLIC_LARGE[0] = False
    try:
        yield
    finally:
        _SYMBOLIC_LARGE[0] = True


def parallel_pays(t: tl.Tensor | tl.Operation) -> bool:
    """Whether a stage's output is large enough to split across threads.

    Waking the thread pool and joining it costs microseconds, as long as one core takes to
    stream a good part of its L2 cache, and on a loaded machine a woken worker may wait for a
    core. Measured side by side (an add of two (1, C, H, W) float32 tensors, 100 KB to 1.7 MB,
    shared 2-core machine), one thread running plain nested loops beat the parallel fused loop
    at every output size below the L2 size of the current target, so smaller outputs stay on
    the calling thread. Outputs of symbolic size count as large (small within
    `symbolic_outputs_small`).
    """
    op = t if isinstance(t, tl.Operation) else t.op
    extents = [static_extent(a) for a in op.axis]
    if any(e is None for e in extents):
        return _SYMBOLIC_LARGE[0]
    elements = 1
    for e in extents:
        elements *= e  # type: ignore[operator]
    nbytes = elements * as_dtype(op.output(0).dtype).itemsize
    return nbytes >= tl.Target.current().caches.l2


def schedule_injective_stage(s: tl.Schedule, t: tl.Tensor | tl.Operation,
                             parallel: bool = True) -> None:
    """Vectorize the innermost axis by one vector of the target; with `parallel`, run the fused
    outer loops in parallel, else keep them as plain nested loops (whose indices need no
    division to recover from a fused one)."""
    stage = s[t]
    axes = list(stage.op.axis)
    if not axes:
        return
    width = vector_lanes(stage.op.output(0).dtype)
    inner = axes[-1]
    extent = static_extent(inner)
    if extent is not None and extent <= width:
        stage.vectorize(inner)
        outer_axes = axes[:-1]
    else:
        outer, lanes = stage.split(inner, factor=width)
        stage.vectorize(lanes)
        # With symbolic extents the loop of vectors stays nested inside the fused loop: fused,
        # every vector would recover its indices with divisions by symbolic sizes.
        symbolic = any(static_extent(a) is None for a in axes)
        outer_axes = axes[:-1] if symbolic else [*axes[:-1], outer]
    if parallel:
        fuse_parallel(s, t, outer_axes)


def materialise_padding(s: tl.Schedule, padded: tl.Tensor) -> None:
    """Compute the zero-padded input of a convolution once, in full, before the convolution.

    `traverse` inlines the pad stage like every injective stage; inlined, every read of the
    convolution's hot loop carries the pad's bounds checks (selects, which the loop partitioner
    cannot remove since the window slides over the border). Stored, the hot loop reads plain
    memory and the copy costs one pass over the input, with rows vectorized and the leading
    axes in parallel (no div/mod of a fused index per vector: laid out as
    `schedule_injective_stage` does, the copy alone took 2.5x the time of a 144x56x56 depthwise
    convolution). Nothing happens when `padded` is not a pad stage (no padding: the convolution
    reads its input directly)."""
    if not (isinstance(padded.op, tl.ComputeOp) and padded.op.tag == "injective,pad"):
        return
    stage = s[padded]
    stage.compute_root()
    *outer, row = stage.op.axis
    fuse_parallel(s, padded, outer[:-1])
    _, lanes = stage.split(row, factor=vector_lanes(padded.dtype))
    stage.vectorize(lanes)


def schedule_reduction_stage(s: tl.Schedule, t: tl.Tensor | tl.Operation) -> None:
    """A reduction stage: parallel over the outer data axes; the innermost data axis (when it is
    longer than 1, or symbolic) moves inside the reduction loops and is vectorized, so each lane
    accumulates its own output."""
    stage = s[t]
    axes = list(stage.op.axis)
    reduce_axes = list(stage.op.reduce_axis)
    inner_pos = max((k for k, a in enumerate(axes) if static_extent(a) != 1), default=None)
    if inner_pos is None:
        fuse_parallel(s, t, axes)
        return
    inner = axes[inner_pos]
    width = vector_lanes(stage.op.output(0).dtype)
    extent = static_extent(inner)
    if extent is not None and extent <= width:
        outer_axes, lanes = axes[:inner_pos], inner
    else:
        outer, lanes = stage.split(inner, factor=width)
        outer_axes = [*axes[:inner_pos], outer]
    rest = axes[inner_pos + 1:]
    stage.reorder(*outer_axes, *reduce_axes, lanes, *rest)
    stage.vectorize(lanes)
    fuse_parallel(s, t, outer_axes)


def generic_schedule(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Inline injective intermediates, give reductions and outputs the default loop structure."""
    outs = as_tensor_list(outs)
    s = tl.create_schedule([t.op for t in outs])
    out_ops = {id(t.op) for t in outs}

    def visit(op: tl.ComputeOp) -> None:
        if op.reduce_axis:
            schedule_reduction_stage(s, op)
        elif id(op) in out_ops or not is_inlinable(op):
            schedule_injective_stage(s, op, parallel=parallel_pays(op))

    traverse(s, outs, visit)
    return s


def _path(s: tl.Schedule, reader: tl.Stage, target: tl.Stage) -> list[tl.Stage] | None:
    """The stages from `reader` down to `target` along what they read (both ends included).

    Walks the stages' current ops, which cache_write and cache_read may have replaced."""
    if reader is target:
        return [reader]
    for t in reader.op.input_tensors:
        if isinstance(t.op, tl.PlaceholderOp):
            continue
        rest = _path(s, s[t], target)
        if rest is not None:
            return [reader, *rest]
    return None


def compute_chain_at(s: tl.Schedule, out: tl.Tensor, anchor: tl.Tensor, axis: IterVar) -> None:
    """Compute `anchor` inside loop `axis` of `out`, with the elementwise stages between them
    inlined into `out`.

    This is the fusion of an epilogue (bias, relu, ...) into a GEMM-like stage: the epilogue
    becomes part of `out`'s expression and the anchor's block is computed right before it is
    read. A stage in between that cannot be inlined is computed at its reader instead, under a
    one-iteration loop around that reader's block. Nothing happens when `anchor` is `out`.
    """
    chain = _path(s, s[out], s[anchor])
    if chain is None:
        raise ValueError(f"schedule: {out.name} does not read {anchor.name}")
    parent, at = s[out], axis
    for stage in chain[1:-1]:
        if is_inlinable(stage.op):
            stage.compute_inline()
        else:
            stage.compute_at(parent, at)
            parent, at = stage, whole_block_loop(stage)
    if len(chain) > 1:
        chain[-1].compute_at(parent, at)


def whole_block_loop(stage: tl.Stage) -> IterVar:
    """A new outermost loop of one iteration around the stage's loops, to attach producers that
    should be computed for the stage's whole block."""
    root, _ = stage.split(stage.leaf_iter_vars[0], nparts=1)
    return root
