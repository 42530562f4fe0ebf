"""Math functions (exp, tanh, ...) and integer floor division as LLVM IR.

Part of the codegen: `emit_math` maps a `MathFunc` to LLVM intrinsics where LLVM has one (so that
vector forms stay vector code) and to libm per lane otherwise; `floor_div_mod` gives Python/numpy
floor semantics for integers without ever trapping (division by zero yields 0, as numpy does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..expr import BinaryOp, MathFunc
from .irtext import Val, const, element_of, lanes_of, mangle, vector_of

if TYPE_CHECKING:
    from .llvm import CodeGen

_LLVM_UNARY = {
    MathFunc.EXP: "llvm.exp",
    MathFunc.LOG: "llvm.log",
    MathFunc.SQRT: "llvm.sqrt",
    MathFunc.FLOOR: "llvm.floor",
    MathFunc.CEIL: "llvm.ceil",
    MathFunc.ABS: "llvm.fabs",
}
_LIBM = {MathFunc.TANH: "tanh", MathFunc.ERF: "erf"}
LIBM_SYMBOLS = ("tanh", "tanhf", "erf", "erff", "exp", "expf", "log", "logf", "pow", "powf", "fmod",
                "fmodf")
"""libm functions generated code may call (registered with the JIT in case it cannot see them)."""


def emit_math(cg: CodeGen, func: MathFunc, args: list[Val]) -> Val:
    """`func(*args)` on floats (scalar or vector); float16 is computed in float32."""
    ty = args[0].ty
    if func is MathFunc.ABS and not element_of(ty).startswith(("half", "float", "double")):
        return cg.intrinsic("llvm.abs", [ty], ty, [args[0], const("i1", 0)])
    if element_of(ty) == "half":
        wide = vector_of("float", lanes_of(ty))
        ext = [cg.fw.op(wide, f"fpext {a} to {wide}") for a in args]
        result = emit_math(cg, func, ext)
        return cg.fw.op(ty, f"fptrunc {result} to {ty}")
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
        e = cg.intrinsic("llvm.exp", [ty], ty, [neg])
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


def floor_div_mod(cg: CodeGen, op: BinaryOp, a: Val, b: Val, signed: bool) -> Val:
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


def float_floor_div_mod(cg: CodeGen, op: BinaryOp, a: Val, b: Val) -> Val:
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
