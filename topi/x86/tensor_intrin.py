"""Ready tensor intrinsics for x86, chosen from the target: int8 and bf16 dot products.

Part of topi's x86 schedules. Each intrinsic is a `tl.decl_tensor_intrin`: a small compute that
says what it does and a `lower_fn` that emits the instructions.

- `dot_int8(lanes)`: out[i] += sum_k uint8 data[k] * int8 kernel[i, k] (k < 4), int32 lanes:
  AVX512-VNNI `vpdpbusd` on zmm (16 lanes) or, with AVX-VNNI or AVX512-VNNI on ymm, 8 lanes;
  without VNNI `vpmaddubsw` + `vpmaddwd` (see `_maddubs_exact`); on aarch64 `usdot` (with
  i8mm) or two `sdot` (with dotprod, see `_sdot_exact`), 4 int32 lanes per instruction.
- `dot_bf16(lanes)`: out[i] += sum_k data[k] * kernel[i, k] (k < 2), bf16 pairs into float32
  lanes with AVX512-BF16 `vdpbf16ps`.

Operands come in the blocked layout of VNNI kernels: the kernel region is `lanes` rows of 4
int8 (or 2 bf16) contiguous, 4 * lanes bytes, one vector load; the data's 4 bytes (2 bf16) are
broadcast to every lane as one int32.
"""

from __future__ import annotations

import tensorlang as tl
from tensorlang.calls import broadcast
from tensorlang.codegen import isa
from tensorlang.ir import seq

#: int8 values reduced per int32 lane by one instruction.
INT8_GROUP = 4
#: bf16 values reduced per float32 lane by one instruction.
BF16_GROUP = 2


def _has(target: tl.Target, *features: str) -> bool:
    return any(target._has(f) for f in features) or (
        target._explicit_cpu and target._has(features[0]) is None
        and target.mcpu in _CPUS_WITH.get(features[0], ()))


#: LLVM CPU names that carry a feature by default (for targets given as -mcpu only).
_CPUS_WITH = {
    "avx512vnni": ("cascadelake", "cooperlake", "icelake-client", "icelake-server", "tigerlake",
                   "rocketlake", "sapphirerapids", "emeraldrapids", "graniterapids", "znver4",
                   "znver5"),
    "avxvnni": ("alderlake", "raptorlake", "meteorlake", "arrowlake", "lunarlake", "sierraforest",
                "grandridge", "sapphirerapids", "emeraldrapids", "graniterapids"),
    "avx512bf16": ("cooperlake", "sapphirerapids", "emeraldrapids", "graniterapids", "znver4",
                   "znver5"),
}


def int8_dot_kind(target: tl.Target | None = None) -> str:
    """How the current target computes the uint8 x int8 dot of 4: "avx512vnni", "avxvnni" or
    "maddubs" (AVX2/AVX-512 without VNNI); on aarch64 "usdot" (i8mm) or "sdot" (dotprod);
    else "none" (schedules then leave the dot to LLVM as plain vector code)."""
    target = target or tl.Target.current()
    if target.arch == "aarch64":
        if isa.has_i8mm(target.arch, target.mcpu, target._flags()):
            return "usdot"
        return "sdot" if isa.has_int8_dot(target.arch, target.mcpu, target._flags()) else "none"
    if target.arch != "x86_64":
        return "none"
    if target.vector_bits == 512 and _has(target, "avx512vnni"):
        return "avx512vnni"
    if target.vector_bits >= 256 and _has(target, "avxvnni"):
        return "avxvnni"
    if target.vector_bits >= 256 and _has(target, "avx512vnni") and _has(target, "avx512vl"):
        return "avxvnni"
    return "maddubs" if target.vector_bits >= 256 else "none"


def has_bf16_dot(target: tl.Target | None = None) -> bool:
    """Whether the target has AVX512-BF16's `vdpbf16ps`."""
    target = target or tl.Target.current()
    return target.arch == "x86_64" and target.vector_bits == 512 and _has(target, "avx512bf16")


