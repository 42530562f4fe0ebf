"""Math functions (exp, tanh, ...) and integer floor division as LLVM IR.

Part of the codegen: `emit_math` computes float32 exp on vectors inline (`_inline_exp_f32`) and
maps the other `MathFunc`s to libmvec's vector forms, to LLVM intrinsics where LLVM has one
(so that vector forms stay vector code) and to libm per lane otherwise; `floor_div_mod` gives
Python/numpy floor semantics for integers without ever trapping (division by zero yields 0, as
numpy does).
"""

from __future__ import annotations

import ctypes.util
import functools

import llvmlite.binding as llvm

from ..expr import BinaryOp, MathFunc
from .emitter import Emitter
from .irtext import Val, const, element_of, lanes_of, mangle, vector_of

_LLVM_UNARY = {
    MathFunc.EXP: "llvm.exp",
    MathFunc.LOG: "llvm.log",
    MathFunc.SQRT: "llvm.sqrt",
    MathFunc.FLOOR: "llvm.floor",
    MathFunc.CEIL: "llvm.ceil",
    MathFunc.ABS: "llvm.fabs",
    MathFunc.SIN: "llvm.sin",
    MathFunc.COS: "llvm.cos",
}
_LIBM = {MathFunc.TANH: "tanh", MathFunc.ERF: "erf"}
LIBM_SYMBOLS = (
    "tanh",
    "tanhf",
    "erf",
    "erff",
    "exp",
    "expf",
    "log",
    "logf",
    "pow",
    "powf",
    "fmod",
    "fmodf",
    "sin",
    "sinf",
    "cos",
    "cosf",
)
"""libm functions generated code may call (registered with the JIT in case it cannot see them)."""


_VECTOR_LIBM = {
    MathFunc.EXP: "exp",
    MathFunc.LOG: "log",
    MathFunc.POW: "pow",
    MathFunc.TANH: "tanh",
    MathFunc.ERF: "erf",
    MathFunc.SIN: "sin",
    MathFunc.COS: "cos",
}
_ISA_LETTER = {128: "b", 256: "d", 512: "e"}  # x86 vector function ABI: SSE, AVX2, AVX-512


@functools.cache
def _libmvec() -> ctypes.CDLL | None:
    """glibc's vector math library, loaded so that JIT code can call it (None if absent)."""
    path = ctypes.util.find_library("mvec")
    if path is None:
        return None
    try:
        lib = ctypes.CDLL(path)
        llvm.load_library_permanently(path)
    except OSError:
        return None
    return lib


def vector_libm_symbol(func: MathFunc, elem: str, lanes: int, target_bits: int) -> str | None:
    """The libmvec function computing `func` on `lanes` lanes of `elem`, if this system has one
    that `target_bits`-wide vectors can use."""
    base = _VECTOR_LIBM.get(func)
    bits = lanes * (32 if elem == "float" else 64)
    if base is None or elem not in ("float", "double") or bits > target_bits:
        return None
    letter = _ISA_LETTER.get(bits)
    lib = _libmvec()
    if letter is None or lib is None:
        return None
    params = "vv" if func is MathFunc.POW else "v"
    name = f"_ZGV{letter}N{lanes}{params}_{base}{'f' if elem == 'float' else ''}"
    return name if hasattr(lib, name) else None


def uses_vector_libm(ll: str) -> bool:
    """Whether LLVM IR text calls libmvec (an exported library must then link it)."""
    return "@_ZGV" in ll


