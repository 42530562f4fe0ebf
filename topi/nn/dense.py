"""Matrix products: dense (x @ W^T + b), matmul (with transposes, batch broadcasting), batch_matmul.

The 2-D and batched products read their right-hand operand through a packed copy of shape
(..., N/w, K, w): column panels one vector of the current target wide (w = `pack_width`: 16
float32 with AVX-512, 8 with AVX2), contiguous along K. That is the GEMM recipe of
shared/DESIGN.md: the inner loop loads one panel row per k with one vector load whatever the
original layout (transposed or not), so one schedule serves every variant. With more than one
row (static), the left operand is read through row panels (..., M/h, K, h) likewise
(h = `pack_height`, the target's register block height): a block's rows then come as one
contiguous stream instead of h rows K elements apart, which share the L1 sets of a cache when
K * itemsize is a multiple of 4 KB. Schedules may inline either packing.
The GEMM stage is tagged "dense", "matmul" or "batch_matmul" after the op that made it; a bias
is a separate "broadcast" stage for the schedule to fuse. Ops record `attrs["workload"]` like the
convolutions: the arguments of their tuning task ("dense.x86", "matmul.x86", "batch_matmul.x86"),
so that a record tuned for the task is the one the op's schedule finds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorlang as tl
from tensorlang.arith import const_value
from tensorlang.expr import Expr, TensorRead, Var
from tensorlang.visitor import nodes_below, substitute

from .dense_int8 import dense_bf16, dense_int8, is_bf16_dense, is_int8_dense
from .elemwise import BROADCAST, broadcast_shape
from .utils import (
    check_same_dim,
    check_tensor,
    json_args,
    pack_height,
    pack_width,
    static_dim,
)


def pack_panels(
    batch: Sequence, n: object, k: object, read: Callable[..., Expr], dtype: str, name: str,
    width: int, tag: str = "injective,panel_pack",
) -> tl.Tensor:
    """(*batch, ceil(n/w), k, w) with packed[..., jo, kk, ji] = read(*b, jo * w + ji, kk).
    Column panels (the default `tag`) are one vector of the product's accumulation dtype wide,
    so that one panel row is one accumulator's worth of columns; row panels
    ("injective,row_pack") are one register block high.

    Past n, a partial last panel holds values that no result reads (an output row or column
    reads only its own row or column of a panel), so they only have to be safe to compute
    with: zeros where a panel row copies a run of the source (one masked vector load), else
    copies of the last row or column (a clamped index, which costs the element-wise copy
    nothing, where a select per element made LLVM keep a copy of the loop per pattern of
    selects: 13 of the 80 ms that the AVX2 GEMM 1024^3 took to compile)."""
    static_n = static_dim(n)
    blocks = (n + width - 1) // width  # type: ignore[operator]
    zero = tl.const(0, dtype)
    guard = static_n is None or static_n % width != 0

    def f(*index: Expr) -> Expr:
        *b, jo, kk, ji = index
        j = jo * width + ji
        value = read(*b, j, kk)
        if not guard:
            return value
        if reads_a_run(value, ji):
            return tl.if_then_else(j < n, value, zero)
        return read(*b, tl.minimum(j, n - 1), kk)  # type: ignore[operator]

    return tl.compute((*batch, blocks, k, width), f, name=name, tag=tag)


def reads_a_run(value: Expr, lane: Var) -> bool:
    """Whether consecutive values of `lane` read consecutive elements of the source: the
    innermost index of the first tensor read in `value` (0-d reads aside) steps by one with
    `lane`."""
    read = next((node for node in nodes_below(value)
                 if isinstance(node, TensorRead) and node.indices), None)
    if read is None:  # a value of scalars (a constant broadcast into the panel)
        return False
    last = read.indices[-1]
    return const_value(substitute(last, {lane: lane + 1}) - last) == 1


def _panel_read(packed: tl.Tensor, *b: Expr, j: Expr, kk: Expr) -> Expr:
    width = static_dim(packed.shape[-1])
    return packed[(*b, j // width, kk, j % width)]


def _shape(t: tl.Tensor) -> tuple:
    return tuple(static_dim(d) if static_dim(d) is not None else d for d in t.shape)


def _add_bias(out: tl.Tensor, bias: tl.Tensor | None, name: str) -> tl.Tensor:
    if bias is None:
        return out
    check_tensor(bias, f"{name}: bias", 1)
    check_same_dim(bias.shape[0], out.shape[-1], f"{name}: bias length vs output columns")
    return tl.compute(
        out.shape, lambda *i: out[i] + bias[i[-1]].astype(out.dtype), name=f"{name}_bias",
        tag=BROADCAST,
    )


def dense(
    data: tl.Tensor, weight: tl.Tensor, bias: tl.Tensor | None = None, out_dtype: str | None = None
) -> tl.Tensor:
    """data (M, K) times weight (N, K) transposed, plus an optional bias (N,) -> (M, N).

    uint8 data with int8 weights accumulate in int32 through a blocked weight layout
    (`topi.nn.dense_int8`: tag "dense_int8", VNNI's operand types); bfloat16 operands accumulate
    in float32 likewise (tag "dense_bf16").

    Returns:
        The output; its GEMM stage is tagged "dense".
    """
    check_tensor(data, "dense: data", 2)
    check_tensor(weight, "dense: weight", 2)
    if is_int8_dense(data, weight):  # uint8 x int8 -> int32 through VNNI's blocked layout
        return dense_int8(data, weight, bias, out_dtype or "int32")
    if is_bf16_dense(data, weight):  # bf16 pairs -> float32 likewise
        return dense_bf16(data, weight, bias, out_dtype or "float32")
    check_same_dim(data.shape[1], weight.shape[1], "dense: data and weight reduction sizes")
    dtype = out_dtype or data.dtype
    out = _product(data, weight, False, True, dtype, _workload(_shape(data), _shape(weight), dtype),
                   tag="dense", pack_names=("data_pack", "weight_pack"))
    return _add_bias(out, bias, "dense")


def matmul(
    a: tl.Tensor,
    b: tl.Tensor,
    transpose_a: bool = False,
    transpose_b: bool = False,
    bias: tl.Tensor | None = None,
    out_dtype: str | None = None,
) -> tl.Tensor:
    """a @ b, with the last two axes of an operand swapped when its transpose flag is set.

    Leading (batch) axes broadcast numpy-style; a 1-D `bias` of the output's last size is added.

    Returns:
        The output; its product stage is tagged "matmul", with the arguments of the
        "matmul.x86" task as its workload: (a shape, b shape, dtype), and the two flags after
        them when either is set.
    """
    check_tensor(a, "matmul: a")
    check_tensor(b, "matmul: b")
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"matmul: operands need at least 2 dimensions, got {a.ndim} and {b.ndim}")
    for label, flag in (("transpose_a", transpose_a), ("transpose_b", transpose_b)):
        if not isinstance(flag, bool):
            raise TypeError(f"matmul: {label} must be a bool, got {flag!r}")
    dtype = out_dtype or a.dtype
    flags = (transpose_a, transpose_b) if transpose_a or transpose_b else ()
    workload = _workload(_shape(a), _shape(b), dtype, *flags)
    out = _product(a, b, transpose_a, transpose_b, dtype, workload, tag="matmul")
    return _add_bias(out, bias, "matmul")


def _workload(*args: object) -> tuple | None:
    """The tuning-task arguments of an op, or None when a shape is symbolic (not tunable)."""
    shapes = [a for a in args if isinstance(a, tuple)]
    if any(not isinstance(d, int) for shape in shapes for d in shape):
        return None
    return json_args(*args)


def _product(
    a: tl.Tensor, b: tl.Tensor, transpose_a: bool, transpose_b: bool, dtype: str,
    workload: tuple | None, tag: str, pack_names: tuple[str, str] = ("a_pack", "b_pack"),
) -> tl.Tensor:
    """The product stage, tagged `tag`, reading both operands through their packed panels."""
    sa, sb = _shape(a), _shape(b)
    m, ka = (sa[-1], sa[-2]) if transpose_a else (sa[-2], sa[-1])
    kb, n = (sb[-1], sb[-2]) if transpose_b else (sb[-2], sb[-1])
    check_same_dim(ka, kb, "matmul: reduction sizes of a and b")
    batch = broadcast_shape(sa[:-2], sb[:-2], "matmul: batch dimensions")
    nb = len(batch)

    def read_a(bi: tuple, i: Expr, kk: Expr) -> Expr:
        lead = _broadcast_index(a, bi, nb)
        return a[(*lead, kk, i)] if transpose_a else a[(*lead, i, kk)]

    def read_b(bi: tuple, j: Expr, kk: Expr) -> Expr:
        lead = _broadcast_index(b, bi, nb)
        return b[(*lead, j, kk)] if transpose_b else b[(*lead, kk, j)]

    packed = pack_panels(
        batch, n, ka, lambda *idx: read_b(tuple(idx[:-2]), idx[-2], idx[-1]), b.dtype,
        pack_names[1], pack_width(dtype),
    )
    read_rows = _row_reader(batch, m, ka, read_a, a.dtype, pack_names[0])
    rk = tl.reduce_axis((0, ka), name="k")
    return tl.compute(
        (*batch, m, n),
        lambda *idx: tl.sum(
            read_rows(idx[:-2], idx[-2], rk).astype(dtype)
            * _panel_read(packed, *idx[:-2], j=idx[-1], kk=rk).astype(dtype),
            axis=rk,
        ),
        name=tag,
        tag=tag,
        attrs={"workload": workload},
    )


def _row_reader(batch: Sequence, m: object, k: object, read: Callable[..., Expr], dtype: str,
                name: str) -> Callable[..., Expr]:
    """How the product reads its left operand, read(batch index, i, kk): through row panels
    when it has a static number of rows above one, else directly (one row has nothing to
    stream together, and symbolic extents keep their guards in the hot loop when inlined)."""
    rows = static_dim(m)
    if rows is None or rows <= 1:
        return read
    packed = pack_panels(
        batch, m, k, lambda *idx: read(tuple(idx[:-2]), idx[-2], idx[-1]), dtype, name,
        pack_height(), tag="injective,row_pack",
    )
    return lambda bi, i, kk: _panel_read(packed, *bi, j=i, kk=kk)


def _broadcast_index(t: tl.Tensor, batch_index: tuple, nb: int) -> list[Expr]:
    """The leading indices of `t` for an output batch index (right-aligned, size 1 pinned)."""
    own = t.ndim - 2
    lead = []
    for k in range(own):
        dim = t.shape[k]
        lead.append(tl.const(0) if static_dim(dim) == 1 else batch_index[nb - own + k])
    return lead


def batch_matmul(x: tl.Tensor, y: tl.Tensor, out_dtype: str | None = None) -> tl.Tensor:
    """x (B, M, K) times y (B, N, K) transposed, per batch -> (B, M, N); a batch of 1
    broadcasts against the other operand's batch.

    Returns:
        The output, tagged "batch_matmul".
    """
    check_tensor(x, "batch_matmul: x", 3)
    check_tensor(y, "batch_matmul: y", 3)
    bx, by = static_dim(x.shape[0]), static_dim(y.shape[0])
    if bx is not None and by is not None and bx != by and 1 not in (bx, by):
        raise ValueError(f"batch_matmul: batch sizes {bx} and {by} differ and neither is 1")
    check_same_dim(x.shape[2], y.shape[2], "batch_matmul: reduction sizes of x and y")
    dtype = out_dtype or x.dtype
    return _product(x, y, False, True, dtype, _workload(_shape(x), _shape(y), dtype),
                    tag="batch_matmul")
