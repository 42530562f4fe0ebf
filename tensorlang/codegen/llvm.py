"""Loop IR -> LLVM IR text: the codegen stage of the data flow.

`codegen(func, target)` writes one exported C-ABI function per PrimFunc,
`void name(T0* p0, T1* p1, ..., int64_t shape_var0, ...)`, plus `name_packed(int64_t* args)` (the
same call with every argument in one array; the runtime times through it). A kernel with bound
checks on data-dependent indices returns an `int32_t` status instead of `void` (codegen/bounds.py);
its packed form drops the status. Parallel loops are outlined into task functions run by the
runtime's thread pool (`tl_parallel_for`).

Integers used as addresses are computed in i64 with `nsw` ("index mode"), so that LLVM can
strength-reduce addresses; variables of int type are kept in i64 and truncated where data needs
their declared width.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable

from ..dtype import DType
from ..expr import (
    Binary,
    BinaryOp,
    Call,
    Cast,
    Compare,
    CompareOp,
    Const,
    Expr,
    Not,
    Select,
    Var,
)
from ..ir import (
    Allocate,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    Let,
    LetStmt,
    PrimFunc,
    Ramp,
    Seq,
    Stmt,
)
from ..lower import debug_level
from ..lower.bound_check import CheckedIndex, SafetyIntrinsic, checks_of, unpack_checked_index
from ..lower.unroll import KEEP_ROLLED
from ..visitor import contains, variables_in_order
from .calls import EXPR_HANDLERS, has_effect
from .glue import is_glue
from .bounds import STATUS_VAR, emit_bound_check, open_status
from .intrinsics import emit_math, float_floor_div_mod, floor_div_mod, intrinsic_name
from .irtext import (
    FunctionWriter,
    Val,
    const,
    element_of,
    lane_indices,
    lanes_of,
    llvm_type,
    scalar_type,
    vector_of,
)
from .promote import SlotFinder, Slots, slot_of
from .target import Target, as_target

STACK_LIMIT = 64 * 1024
#: A parallel loop is cut into up to this many contiguous chunks per thread, claimed by the
#: threads one at a time: a thread that the OS deschedules (another process on its core) then
#: holds back one small chunk, which the others cannot take over, instead of its whole share.
TASKS_PER_THREAD = 4
"""Constant-size allocations up to this many bytes live on the stack, larger ones on the heap."""
REGISTER_BLOCK_STORES = 4
"""A loop whose body stores this many vectors is a register block that the schedule unrolled
already; LLVM keeps it rolled (see `CodeGen._loop_metadata`)."""

RUNTIME_DECLS = {
    "tl_parallel_for": "declare void @tl_parallel_for(ptr, ptr, i32)",
    "tl_get_num_threads": "declare i32 @tl_get_num_threads()",
    "tl_aligned_alloc": "declare noalias ptr @tl_aligned_alloc(i64)",
    "tl_free": "declare void @tl_free(ptr)",
}

_ICMP = {
    CompareOp.LT: "lt",
    CompareOp.LE: "le",
    CompareOp.GT: "gt",
    CompareOp.GE: "ge",
}
_FCMP = {
    CompareOp.LT: "olt",
    CompareOp.LE: "ole",
    CompareOp.GT: "ogt",
    CompareOp.GE: "oge",
    CompareOp.EQ: "oeq",
    CompareOp.NE: "une",
}
_FLOAT_OPS = {BinaryOp.ADD: "fadd", BinaryOp.SUB: "fsub", BinaryOp.MUL: "fmul"}
_INT_OPS = {
    BinaryOp.ADD: "add",
    BinaryOp.SUB: "sub",
    BinaryOp.MUL: "mul",
    BinaryOp.AND: "and",
    BinaryOp.OR: "or",
}


def _const_int(e: Expr) -> int | None:
    if isinstance(e, Const) and not e.dtype.is_float:
        return int(e.value)
    return None


def _is_unit_ramp(e: Expr) -> bool:
    return isinstance(e, Ramp) and _const_int(e.stride) == 1


def _split_check(index: Expr) -> tuple[Expr, CheckedIndex | None]:
    """An access's index without its bound check, and the check (None when unchecked)."""
    check = unpack_checked_index(index)
    return (index, None) if check is None else (check.index, check)