def int8_lanes(target: tl.Target | None = None) -> int:
    """int32 lanes of the int8 dot on the target: 16 with AVX-512, else 8."""
    target = target or tl.Target.current()
    return 16 if target.vector_bits == 512 else 8


def _dot_compute(lanes: int, group: int, data_dtype: str, kernel_dtype: str, out_dtype: str,
                 name: str) -> tl.Tensor:
    data = tl.placeholder((group,), data_dtype, name="data")
    kernel = tl.placeholder((lanes, group), kernel_dtype, name="kernel")
    k = tl.reduce_axis((0, group), name="k")
    return tl.compute(
        (lanes,),
        lambda i: tl.sum(data[k].astype(out_dtype) * kernel[i, k].astype(out_dtype), axis=k),
        name=name)


def _maddubs_exact(lanes: int, a: tl.Expr, b: tl.Expr) -> tl.Expr:
    """The uint8 x int8 dot of 4 per int32 lane without VNNI, exact for every input.

    `vpmaddubsw` adds two uint8 * int8 products in int16 with saturation, which 255 * -128 * 2
    overflows. Split each data byte as a = 128 * hi + lo (hi = a >> 7, lo = a & 127): pairs of
    lo * b stay within +-32512 and pairs of hi * b within +-256, so both `vpmaddubsw` are exact;
    `vpmaddwd` by ones adds each int16 pair into int32, and the high part is scaled by 128.
    """
    nbytes = lanes * 4
    bits = lanes * 32
    suffix = {512: ("avx512.pmaddubs.w.512", "avx512.pmaddw.d.512"),
              256: ("avx2.pmadd.ub.sw", "avx2.pmadd.wd")}[bits]
    a32 = tl.reinterpret(a, f"int32x{lanes}")
    lo = tl.reinterpret(a32 & broadcast(tl.const(0x7F7F7F7F, "int32"), lanes), f"int8x{nbytes}")
    hi = tl.reinterpret(_shr7(a32, lanes), f"int8x{nbytes}")
    ones = broadcast(tl.const(1, "int16"), lanes * 2)
    pair_lo = tl.call_llvm_intrin(f"int16x{lanes * 2}", f"llvm.x86.{suffix[0]}", lo, b)
    pair_hi = tl.call_llvm_intrin(f"int16x{lanes * 2}", f"llvm.x86.{suffix[0]}", hi, b)
    sum_lo = tl.call_llvm_intrin(f"int32x{lanes}", f"llvm.x86.{suffix[1]}", pair_lo, ones)
    sum_hi = tl.call_llvm_intrin(f"int32x{lanes}", f"llvm.x86.{suffix[1]}", pair_hi, ones)
    return sum_lo + sum_hi * broadcast(tl.const(128, "int32"), lanes)


def _shr7(a32: tl.Expr, lanes: int) -> tl.Expr:
    """(a >> 7) & 0x01010101 per int32 lane: each byte's top bit moved to its bottom."""
    return (a32 // broadcast(tl.const(128, "int32"), lanes)) & broadcast(
        tl.const(0x01010101, "int32"), lanes)


