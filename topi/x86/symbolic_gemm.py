"""The register-blocked GEMM schedule of `dense.py` for products with symbolic extents (a
model's dynamic batch or sequence), as fast as the static schedule at every size.

The static schedule packs the right operand into vector-wide panels once, at the root. With
a symbolic column count that root buffer would be a symbolic ceil-division, which tensorlang
cannot bound, and reading the operand through its own layout instead costs a gather per vector
and K step wherever it is transposed (attention's Q K^T and its probabilities times V: 5-15x
slower than static). Here each parallel chunk packs the panels of its own column block,
computed at the column-block loop: the buffer is one block wide and K deep, and every row
block of the chunk reads it from L1.

The loop order, register block, vector lanes and epilogue fusion are the static schedule's
(same knobs, same fallback), so a size bucket's tuned config applies unchanged.
"""

from __future__ import annotations

import tensorlang as tl

from ..nn.dense import reads_a_run
from .common import compute_chain_at, parallel_pays, static_extent


def is_symbolic_gemm(gemm: tl.Tensor) -> bool:
    """Whether a product stage has a symbolic extent (batch, rows, columns or K)."""
    return any(static_extent(a) is None for a in (*gemm.op.axis, *gemm.op.reduce_axis))


def schedule_symbolic_gemm_with(cfg, s: tl.Schedule, gemm: tl.Tensor, out: tl.Tensor,
                                packed: tl.Tensor, rows: tl.Tensor | None) -> None:
    """Schedule the product stage `gemm` of symbolic extents, with its elementwise tail ending
    in `out`, its right operand's panels `packed` and its left operand's row panels `rows`
    (or None), with the knobs of `cfg` (defined by the caller): parallel over the (batch,
    column block) chunks, each packing its panels of the right operand and then running its
    row blocks over them. Serial within `common.symbolic_outputs_small` (the variant that a
    symbolic module runs below the L2 size, where waking the threads costs more than it buys)."""
    *_, m, n = (static_extent(a) for a in gemm.op.axis)
    lanes = static_extent(packed.op.axis[-1])
    if rows is not None:  # static rows, a symbolic batch or K: no panel buffer to bound
        s[rows].compute_inline()
    if gemm.op is out.op:
        out, gemm = gemm, s.cache_write(gemm, "local")
    o = s[out]
    *batch, i, j = o.op.axis
    i_outer, i_inner = cfg["tile_y"].apply(s, out, i)
    j_outer, j_inner = cfg["tile_x"].apply(s, out, j)
    o.reorder(*batch, j_outer, i_outer, i_inner, j_inner)
    # (A symbolic column count makes the column-block loop a symbolic ceil-division, which
    # tensorlang cannot fuse and bound: then it stays serial inside the parallel batch.)
    outer = [*batch, j_outer] if n is not None else batch
    chunk = (o.fuse(*outer) if len(outer) > 1 else outer[0]) if outer else None
    if chunk is not None and parallel_pays(out):  # (not in a module's serial variant)
        o.parallel(chunk)
    _, j_lanes = o.split(j_inner, factor=lanes)
    o.vectorize(j_lanes)

    p = s[packed]
    p.compute_at(o, j_outer if n is None or chunk is None else chunk)
    if reads_a_run(packed.op.body[0], packed.op.axis[-1].var):
        p.vectorize(p.op.axis[-1])
    else:
        p.unroll(p.op.axis[-1])

    compute_chain_at(s, out, gemm, i_outer)
    g = s[gemm]
    *g_batch, gi, gj = g.op.axis
    (gk,) = g.op.reduce_axis
    k_outer, k_inner = cfg["tile_k"].apply(s, gemm, gk)
    # Fewer columns than a vector: vectors of that many lanes, not masked ones (masked stores
    # keep the accumulators in memory: 6x slower for attention's 8-wide heads on AVX-512).
    gj_outer, gj_lanes = g.split(gj, factor=n if n is not None and n < lanes else lanes)
    g.reorder(*g_batch, k_outer, k_inner, gi, gj_outer, gj_lanes)
    g.vectorize(gj_lanes)
    g.unroll(gj_outer)
    g.unroll(gi)
    g.unroll(k_inner)
