"""Readable pseudo-Python text for expressions, loop IR statements and functions.

What `str()` of any node returns; lowering's debug output and the golden IR tests use it, so the
format is stable: one statement per line, 4-space indents, Python operators and `range`.
"""

from __future__ import annotations

from .calls import AddressOf, CallExtern, CallLLVMIntrin, Reinterpret
from .arith import simplify
from .expr import (
    Binary,
    BinaryOp,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    Node,
    Not,
    Reduce,
    Select,
    TensorRead,
    Var,
    register_printer,
)
from .ir import (
    Allocate,
    Broadcast,
    BufferLoad,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    Let,
    LetStmt,
    PrimFunc,
    ProducerLoad,
    ProducerStore,
    Ramp,
    Seq,
    Stmt,
)

# Binding strength, loosest first: used to parenthesise only where Python would need it.
_PRECEDENCE = {
    BinaryOp.OR: 1,
    BinaryOp.AND: 3,
    BinaryOp.ADD: 5,
    BinaryOp.SUB: 5,
    BinaryOp.MUL: 6,
    BinaryOp.DIV: 6,
    BinaryOp.FLOORDIV: 6,
    BinaryOp.FLOORMOD: 6,
}
_COMPARE_PRECEDENCE = 4
_ATOM = 10


def _const_str(node: Const) -> str:
    if node.dtype.is_bool:
        return str(bool(node.value))
    if node.dtype.is_float:
        text = repr(float(node.value))
        return text if node.dtype.bits == 32 else f"{node.dtype}({text})"
    if node.dtype.bits in (32,) and node.dtype.is_int:
        return str(node.value)
    return f"{node.dtype}({node.value})"


def _expr(node: Expr) -> tuple[str, int]:
    """Text of `node` and its binding strength."""
    if isinstance(node, Var):
        return node.name, _ATOM
    if isinstance(node, Const):
        return _const_str(node), _ATOM
    if isinstance(node, Binary):
        if node.op in (BinaryOp.MIN, BinaryOp.MAX):
            return f"{node.op.value}({_plain(node.a)}, {_plain(node.b)})", _ATOM
        prec = _PRECEDENCE[node.op]
        left = _wrap(node.a, prec)
        right = _wrap(node.b, prec + 1)  # left-associative
        return f"{left} {node.op.value} {right}", prec
    if isinstance(node, Compare):
        left = _wrap(node.a, _COMPARE_PRECEDENCE + 1)
        right = _wrap(node.b, _COMPARE_PRECEDENCE + 1)
        return f"{left} {node.op.value} {right}", _COMPARE_PRECEDENCE
    if isinstance(node, Not):
        return f"~{_wrap(node.value, _ATOM)}", _ATOM
    if isinstance(node, Select):
        args = ", ".join(_plain(e) for e in (node.cond, node.true_value, node.false_value))
        return f"if_then_else({args})", _ATOM
    if isinstance(node, Cast):
        return f"{node.dtype}({_plain(node.value)})", _ATOM
    if isinstance(node, Call):
        return f"{node.func.value}({', '.join(_plain(a) for a in node.args)})", _ATOM
    if isinstance(node, TensorRead):
        return f"{node.tensor.name}[{', '.join(_plain(i) for i in node.indices)}]", _ATOM
    if isinstance(node, BufferLoad):
        mask = f", mask={_plain(node.mask)}" if node.mask is not None else ""
        return f"{node.buffer.name}[{_plain(node.index)}{mask}]", _ATOM
    if isinstance(node, ProducerLoad):
        return f"{node.buffer.name}[{', '.join(_plain(i) for i in node.indices)}]", _ATOM
    if isinstance(node, Ramp):
        return f"ramp({_plain(node.base)}, {_plain(node.stride)}, {node.lanes})", _ATOM
    if isinstance(node, Broadcast):
        return f"x{node.lanes}({_plain(node.value)})", _ATOM
    if isinstance(node, Let):
        return f"(let {node.var.name} = {_plain(node.value)} in {_plain(node.body)})", _ATOM
    if isinstance(node, Reduce):
        axes = ", ".join(f"{iv.name} in range({_plain(iv.dom.extent)})" for iv in node.axis)
        source = ", ".join(_plain(s) for s in node.source)
        where = "" if _is_true(node.condition) else f", where={_plain(node.condition)}"
        return f"{node.combiner.name}({source}, axis=[{axes}]{where})", _ATOM
    if isinstance(node, (CallExtern, CallLLVMIntrin)):
        name = node.symbol if isinstance(node, CallExtern) else node.name
        return f'call("{name}", {", ".join(_plain(a) for a in node.args)})', _ATOM
    if isinstance(node, Reinterpret):
        return f"reinterpret({_plain(node.value)}, {node.dtype})", _ATOM
    if isinstance(node, AddressOf):
        return f"&{node.buffer.name}[{_plain(node.index)}]", _ATOM
    return f"<{type(node).__name__}>", _ATOM


