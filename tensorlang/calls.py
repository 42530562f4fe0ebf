"""Calls out of generated code: C functions, LLVM intrinsics, and the regions they work on.

Part of the loop-IR layer. `call_extern` calls a C function linked into the process (see
`extern` for how to make a symbol visible to the JIT); `call_llvm_intrin` calls an LLVM
intrinsic such as `llvm.x86.avx512.vpdpbusd.512`; `reinterpret` reinterprets the bits of a value
as another type of the same size (a bitcast, e.g. four uint8 as one int32). A `TensorRegion` is
what the `lower_fn` of a tensor intrinsic and the `fcompute` of an extern stage receive for each
tensor: a buffer and the position of the region inside it, with vector loads, stores and
pointers expressed in the region's own (local) indices.
"""

from __future__ import annotations

from collections.abc import Sequence

from .dtype import HANDLE, DType, as_dtype
from .expr import BinaryOp, Expr, ExprLike, _frozen, as_expr, binary, const
from .ir import Buffer, BufferLoad, BufferStore, Broadcast, Ramp, Stmt


@_frozen
class CallExtern(Expr):
    """A call of the C function `symbol`; `returns_void` calls it for its effect only."""

    symbol: str
    args: tuple[Expr, ...]
    dtype: DType
    returns_void: bool = False


@_frozen
class CallLLVMIntrin(Expr):
    """A call of the LLVM intrinsic `name` (declared from the argument and result types)."""

    name: str
    args: tuple[Expr, ...]
    dtype: DType


@_frozen
class Reinterpret(Expr):
    """The bits of `value` read as `dtype` (same total size): LLVM's bitcast."""

    value: Expr
    dtype: DType


@_frozen
class AddressOf(Expr):
    """The address of element `index` (flat) of `buffer`, a pointer for C functions."""

    buffer: Buffer
    index: Expr
    dtype: DType = HANDLE


def _call_args(args: Sequence[object]) -> tuple[Expr, ...]:
    out = []
    for a in args:
        if isinstance(a, TensorRegion):
            out.append(a.access_ptr())
        elif isinstance(a, Buffer):
            out.append(AddressOf(a, const(0)))
        else:
            out.append(as_expr(a))  # type: ignore[arg-type]
    return tuple(out)


def call_extern(dtype: str | DType, symbol: str, *args: object) -> CallExtern:
    """Call the C function `symbol` with `args` (expressions, or regions/buffers, passed as
    pointers). `dtype` is its return type; "void" for a function returning nothing.

    The symbol must be visible to the JIT: a function of a shared library loaded with
    `llvmlite.binding.load_library_permanently(path)` (or already in the process, e.g. libc),
    or an address registered with `llvmlite.binding.add_symbol(symbol, address)` (for example a
    `ctypes` callback or a `cffi` function's address).
    """
    if not isinstance(symbol, str) or not symbol.isidentifier():
        raise ValueError(f"call_extern: {symbol!r} is not a C identifier")
    if dtype == "void":
        return CallExtern(symbol, _call_args(args), as_dtype("int32"), returns_void=True)
    return CallExtern(symbol, _call_args(args), as_dtype(dtype))


def call_llvm_intrin(dtype: str | DType, name: str, *args: ExprLike) -> CallLLVMIntrin:
    """Call the LLVM intrinsic `name` (e.g. "llvm.x86.avx512.vpdpbusd.512") returning `dtype`
    (e.g. "int32x16"); the argument types are those of `args`, so pass exactly the vector types
    the intrinsic takes (`reinterpret` converts between equally sized ones)."""
    if not isinstance(name, str) or not name.startswith("llvm."):
        raise ValueError(f"call_llvm_intrin: {name!r} is not an LLVM intrinsic name (llvm.*)")
    return CallLLVMIntrin(name, tuple(as_expr(a) for a in args), as_dtype(dtype))


