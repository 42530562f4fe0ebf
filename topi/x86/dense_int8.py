"""x86 schedule and tuning template of the int8 dense (uint8 x int8 -> int32).

The product stage (`topi.nn.dense_int8`, tag "dense_int8") is register-blocked like the float
GEMM of shared/DESIGN.md: the output is tiled into blocks of `tile_y` rows x `tile_x` vectors of
int32, accumulated in a local buffer (cache_write) computed at the block; inside, K runs in steps
of 4 and each (row, vector) pair of the block is one tensorized dot of 4 (`dot_int8`: AVX512-VNNI
`vpdpbusd`, AVX-VNNI, or the exact `vpmaddubsw` + `vpmaddwd` sequence where VNNI is missing).
Column blocks run in parallel; the blocked weight copy runs in parallel over its panels.

The fallback block is derived from the target's register file: with 32 vector registers 6 rows x
4 vectors (24 accumulators + 4 kernel vectors + a broadcast), with 16 (AVX2) 4 rows x 2 vectors
for VNNI and 3 x 2 for the fallback sequence, whose temporaries need registers of their own.
"""

from __future__ import annotations

import autotune
import tensorlang as tl

from ..nn.dense_int8 import (
    BF16_GROUP,
    BF16_TAG,
    GROUP,
    PACK_TAG,
    PAD_TAG,
    dense_bf16,
    dense_int8,
)
from .common import fuse_parallel, static_extent
from .config import template_schedule
from .tensor_intrin import dot_bf16, dot_int8, has_bf16_dot, int8_dot_kind

#: Column blocks that keep the cores busy on their own (else row blocks join the parallel loop).
MIN_PARALLEL_CHUNKS = 16
#: Register-block heights offered to the tuner, in rows.
TILE_Y_ROWS = (1, 2, 3, 4, 5, 6, 7, 8)
#: Register-block widths offered to the tuner, in vectors.
TILE_X_VECTORS = (1, 2, 3, 4)
#: K steps of 4 per unrolled iteration offered to the tuner.
TILE_K_STEPS = (1, 2, 4)


def fallback_int8_block(kind: str | None = None) -> tuple[int, int]:
    """(rows, vectors) of the fallback register block on the current target (module doc)."""
    kind = kind or int8_dot_kind()
    if tl.Target.current().vector_registers >= 32:
        return 6, 4
    return (4, 2) if kind != "maddubs" else (3, 2)


def _define_space(cfg, m: int, n_vectors: int) -> None:
    rows = [r for r in TILE_Y_ROWS if r <= m] or [1]
    # Widths that divide the (padded) columns: a partial block would run the intrinsic past
    # the blocked weight's end.
    vectors = [v for v in TILE_X_VECTORS if n_vectors % v == 0]
    cfg.define_knob("tile_y", rows)
    cfg.define_knob("tile_x", vectors)
    cfg.define_knob("tile_k", list(TILE_K_STEPS))
    if cfg.is_fallback:
        block_rows, block_vectors = fallback_int8_block()
        cfg.fallback_knob("tile_y", min(block_rows, max(rows)))
        cfg.fallback_knob("tile_x", max(v for v in vectors if v <= block_vectors))
        cfg.fallback_knob("tile_k", 1)
    elif cfg["tile_y"].val * cfg["tile_x"].val + cfg["tile_x"].val + 2 > \
            tl.Target.current().vector_registers:
        cfg.raise_error("register block larger than the register file")