def _is_true(node: Expr) -> bool:
    return isinstance(node, Const) and node.dtype.is_bool and bool(node.value)


def _plain(node: Expr) -> str:
    return _expr(node)[0]


def _wrap(node: Expr, min_prec: int) -> str:
    text, prec = _expr(node)
    return text if prec >= min_prec else f"({text})"


def expr_to_str(node: Expr) -> str:
    return _plain(node)


def _loop_header(node: For) -> str:
    extent = _plain(node.extent)
    if isinstance(node.min, Const) and node.min.value == 0:
        rng = f"range({extent})"
    else:
        end = simplify(node.min + node.extent)
        rng = f"range({_plain(node.min)}, {_plain(end)})"
    kind = "" if node.kind is ForKind.SERIAL else f"  # {node.kind.value}"
    pragmas = "".join(f" pragma({k}={v!r})" for k, v in node.annotations)
    if pragmas:
        kind = (kind or "  #") + pragmas
    return f"for {node.var.name} in {rng}:{kind}"


def _stmt_lines(node: Stmt, indent: int, out: list[str]) -> None:
    pad = "    " * indent
    if isinstance(node, Seq):
        for s in node.stmts:
            _stmt_lines(s, indent, out)
    elif isinstance(node, For):
        out.append(pad + _loop_header(node))
        _stmt_lines(node.body, indent + 1, out)
    elif isinstance(node, BufferStore):
        mask = f"  # mask={_plain(node.mask)}" if node.mask is not None else ""
        out.append(f"{pad}{node.buffer.name}[{_plain(node.index)}] = {_plain(node.value)}{mask}")
    elif isinstance(node, ProducerStore):
        index = ", ".join(_plain(i) for i in node.indices)
        out.append(f"{pad}{node.buffer.name}[{index}] = {_plain(node.value)}")
    elif isinstance(node, Allocate):
        buf = node.buffer
        shape = ", ".join(_plain(s) for s in buf.shape)
        out.append(f"{pad}{buf.name} = allocate(({shape},), {buf.dtype}, {buf.scope.value!r})")
        _stmt_lines(node.body, indent, out)
    elif isinstance(node, IfThenElse):
        likely = "  # likely" if node.likely else ""
        out.append(f"{pad}if {_plain(node.cond)}:{likely}")
        _stmt_lines(node.then_case, indent + 1, out)
        if node.else_case is not None:
            out.append(pad + "else:")
            _stmt_lines(node.else_case, indent + 1, out)
    elif isinstance(node, LetStmt):
        out.append(f"{pad}{node.var.name} = {_plain(node.value)}")
        _stmt_lines(node.body, indent, out)
    elif isinstance(node, Evaluate):
        if not (isinstance(node.value, Var) and node.value.name == "nop"):
            out.append(pad + _plain(node.value))
        elif not out or out[-1].rstrip().endswith(":"):
            out.append(pad + "pass")
    else:
        out.append(f"{pad}<{type(node).__name__}>")


def stmt_to_str(node: Stmt, indent: int = 0) -> str:
    lines: list[str] = []
    _stmt_lines(node, indent, lines)
    return "\n".join(lines)


def func_to_str(func: PrimFunc) -> str:
    params = ", ".join(
        f"{b.name}: {b.dtype}[{', '.join(_plain(s) for s in b.shape)}]" for b in func.params
    )
    lines = [f"def {func.name}({params}):"]
    _stmt_lines(func.body, 1, lines)
    return "\n".join(lines)


def node_to_str(node: Node) -> str:
    """The text of any node: a function, a statement or an expression."""
    if isinstance(node, PrimFunc):
        return func_to_str(node)
    if isinstance(node, Stmt):
        return stmt_to_str(node)
    if isinstance(node, Expr):
        return expr_to_str(node)
    return f"<{type(node).__name__}>"


register_printer(node_to_str)