def reinterpret(value: ExprLike, dtype: str | DType) -> Expr:
    """`value`'s bits as `dtype`, e.g. uint8x4 -> int32 or int32x16 -> int8x64.

    Raises:
        ValueError: the sizes differ.
    """
    e = as_expr(value)
    t = as_dtype(dtype)
    if e.dtype.bits * e.dtype.lanes != t.bits * t.lanes:
        raise ValueError(f"reinterpret: {e.dtype} and {t} have different sizes")
    return e if e.dtype == t else Reinterpret(e, t)


def _flat(shape: Sequence[Expr], indices: Sequence[Expr]) -> Expr:
    index: Expr = indices[0] if indices else const(0)
    for extent, i in zip(shape[1:], indices[1:]):
        index = binary(BinaryOp.ADD, binary(BinaryOp.MUL, index, extent), i)
    return index


class TensorRegion:
    """A region of a tensor's buffer starting at `base` (one index per buffer dimension).

    Local indices address the region's trailing `ndim` dimensions (those of the intrinsic's own
    placeholder); the leading buffer dimensions stay at `base`.
    """

    def __init__(self, buffer: Buffer, base: Sequence[Expr], ndim: int | None = None):
        self.buffer = buffer
        self.base = tuple(base)
        self.ndim = len(self.base) if ndim is None else ndim

    @property
    def dtype(self) -> str:
        """The element type of the buffer."""
        return str(self.buffer.dtype)

    @property
    def data(self) -> Expr:
        """A pointer to the region's first element (what C functions take)."""
        return self.access_ptr()

    def _index(self, local: Sequence[ExprLike] | ExprLike | None) -> Expr:
        if local is None:
            local = [0] * self.ndim
        if not isinstance(local, (list, tuple)):
            local = [local]
        if len(local) != self.ndim:
            raise IndexError(f"region of {self.buffer.name} has {self.ndim} local dimensions, "
                             f"got {len(local)} indices")
        lead = len(self.base) - self.ndim
        full = list(self.base[:lead]) + [
            binary(BinaryOp.ADD, b, as_expr(i)) for b, i in zip(self.base[lead:], local)]
        return _flat(self.buffer.shape, full)

    def access_ptr(self, local: Sequence[ExprLike] | None = None) -> Expr:
        """The address of the element at `local` (the region's start by default)."""
        return AddressOf(self.buffer, self._index(local))

    def vload(self, local: Sequence[ExprLike] | ExprLike, dtype: str | DType | None = None) -> Expr:
        """Load `dtype`'s lanes (the buffer's element type, e.g. "uint8x64") contiguously from
        `local`; a scalar dtype loads one element."""
        t = self.buffer.dtype if dtype is None else as_dtype(dtype)
        if t.element != self.buffer.dtype:
            raise TypeError(f"vload of {self.buffer.name}: {t} is not a vector of "
                            f"{self.buffer.dtype} (reinterpret the result instead)")
        index = self._index(local)
        if t.lanes > 1:
            index = Ramp(index, const(1, index.dtype), t.lanes, index.dtype.with_lanes(t.lanes))
        return BufferLoad(self.buffer, index, t)

    def vstore(self, local: Sequence[ExprLike] | ExprLike, value: ExprLike) -> Stmt:
        """Store `value` (a vector of the buffer's element type, or a scalar) at `local`."""
        v = as_expr(value)
        if v.dtype.element != self.buffer.dtype:
            raise TypeError(f"vstore into {self.buffer.name}: {v.dtype} is not a vector of "
                            f"{self.buffer.dtype}")
        index = self._index(local)
        if v.dtype.lanes > 1:
            index = Ramp(index, const(1, index.dtype), v.dtype.lanes,
                         index.dtype.with_lanes(v.dtype.lanes))
        return BufferStore(self.buffer, index, v)

    def __repr__(self) -> str:
        return f"TensorRegion({self.buffer.name}, base=({', '.join(map(str, self.base))}))"


def broadcast(value: ExprLike, lanes: int) -> Expr:
    """`value` repeated in `lanes` lanes (a vector expression for intrinsic arguments)."""
    e = as_expr(value)
    return Broadcast(e, lanes, e.dtype.with_lanes(lanes))
