"""x86 schedule and tuning template of conv2d_nchw: the NCHW[x]c recipe.

The compute (topi.nn.conv2d_nchw) already reads a kernel packed by blocks of w output channels
(w: one vector of the target it was defined for) and produces a (N, K/w, OH, OW, w) blocked
result. The schedule:
- materialises the padded input once (no bounds checks in the hot loop) and the packed kernel;
- per (batch, block of output channels, block of `tile_oh` output rows x `tile_ow` output
  columns) keeps a register block of tile_oh x tile_ow x tile_oc vectors of w channels,
  accumulated over input channels split by `tile_ic`, kernel rows and kernel columns (the
  kernel-column loop unrolled when `unroll_kw`) and, innermost, the `tile_ic` channels of one
  step: each step broadcasts one input value per output point of the block and multiplies it
  with tile_oc kernel vectors, one FMA per accumulator;
- writes the block out through the fused elementwise tail (bias, relu, ...) of the output stage.
Knobs: tile_ic, tile_oc, tile_oh, tile_ow, unroll_kw (shared/DESIGN.md). The register block may
hold as many accumulators as the current target has vector registers to spare; the fallback
sizes it from the target's registers and the layer's shape, and `tile_ic` from its caches.
"""

from __future__ import annotations

from collections.abc import Sequence

import autotune
import tensorlang as tl
from tensorlang.expr import IterVar

from ..nn.conv2d import conv2d_nchw
from ..nn.conv2d_int8 import TAG as INT8_TAG
from .common import (
    accumulator_budget,
    as_tensor_list,
    cache_sizes,
    fuse_parallel,
    materialise_padding,
    static_extent,
)
from .config import conv_template, schedule_tagged
from .conv2d_int8 import schedule_conv2d_nchw_int8

TASK = "conv2d_nchw.x86"


def define_conv_space(cfg, in_channels: int, oc_vectors: int, out_hw: tuple[int, int],
                      lanes: int, window: tuple[int, int, int, int],
                      parallel_vectors: int | None = None, out_channels: int = 0,
                      whole_columns: bool = False) -> None:
    """The knobs of a register-blocked convolution and its fallback: `tile_ic` input channels
    per step, and a register block of `tile_oh` output rows x `tile_ow` output columns x
    `tile_oc` vectors of output channels (of `oc_vectors`), within the current target's
    accumulator budget. `window` is (dilated kernel rows, columns, stride h, stride w);
    `parallel_vectors` the images x channel vectors when the parallel loop runs over images x
    register blocks of channels, and `whole_columns` an NCHW output (see `fallback_block`);
    `out_channels` the layer's output channels (0: unknown), whose kernel size the fallback's
    `tile_ic` depends on."""
    budget = accumulator_budget(1)
    cfg.define_split("tile_ic", in_channels, num_outputs=2)
    cfg.define_knob("tile_oc", [v for v in (1, 2, 4) if v <= oc_vectors])
    # Every block height and width up to the budget: the loop partitioner peels the partial
    # last block, so non-divisors are cheap. Blocks larger than the budget are filtered out.
    for name, extent in (("tile_oh", out_hw[0]), ("tile_ow", out_hw[1])):
        cfg.define_split(name, extent, num_outputs=2, policy="candidate",
                         candidate=[[-1, v] for v in range(1, min(extent, budget) + 1)])
    cfg.define_knob("unroll_kw", [False, True])
    cfg.multi_filter(lambda c: _block_fits(c["tile_oc"].val, c["tile_oh"].size[-1],
                                           c["tile_ow"].size[-1]))
    if cfg.is_fallback:
        oc, rows, cols = fallback_block(out_hw, oc_vectors, parallel_vectors, whole_columns)
        cfg.fallback_knob("tile_oc", oc)
        cfg.fallback_split("tile_oh", [-1, rows])
        cfg.fallback_split("tile_ow", [-1, cols])
        cfg.fallback_split("tile_ic", [-1, fallback_tile_ic(
            in_channels, oc * lanes, (rows, cols), window, out_channels=out_channels)])
    elif not _block_fits(cfg["tile_oc"].val, cfg["tile_oh"].size[-1], cfg["tile_ow"].size[-1]):
        cfg.raise_error("register block larger than the register file")