def _vector_libm_call(cg: Emitter, func: MathFunc, args: list[Val]) -> Val | None:
    """`func` on whole vectors through libmvec, in register-wide chunks; None if unavailable."""
    ty = args[0].ty
    lanes, elem = lanes_of(ty), element_of(ty)
    if lanes == 1 or elem not in ("float", "double") or cg.target.arch != "x86_64":
        return None  # the names follow the x86 vector function ABI; other targets call libm
    width = min(lanes, cg.target.vector_bits // (32 if elem == "float" else 64))
    count = lanes // width
    if lanes % width or count & (count - 1):
        return None
    name = vector_libm_symbol(func, elem, width, cg.target.vector_bits)
    if name is None:
        return None
    chunk_ty = vector_of(elem, width)
    cg.declare(
        name, f"declare {chunk_ty} @{name}({', '.join([chunk_ty] * len(args))}) nounwind readnone"
    )
    fw = cg.fw
    parts: list[Val] = []
    for c in range(count):
        if count == 1:
            pieces = args
        else:
            mask = "<" + ", ".join(f"i32 {c * width + k}" for k in range(width)) + ">"
            pieces = [
                fw.op(chunk_ty, f"shufflevector {a}, {ty} poison, <{width} x i32> {mask}")
                for a in args
            ]
        parts.append(fw.op(chunk_ty, f"call {chunk_ty} @{name}({', '.join(map(str, pieces))})"))
    while len(parts) > 1:  # concatenate pairwise
        half = lanes_of(parts[0].ty)
        joined_ty = vector_of(elem, 2 * half)
        mask = "<" + ", ".join(f"i32 {k}" for k in range(2 * half)) + ">"
        parts = [
            fw.op(joined_ty, f"shufflevector {parts[k]}, {parts[k + 1]}, <{2 * half} x i32> {mask}")
            for k in range(0, len(parts), 2)
        ]
    return parts[0]


# exp(x) = 2^n * exp(r), n = rint(x / ln 2), |r| <= ln 2 / 2 (Cephes' expf): ln 2 in two parts
# (n * _LN2_HI is exact for the n that occur), exp(r) = 1 + r + r^2 * P(r) with P of degree 5.
_LOG2E = 1.44269504088896341
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4
_EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
             1.6666665459e-1, 5.0000001201e-1)
# Inputs are clamped here: exp(-104) rounds to 0 and exp(89) overflows to inf, and 2^n then
# stays within two normal factors 2^(n >> 1) * 2^(n - (n >> 1)) (a subnormal result rounds once).
_EXP_LOW, _EXP_HIGH = -104.0, 89.0
# Added to x / ln 2, 1.5 * 2^23 leaves rint(x / ln 2) in the low bits of the sum: n as an
# integer without a conversion (which would make NaN poison) and as a float by subtracting it.
_ROUNDING_BIAS = 12582912.0
_ROUNDING_BIAS_BITS = 0x4B400000


def _inline_exp_f32(cg: Emitter, x: Val) -> Val:
    """exp of a float32 vector as inline arithmetic, within about one ulp of the exact value,
    with IEEE results at the edges (0 below -103.97, inf above 88.72, NaN for NaN).

    A call into libmvec clobbers every vector register, so a loop that computes exp next to
    other work (a softmax row's sum, a convolution's output stage) spills around each call;
    inline, LLVM interleaves it with that work. AVX-512 scales by 2^n in one instruction
    (vscalefps); elsewhere the two factors are built in the exponent bits.
    """
    fw = cg.fw
    ty = x.ty
    lanes = lanes_of(ty)
    ity = vector_of("i32", lanes)
    bty = vector_of("i1", lanes)

    def c(value: float) -> str:
        return const(ty, value).ref

    below = fw.op(bty, f"fcmp olt {x}, {c(_EXP_LOW)}")
    xc = fw.op(ty, f"select {below}, {ty} {c(_EXP_LOW)}, {x}")
    above = fw.op(bty, f"fcmp ogt {xc}, {c(_EXP_HIGH)}")
    xc = fw.op(ty, f"select {above}, {ty} {c(_EXP_HIGH)}, {xc}")
    scaled = fw.op(ty, f"fmul contract {xc}, {c(_LOG2E)}")
    biased = fw.op(ty, f"fadd contract {scaled}, {c(_ROUNDING_BIAS)}")
    n = fw.op(ty, f"fsub {biased}, {c(_ROUNDING_BIAS)}")
    r = xc
    for part in (_LN2_HI, _LN2_LO):
        step = fw.op(ty, f"fmul contract {n}, {c(-part)}")
        r = fw.op(ty, f"fadd contract {step}, {r.ref}")
    p = const(ty, _EXP_POLY[0])
    for coefficient in _EXP_POLY[1:]:
        p = fw.op(ty, f"fmul contract {p}, {r.ref}")
        p = fw.op(ty, f"fadd contract {p}, {c(coefficient)}")
    rr = fw.op(ty, f"fmul {r}, {r.ref}")
    e = fw.op(ty, f"fmul contract {p}, {rr.ref}")
    e = fw.op(ty, f"fadd contract {e}, {r.ref}")
    e = fw.op(ty, f"fadd {e}, {c(1.0)}")
    if cg.target.arch == "x86_64" and lanes * 32 == 512 == cg.target.vector_bits:
        return cg.intrinsic("llvm.x86.avx512.mask.scalef.ps.512", [], ty,
                            [e, n, Val(ty, "poison"), const("i16", -1), const("i32", 4)])
    bits = fw.op(ity, f"bitcast {biased} to {ity}")
    ni = fw.op(ity, f"sub {bits}, {const(ity, _ROUNDING_BIAS_BITS).ref}")
    half = fw.op(ity, f"ashr {ni}, {const(ity, 1).ref}")
    rest = fw.op(ity, f"sub {ni}, {half.ref}")
    for part in (half, rest):
        exponent = fw.op(ity, f"add {part}, {const(ity, 127).ref}")
        factor_bits = fw.op(ity, f"shl {exponent}, {const(ity, 23).ref}")
        factor = fw.op(ty, f"bitcast {factor_bits} to {ty}")
        e = fw.op(ty, f"fmul {e}, {factor.ref}")
    return e


