"""x86 schedules and tuning templates of the matrix products: dense, matmul, batch_matmul.

The GEMM recipe of shared/DESIGN.md: the right operand is already packed in panels one vector
wide by the compute; the output is tiled into register blocks of `tile_y` rows x `tile_x`
columns (whole vectors) accumulated in a local buffer (cache_write, or the fused epilogue's block),
over K unrolled by `tile_k`; the (batch, column block) loops run in parallel, with the row blocks
inside each (or fused into the parallel loop when there are few column blocks; with `col_group`,
a chunk runs its row blocks over a group of column blocks), and the panel packing runs in
parallel over panels. Batch-1 dense is a matrix-vector product instead
(`schedule_gemv_with`).

Vector width and register budget come from the current target (`tl.Target.current()`): the block
may hold as many accumulators as the target has vector registers besides the loaded B vectors,
the broadcast A value and one spare (with AVX2's 16: 6 rows x 2 vectors + 2 + 2, the fallback).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import autotune
import tensorlang as tl
from tensorlang.expr import Expr, TensorRead
from tensorlang.visitor import nodes_below, substitute

from ..nn.dense import batch_matmul, dense, matmul, reads_a_run
from ..nn.utils import pack_height
from .common import (
    accumulator_budget,
    compute_chain_at,
    fuse_parallel,
    is_inlinable,
    static_extent,
    vector_lanes,
    vectors_assembled_in_memory,
    whole_block_loop,
)
from ..nn.dense_int8 import BF16_TAG
from ..nn.dense_int8 import TAG as INT8_TAG
from .config import schedule_tagged, template_schedule
from .dense_int8 import schedule_dense_int8_with
from .symbolic_gemm import is_symbolic_gemm, schedule_symbolic_gemm_with

GEMM_TAGS = {"dense": "dense.x86", "matmul": "matmul.x86", "batch_matmul": "batch_matmul.x86"}

#: Parallel chunks that keep a few to a dozen cores busy: with as many column blocks the parallel
#: loop runs over them alone, else over (column block, row block) pairs.
MIN_PARALLEL_CHUNKS = 16

#: Register-block widths offered to the tuner, in vectors.
TILE_X_VECTORS = (1, 2, 3, 4)
#: Register-block heights offered to the tuner, in rows.
TILE_Y_ROWS = tuple(range(1, 9))
#: Column blocks per parallel chunk offered to the tuner (`col_group`): a chunk runs its row
#: blocks over a group of column blocks, so a row block of the left operand is read from L1 for
#: each block of the group, and the operand goes through the cache hierarchy once per group
#: instead of once per column block. Side by side at 1024^3 against one block per chunk
#: (python /tmp/grp.py, an Intel Xeon with a 2 MiB L2): -mcpu=haswell 6x16 blocks 1.04-1.11x
#: with 4, 8 or 16; the host 6x64 blocks 1.06x with 2 and 4, while 4x64 blocks ran 0.89x with 4:
#: which group pays depends on the block and the machine, so the fallback keeps 1.
COL_GROUPS = (1, 2, 4, 8, 16)
#: Parallel chunks a column group must leave, so that both threads of a small machine and the
#: cores of a larger one stay busy.
MIN_GROUPED_CHUNKS = 4


def fallback_block() -> tuple[int, int]:
    """The fallback register block (rows, vectors) on the current target: one row panel of
    the left operand (`pack_height`) by 2 vectors with 16 registers (12 accumulators + 2
    loads + 2), by 4 with 32 (4 x 4, the most robust block measured across GEMM, dense and
    batch_matmul shapes: taller blocks halve batch_matmul with short K)."""
    return pack_height(), 2 if tl.Target.current().vector_registers < 32 else 4


#: Whether the fallback config copies the left operand into its row panels: no, on every target.
#: The copy paid only where a block's rows, 4 KB apart, shared L1 sets in an 8-way L1 (AVX2
#: 6-row blocks at 1024^3 on a Zen 4: ~1.05x), and cost elsewhere, side by side on an Intel
#: Xeon with a 12-way L1 (no copy vs copy): -mcpu=haswell 1.09x at 1024^3, 1.12x at
#: 1000x1000x1024, 1.43x at N = 64, 1.31x at 256x4096x256; the host (AVX-512) 1.04-2.15x. It
#: is also the dearest function of the module to compile (a fifth of the AVX2 GEMM's compile
#: time). The `pack_rows` knob lets the tuner copy where a machine gains.
PACK_ROWS_BY_DEFAULT = False


def _define_space(cfg, m: int | None, n: int | None, k: int | None, lanes: int,
                  rows_packed: bool, columns: int | None) -> None:
    """The knobs of the register-blocked GEMM; `columns` is the output's columns times its
    batch (None when symbolic): the one-vector blocks that column groups are made of."""
    rows = [r for r in TILE_Y_ROWS if m is None or r <= m] or [1]
    cfg.define_split("tile_y", m or 64, num_outputs=2, policy="candidate",
                     candidate=[[-1, r] for r in rows])
    cols = [v * lanes for v in TILE_X_VECTORS if n is None or (v - 1) * lanes < n] or [lanes]
    cfg.define_split("tile_x", n or 64, num_outputs=2, policy="candidate",
                     candidate=[[-1, c] for c in cols])
    cfg.define_split("tile_k", k or 64, num_outputs=2, policy="power2", max_factor=8)
    if rows_packed:
        cfg.define_knob("pack_rows", [True, False])
    most_blocks = None if columns is None else columns // lanes
    cfg.define_knob("col_group", [g for g in COL_GROUPS if _groups_fit(most_blocks, g)])
    if cfg.is_fallback:
        block_rows, block_vectors = fallback_block()
        cfg.fallback_split("tile_y", [-1, min(block_rows, max(rows))])
        cfg.fallback_split("tile_x", [-1, min(block_vectors * lanes, max(cols))])
        # One K step per iteration, not unrolled: against 2 steps, side by side in three runs
        # (matmul 1024^3, dense 128x768->3072, batch_matmul 12x128x64x128), 0.98-1.03x with
        # AVX2 and 0.99-1.02x with AVX-512 (batch_matmul with AVX2 the one steady loss, 1.5%),
        # for 16% less compile time (the AVX2 GEMM 45 -> 38 ms). The tuner unrolls up to 8.
        cfg.fallback_split("tile_k", [-1, 1])
        if rows_packed:
            cfg.fallback_knob("pack_rows", PACK_ROWS_BY_DEFAULT)
        cfg.fallback_knob("col_group", 1)
    elif (cfg["tile_y"].size[-1] * (vectors := cfg["tile_x"].size[-1] // lanes)
          > accumulator_budget(vectors)):
        cfg.raise_error("register block larger than the register file")


def _groups_fit(blocks: int | None, group: int) -> bool:
    """Whether `blocks` column blocks in groups of `group` leave enough parallel chunks (no
    group at all always does)."""
    return group == 1 or (blocks is not None
                          and blocks >= max(MIN_PARALLEL_CHUNKS, group * MIN_GROUPED_CHUNKS))


def schedule_gemm_with(cfg, s: tl.Schedule, gemm: tl.Tensor, out: tl.Tensor) -> None:
    """Apply the register-blocked schedule to the product stage `gemm` (tag dense / matmul /
    batch_matmul), whose elementwise tail (bias, relu, ...) ends in `out`."""
    packed = _input_tagged(gemm, "injective,panel_pack")
    rows = _input_tagged(gemm, "injective,row_pack")
    axes = gemm.op.axis
    m, n = static_extent(axes[-2]), static_extent(axes[-1])
    k = static_extent(gemm.op.reduce_axis[0])
    lanes = static_extent(packed.op.axis[-1])  # one vector of the target the compute was made for
    if m == 1 and len(axes) == 2 and gemm.op.tag == "dense":
        schedule_gemv_with(cfg, s, gemm, out, packed)
        return
    if is_symbolic_gemm(gemm):
        _define_space(cfg, m, n, k, lanes, rows is not None, None)
        schedule_symbolic_gemm_with(cfg, s, gemm, out, packed, rows)
        return
    columns = math.prod([static_extent(a) for a in axes[:-2]] + [n])
    _define_space(cfg, m, n, k, lanes, rows is not None, columns)
    _schedule_pack(s, packed)
    if rows is not None:
        if cfg["pack_rows"].val:
            _schedule_pack(s, rows)
        else:
            s[rows].compute_inline()

    if gemm.op is out.op:
        out, gemm = gemm, s.cache_write(gemm, "local")
    o = s[out]
    *batch, i, j = o.op.axis
    i_outer, i_inner = cfg["tile_y"].apply(s, out, i)
    j_outer, j_inner = cfg["tile_x"].apply(s, out, j)
    blocks = columns // cfg["tile_x"].size[-1]
    group = cfg["col_group"].val
    if not _groups_fit(blocks, group):
        cfg.raise_error(f"a column group of {group} leaves too few parallel chunks")
    grouped = []  # the loop over a group's column blocks, inside the row blocks
    if group > 1:
        j_outer, j_block = o.split(j_outer, factor=group)
        grouped.append(j_block)
    o.reorder(*batch, j_outer, i_outer, *grouped, i_inner, j_inner)
    if blocks >= MIN_PARALLEL_CHUNKS:
        # The row-block loop stays serial, so the loop partitioner can peel a last partial
        # block: its guards would otherwise sit in the hot loop and spill accumulators. With a
        # column group, each chunk's blocks come from the group's loop inside the row loop.
        fuse_parallel(s, out, [*batch, j_outer])
        block_loop = grouped[0] if grouped else i_outer
    else:
        block_loop = fuse_parallel(s, out, [*batch, j_outer, i_outer])
    _, j_lanes = o.split(j_inner, factor=lanes)
    o.vectorize(j_lanes)

    compute_chain_at(s, out, gemm, block_loop)
    g = s[gemm]
    *g_batch, gi, gj = g.op.axis
    (gk,) = g.op.reduce_axis
    k_outer, k_inner = cfg["tile_k"].apply(s, gemm, gk)
    gj_outer, gj_lanes = g.split(gj, factor=lanes)
    g.reorder(*g_batch, k_outer, k_inner, gi, gj_outer, gj_lanes)
    g.vectorize(gj_lanes)
    g.unroll(gj_outer)
    g.unroll(gi)
    g.unroll(k_inner)


def _input_tagged(gemm: tl.Tensor, tag: str) -> tl.Tensor | None:
    return next((t for t in gemm.op.input_tensors if getattr(t.op, "tag", "") == tag), None)


def _schedule_pack(s: tl.Schedule, packed: tl.Tensor) -> None:
    """Copy an operand into its panels in parallel over panels, one panel row at a time: one
    vector copy when the row is a run of the source, else element by element (unrolled), which
    ran 1.9x faster than LLVM's gathers for dense's weight (a 1024^2 transpose into 8-wide
    panels, -mcpu=haswell). Where LLVM assembles a vector from scalars through the stack (SVE),
    the loop over panel rows stays a scalar loop: LLVM's vectorizer made each row a vector of
    loaded scalars, stored to the stack and loaded back (7 stack references in 35
    instructions per row, 17 instructions and none as a scalar copy)."""
    p = s[packed]
    *batch, block, rows, row = p.op.axis
    if _copies_a_run(packed):
        p.vectorize(row)
    else:
        p.unroll(row)
        if vectors_assembled_in_memory():
            p.pragma(rows, "scalar_loop", True)
    p.parallel(p.fuse(*batch, block) if batch else block)


def _copies_a_run(packed: tl.Tensor) -> bool:
    """Whether consecutive elements of a panel row read consecutive elements of the source:
    the tensor it reads, or what that tensor reads where the schedule inlines it (an operand
    permuted in the product's kernel, `fold_gemm_permutes`: V of attention, a run along the
    panel's columns in the source though not in its transposed view)."""
    return reads_a_run(_source_read(packed.op.body[0]), packed.op.axis[-1].var)


def _source_read(value: Expr) -> Expr:
    """The first tensor read in `value`, followed through the injective stages that `traverse`
    inlines down to a read of a tensor that is stored (or of a scalar: a stage that reads only
    a 0-d constant, which is no run)."""
    read = _first_read(value)
    while read is not None and is_inlinable(op := read.tensor.op):
        body = op.body[read.tensor.value_index]
        value = substitute(body, {iv.var: i for iv, i in zip(op.axis, read.indices)})
        read = _first_read(value)
    return value if read is None else read


def _first_read(value: Expr) -> TensorRead | None:
    """The first read of a tensor with indices in `value`."""
    return next((node for node in nodes_below(value)
                 if isinstance(node, TensorRead) and node.indices), None)


#: Rows per column of a batch-1 weight from which its default schedule reads each row whole
#: (`schedule_gemv_with`).
ROW_STREAM_RATIO = 2


def schedule_gemv_with(cfg, s: tl.Schedule, gemm: tl.Tensor, out: tl.Tensor,
                       packed: tl.Tensor) -> None:
    """Batch-1 dense: each weight is read once, so packing it into panels would cost as much
    as the product. Rows of the weight are contiguous in K, so the reduction is factored into
    `gemv_lanes` vector lanes (rfactor), `gemv_rows` outputs at a time, with the blocks of
    outputs in parallel. Within a block (`gemv_row_major`) either the rows' FMA chains
    interleave, reading the block's rows side by side, or each row is read whole in turn, one
    sequential stream: that reaches the machine's stream read on weights of many short rows
    (a 49152 x 576 head 23 -> 30 GB/s, 4864 x 896 25 -> 31 on a 2-core Zen 4, where a stream
    read gives 32), side by side rows win on few long ones (896 x 4864 28 against 25), so
    the default streams rows when there are at least `ROW_STREAM_RATIO` times as many rows as
    columns."""
    lanes = vector_lanes(gemm.dtype)
    cfg.define_knob("gemv_lanes", list(dict.fromkeys([lanes, max(lanes // 2, 1), 2 * lanes])))
    cfg.define_knob("gemv_rows", [8, 4, 2, 16])
    n, k = static_extent(out.op.axis[1]), static_extent(gemm.op.reduce_axis[0])
    streamed = n is not None and k is not None and n >= ROW_STREAM_RATIO * k
    cfg.define_knob("gemv_row_major", [streamed, not streamed])
    s[packed].compute_inline()
    _, k_lanes = s[gemm].split(gemm.op.reduce_axis[0], factor=cfg["gemv_lanes"].val)
    partial = s.rfactor(gemm, k_lanes, factor_axis=2)
    o = s[out]
    j_outer, _ = o.split(o.op.axis[1], factor=cfg["gemv_rows"].val)
    o.parallel(j_outer)
    compute_chain_at(s, out, gemm, j_outer)
    p = s[partial]
    if gemm.op is out.op:
        p.compute_at(o, j_outer)
    else:  # the reader is the product stage, itself computed at j_outer of the epilogue
        p.compute_at(s[gemm], whole_block_loop(s[gemm]))
    i, j, lanes = p.op.axis
    if cfg["gemv_row_major"].val:
        p.reorder(i, j, p.op.reduce_axis[0], lanes)
    else:
        p.reorder(i, p.op.reduce_axis[0], j, lanes)
        p.unroll(j)
    p.vectorize(lanes)


def _schedule(outs: tl.Tensor | Sequence[tl.Tensor], tags: Sequence[str]) -> tl.Schedule:
    return schedule_tagged(outs, {tag: GEMM_TAGS[tag] for tag in tags}, schedule_gemm_with)


def schedule_dense(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule dense with its bias and elementwise tail (tuned config when one is active);
    uint8 x int8 dense takes the int8 schedule (`dense_int8.x86`), bfloat16 dense the bf16 one
    (`dense_bf16.x86`)."""
    return schedule_tagged(outs, {"dense": GEMM_TAGS["dense"], INT8_TAG: "dense_int8.x86",
                                  BF16_TAG: "dense_bf16.x86"}, _gemm_or_int8_with)


def _gemm_or_int8_with(cfg, s: tl.Schedule, gemm: tl.Tensor, out: tl.Tensor) -> None:
    if gemm.op.tag in (INT8_TAG, BF16_TAG):
        schedule_dense_int8_with(cfg, s, gemm, out)
    else:
        schedule_gemm_with(cfg, s, gemm, out)


def schedule_matmul(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule matmul (2-D or batched) with its bias and elementwise tail."""
    return _schedule(outs, ["matmul", "batch_matmul"])


def schedule_batch_matmul(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule batch_matmul with its elementwise tail."""
    return _schedule(outs, ["batch_matmul"])


def _template_result(cfg, out: tl.Tensor, inputs: list[tl.Tensor], flop: int) -> tuple:
    s = template_schedule(cfg, out, schedule_gemm_with)
    cfg.add_flop(flop)
    return s, [*inputs, out]


@autotune.template("matmul.x86")
def matmul_template(cfg, a_shape, b_shape, dtype, transpose_a=False, transpose_b=False):
    """Tunable matmul: args ((..., M, K), (..., K, N), dtype), then the transpose flags of
    `topi.nn.matmul` when either is set; the workload that op records."""
    a = tl.placeholder(a_shape, dtype, name="a")
    b = tl.placeholder(b_shape, dtype, name="b")
    out = matmul(a, b, transpose_a, transpose_b, out_dtype=dtype)
    k = a_shape[-2] if transpose_a else a_shape[-1]
    points = math.prod(static_extent(axis) for axis in out.op.axis)
    return _template_result(cfg, out, [a, b], 2 * points * k)


@autotune.template("dense.x86")
def dense_template(cfg, data_shape, weight_shape, dtype):
    """Tunable dense: args ((M, K), (N, K), dtype)."""
    data = tl.placeholder(data_shape, dtype, name="data")
    weight = tl.placeholder(weight_shape, dtype, name="weight")
    out = dense(data, weight, out_dtype=dtype)
    return _template_result(cfg, out, [data, weight],
                            2 * data_shape[0] * data_shape[1] * weight_shape[0])


@autotune.template("batch_matmul.x86")
def batch_matmul_template(cfg, x_shape, y_shape, dtype):
    """Tunable batch_matmul: args ((B, M, K), (B, N, K), dtype)."""
    x = tl.placeholder(x_shape, dtype, name="x")
    y = tl.placeholder(y_shape, dtype, name="y")
    out = batch_matmul(x, y, out_dtype=dtype)
    b = max(x_shape[0], y_shape[0])
    return _template_result(cfg, out, [x, y], 2 * b * x_shape[1] * x_shape[2] * y_shape[1])