class CodeGen:
    """Writes the LLVM module for one PrimFunc; see `codegen`."""

    def __init__(self, func: PrimFunc, target: Target, symbol: str) -> None:
        self.func = func
        self.symbol = symbol
        self.target = target
        self.decls: dict[str, str] = {}
        self.functions: list[str] = []
        self.metadata: list[str] = []
        self.env: dict[Var, Val] = {}
        self.globals_by_name: dict[str, Val] = {}
        self.mask: Val | None = None
        self.in_parallel = False
        self.status: Val | None = None
        self.vector_stores = 0  # stored in the loop being written: see _loop_metadata
        self.rolled_inside = False  # a loop kept rolled in it: see _loop_metadata
        self.fw = FunctionWriter("")
        self._has_load: dict[int, bool] = {}
        # Stack buffers in scope (their data var -> finder of the loops that may keep their
        # elements in registers, see promote.py) and, inside such a loop, the value of each
        # carried element (offset -> value).
        self.stack_finders: dict[Var, tuple[SlotFinder, Buffer]] = {}
        self.registers: dict[Var, dict[int, Val]] = {}
        self._expr_methods: dict[type, Callable[[Expr], Val]] = {
            Var: self._var,
            Const: self._const,
            Binary: self._binary,
            Compare: self._compare,
            Not: self._not,
            Select: self._select,
            Cast: self._cast,
            Call: self._call,
            BufferLoad: self._load,
            Ramp: self._ramp,
            Broadcast: self._broadcast,
            Let: self._let,
        }
        for node_type, handler in EXPR_HANDLERS.items():
            self._expr_methods[node_type] = lambda e, handler=handler: handler(self, e)

    # ----------------------------------------------------------------- module
    def module_text(self) -> str:
        func = self.func
        params: list[str] = []
        for i, buf in enumerate(func.params):
            val = Val("ptr", f"%arg{i}")
            self.env[buf.data] = val
            self.globals_by_name[buf.name] = val
            params.append(f"ptr noalias %arg{i}")
        base = len(func.params)
        for i, var in enumerate(func.shape_vars):
            self.env[var] = Val("i64", f"%arg{base + i}")
            params.append(f"i64 %arg{base + i}")
        name = self.symbol
        ret = "i32" if checks_of(func) else "void"
        attributes = "#2" if is_glue(func.body) else "#0"
        self.fw = FunctionWriter(f'define {ret} @"{name}"({", ".join(params)}) {attributes}')
        if checks_of(func):
            self.status = open_status(self)
        self.stmt(func.body)
        if self.status is None:
            self.fw.emit("ret void")
        else:
            code = self.fw.op("i32", f"load i32, ptr {self.status.ref}, align 4")
            self.fw.emit(f"ret {code}")
        self.functions.append(self.fw.text())
        self.functions.append(self._packed_wrapper(name, len(params), ret))
        layout, triple = self.target.module_header()
        head = [
            f'; tensorlang kernel "{name}"',
            f'target datalayout = "{layout}"',
            f'target triple = "{triple}"',
        ]
        target = self.target.function_attributes()
        attrs = [f"attributes #0 = {{ nounwind {target} }}",
                 f"attributes #1 = {{ nounwind alwaysinline {target} }}",
                 f"attributes #2 = {{ nounwind noinline optnone {target} }}"]  # glue.py
        return "\n".join([*head, "", *self.decls.values(), "", *self.functions, *attrs,
                          *self.metadata, ""])

    def _packed_wrapper(self, name: str, count: int, ret: str) -> str:
        fw = FunctionWriter(f'define void @"{name}_packed"(ptr %args) #2')  # glue
        args: list[str] = []
        for i in range(count):
            ty = "ptr" if i < len(self.func.params) else "i64"
            slot = fw.op("ptr", f"getelementptr i64, ptr %args, i64 {i}")
            args.append(str(fw.op(ty, f"load {ty}, ptr {slot.ref}, align 8")))
        fw.emit(f'call {ret} @"{name}"({", ".join(args)})')
        fw.emit("ret void")
        return fw.text()

    def declare(self, name: str, text: str) -> None:
        self.decls.setdefault(name, text)

    def intrinsic(self, base: str, overloads: list[str], ret: str, args: list[Val]) -> Val:
        """Call the LLVM intrinsic `base` overloaded on `overloads`."""
        name = intrinsic_name(base, overloads)
        self.declare(name, f"declare {ret} @{name}({', '.join(a.ty for a in args)})")
        return self.fw.op(ret, f"call {ret} @{name}({', '.join(map(str, args))})")

    # ---------------------------------------------------------------- helpers
    def splat(self, v: Val, lanes: int) -> Val:
        if lanes == 1 or v.ty.startswith("<"):
            return v
        ty = f"<{lanes} x {v.ty}>"
        one = self.fw.op(ty, f"insertelement {ty} poison, {v}, i64 0")
        return self.fw.op(ty, f"shufflevector {one}, {ty} poison, <{lanes} x i32> zeroinitializer")

    def match(self, a: Val, b: Val) -> tuple[Val, Val]:
        """Splat a scalar operand next to a vector one."""
        la, lb = lanes_of(a.ty), lanes_of(b.ty)
        if la == lb:
            return a, b
        return self.splat(a, max(la, lb)), self.splat(b, max(la, lb))

    def per_lane(self, v: Val, fn: Callable[[Val], Val]) -> Val:
        """Apply a scalar function to every lane of `v` (used for libm calls)."""
        lanes = lanes_of(v.ty)
        if lanes == 1:
            return fn(v)
        elem = element_of(v.ty)
        acc: Val | None = None
        for i in range(lanes):
            x = self.fw.op(elem, f"extractelement {v}, i64 {i}")
            y = fn(x)
            out_ty = vector_of(y.ty, lanes)
            acc_ref = acc.ref if acc is not None else "poison"
            acc = self.fw.op(out_ty, f"insertelement {out_ty} {acc_ref}, {y}, i64 {i}")
        assert acc is not None
        return acc

    def _resize_int(self, v: Val, elem: str, signed: bool) -> Val:
        """Sign/zero-extend or truncate an integer value to element type `elem`."""
        cur = element_of(v.ty)
        if cur == elem:
            return v
        ty = vector_of(elem, lanes_of(v.ty))
        bits_now, bits_new = int(cur[1:]), int(elem[1:])
        if bits_new < bits_now:
            return self.fw.op(ty, f"trunc {v} to {ty}")
        ext = "sext" if signed and cur != "i1" else "zext"
        return self.fw.op(ty, f"{ext} {v} to {ty}")

    def _has_memory_read(self, e: Expr) -> bool:
        key = id(e)
        if key not in self._has_load:
            self._has_load[key] = contains(e, BufferLoad)
        return self._has_load[key]

    def _buffer_ptr(self, buf: Buffer) -> Val:
        val = self.env.get(buf.data) or self.globals_by_name.get(buf.name)
        if val is None:
            raise ValueError(f"buffer {buf.name} is used outside of its allocation")
        return val

    # ------------------------------------------------------------ expressions
    def expr(self, e: Expr) -> Val:
        method = self._expr_methods.get(type(e))
        if method is None:
            raise NotImplementedError(f"codegen does not support {type(e).__name__} ({e})")
        return method(e)

    def _var(self, e: Var) -> Val:
        v = self.env.get(e)
        if v is None:
            raise ValueError(f"variable {e.name} is used but not defined in {self.func.name}")
        if e.dtype.is_integer or e.dtype.is_bool:
            return self._resize_int(v, scalar_type(e.dtype), e.dtype.is_int)
        return v

    def _const(self, e: Const) -> Val:
        return const(llvm_type(e.dtype), e.value)

    def _binary(self, e: Binary) -> Val:
        a, b = self.match(self.expr(e.a), self.expr(e.b))
        return self.binary_op(e.op, a, b, e.dtype)

    def binary_op(self, op: BinaryOp, a: Val, b: Val, t: DType, nsw: bool = False) -> Val:
        ty = a.ty
        fw = self.fw
        if t.is_float:
            if op in _FLOAT_OPS:
                return fw.op(ty, f"{_FLOAT_OPS[op]} contract {a}, {b.ref}")
            if op is BinaryOp.DIV:
                return fw.op(ty, f"fdiv {a}, {b.ref}")
            if op in (BinaryOp.FLOORDIV, BinaryOp.FLOORMOD):
                return float_floor_div_mod(self, op, a, b)
            if op in (BinaryOp.MIN, BinaryOp.MAX):
                return self._float_min_max(op, a, b)
            raise TypeError(f"operator {op.value} is not defined for {t}")
        signed = t.is_int
        if t.is_bool and op in (BinaryOp.MIN, BinaryOp.MAX):
            op = BinaryOp.AND if op is BinaryOp.MIN else BinaryOp.OR
        if op in _INT_OPS:
            flag = " nsw" if nsw and op in (BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL) else ""
            return fw.op(ty, f"{_INT_OPS[op]}{flag} {a}, {b.ref}")
        if op in (BinaryOp.FLOORDIV, BinaryOp.FLOORMOD):
            return floor_div_mod(self, op, a, b, signed)
        if op in (BinaryOp.MIN, BinaryOp.MAX):
            prefix = "s" if signed else "u"
            name = f"llvm.{prefix}{'min' if op is BinaryOp.MIN else 'max'}"
            return self.intrinsic(name, [ty], ty, [a, b])
        raise TypeError(
            f"operator {op.value} is not defined for {t} (the front end casts / to float)"
        )

    def _float_min_max(self, op: BinaryOp, a: Val, b: Val) -> Val:
        """max / min of floats with NaN propagating, as numpy's maximum / minimum: `b` when it
        is NaN or beyond `a`, else `a` (which of two equal zeros is unspecified, as in numpy).
        On vectors a compare and select: with AVX-512 a running max(acc, x) costs the
        accumulator's chain a compare and a masked move (the NaN test of x is off it), where
        `llvm.maximum` (which also orders -0 below +0) costs six dependent instructions and
        made a softmax's row max as slow as its exponentials. Scalars keep `llvm.maximum`:
        LLVM folds a chain of them over a vector's lanes (the end of a row max in vector lanes)
        into a tree of vector steps, but not a chain of selects (16 serial steps per row)."""
        if lanes_of(a.ty) == 1:
            name = "llvm.minimum" if op is BinaryOp.MIN else "llvm.maximum"
            return self.intrinsic(name, [a.ty], a.ty, [a, b])
        fw = self.fw
        bool_ty = vector_of("i1", lanes_of(a.ty))
        beyond = fw.op(bool_ty, f"fcmp {'ogt' if op is BinaryOp.MAX else 'olt'} {b}, {a.ref}")
        picked = fw.op(a.ty, f"select {beyond}, {b}, {a}")
        nan = fw.op(bool_ty, f"fcmp uno {b}, {b.ref}")
        return fw.op(a.ty, f"select {nan}, {b}, {picked}")

    def _compare(self, e: Compare) -> Val:
        a, b = self.match(self.expr(e.a), self.expr(e.b))
        t = e.a.dtype
        ty = vector_of("i1", lanes_of(a.ty))
        if t.is_float:
            return self.fw.op(ty, f"fcmp {_FCMP[e.op]} {a}, {b.ref}")
        if e.op is CompareOp.EQ:
            pred = "eq"
        elif e.op is CompareOp.NE:
            pred = "ne"
        else:
            pred = ("s" if t.is_int else "u") + _ICMP[e.op]
        return self.fw.op(ty, f"icmp {pred} {a}, {b.ref}")

    def _not(self, e: Not) -> Val:
        v = self.expr(e.value)
        return self.fw.op(v.ty, f"xor {v}, {const(v.ty, -1 if e.dtype.is_integer else 1).ref}")

    def _select(self, e: Select) -> Val:
        lazy = self._has_memory_read(e.true_value) or self._has_memory_read(e.false_value)
        cond = self.expr(e.cond)
        if not lazy:
            a, b = self.match(self.expr(e.true_value), self.expr(e.false_value))
            cond = self.splat(cond, lanes_of(a.ty)) if lanes_of(a.ty) > 1 else cond
            return self.fw.op(a.ty, f"select {cond}, {a}, {b}")
        if lanes_of(cond.ty) == 1:
            return self._branchy_select(cond, e.true_value, e.false_value)
        # A vector condition: every load of a branch reads only the lanes that branch provides.
        outer = self.mask
        inverse = self.fw.op(cond.ty, f"xor {cond}, {const(cond.ty, 1).ref}")
        self.mask = self._and_mask(outer, cond)
        a = self.expr(e.true_value)
        self.mask = self._and_mask(outer, inverse)
        b = self.expr(e.false_value)
        self.mask = outer
        a, b = self.match(a, b)
        return self.fw.op(a.ty, f"select {cond}, {a}, {b}")

    def _and_mask(self, outer: Val | None, cond: Val) -> Val:
        if outer is None:
            return cond
        return self.fw.op(cond.ty, f"and {outer}, {cond.ref}")

    def _branchy_select(self, cond: Val, true_e: Expr, false_e: Expr) -> Val:
        fw = self.fw
        then_l, else_l, end_l = fw.label("sel_t"), fw.label("sel_f"), fw.label("sel_end")
        fw.cond_br(cond, then_l, else_l)
        fw.start_block(then_l)
        a = self.expr(true_e)
        a_block = fw.block
        fw.br(end_l)
        fw.start_block(else_l)
        b = self.expr(false_e)
        if lanes_of(a.ty) != lanes_of(b.ty):
            b = self.splat(b, lanes_of(a.ty))
        b_block = fw.block
        fw.br(end_l)
        fw.start_block(end_l)
        if lanes_of(a.ty) < lanes_of(b.ty):
            raise NotImplementedError(
                "a lazy select whose true branch is narrower than the false one"
            )
        return fw.op(a.ty, f"phi {a.ty} [ {a.ref}, %{a_block} ], [ {b.ref}, %{b_block} ]")

    def _cast(self, e: Cast) -> Val:
        return self.convert(self.expr(e.value), e.value.dtype, e.dtype)

    def convert(self, v: Val, src: DType, dst: DType) -> Val:
        """Convert `v` from dtype `src` to `dst` with numpy's astype semantics."""
        lanes = lanes_of(v.ty)
        ty = vector_of(scalar_type(dst), lanes)
        if v.ty == ty and src.kind is dst.kind:
            return v
        fw = self.fw
        if dst.is_bool:
            if src.is_float:
                return fw.op(ty, f"fcmp une {v}, {const(v.ty, 0.0).ref}")
            return fw.op(ty, f"icmp ne {v}, {const(v.ty, 0).ref}")
        if src.is_float and dst.is_float:
            op = "fpext" if dst.bits > src.bits else "fptrunc"
            return fw.op(ty, f"{op} {v} to {ty}")
        if src.is_float:
            return fw.op(ty, f"{'fptosi' if dst.is_int else 'fptoui'} {v} to {ty}")
        if dst.is_float:
            return fw.op(ty, f"{'sitofp' if src.is_int else 'uitofp'} {v} to {ty}")
        return self._resize_int(v, scalar_type(dst), src.is_int)

    def _call(self, e: Call) -> Val:
        if isinstance(e.func, SafetyIntrinsic):
            raise NotImplementedError(f"{e.func.value} is only valid as an access's index ({e})")
        args = [self.expr(a) for a in e.args]
        lanes = max(lanes_of(a.ty) for a in args)
        return emit_math(self, e.func, [self.splat(a, lanes) for a in args])

    def _ramp(self, e: Ramp) -> Val:
        base = self.expr(e.base)
        stride = self.expr(e.stride)
        return self._ramp_from(base, stride, e.lanes, nsw=False)

    def _ramp_from(self, base: Val, stride: Val, lanes: int, nsw: bool) -> Val:
        elem = base.ty
        ty = f"<{lanes} x {elem}>"
        steps = lane_indices(lanes, elem)
        flag = " nsw" if nsw else ""
        if stride.ref.lstrip("-").isdigit():
            s = int(stride.ref)
            offsets = Val(ty, "<" + ", ".join(f"{elem} {i * s}" for i in range(lanes)) + ">")
        else:
            offsets = self.fw.op(ty, f"mul{flag} {steps}, {self.splat(stride, lanes).ref}")
        return self.fw.op(ty, f"add{flag} {self.splat(base, lanes)}, {offsets.ref}")

    def _broadcast(self, e: Broadcast) -> Val:
        return self.splat(self.expr(e.value), e.lanes)

    def _let(self, e: Let) -> Val:
        self.env[e.var] = self._bind_value(e.value)
        try:
            return self.expr(e.body)
        finally:
            del self.env[e.var]

    def _bind_value(self, value: Expr) -> Val:
        """The value a Let/LetStmt binds; signed integers are kept in i64 (see module doc)."""
        if value.dtype.is_int:
            return self.index(value)
        return self.expr(value)

    # ----------------------------------------------------------------- memory
    def _load(self, e: BufferLoad) -> Val:
        registers = self.registers.get(e.buffer.data)
        if registers is not None:  # an element carried in a register (promote.py)
            return self.splat(registers[slot_of(e.index)[1]], e.dtype.lanes)
        ptr = self._buffer_ptr(e.buffer)
        elem = scalar_type(e.dtype, memory=True)
        align = e.dtype.itemsize
        lanes = e.dtype.lanes
        mask = self._load_mask(e.mask, lanes)
        index, check = _split_check(e.index)
        if lanes == 1 or isinstance(index, Broadcast) or index.dtype.lanes == 1:
            # A lane-invariant address: one scalar load, splat to the lanes.
            offset = self.index(index.value if isinstance(index, Broadcast) else index)
            if check is not None:
                mask = emit_bound_check(self, offset, check, mask)
            value = self._scalar_load(ptr, elem, align, offset, mask)
            value = self._from_memory(value, e.dtype.element)
            return self.splat(value, lanes)
        vty = f"<{lanes} x {elem}>"
        if _is_unit_ramp(index):
            addr, mask = self._contiguous_address(ptr, elem, index, check, mask)
            if mask is None:
                value = self._plain_load(ptr, vty, addr, align)
            else:
                value = self.intrinsic(
                    "llvm.masked.load",
                    [vty, "ptr"],
                    vty,
                    [Val(f"ptr align {align}", addr.ref), mask, const(vty, 0)],
                )
        else:
            offsets = self.index(index)
            if check is not None:
                mask = emit_bound_check(self, offsets, check, mask)
            addrs = self._address(ptr, elem, offsets)
            if mask is None:
                mask = const(vector_of("i1", lanes), 1)
            value = self.intrinsic(
                "llvm.masked.gather",
                [vty, addrs.ty],
                vty,
                [Val(f"{addrs.ty} align {align}", addrs.ref), mask, const(vty, 0)],
            )
        return self._from_memory(value, e.dtype)

    def _contiguous_address(self, ptr: Val, elem: str, index: Ramp, check: CheckedIndex | None,
                            mask: Val | None) -> tuple[Val, Val | None]:
        """The address of a unit-stride vector access, and its mask with the lanes that fail
        the access's bound check (if it has one) switched off."""
        base = self.index(index.base)
        if check is not None:
            offsets = self._ramp_from(base, const("i64", 1), index.lanes, nsw=True)
            mask = emit_bound_check(self, offsets, check, mask)
        return self._address(ptr, elem, base), mask

    def _load_mask(self, own: Expr | None, lanes: int) -> Val | None:
        mask = self.expr(own) if own is not None else None
        if self.mask is not None:
            ctx = self.mask
            if lanes > 1 and lanes_of(ctx.ty) != lanes:
                raise NotImplementedError("a masked load with a different lane count than its mask")
            mask = ctx if mask is None else self.fw.op(ctx.ty, f"and {ctx}, {mask.ref}")
        return mask

    def _scalar_load(self, ptr: Val, elem: str, align: int, offset: Val, mask: Val | None) -> Val:
        """A scalar load; under a vector mask it happens only when some lane needs it."""
        addr = self._address(ptr, elem, offset)
        if mask is None:
            return self._plain_load(ptr, elem, addr, align)
        fw = self.fw
        if lanes_of(mask.ty) > 1:
            mask = self.intrinsic("llvm.vector.reduce.or", [mask.ty], "i1", [mask])
        load_l, end_l = fw.label("ld"), fw.label("ld_end")
        before = fw.block
        fw.cond_br(mask, load_l, end_l)
        fw.start_block(load_l)
        value = fw.op(elem, f"load {elem}, ptr {addr.ref}, align {align}")
        fw.br(end_l)
        fw.start_block(end_l)
        zero = const(elem, 0)
        return fw.op(elem, f"phi {elem} [ {value.ref}, %{load_l} ], [ {zero.ref}, %{before} ]")

    def _plain_load(self, ptr: Val, ty: str, addr: Val, align: int) -> Val:
        """An unmasked load of `ty` at `addr` in the buffer at `ptr`, or the value this block
        already loaded or stored there."""
        known = self.fw.remembered(ptr, ty, addr)
        if known is not None:
            return known
        value = self.fw.op(ty, f"load {ty}, ptr {addr.ref}, align {align}")
        self.fw.remember(ptr, addr, value)
        return value

    def _plain_store(self, ptr: Val, value: Val, addr: Val, align: int) -> None:
        """An unmasked store into the buffer at `ptr`; later loads of that address in this
        block read `value` back without a load."""
        self.fw.emit(f"store {value}, ptr {addr.ref}, align {align}")
        self.fw.forget(ptr)
        self.fw.remember(ptr, addr, value)

    def _address(self, ptr: Val, elem: str, index: Val) -> Val:
        ty = "ptr" if lanes_of(index.ty) == 1 else vector_of("ptr", lanes_of(index.ty))
        return self.fw.op(ty, f"getelementptr inbounds {elem}, {ptr}, {index}")

    def _from_memory(self, v: Val, t: DType) -> Val:
        if not t.is_bool:
            return v
        ty = vector_of("i1", lanes_of(v.ty))
        return self.fw.op(ty, f"icmp ne {v}, {const(v.ty, 0).ref}")

    def _to_memory(self, v: Val, t: DType) -> Val:
        if not t.is_bool:
            return v
        ty = vector_of("i8", lanes_of(v.ty))
        return self.fw.op(ty, f"zext {v} to {ty}")

    def _store(self, s: BufferStore) -> None:
        registers = self.registers.get(s.buffer.data)
        if registers is not None:  # an element carried in a register (promote.py)
            _, offset, lanes = slot_of(s.index)
            registers[offset] = self.splat(self.expr(s.value), lanes)
            # A register block's accumulator, a vector or one of several scalars: a loop around
            # a block of scalars (a GEMM's one-column edge) is no loop for LLVM's vectorizer to
            # gather across (it spilled), nor to unroll.
            self.vector_stores += lanes > 1 or len(registers) > 1
            return
        ptr = self._buffer_ptr(s.buffer)
        t = s.buffer.dtype
        elem = scalar_type(t, memory=True)
        align = t.itemsize
        value = self._to_memory(self.expr(s.value), t)
        lanes = lanes_of(value.ty)
        index, check = _split_check(s.index)
        index_lanes = index.dtype.lanes
        if lanes < index_lanes:
            value = self.splat(value, index_lanes)
            lanes = index_lanes
        mask = self.expr(s.mask) if s.mask is not None else None
        self.vector_stores += lanes > 1
        if lanes == 1:
            offset = self.index(index)
            addr = self._address(ptr, elem, offset)
            if check is None:
                self._plain_store(ptr, value, addr, align)
                return
            fw = self.fw
            store_l, end_l = fw.label("st"), fw.label("st_end")
            fw.cond_br(emit_bound_check(self, offset, check, mask), store_l, end_l)
            fw.start_block(store_l)
            fw.emit(f"store {value}, ptr {addr.ref}, align {align}")
            fw.br(end_l)
            fw.start_block(end_l)
            return
        if _is_unit_ramp(index):
            addr, mask = self._contiguous_address(ptr, elem, index, check, mask)
            if mask is None:
                self._plain_store(ptr, value, addr, align)
            else:
                name = intrinsic_name("llvm.masked.store", [value.ty, "ptr"])
                self.declare(name, f"declare void @{name}({value.ty}, ptr, {mask.ty})")
                self.fw.emit(f"call void @{name}({value}, ptr align {align} {addr.ref}, {mask})")
            return
        offsets = self.index(index)
        if check is not None:
            mask = emit_bound_check(self, offsets, check, mask)
        addrs = self._address(ptr, elem, offsets)
        if mask is None:
            mask = const(vector_of("i1", lanes), 1)
        name = intrinsic_name("llvm.masked.scatter", [value.ty, addrs.ty])
        self.declare(name, f"declare void @{name}({value.ty}, {addrs.ty}, {mask.ty})")
        self.fw.emit(f"call void @{name}({value}, {addrs.ty} align {align} {addrs.ref}, {mask})")

    # ------------------------------------------------------------ index mode
    def index(self, e: Expr) -> Val:
        """`e` as an i64 (or vector of i64) address offset."""
        if isinstance(e, Const) and not e.dtype.is_float:
            return const("i64", int(e.value))
        if isinstance(e, Var):
            v = self.env.get(e)
            if v is None:
                raise ValueError(f"variable {e.name} is used but not defined in {self.func.name}")
            return self._resize_int(v, "i64", e.dtype.is_int)
        if (
            isinstance(e, Binary)
            and e.dtype.is_int
            and e.op in _INT_OPS
            or (
                isinstance(e, Binary)
                and e.dtype.is_int
                and e.op in (BinaryOp.FLOORDIV, BinaryOp.FLOORMOD, BinaryOp.MIN, BinaryOp.MAX)
            )
        ):
            a, b = self.match(self.index(e.a), self.index(e.b))
            return self.binary_op(e.op, a, b, e.dtype, nsw=True)
        if isinstance(e, Ramp):
            return self._ramp_from(self.index(e.base), self.index(e.stride), e.lanes, nsw=True)
        if isinstance(e, Broadcast):
            return self.splat(self.index(e.value), e.lanes)
        if isinstance(e, Let):
            self.env[e.var] = self._bind_value(e.value)
            try:
                return self.index(e.body)
            finally:
                del self.env[e.var]
        v = self.expr(e)
        return self._resize_int(v, "i64", e.dtype.is_int)

    # ------------------------------------------------------------- statements
    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for child in s.stmts:
                self.stmt(child)
        elif isinstance(s, BufferStore):
            self._store(s)
        elif isinstance(s, For):
            if s.kind is ForKind.PARALLEL and not self.in_parallel:
                self._parallel_for(s)
            else:
                self._serial_for(s)
        elif isinstance(s, IfThenElse):
            self._if(s)
        elif isinstance(s, LetStmt):
            self.env[s.var] = self._bind_value(s.value)
            self.stmt(s.body)
            del self.env[s.var]
        elif isinstance(s, Allocate):
            self._allocate(s)
        elif isinstance(s, Evaluate):
            if has_effect(s.value):  # a C function's call; other expressions do nothing
                self.expr(s.value)
        else:
            raise NotImplementedError(f"codegen does not support {type(s).__name__}")

    def _serial_for(self, s: For) -> None:
        lo = self.index(s.min)
        hi = self.fw.op("i64", f"add nsw {lo}, {self.index(s.extent).ref}")
        scalar = s.kind is ForKind.SERIAL and bool(dict(s.annotations).get("scalar_loop"))
        if s.kind is ForKind.UNROLLED:
            unroll = "llvm.loop.unroll.full"
        elif KEEP_ROLLED in s.annotations or scalar:
            unroll = "llvm.loop.unroll.disable"
        else:
            unroll = None
        self._loop(s.var, lo, hi, s.body, unroll, vectorize=not scalar)

    def _loop_metadata(self, hints: list[str]) -> str:
        """`!llvm.loop` metadata with `hints`: `llvm.loop.unroll.full` (pragma
        unroll_explicit=False leaves loops of kind UNROLLED to LLVM), `llvm.loop.unroll.disable`
        (loops in the copies of an unrolled loop, see lower/unroll.py), no loop vectorizer where
        the loop stores vectors already (the vectorizer's memory analysis of an unrolled
        register block costs more than the rest of LLVM's passes, and finds nothing to do).
        A loop under the pragma `scalar_loop` gets neither unrolling nor the loop vectorizer:
        a filter packing's loop over kernel taps, whose strided stores LLVM's vectorizers
        analysed for 180 ms of a 3x3 conv's 420 ms compile to find nothing (and where they
        did vectorize it, a 512 x 512 3x3 layer ran at 0.35-0.7x).

        No LLVM unrolling either for a register block (a loop that stores `REGISTER_BLOCK_STORES`
        vectors or more: the schedule unrolled it, and another copy saves a loop branch per
        dozens of FMAs) nor for a loop holding a loop kept rolled (it would copy that loop
        whole). LLVM's unrolling of these and the passes after it on the copies took 25 ms
        of a 3x3 conv2d_nchw's 84 ms of LLVM passes, and 26 ms of the 7x7 stem's 87 (filter
        packing nests), for code that ran equally fast (CPU time, one thread, 1.00x)."""
        loop = len(self.metadata)
        nodes = [f"!{loop + 1 + k}" for k in range(len(hints))]
        self.metadata.append(f"!{loop} = distinct !{{!{loop}, {', '.join(nodes)}}}")
        self.metadata += [f"{node} = !{{{hint}}}" for node, hint in zip(nodes, hints)]
        return f", !llvm.loop !{loop}"

    def _loop(self, var: Var, lo: Val, hi: Val, body: Stmt, unroll: str | None = None,
              vectorize: bool = True) -> None:
        fw = self.fw
        carried, opened = self._carried(body, var)
        pre = fw.block
        head, body_l, latch, end = (fw.label(p) for p in ("for", "body", "latch", "end"))
        i = fw.fresh(re.sub(r"[^A-Za-z0-9_]", "_", var.name))
        nxt = fw.fresh("next")
        fw.br(head)
        fw.start_block(head)
        fw.emit(f"{i} = phi i64 [ {lo.ref}, %{pre} ], [ {nxt}, %{latch} ]")
        phis = []
        for data, offset in carried:
            phi, handle = fw.open_phi(self.registers[data][offset], pre)
            self.registers[data][offset] = phi
            phis.append((data, offset, phi, handle))
        cont = fw.op("i1", f"icmp slt i64 {i}, {hi.ref}")
        fw.cond_br(cont, body_l, end)
        fw.start_block(body_l)
        self.env[var] = Val("i64", i)
        outer_vectors, self.vector_stores = self.vector_stores, 0
        outer_rolled, self.rolled_inside = self.rolled_inside, False
        self.stmt(body)
        if unroll is None and (self.rolled_inside or self.vector_stores >= REGISTER_BLOCK_STORES):
            unroll = "llvm.loop.unroll.disable"
        hints = [f'!"{unroll}"'] if unroll else []
        if self.vector_stores or not vectorize:
            hints.append('!"llvm.loop.vectorize.enable", i1 false')
        self.vector_stores += outer_vectors
        self.rolled_inside = outer_rolled or unroll == "llvm.loop.unroll.disable"
        del self.env[var]
        fw.br(latch)
        fw.start_block(latch)
        for data, offset, phi, handle in phis:  # the loop exits from its head: the phi's value
            fw.close_phi(handle, self.registers[data][offset], latch)
            self.registers[data][offset] = phi
        fw.emit(f"{nxt} = add nsw i64 {i}, 1")
        fw.emit(f"br label %{head}{self._loop_metadata(hints) if hints else ''}")
        fw.start_block(end)
        for data, slots in opened:
            self._store_registers(data, slots)

    def _carried(self, body: Stmt, var: Var) -> tuple[list[tuple[Var, int]],
                                                       list[tuple[Var, Slots]]]:
        """The stack elements a loop of `var` with `body` carries in registers: (buffer, offset)
        of each element it writes, and the buffers whose registers it opens, loaded here before
        the loop (the outermost such loop; `_store_registers` writes them back after it)."""
        carried: list[tuple[Var, int]] = []
        opened: list[tuple[Var, Slots]] = []
        for data, (finder, buf) in self.stack_finders.items():
            slots = finder.loop_slots(body, var)
            if slots is None:
                continue
            if data not in self.registers:
                elem = scalar_type(buf.dtype, memory=True)
                self.registers[data] = {
                    offset: self._plain_load(self.env[data], vector_of(elem, lanes),
                                             self._slot_address(data, slots, offset),
                                             buf.dtype.itemsize)
                    for offset, lanes in slots.lanes.items()}
                opened.append((data, slots))
            carried += [(data, offset) for offset in sorted(slots.written)]
        return carried, opened

    def _slot_address(self, data: Var, slots: Slots, offset: int) -> Val:
        """The address of the element `offset` past the slots' base in the stack buffer `data`."""
        elem = scalar_type(self.stack_finders[data][1].dtype, memory=True)
        index = const("i64", offset)
        if slots.base is not None:
            index = self.fw.op("i64", f"add nsw {self.index(slots.base)}, {index.ref}")
        return self._address(self.env[data], elem, index)

    def _store_registers(self, data: Var, slots: Slots) -> None:
        registers = self.registers.pop(data)
        buf = self.stack_finders[data][1]
        for offset in sorted(slots.written):
            self._plain_store(self.env[data], registers[offset],
                              self._slot_address(data, slots, offset), buf.dtype.itemsize)

    def _if(self, s: IfThenElse) -> None:
        cond = self.expr(s.cond)
        if lanes_of(cond.ty) > 1:
            raise NotImplementedError("an if statement with a vector condition reached codegen")
        fw = self.fw
        then_l, end_l = fw.label("then"), fw.label("endif")
        else_l = fw.label("else") if s.else_case is not None else end_l
        fw.cond_br(cond, then_l, else_l)
        fw.start_block(then_l)
        self.stmt(s.then_case)
        fw.br(end_l)
        if s.else_case is not None:
            fw.start_block(else_l)
            self.stmt(s.else_case)
            fw.br(end_l)
        fw.start_block(end_l)

    def _allocate(self, s: Allocate) -> None:
        buf = s.buffer
        count: int | None = 1
        for dim in buf.shape:
            value = _const_int(dim)
            count = None if value is None or count is None else count * value
        if count is not None and count * buf.dtype.itemsize <= STACK_LIMIT:
            ptr = self.fw.alloca(f"i8, i64 {max(count * buf.dtype.itemsize, 1)}, align 64")
            self.env[buf.data] = ptr
            if not buf.dtype.is_bool:
                self.stack_finders[buf.data] = (SlotFinder(buf.data), buf)
            self.stmt(s.body)
            self.stack_finders.pop(buf.data, None)
            del self.env[buf.data]
            return
        size = const("i64", buf.dtype.itemsize)
        for dim in buf.shape:
            size = self.fw.op("i64", f"mul {size}, {self.index(dim).ref}")
        self.declare("tl_aligned_alloc", RUNTIME_DECLS["tl_aligned_alloc"])
        self.declare("tl_free", RUNTIME_DECLS["tl_free"])
        ptr = self.fw.op("ptr", f"call ptr @tl_aligned_alloc({size})")
        self.env[buf.data] = ptr
        self.stmt(s.body)
        del self.env[buf.data]
        self.fw.emit(f"call void @tl_free({ptr})")

    # --------------------------------------------------------------- parallel
    def _parallel_for(self, s: For) -> None:
        """Outline the loop into a task function and run it on the thread pool."""
        captured = self._captured(s)
        if self.status is not None:
            captured.append((STATUS_VAR, self.status))
        fw = self.fw
        struct = "{" + ", ".join(v.ty for _, v in captured) + "}" if captured else "{i8}"
        closure = fw.alloca(f"{struct}, align 8")
        for k, (_, val) in enumerate(captured):
            slot = fw.op(
                "ptr", f"getelementptr inbounds {struct}, ptr {closure.ref}, i32 0, i32 {k}"
            )
            fw.emit(f"store {val}, ptr {slot.ref}")
        task_fn = self._outline(s, captured, struct)
        for name in ("tl_parallel_for", "tl_get_num_threads"):
            self.declare(name, RUNTIME_DECLS[name])
        extent = self.index(s.extent)
        threads = fw.op("i32", "call i32 @tl_get_num_threads()")
        threads64 = fw.op("i64", f"sext {threads} to i64")
        chunks = fw.op("i64", f"mul nsw {threads64}, {TASKS_PER_THREAD}")
        tasks64 = self.intrinsic("llvm.smin", ["i64"], "i64", [extent, chunks])
        tasks = fw.op("i32", f"trunc {tasks64} to i32")
        fw.emit(f"call void @tl_parallel_for(ptr @{task_fn}, ptr {closure.ref}, {tasks})")

    def _captured(self, s: For) -> list[tuple[Var, Val]]:
        """The defined variables that the loop `s` uses, in the order they first occur."""
        return [(v, self.env[v]) for v in variables_in_order(s) if v in self.env]

    def _outline(self, s: For, captured: list[tuple[Var, Val]], struct: str) -> str:
        index = len(self.functions)
        name = f'"{self.symbol}_par{index}"'
        impl = f'"{self.symbol}_par{index}_impl"'
        # The task wrapper unpacks the closure and calls an always-inlined body whose pointer
        # parameters are noalias, which LLVM turns into alias scopes when it inlines.
        wrapper = FunctionWriter(
            f"define internal void @{name}(i32 %task, i32 %ntasks, ptr %cl) #0"
        )
        args: list[str] = []
        for k, (_, val) in enumerate(captured):
            slot = wrapper.op("ptr", f"getelementptr inbounds {struct}, ptr %cl, i32 0, i32 {k}")
            args.append(str(wrapper.op(val.ty, f"load {val.ty}, ptr {slot.ref}")))
        args += ["i32 %task", "i32 %ntasks"]
        wrapper.emit(f"call void @{impl}({', '.join(args)})")
        wrapper.emit("ret void")

        # The status slot is shared by all tasks, so it is the one pointer that is not noalias.
        params = [
            f"{'ptr noalias' if val.ty == 'ptr' and var is not STATUS_VAR else val.ty} %cap{k}"
            for k, (var, val) in enumerate(captured)
        ]
        saved = (self.fw, self.env, self.in_parallel, self.status, self.stack_finders,
                 self.registers)
        self.stack_finders, self.registers = {}, {}
        self.fw = FunctionWriter(
            f"define internal void @{impl}({', '.join(params + ['i32 %task', 'i32 %ntasks'])}) #1"
        )
        self.env = {var: Val(val.ty, f"%cap{k}") for k, (var, val) in enumerate(captured)}
        self.status = self.env.pop(STATUS_VAR, None)
        self.in_parallel = True
        fw = self.fw
        lo = self.index(s.min)
        extent = self.index(s.extent)
        tasks = fw.op("i64", "sext i32 %ntasks to i64")
        task = fw.op("i64", "sext i32 %task to i64")
        chunk_num = fw.op("i64", f"add nsw {extent}, {tasks.ref}")
        chunk_num = fw.op("i64", f"sub nsw {chunk_num}, 1")
        chunk = fw.op("i64", f"sdiv {chunk_num}, {tasks.ref}")
        begin = fw.op("i64", f"mul nsw {task}, {chunk.ref}")
        end = fw.op("i64", f"add nsw {begin}, {chunk.ref}")
        end = self.intrinsic("llvm.smin", ["i64"], "i64", [end, extent])
        first = fw.op("i64", f"add nsw {lo}, {begin.ref}")
        last = fw.op("i64", f"add nsw {lo}, {end.ref}")
        self._loop(s.var, first, last, s.body)
        fw.emit("ret void")
        self.functions.append(fw.text())
        (self.fw, self.env, self.in_parallel, self.status, self.stack_finders,
         self.registers) = saved
        self.functions.append(wrapper.text())
        return name


def codegen(func: PrimFunc, target: Target | str | None = None, symbol: str | None = None) -> str:
    """Translate a lowered PrimFunc into LLVM IR text.

    Args:
        func: the kernel; its body holds only loop IR (no TensorRead / Reduce).
        target: the CPU to generate code for (default: this host).
        symbol: the exported function's name (default `func.name`). The JIT uses a prefixed
            name, because a kernel called e.g. `exp` would otherwise capture LLVM's calls to
            libm's `exp` from inside its own module.

    Returns:
        The text of an LLVM module exporting `void <symbol>(T* param..., int64_t shape_var...)`
        (returning an `int32_t` status instead when `func` has bound checks, see
        codegen/bounds.py) and `void <symbol>_packed(int64_t* args)`.
    """
    start = time.perf_counter()
    text = CodeGen(func, as_target(target), symbol or func.name).module_text()
    if debug_level() >= 1:  # next to the timings of the lowering passes and of LLVM
        ms, lines = 1e3 * (time.perf_counter() - start), text.count("\n")
        print(f"[tensorlang] {symbol or func.name}: codegen {ms:.1f} ms, {lines} lines of LLVM IR",
              file=sys.stderr)
    return text
