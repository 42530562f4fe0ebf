"""Codegen of calls out of generated code: C functions, LLVM intrinsics, bitcasts, addresses.

Part of the codegen stage: `EXPR_HANDLERS` extends `CodeGen`'s expression table with the nodes of
`tensorlang.calls`. A C function is declared by name and left for the JIT (or the linker) to
resolve; an LLVM intrinsic is declared from its argument and result types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..calls import AddressOf, CallExtern, CallLLVMIntrin, Reinterpret
from ..expr import Expr, Var
from ..visitor import contains
from .irtext import Val, llvm_type, scalar_type

CodeGen = Any  # codegen.llvm.CodeGen, which imports this module


def _args(cg: CodeGen, args: tuple[Expr, ...]) -> list[Val]:
    out = []
    for a in args:
        if a.dtype.is_int and a.dtype.lanes == 1 and not isinstance(a, AddressOf):
            v = cg.expr(a)
            out.append(cg._resize_int(v, scalar_type(a.dtype), True))
        else:
            out.append(cg.expr(a))
    return out


def _forget_written(cg: CodeGen, args: tuple[Expr, ...]) -> None:
    """A C function may write through any pointer it gets: drop what the block remembers."""
    for a in args:
        if isinstance(a, AddressOf):
            cg.fw.forget(cg._buffer_ptr(a.buffer))
        elif isinstance(a, Var) and a.dtype.kind.value == "handle" and a in cg.env:
            cg.fw.forget(cg.env[a])


def call_extern(cg: CodeGen, e: CallExtern) -> Val:
    args = _args(cg, e.args)
    ret = "void" if e.returns_void else llvm_type(e.dtype)
    cg.declare(e.symbol, f"declare {ret} @{e.symbol}({', '.join(a.ty for a in args)})")
    call = f"call {ret} @{e.symbol}({', '.join(map(str, args))})"
    _forget_written(cg, e.args)
    if e.returns_void:
        cg.fw.emit(call)
        return Val("i32", "0")
    return cg.fw.op(ret, call)


def call_llvm_intrin(cg: CodeGen, e: CallLLVMIntrin) -> Val:
    args = [cg.expr(a) for a in e.args]
    ret = llvm_type(e.dtype)
    cg.declare(e.name, f"declare {ret} @{e.name}({', '.join(a.ty for a in args)})")
    return cg.fw.op(ret, f"call {ret} @{e.name}({', '.join(map(str, args))})")


def reinterpret(cg: CodeGen, e: Reinterpret) -> Val:
    value = cg.expr(e.value)
    ty = llvm_type(e.dtype)
    return value if value.ty == ty else cg.fw.op(ty, f"bitcast {value} to {ty}")


def address_of(cg: CodeGen, e: AddressOf) -> Val:
    ptr = cg._buffer_ptr(e.buffer)
    elem = scalar_type(e.buffer.dtype, memory=True)
    return cg.fw.op("ptr", f"getelementptr inbounds {elem}, {ptr}, {cg.index(e.index)}")


EXPR_HANDLERS: dict[type, Callable] = {
    CallExtern: call_extern,
    CallLLVMIntrin: call_llvm_intrin,
    Reinterpret: reinterpret,
    AddressOf: address_of,
}
"""Codegen of each node of tensorlang.calls, called as handler(codegen, node)."""


def has_effect(e: Expr) -> bool:
    """Whether evaluating `e` does something (calls a C function)."""
    return contains(e, CallExtern)