def emit_math(cg: Emitter, func: MathFunc, args: list[Val]) -> Val:
    """`func(*args)` on floats (scalar or vector); float16 is computed in float32."""
    ty = args[0].ty
    if func is MathFunc.ABS and not element_of(ty).startswith(("half", "float", "double")):
        return cg.intrinsic("llvm.abs", [ty], ty, [args[0], const("i1", 0)])
    if element_of(ty) == "half":
        wide = vector_of("float", lanes_of(ty))
        ext = [cg.fw.op(wide, f"fpext {a} to {wide}") for a in args]
        result = emit_math(cg, func, ext)
        return cg.fw.op(ty, f"fptrunc {result} to {ty}")
    if func is MathFunc.EXP and element_of(ty) == "float" and lanes_of(ty) > 1:
        return _inline_exp_f32(cg, args[0])
    vector = _vector_libm_call(cg, func, args)
    if vector is not None:
        return vector
    if func in _LLVM_UNARY:
        return cg.intrinsic(_LLVM_UNARY[func], [ty], ty, args)
    if func is MathFunc.POW:
        return cg.intrinsic("llvm.pow", [ty], ty, args)
    if func is MathFunc.FMA:
        return cg.intrinsic("llvm.fma", [ty], ty, args)
    one = const(ty, 1.0)
    if func is MathFunc.RSQRT:
        root = cg.intrinsic("llvm.sqrt", [ty], ty, args)
        return cg.fw.op(ty, f"fdiv {one}, {root.ref}")
    if func is MathFunc.SIGMOID:
        neg = cg.fw.op(ty, f"fneg {args[0]}")
        e = emit_math(cg, MathFunc.EXP, [neg])
        denom = cg.fw.op(ty, f"fadd {one}, {e.ref}")
        return cg.fw.op(ty, f"fdiv {one}, {denom.ref}")
    if func in _LIBM:
        elem = element_of(ty)
        name = _LIBM[func] + ("f" if elem == "float" else "")
        cg.declare(name, f"declare {elem} @{name}({elem}) nounwind readnone")
        return cg.per_lane(args[0], lambda x: cg.fw.op(elem, f"call {elem} @{name}({x})"))
    raise NotImplementedError(f"math function {func.value} is not supported by the codegen")


def _const_int(v: Val) -> int | None:
    """The integer a constant operand holds (splats included), else None."""
    ref = v.ref
    if ref.startswith("splat ("):
        ref = ref[len("splat (") : -1].split(" ", 1)[1]
    try:
        return int(ref)
    except ValueError:
        return None