def _block_fits(oc_vectors: int, rows: int, cols: int) -> bool:
    return rows * cols * oc_vectors <= accumulator_budget(oc_vectors)


def _block_sizes(extent: int, block: int) -> list[int]:
    """The sizes of the blocks a split of `extent` by `block` makes (the last may be partial)."""
    return [block] * (extent // block) + ([extent % block] if extent % block else [])


def fallback_block(out_hw: tuple[int, int], oc_vectors: int,
                   parallel_vectors: int | None = None,
                   whole_columns: bool = False) -> tuple[int, int, int]:
    """The fallback's register block: (vectors of output channels, rows, columns).

    Two vectors of output channels where the layer has them: a step then does twice as many
    FMAs as loads (one kernel vector per broadcast input would make every FMA wait on a load of
    its own). One vector where the parallel loop runs over the register blocks of
    `parallel_vectors` channel vectors (all images) and two vectors would leave it fewer
    iterations than threads: 128 -> 32 channels 3x3 (DenseNet's), AVX-512, 2 threads on Zen 4,
    ran on one core with 2 x 16 channels (114 GFLOP/s at 56x56, 28x28 and 14x14) and on both
    with 1 x 16 (208-220); one thread ran both at 114-116. The rows x columns of output points
    then fill the target's accumulator budget with as little waste as the layer's shape allows:
    each block costs its number of points, but at least half the budget (a block with fewer
    independent accumulators waits on FMA latency), so partial blocks at the edges count what
    they really cost. Of equally cheap shapes one whose rows tile the plane wins: on 7x7 planes
    (AVX-512: 2 x 7, 7 x 2 and 1 x 7 blocks all cost 49 steps) the full-budget 2 x 7 block with
    a partial last row ran at 50-65% of the others (one thread, Zen 4: 512 -> 512 3x3 60
    against 77-88 GFLOP/s, 2048 -> 512 1x1 75 against 117). Then the largest block wins (fewer
    loads of the kernel per output), then the widest (its inputs are contiguous).

    `whole_columns` (an NCHW output) prefers, next, columns that tile the row as well: each
    block of an NCHW output is written back row by row, a strided read of the block as wide as
    its columns, and a partial last block compiles a second copy of the unrolled block and of
    that write-back. Without it 512 -> 512 3x3 at 7x7 (a 7 x 2 block), 48 -> 64 5x5 at 35x35 (1 x
    14) and 32 -> 32 5x5 at 112x112 (1 x 29) took 108, 131 and 256 ms to compile. Models never
    have such outputs (their convolutions run on NCHW[x]c), whose larger blocks were measured
    faster. Where no equally cheap block tiles the row (a prime width), the one with the least
    unrolled code (points of the block and of its partial copy) wins: 3 -> 32 3x3 stride 2 at
    299x299 (149 columns) takes 1 x 15 blocks instead of 1 x 27, as fast (0.99-1.02x) and 16 ms
    less of LLVM."""
    oc = min(2, oc_vectors)
    if parallel_vectors is not None and -(-parallel_vectors // oc) < tl.get_num_threads():
        oc = 1
    points = accumulator_budget(oc) // oc
    out_h, out_w = out_hw

    def cost(shape: tuple[int, int]) -> tuple[int, bool, bool, int, int, int]:
        rows, cols = shape
        heights, widths = _block_sizes(out_h, rows), _block_sizes(out_w, cols)
        steps = sum(max(r * c, points // 2) for r in heights for c in widths)
        partial_columns = whole_columns and out_w % cols != 0
        unrolled = sum(r * c for r in set(heights) for c in set(widths)) if partial_columns else 0
        return steps, out_h % rows != 0, partial_columns, unrolled, -rows * cols, -cols

    shapes = [(r, c) for r in range(1, min(out_h, points) + 1)
              for c in range(1, min(out_w, points // r) + 1)]
    return (oc, *min(shapes, key=cost))


def fallback_tile_ic(in_channels: int, oc_lanes: int, block: tuple[int, int],
                     window: tuple[int, int, int, int], itemsize: int = 4,
                     out_channels: int = 0) -> int:
    """Input channels per step, from the target's L1 and L2 sizes.

    A step runs over every kernel row and column for `tile_ic` channels: it reads their kernel
    block (R x S x `oc_lanes` values each) and the input window of the register block (rows x
    columns of output points, widened by the kernel and the stride). Each kernel column re-reads
    the input values of its neighbour, each kernel row its neighbour's, so the window must stay
    in L1 through the step; half of L1 is left to the output block and the next step's lines:
    the largest divisor of `in_channels` whose step fits (1 at least).

    Every register block streams the kernel of its output channels (C x R x S x `oc_lanes`
    values). Where that exceeds L2 it comes from farther away on every pass, and one channel
    per step reads it in address order, which the prefetchers follow (512x7x7 layers, AVX2:
    66 GFLOP/s per core with 1 channel per step, 62 with 4, 54 with 16).

    So does a window of several taps whose whole kernel (C x R x S x `out_channels`) exceeds
    L2: in a model, whose weights pass through the caches layer after layer, the first
    register block of each block of output channels fetches its kernel from memory on every
    call, and with several channels per step it reads it in R x S x `oc_lanes` strides, which
    the prefetchers do not follow (a 1x1 kernel is read in address order with any step).
    ResNet-18 from ONNX, 1 thread, kernels timed in the model, loaded Zen 4 (AVX-512):
    512 -> 512 3x3 on 7x7 7.35 -> 6.20 ms for its three layers (onnxruntime 6.99 in the same
    run), 256 -> 256 on 14x14 6.26 -> 5.99 (6.07), 256 -> 512 stride 2 1.21 -> 1.05 (1.26)."""
    kernel_h, kernel_w, stride_h, stride_w = window
    caches = cache_sizes()
    taps = kernel_h * kernel_w
    if (in_channels * taps * oc_lanes * itemsize > caches.l2
            or taps > 1 and in_channels * taps * out_channels * itemsize > caches.l2):
        return 1
    rows, cols = block
    window_values = ((rows - 1) * stride_h + kernel_h) * ((cols - 1) * stride_w + kernel_w)
    per_channel = (kernel_h * kernel_w * oc_lanes + window_values) * itemsize
    limit = max(1, caches.l1d // 2 // per_channel)
    return max(d for d in range(1, min(in_channels, limit) + 1) if in_channels % d == 0)


def parallel_axes(outer: list[IterVar], iterations: int | None, rows: IterVar) -> list[IterVar]:
    """The loops a convolution's parallel loop fuses: `outer` (images x channel blocks, of
    `iterations` iterations, None when symbolic), and the output rows (or blocks of rows)
    `rows` too where the threads would not share `outer` evenly: Inception's 96 and 160
    channels make 3 and 5 register blocks of 32 channels, which keep 2 threads 75% and 83%
    busy (idle Zen 4: 168 and 178 GFLOP/s against 212-230 for their even neighbours). Where
    they share it evenly the rows stay out: the loop is split as before, with no division of
    its index by the rows."""
    if iterations is not None and iterations % tl.get_num_threads() == 0:
        return outer
    return [*outer, rows]


PACK_ROWS_UNROLLED = 8
"""How many rows of a block of output channels the kernel packing reads in one unrolled body."""


def pack_kernel(s: tl.Schedule, kernel_vec: tl.Tensor,
                per_block: tuple[tl.Stage, IterVar] | None) -> None:
    """The kernel packing (K/w, C, R, S, w) as a blocked transpose: per block of w output
    channels and input channel, one loop over the R x S taps, each tap reading the w rows'
    values (unrolled, scalar loads a filter apart) and writing them as one contiguous run of w.
    The tap loop stays a loop in LLVM too (pragma `scalar_loop`: not unrolled, not vectorized):
    with the taps unrolled inside the w rows (the former order, w rows of R x S values one
    after the other) a 3x3 filter made a block of 144 scalar stores, on which LLVM's SLP and
    loop vectorizers spent 180 ms of the conv's 420 ms compile to find nothing, and a 7x7 one
    a nest on which loop strength reduction spent 160 ms. Vectorized over w, the loads would be
    gathers a whole filter apart (C x R x S values, a page or more for wide layers): on
    512 x 512 3x3 filters such a pass took 1.0 ms per core against 0.65 ms for scalar ones,
    and LLVM's loop vectorizer let loose on the tap loop ran that layer at 0.35-0.7x. A kernel
    packed ahead of time (a placeholder) needs nothing.

    `per_block` (the output stage and its parallel loop over blocks of output channels) packs
    each block's filters inside that loop, just before its convolution: the packed block stays
    in the cache of the core that reads it, instead of a whole packed kernel going out to
    memory and coming back (512x7x7 layers: 1.10-1.14x the whole layer, 9 MB of filters). The
    loop must not repeat a block's filters (a batch of one).

    Wider blocks take their rows PACK_ROWS_UNROLLED at a time, in a rolled loop inside the tap
    loop: loop strength reduction and LICM cost superlinearly in the strided loads of one body,
    and 16 of them took 10-20 ms of LLVM per conv (3x3 64x56x56 and the 7x7 stem: 120 -> 104 ms
    to compile), while runs of 8 pack as fast (one thread, 512 x 512 3x3: 0.98x the time)."""
    if not isinstance(kernel_vec.op, tl.ComputeOp):
        return
    pk = s[kernel_vec]
    ko, ci, ry, rx, ki = pk.op.axis
    taps = pk.fuse(ry, rx)
    pk.pragma(taps, "scalar_loop")
    rows = static_extent(ki)
    if rows is not None and rows > PACK_ROWS_UNROLLED and rows % PACK_ROWS_UNROLLED == 0:
        steps, ki = pk.split(ki, factor=PACK_ROWS_UNROLLED)
        pk.pragma(steps, "scalar_loop")
    pk.unroll(ki)
    if per_block is None:
        pk.parallel(ko)
    else:
        pk.compute_at(*per_block)


def schedule_conv2d_nchw_with(cfg, s: tl.Schedule, conv: tl.Tensor, out: tl.Tensor) -> None:
    """Apply the blocked schedule to the stage `conv`, which reads the (N, K/w, OH, OW, w)
    blocked convolution as (N, K, OH, OW) (conv2d_nchw) or as it is (conv2d_NCHWc) and whose
    elementwise tail ends in the output `out` (possibly `conv` itself); `cfg` holds the knob
    values."""
    blocked = conv.op.input_tensors[0]
    padded, kernel_vec = blocked.op.input_tensors
    images, blocks, out_h, out_w, lanes = (static_extent(a) for a in blocked.op.axis)
    in_channels, kernel_h, kernel_w = (static_extent(a) for a in blocked.op.reduce_axis)
    (stride_h, stride_w), (dilation_h, dilation_w) = blocked.op.attrs["window"]
    # A register block stacks only output blocks that read the same inputs (all of them but
    # in a grouped convolution): each broadcast input then feeds tile_oc FMAs.
    shared = min(blocks, blocked.op.attrs.get("shared_input_blocks", blocks))
    define_conv_space(cfg, in_channels, shared, (out_h, out_w), lanes,
                      ((kernel_h - 1) * dilation_h + 1, (kernel_w - 1) * dilation_w + 1,
                       stride_h, stride_w), images * blocks, blocks * lanes,
                      whole_columns=len(out.op.axis) == 4)
    oc_vectors = cfg["tile_oc"].val

    materialise_padding(s, padded)

    o = s[out]
    # An NCHW output splits its channels into the blocks; an NCHW[x]c one (conv2d_NCHWc) has
    # them, and its lane axis stays innermost, one vector store.
    n, k, y, x, *lane = o.op.axis
    k_outer, k_inner = o.split(k, factor=oc_vectors if lane else lanes * oc_vectors)
    y_outer, y_inner = o.split(y, factor=cfg["tile_oh"].size[-1])
    x_outer, x_inner = o.split(x, factor=cfg["tile_ow"].size[-1])
    o.reorder(n, k_outer, y_outer, x_outer, k_inner, y_inner, x_inner, *lane)
    # NCHW[x]c stores whole channel vectors; NCHW stores rows of the block's columns, each a
    # strided read of the block (a gather, not one scalar store per point).
    o.vectorize(lane[0] if lane else x_inner)
    if not lane:
        # The loop over the block's channels stays a loop in LLVM: unrolled, its 16-32 gathers
        # of odd widths (10, 27, 28 columns) were legalised by the x86 backend into hundreds of
        # pointer extracts. The 3 -> 32 3x3 stride-2 conv at 299x299 spent 94 of its 187 ms of
        # compiling in machine code (18 rolled), 32 -> 32 5x5 at 112x112 62 of 140 (16). A
        # gather per channel costs the same either way: the kernels ran at 0.99-1.10x their
        # unrolled time, 64 -> 256 1x1 at 56x56 at 1.31x (idle Zen 4, 2 threads).
        o.pragma(k_inner, "scalar_loop")
        if cfg["tile_ow"].size[-1] == 1 < cfg["tile_oh"].size[-1]:
            # A block one column wide writes each channel's column row by row, a scalar copy
            # that LLVM's loop vectorizer took 10-15 ms to turn into scatters (16 -> 24 7x7 at
            # 29x31, a 29 x 1 block).
            o.pragma(y_inner, "scalar_loop")
    # A kernel packed here is packed per block of output channels, inside a parallel loop that
    # visits each block once (see `pack_kernel`).
    packs_per_block = static_extent(n) == 1 and isinstance(kernel_vec.op, tl.ComputeOp)
    iterations = None if None in (images, blocks) else images * -(-blocks // oc_vectors)
    axes = [n, k_outer] if packs_per_block else parallel_axes([n, k_outer], iterations, y_outer)
    blocks_loop = fuse_parallel(s, out, axes)
    pack_kernel(s, kernel_vec, (o, blocks_loop) if packs_per_block else None)

    b = s[blocked]
    if conv.op is not out.op:
        # The output stage only reads the block (as it is, or its channels as NCHW rows): the
        # tail reads the block itself, in one pass.
        s[conv].compute_inline()
    b.compute_at(o, x_outer)
    bn, bk, by, bx, bc = b.op.axis
    rc, ry, rx = b.op.reduce_axis
    rc_outer, rc_inner = cfg["tile_ic"].apply(s, blocked, rc)
    # Channels innermost, then point by point: each broadcast input is used by its tile_oc
    # FMAs at once and dies (with the kernel columns inside the channel loop, or the vectors
    # outside the points, LLVM shares broadcasts between neighbours and spills accumulators).
    b.reorder(bn, rc_outer, ry, rx, rc_inner, by, bx, bk, bc)
    b.vectorize(bc)
    for axis in (bk, bx, by):
        b.unroll(axis)
    if cfg["unroll_kw"].val:
        b.unroll(rx)


def schedule_conv2d_nchw(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule conv2d_nchw and its fused elementwise tail (tuned config when one is active);
    its uint8 x int8 path gets the int8 schedule."""
    stages = tl.create_schedule([t.op for t in as_tensor_list(outs)]).stages
    if any(getattr(stage.op, "tag", "") == INT8_TAG for stage in stages):
        return schedule_conv2d_nchw_int8(outs)
    return schedule_tagged(outs, {"conv2d_nchw": TASK}, schedule_conv2d_nchw_with)


@autotune.template(TASK)
def conv2d_nchw_template(cfg, data_shape, kernel_shape, stride, padding, dilation, dtype):
    """Tunable conv2d_nchw: args ((N, C, H, W), (K, C, R, S), stride, padding, dilation, dtype)."""
    return conv_template(cfg, conv2d_nchw, schedule_conv2d_nchw_with, data_shape, kernel_shape,
                         stride, padding, dilation, dtype, channel_axis=1)
