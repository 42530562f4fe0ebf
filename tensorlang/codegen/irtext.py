"""A small writer of LLVM IR text: types, constants, SSA values and function bodies.

The codegen writes IR as text rather than through `llvmlite.ir` because it needs what that
builder cannot express (fast-math and `nsw` flags, parameter attributes, attribute groups), and
because formatting strings is the fastest way to produce IR from Python (compile time matters
for tuning).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..dtype import DType, DTypeKind


@dataclass(frozen=True, slots=True)
class Val:
    """An SSA value or constant: its LLVM type and how it is written as an operand."""

    ty: str
    ref: str

    def __str__(self) -> str:
        return f"{self.ty} {self.ref}"


def scalar_type(t: DType, memory: bool = False) -> str:
    """The LLVM type of one lane of `t`; bool is i1 in registers and i8 in memory."""
    if t.kind is DTypeKind.BOOL:
        return "i8" if memory else "i1"
    if t.kind is DTypeKind.FLOAT:
        return {16: "half", 32: "float", 64: "double"}[t.bits]
    if t.kind is DTypeKind.BFLOAT:
        return "bfloat"
    if t.kind is DTypeKind.HANDLE:
        return "ptr"
    return f"i{t.bits}"


def llvm_type(t: DType, memory: bool = False) -> str:
    """The LLVM type of `t` (a vector type when it has lanes)."""
    s = scalar_type(t, memory)
    return s if t.lanes == 1 else f"<{t.lanes} x {s}>"


def vector_of(elem: str, lanes: int) -> str:
    return elem if lanes == 1 else f"<{lanes} x {elem}>"


def element_of(ty: str) -> str:
    """`float` for `<16 x float>`, the type itself for scalars."""
    return ty[1:-1].split(" x ", 1)[1] if ty.startswith("<") else ty


def lanes_of(ty: str) -> int:
    return int(ty[1:].split(" x ", 1)[0]) if ty.startswith("<") else 1


def mangle(ty: str) -> str:
    """The overload suffix of an intrinsic for `ty`: f32, v16f32, i64, v8i1, p0, v16p0."""
    elem = element_of(ty)
    suffix = {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64", "ptr": "p0"}.get(elem, elem)
    lanes = lanes_of(ty)
    return suffix if lanes == 1 else f"v{lanes}{suffix}"


def _float_literal(value: float, elem: str) -> str:
    if elem == "half":
        (bits,) = struct.unpack("<H", struct.pack("<e", value))
        return f"0xH{bits:04X}"
    if elem == "bfloat":  # the top half of the float32, rounded to nearest even
        (word,) = struct.unpack("<I", struct.pack("<f", value))
        return f"0xR{((word + 0x7FFF + ((word >> 16) & 1)) >> 16) & 0xFFFF:04X}"
    if elem == "float":
        # LLVM writes float literals as the double with the same value.
        value = struct.unpack("<f", struct.pack("<f", value))[0]
    (bits,) = struct.unpack("<Q", struct.pack("<d", value))
    return f"0x{bits:016X}"


def const(ty: str, value: bool | int | float) -> Val:
    """A constant of scalar or vector type `ty` (vectors are splats)."""
    elem = element_of(ty)
    if elem in ("half", "bfloat", "float", "double"):
        lit = _float_literal(float(value), elem)
    elif elem == "i1":
        lit = "true" if value else "false"
    else:
        lit = str(int(value))
    if ty == elem:
        return Val(ty, lit)
    return Val(ty, f"splat ({elem} {lit})")


def lane_indices(lanes: int, ty: str = "i64") -> Val:
    """The constant vector <0, 1, ..., lanes - 1>."""
    return Val(f"<{lanes} x {ty}>", "<" + ", ".join(f"{ty} {i}" for i in range(lanes)) + ">")


# Instructions without side effects and without memory reads: the same text in one block is the
# same value. Loads, calls, phis and divisions (which may trap) are always emitted.
_PURE_OPCODES = frozenset({
    "add", "sub", "mul", "and", "or", "xor", "shl", "lshr", "ashr", "icmp", "fcmp", "select",
    "getelementptr", "insertelement", "extractelement", "shufflevector", "sext", "zext", "trunc",
    "fadd", "fsub", "fmul", "fdiv", "fneg", "sitofp", "uitofp", "fptosi", "fptoui", "fpext",
    "fptrunc",
})


def _may_write_memory(call: str) -> bool:
    """Whether a call instruction may write memory: any call but to an LLVM intrinsic that only
    computes or reads (math, min/max, reductions, masked loads and gathers)."""
    callee = call[call.index("@") + 1:] if "@" in call else ""
    if not callee.startswith("llvm."):
        return True
    return any(word in callee.split("(")[0] for word in ("store", "scatter", "mem"))


class FunctionWriter:
    """Accumulates the body of one LLVM function; allocas go to the entry block.

    A pure instruction already written in the current block is not written again: `op` returns
    the earlier value. The loop IR recomputes the same index arithmetic and splats in every
    statement of an unrolled body; numbering them here keeps the IR that LLVM parses and
    optimises a third smaller for a register-blocked GEMM, which is most of its compile time.
    Memory values are remembered the same way (`remembered` / `remember` / `forget`): an
    unrolled register block loads each operand once per step instead of once per accumulator
    and reads back the accumulator it just stored as the stored value.
    """

    def __init__(self, header: str) -> None:
        self.header = header
        self._allocas: list[str] = []
        self._lines: list[str] = []
        self._counter = 0
        self._known: dict[str, Val] = {}  # pure instruction text -> its value, in this block
        # base pointer -> (type, address) -> the value there, in this block since the last call
        self._memory: dict[str, dict[tuple[str, str], Val]] = {}
        self.block = "entry"

    def remembered(self, base: Val, ty: str, addr: Val) -> Val | None:
        """The value of type `ty` at `addr` (an address within the object `base` points to),
        if this block loaded or stored it since the last write that may have changed it."""
        return self._memory.get(base.ref, {}).get((ty, addr.ref))

    def remember(self, base: Val, addr: Val, value: Val) -> None:
        self._memory.setdefault(base.ref, {})[(value.ty, addr.ref)] = value

    def forget(self, base: Val) -> None:
        """A write to the object `base` points to: any remembered value in it may be stale
        (objects behind different base pointers never overlap: parameters are noalias and the
        runtime rejects overlapping arguments)."""
        self._memory.pop(base.ref, None)

    def fresh(self, prefix: str = "t") -> str:
        """A new local name: `prefix` and the writer's counter, which ends every name and so
        keeps them apart; after a prefix that ends in a digit a "_" comes first (the loop
        variables "i1" and "i" at counts 26 and 126 would both have been %i126)."""
        self._counter += 1
        return f"%{prefix}{'_' if prefix[-1:].isdigit() else ''}{self._counter}"

    def label(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"

    def op(self, ty: str, text: str, prefix: str = "t") -> Val:
        """Emit `%x = text` and return `%x` as a value of type `ty` (or the value of the same
        pure instruction earlier in this block)."""
        pure = text.split(" ", 1)[0] in _PURE_OPCODES
        if pure:
            known = self._known.get(text)
            if known is not None and known.ty == ty:
                return known
        else:
            self._note_writes(text)
        name = self.fresh(prefix)
        self._lines.append(f"  {name} = {text}")
        value = Val(ty, name)
        if pure:
            self._known[text] = value
        return value

    def emit(self, text: str) -> None:
        self._note_writes(text)
        self._lines.append(f"  {text}")

    def _note_writes(self, text: str) -> None:
        """Before an instruction with effects: a call that may write memory makes every
        remembered memory value stale (stores forget their own buffer, see `forget`)."""
        if text.startswith("call") and _may_write_memory(text):
            self._memory.clear()

    def open_phi(self, first: Val, pred: str) -> tuple[Val, int]:
        """A phi at the head of a loop block: `first` from the block `pred`, the other incoming
        value (from the loop's latch) given later to `close_phi` with the returned handle, once
        the body that computes it is written."""
        name = self.fresh("carry")
        self._lines.append(f"  {name} = phi {first.ty} [ {first.ref}, %{pred} ]")
        return Val(first.ty, name), len(self._lines) - 1

    def close_phi(self, handle: int, value: Val, pred: str) -> None:
        self._lines[handle] += f", [ {value.ref}, %{pred} ]"

    def alloca(self, text: str) -> Val:
        """An `alloca` in the entry block, so that loops do not grow the stack."""
        name = self.fresh("stack")
        self._allocas.append(f"  {name} = alloca {text}")
        return Val("ptr", name)

    def start_block(self, label: str) -> None:
        self._lines.append(f"{label}:")
        self.block = label
        self._known.clear()
        self._memory.clear()

    def br(self, label: str) -> None:
        self.emit(f"br label %{label}")

    def cond_br(self, cond: Val, then_label: str, else_label: str, meta: str = "") -> None:
        self.emit(f"br i1 {cond.ref}, label %{then_label}, label %{else_label}{meta}")

    def text(self) -> str:
        body = "\n".join(["entry:", *self._allocas, *self._lines])
        return f"{self.header} {{\n{body}\n}}\n"