def _sdot_exact(acc: tl.Expr, word: tl.Expr, b: tl.Expr) -> tl.Expr:
    """`acc` plus the uint8 x int8 dot of 4 per int32 lane (4 lanes) with the signed `sdot`:
    each data byte a = 128 * hi + lo (hi = a >> 7, lo = a & 127) makes two signed dots, of lo
    and of hi, exact for every input; the second is scaled by 128."""
    sdot = "llvm.aarch64.neon.sdot.v4i32.v16i8"
    lo = tl.reinterpret(broadcast(word & tl.const(0x7F7F7F7F, "int32"), 4), "int8x16")
    top_bits = (word // tl.const(128, "int32")) & tl.const(0x01010101, "int32")  # as _shr7
    hi = tl.reinterpret(broadcast(top_bits, 4), "int8x16")
    zero = broadcast(tl.const(0, "int32"), 4)
    high = tl.call_llvm_intrin("int32x4", sdot, zero, hi, b)
    return (tl.call_llvm_intrin("int32x4", sdot, acc, lo, b)
            + high * broadcast(tl.const(128, "int32"), 4))


def _aarch64_dot(kind: str, lanes: int, ins: list[tl.TensorRegion],
                 outs: list[tl.TensorRegion]) -> object:
    """The dot of `dot_int8` on aarch64: one 128-bit instruction per 4 lanes."""
    word = tl.reinterpret(ins[0].vload([0], "uint8x4"), "int32")
    stores = []
    for first in range(0, lanes, 4):
        b = ins[1].vload([first, 0], "int8x16")
        acc = outs[0].vload([first], "int32x4")
        if kind == "usdot":
            a = tl.reinterpret(broadcast(word, 4), "uint8x16")
            value = tl.call_llvm_intrin("int32x4", "llvm.aarch64.neon.usdot.v4i32.v16i8",
                                        acc, a, b)
        else:
            value = _sdot_exact(acc, word, b)
        stores.append(outs[0].vstore([first], value))
    return seq(*stores)


def dot_int8(lanes: int | None = None, kind: str | None = None) -> tl.TensorIntrin:
    """The uint8 x int8 -> int32 dot of 4 into `lanes` int32 lanes (see the module docstring),
    with the instructions `kind` names (default: the best the current target has)."""
    lanes = lanes or int8_lanes()
    kind = kind or int8_dot_kind()
    if kind == "none":
        raise ValueError("the int8 dot intrinsic needs AVX2, AVX-512 or aarch64's dotprod")
    if kind in ("sdot", "usdot") and lanes % 4:
        raise ValueError(f"the aarch64 int8 dot runs 4 int32 lanes at a time, not {lanes}")
    out = _dot_compute(lanes, INT8_GROUP, "uint8", "int8", "int32", f"dot_int8x{lanes}")
    nbytes = lanes * INT8_GROUP

    def lower(ins: list[tl.TensorRegion], outs: list[tl.TensorRegion]) -> object:
        word = tl.reinterpret(ins[0].vload([0], "uint8x4"), "int32")
        a = tl.reinterpret(broadcast(word, lanes), f"uint8x{nbytes}")
        b = ins[1].vload([0, 0], f"int8x{nbytes}")
        if kind in ("sdot", "usdot"):
            return _aarch64_dot(kind, lanes, ins, outs)
        acc = outs[0].vload([0], f"int32x{lanes}")
        if kind == "maddubs":
            return outs[0].vstore([0], acc + _maddubs_exact(lanes, a, b))
        name = "llvm.x86.avx512.vpdpbusd.512" if lanes == 16 else "llvm.x86.avx512.vpdpbusd.256"
        return outs[0].vstore([0], tl.call_llvm_intrin(f"int32x{lanes}", name, acc, a, b))

    return tl.decl_tensor_intrin(out.op, lower, name=f"dot_int8x{lanes}_{kind}")


def dot_bf16(lanes: int = 16) -> tl.TensorIntrin:
    """bf16 pairs into float32 lanes with AVX512-BF16 `vdpbf16ps` (16 lanes)."""
    out = _dot_compute(lanes, BF16_GROUP, "bfloat16", "bfloat16", "float32", f"dot_bf16x{lanes}")

    def lower(ins: list[tl.TensorRegion], outs: list[tl.TensorRegion]) -> object:
        word = tl.reinterpret(ins[0].vload([0], "bfloat16x2"), "float32")
        a = tl.reinterpret(broadcast(word, lanes), f"bfloat16x{lanes * 2}")
        b = ins[1].vload([0, 0], f"bfloat16x{lanes * 2}")
        acc = outs[0].vload([0], f"float32x{lanes}")
        value = tl.call_llvm_intrin(f"float32x{lanes}", "llvm.x86.avx512bf16.dpbf16ps.512",
                                    acc, a, b)
        return outs[0].vstore([0], value)

    return tl.decl_tensor_intrin(out.op, lower, name=f"dot_bf16x{lanes}")
