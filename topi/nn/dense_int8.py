"""Low-precision dense: uint8 x int8 -> int32 (VNNI's operand types), bf16 x bf16 -> float32.

The weight is read through a blocked copy, (ceil(N/L), ceil(K/4), L, 4): L output columns (one
int32 vector of the current target: 16 with AVX-512, 8 with AVX2) of 4 consecutive K values
each, so that one vector load gives the kernel operand of one `vpdpbusd` (or its fallback) and
the 4 data bytes of a row are one broadcast int32. K is padded to a multiple of 4 and N to one
of L with zeros (a padded data copy only when K needs it); the product then runs over the padded
extents and the output stage reads the (M, N) part. The product stage is tagged "dense_int8"
and records the arguments of the "dense_int8.x86" task: ((M, K), (N, K), out_dtype). bf16 works
the same way with pairs along K and 16 float32 lanes (AVX512-BF16's `vdpbf16ps`).
"""

from __future__ import annotations

import tensorlang as tl

from .elemwise import BROADCAST
from .utils import check_same_dim, check_tensor, json_args, static_dim

#: int8 values per int32 lane of the blocked weight (one VNNI dot).
GROUP = 4
#: bf16 values per float32 lane of the blocked weight (one vdpbf16ps).
BF16_GROUP = 2
#: The tags of the product stages.
TAG = "dense_int8"
BF16_TAG = "dense_bf16"
#: The tags of the blocked weight copy and of the data padded along K.
PACK_TAG = "injective,kernel_pack"  # the graph pre-packs constant weights by this tag
PAD_TAG = "injective,int8_pad"


def is_int8_dense(data: tl.Tensor, weight: tl.Tensor) -> bool:
    """Whether dense takes the int8 path: uint8 data with int8 weights."""
    return data.dtype == "uint8" and weight.dtype == "int8"


def int8_lanes() -> int:
    """int32 lanes of one vector of the current target (16 with AVX-512, 8 otherwise)."""
    return 16 if tl.Target.current().vector_bits == 512 else 8


def pack_weight_blocked(weight: tl.Tensor, lanes: int, group: int = GROUP,
                        name: str = "weight_vnni", dtype: str | None = None) -> tl.Tensor:
    """(N, K) -> (ceil(N/lanes), ceil(K/group), lanes, group), zeros past N and K, converted
    to `dtype` (default: the weight's)."""
    n, k = (static_dim(d) for d in weight.shape)
    dtype = dtype or weight.dtype
    zero = tl.const(0, dtype)

    def f(no, ko, ni, ki):
        j, kk = no * lanes + ni, ko * group + ki
        value = weight[tl.minimum(j, n - 1), tl.minimum(kk, k - 1)].astype(dtype)
        if n % lanes == 0 and k % group == 0:
            return weight[j, kk].astype(dtype)
        return tl.if_then_else((j < n) & (kk < k), value, zero)

    return tl.compute((-(-n // lanes), -(-k // group), lanes, group), f, name=name,
                      tag=PACK_TAG)


def dense_int8(data: tl.Tensor, weight: tl.Tensor, bias: tl.Tensor | None = None,
               out_dtype: str = "int32") -> tl.Tensor:
    """uint8 data (M, K) times int8 weight (N, K) transposed -> int32 (M, N), plus an optional
    int32 bias (N,); see the module docstring.

    Raises:
        ValueError: symbolic shapes (the blocked layout needs static ones), or out_dtype is
            not int32.
    """
    if out_dtype != "int32":
        raise ValueError(f"dense: uint8 x int8 accumulates in int32, got out_dtype={out_dtype!r}")
    return _blocked_dense(data, weight, bias, GROUP, int8_lanes(), "int32", TAG, None)


def is_bf16_dense(data: tl.Tensor, weight: tl.Tensor) -> bool:
    """Whether dense takes the bf16 path: bfloat16 data and weight."""
    return data.dtype == "bfloat16" and weight.dtype == "bfloat16"


def dense_bf16(data: tl.Tensor, weight: tl.Tensor, bias: tl.Tensor | None = None,
               out_dtype: str = "float32") -> tl.Tensor:
    """bfloat16 data (M, K) times bfloat16 weight (N, K) transposed, accumulated in float32
    (AVX512-BF16's `vdpbf16ps` reduces pairs along K), plus an optional float32 bias (N,). The
    weight is blocked as (ceil(N/16), ceil(K/2), 16, 2); the product stage is tagged
    "dense_bf16". float32 operands are rounded to bfloat16 in the data's copy and the weight's
    blocked copy (`build(precision="bf16")`).

    Raises:
        ValueError: symbolic shapes, out_dtype not float32, operands neither bfloat16 nor
            float32.
    """
    if out_dtype != "float32":
        raise ValueError(f"dense: bfloat16 accumulates in float32, got out_dtype={out_dtype!r}")
    if {data.dtype, weight.dtype} - {"bfloat16", "float32"}:
        raise ValueError(f"dense_bf16: bfloat16 or float32 operands, got {data.dtype} x "
                         f"{weight.dtype}")
    return _blocked_dense(data, weight, bias, BF16_GROUP, 16, "float32", BF16_TAG, "bfloat16")


def _blocked_dense(data: tl.Tensor, weight: tl.Tensor, bias: tl.Tensor | None, group: int,
                   lanes: int, acc: str, tag: str, operand: str | None) -> tl.Tensor:
    """The blocked product; `operand` (if given) is the dtype both operands are converted to
    in their copies."""
    check_tensor(data, "dense: data", 2)
    check_tensor(weight, "dense: weight", 2)
    check_same_dim(data.shape[1], weight.shape[1], "dense: data and weight reduction sizes")
    m, k = (static_dim(d) for d in data.shape)
    n = static_dim(weight.shape[0])
    if None in (m, n, k):
        raise ValueError(f"dense: the {data.dtype} x {weight.dtype} path needs static shapes")
    packed = pack_weight_blocked(weight, lanes, group, dtype=operand)
    kp = -(-k // group) * group
    if kp != k or (operand or data.dtype) != data.dtype:
        dtype, source = operand or data.dtype, data
        zero = tl.const(0, dtype)
        data = tl.compute((m, kp), lambda i, kk: tl.if_then_else(
            kk < k, source[i, tl.minimum(kk, k - 1)].astype(dtype), zero), name="data_pad",
            tag=PAD_TAG)
    np_ = -(-n // lanes) * lanes
    rk = tl.reduce_axis((0, kp), name="k")
    workload = json_args((m, k), (n, k), acc)
    out = tl.compute(
        (m, np_),
        lambda i, j: tl.sum(data[i, rk].astype(acc)
                            * packed[j // lanes, rk // group, j % lanes, rk % group].astype(acc),
                            axis=rk),
        name=tag, tag=tag, attrs={"workload": workload})
    if np_ != n or bias is not None:
        if bias is not None:
            check_tensor(bias, "dense: bias", 1)
            check_same_dim(bias.shape[0], n, "dense: bias length vs output columns")
        out = tl.compute(
            (m, n), lambda i, j: out[i, j] + (bias[j].astype(acc) if bias is not None else 0),
            name=f"{tag}_out", tag=BROADCAST)
    return out