def floor_div_mod(cg: Emitter, op: BinaryOp, a: Val, b: Val, signed: bool) -> Val:
    """Integer `a // b` or `a % b` rounding towards minus infinity; 0 when `b` is 0."""
    fw = cg.fw
    ty = a.ty
    is_div = op is BinaryOp.FLOORDIV
    zero = const(ty, 0)
    divisor = _const_int(b)
    if divisor == 0:
        return zero
    if divisor is not None and divisor > 0:
        if divisor & (divisor - 1) == 0:
            if is_div:
                shift = divisor.bit_length() - 1
                return fw.op(ty, f"{'ashr' if signed else 'lshr'} {a}, {const(ty, shift).ref}")
            return fw.op(ty, f"and {a}, {const(ty, divisor - 1).ref}")
        if not signed:
            return fw.op(ty, f"{'udiv' if is_div else 'urem'} {a}, {b.ref}")
        q = fw.op(ty, f"sdiv {a}, {b.ref}")
        r = fw.op(ty, f"srem {a}, {b.ref}")
        neg = fw.op(vector_of("i1", lanes_of(ty)), f"icmp slt {r}, {zero.ref}")
        if is_div:
            fix = fw.op(ty, f"sext {neg} to {ty}")
            return fw.op(ty, f"add {q}, {fix.ref}")
        add = fw.op(ty, f"select {neg}, {b}, {zero}")
        return fw.op(ty, f"add {r}, {add.ref}")
    bool_ty = vector_of("i1", lanes_of(ty))
    one = const(ty, 1)
    is_zero = fw.op(bool_ty, f"icmp eq {b}, {zero.ref}")
    if not signed:
        safe = fw.op(ty, f"select {is_zero}, {one}, {b}")
        res = fw.op(ty, f"{'udiv' if is_div else 'urem'} {a}, {safe.ref}")
        return fw.op(ty, f"select {is_zero}, {zero}, {res}")
    # INT_MIN / -1 traps on x86 like a division by zero, so -1 is handled apart as well.
    is_m1 = fw.op(bool_ty, f"icmp eq {b}, {const(ty, -1).ref}")
    bad = fw.op(bool_ty, f"or {is_zero}, {is_m1.ref}")
    safe = fw.op(ty, f"select {bad}, {one}, {b}")
    q = fw.op(ty, f"sdiv {a}, {safe.ref}")
    r = fw.op(ty, f"srem {a}, {safe.ref}")
    nonzero = fw.op(bool_ty, f"icmp ne {r}, {zero.ref}")
    sign = fw.op(ty, f"xor {r}, {b.ref}")
    differ = fw.op(bool_ty, f"icmp slt {sign}, {zero.ref}")
    adjust = fw.op(bool_ty, f"and {nonzero}, {differ.ref}")
    if is_div:
        fix = fw.op(ty, f"sext {adjust} to {ty}")
        qf = fw.op(ty, f"add {q}, {fix.ref}")
        neg_a = fw.op(ty, f"sub {zero}, {a.ref}")
        by_m1 = fw.op(ty, f"select {is_m1}, {neg_a}, {qf}")
        return fw.op(ty, f"select {is_zero}, {zero}, {by_m1}")
    add = fw.op(ty, f"select {adjust}, {b}, {zero}")
    rf = fw.op(ty, f"add {r}, {add.ref}")
    return fw.op(ty, f"select {bad}, {zero}, {rf}")


def float_floor_div_mod(cg: Emitter, op: BinaryOp, a: Val, b: Val) -> Val:
    """Float `a // b` (floor of the quotient) or `a % b` with the sign of `b`, as numpy."""
    fw = cg.fw
    ty = a.ty
    if op is BinaryOp.FLOORDIV:
        q = fw.op(ty, f"fdiv {a}, {b.ref}")
        return cg.intrinsic("llvm.floor", [ty], ty, [q])
    bool_ty = vector_of("i1", lanes_of(ty))
    zero = const(ty, 0.0)
    r = fw.op(ty, f"frem {a}, {b.ref}")
    nonzero = fw.op(bool_ty, f"fcmp une {r}, {zero.ref}")
    r_neg = fw.op(bool_ty, f"fcmp olt {r}, {zero.ref}")
    b_neg = fw.op(bool_ty, f"fcmp olt {b}, {zero.ref}")
    differ = fw.op(bool_ty, f"xor {r_neg}, {b_neg.ref}")
    adjust = fw.op(bool_ty, f"and {nonzero}, {differ.ref}")
    shifted = fw.op(ty, f"fadd {r}, {b.ref}")
    return fw.op(ty, f"select {adjust}, {shifted}, {r}")


def intrinsic_name(base: str, overloads: list[str]) -> str:
    return ".".join([base, *(mangle(t) for t in overloads)])