def schedule_dense_int8_with(cfg, s: tl.Schedule, gemm: tl.Tensor, out: tl.Tensor) -> None:
    """Schedule the int8 (or bf16) product stage `gemm`, whose epilogue (bias, the (M, N)
    slice) ends in `out` (see the module docstring). bf16 without AVX512-BF16 runs the same
    blocks as plain vector code (each pair widened to float32)."""
    packed = next(t for t in gemm.op.input_tensors if getattr(t.op, "tag", "") == PACK_TAG)
    bf16 = gemm.op.tag == BF16_TAG
    group = BF16_GROUP if bf16 else GROUP
    if bf16:
        intrin = dot_bf16() if has_bf16_dot() else None
    else:
        intrin = dot_int8(static_extent(packed.op.axis[2])) if int8_dot_kind() != "none" else None
    lanes = static_extent(packed.op.axis[2])
    m, n = (static_extent(a) for a in gemm.op.axis)
    _define_space(cfg, m, n // lanes)
    rows, vectors, ksteps = cfg["tile_y"].val, cfg["tile_x"].val, cfg["tile_k"].val

    p = s[packed]
    no, ko, ni, ki = p.op.axis
    p.parallel(no)
    p.unroll(ki)
    for t in gemm.op.input_tensors:
        if getattr(t.op, "tag", "") == PAD_TAG:
            fuse_parallel(s, t, [t.op.axis[0]])

    if gemm.op is out.op:
        out, gemm = gemm, s.cache_write(gemm, "local")
    else:
        for t in out.op.input_tensors:  # stages between the product and the output
            if t.op is not gemm.op and isinstance(t.op, tl.ComputeOp):
                s[t].compute_inline()
    o = s[out]
    i, j = o.op.axis
    io, ii = o.split(i, factor=rows)
    jo, ji = o.split(j, factor=vectors * lanes)
    o.reorder(jo, io, ii, ji)
    jv, jl = o.split(ji, factor=lanes)
    o.vectorize(jl)
    column_blocks = -(-static_extent(j) // (vectors * lanes))
    if column_blocks >= MIN_PARALLEL_CHUNKS:
        fuse_parallel(s, out, [jo])
        block_loop = io
    else:
        block_loop = fuse_parallel(s, out, [jo, io])
    s[gemm].compute_at(o, block_loop)

    g = s[gemm]
    gi, gj = g.op.axis
    (gk,) = g.op.reduce_axis
    gjo, gjl = g.split(gj, factor=lanes)
    gko, gki = g.split(gk, factor=group)
    gkoo, gkoi = g.split(gko, factor=ksteps)
    if intrin is None:
        g.reorder(gkoo, gkoi, gki, gi, gjo, gjl)
        g.unroll(gki)
    else:
        g.reorder(gkoo, gkoi, gi, gjo, gjl, gki)
    g.vectorize(gjl)  # the accumulators' zero fill (the update is the intrinsic)
    if intrin is not None:
        g.tensorize(gjl, intrin)
    g.unroll(gi)
    g.unroll(gjo)
    if ksteps > 1:
        g.unroll(gkoi)


def _template(cfg, data_shape, weight_shape, dtype: str, op, out_dtype: str) -> tuple:
    data = tl.placeholder(data_shape, dtype, name="data")
    weight = tl.placeholder(weight_shape, "int8" if dtype == "uint8" else dtype, name="weight")
    out = op(data, weight, out_dtype=out_dtype)
    s = template_schedule(cfg, out, schedule_dense_int8_with)
    cfg.add_flop(2 * data_shape[0] * data_shape[1] * weight_shape[0])
    return s, [data, weight, out]


@autotune.template("dense_int8.x86")
def dense_int8_template(cfg, data_shape, weight_shape, out_dtype="int32"):
    """Tunable int8 dense: args ((M, K), (N, K), "int32"), uint8 data and int8 weight."""
    return _template(cfg, data_shape, weight_shape, "uint8", dense_int8, out_dtype)


@autotune.template("dense_bf16.x86")
def dense_bf16_template(cfg, data_shape, weight_shape, out_dtype="float32"):
    """Tunable bf16 dense: args ((M, K), (N, K), "float32"), bfloat16 data and weight."""
    return _template(cfg, data_shape, weight_shape, "bfloat16", dense_bf16, out_dtype)
