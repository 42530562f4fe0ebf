"""Argument normalisation shared by the compute definitions: pairs, padding, constant shapes.

TVM's conventions (shared/API.md): stride and dilation are an int or an (h, w) pair; padding is an
int, (pad_h, pad_w), (top, left, bottom, right), "SAME" or "VALID". Every helper names the argument
it rejects, so a bad call fails at the compute, not deep inside lowering.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl
from tensorlang.arith import const_value
from tensorlang.expr import Expr

PaddingLike = int | str | Sequence[int]


def pack_width(dtype: str) -> int:
    """The block of the packed operand layouts (conv2d output channels, GEMM column panels):
    the lanes of one `dtype` vector of the current target (`tl.Target.current()`: 16 float32
    with AVX-512, 8 with AVX2, 4 with SSE), so that the innermost packed axis is exactly one
    vector. Read when the compute is defined; schedules read it back from the packed shape."""
    return tl.Target.current().vector_lanes(dtype)


def pack_height() -> int:
    """Rows of the left operand's packed panels in a matrix product: the register block height
    of the current target's fallback GEMM schedule (6 with 16 vector registers, whose
    6 rows x 2 vectors fill 12 accumulators; 4 with 32, as in its 4 x 4 block), so that a block
    reads its rows as one contiguous stream. Read when the compute is defined."""
    return 6 if tl.Target.current().vector_registers < 32 else 4


def as_pair(value: int | Sequence[int], name: str) -> tuple[int, int]:
    """An int or a pair of positive ints as an (h, w) pair."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int or an (h, w) pair, got {value!r}")
    if isinstance(value, int):
        pair = (value, value)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        pair = (value[0], value[1])
    else:
        raise TypeError(f"{name} must be an int or an (h, w) pair, got {value!r}")
    for v in pair:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must hold ints, got {value!r}")
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {value!r}")
    return pair


def get_pad_tuple(padding: PaddingLike, kernel: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) padding for a window of effective size `kernel` (h, w).

    "SAME" pads `kernel - 1` in total per dimension, the odd pixel at the top/left (TVM's rule,
    independent of the stride); "VALID" pads nothing.
    """
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return (0, 0, 0, 0)
        if mode == "SAME":
            total_h, total_w = kernel[0] - 1, kernel[1] - 1
            top, left = (total_h + 1) // 2, (total_w + 1) // 2
            return (top, left, total_h - top, total_w - left)
        raise ValueError(f"padding must be 'SAME' or 'VALID' when a string, got {padding!r}")
    if isinstance(padding, bool):
        raise TypeError(f"padding must be an int, a tuple or 'SAME'/'VALID', got {padding!r}")
    if isinstance(padding, int):
        values: tuple[int, ...] = (padding,) * 4
    elif isinstance(padding, (tuple, list)) and len(padding) == 2:
        values = (padding[0], padding[1], padding[0], padding[1])
    elif isinstance(padding, (tuple, list)) and len(padding) == 4:
        values = tuple(padding)
    else:
        raise TypeError(
            "padding must be an int, (pad_h, pad_w), (top, left, bottom, right), 'SAME' or "
            f"'VALID', got {padding!r}"
        )
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"padding must hold ints, got {padding!r}")
        if v < 0:
            raise ValueError(f"padding must be >= 0, got {padding!r}")
    return values  # type: ignore[return-value]


def static_dim(dim: object) -> int | None:
    """The value of a shape dimension when it is a constant, None when symbolic."""
    if isinstance(dim, int):
        return dim
    return const_value(dim)  # type: ignore[arg-type]


def dims(tensor: tl.Tensor) -> tuple[int | Expr, ...]:
    """The shape of `tensor` with its constant dims as ints, its symbolic ones as expressions."""
    return tuple(d if (v := static_dim(d)) is None else v for d in tensor.shape)


def const_shape(tensor: tl.Tensor, what: str) -> tuple[int, ...]:
    """The shape of `tensor` as ints; ops with windows and blocked layouts need static shapes."""
    dims = tuple(static_dim(d) for d in tensor.shape)
    if any(d is None for d in dims):
        raise ValueError(f"{what}: tensor {tensor.name} must have a static shape, got {tensor.shape}")
    return dims  # type: ignore[return-value]


def check_tensor(value: object, name: str, ndim: int | None = None) -> tl.Tensor:
    """`value` as a Tensor of `ndim` dimensions, or a TypeError/ValueError naming `name`."""
    if not isinstance(value, tl.Tensor):
        raise TypeError(f"{name} must be a tensorlang Tensor, got {type(value).__name__}")
    if ndim is not None and value.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {_shape_str(value)}")
    return value


def check_same_dim(a: object, b: object, what: str) -> None:
    """Raise ValueError when two dimensions are both static and differ."""
    va, vb = static_dim(a), static_dim(b)
    if va is not None and vb is not None and va != vb:
        raise ValueError(f"{what}: {va} != {vb}")


def check_axis(axis: int, ndim: int, name: str = "axis") -> int:
    """A possibly negative `axis` of an `ndim`-dimensional tensor as a non-negative index."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"{name} must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name} {axis} is out of range for a tensor of {ndim} dimensions")
    return axis % ndim


def pooled_size(size: int, before: int, after: int, window: int, stride: int,
                ceil_mode: bool) -> int:
    """How many windows of `window` (dilated) taps a pooling at `stride` places along an axis
    of `size` padded by `before` and `after`: rounded up with `ceil_mode`, but a last window
    must start inside the input or its front padding (PyTorch's rule, ONNX's since opset 19):
    a 2-wide window at stride 3 over 4 pixels padded by 1 makes 2 windows, not 3."""
    span = size + before + after - window
    count = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (count - 1) * stride >= size + before:
        count -= 1
    return count


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _shape_str(t: tl.Tensor) -> str:
    return "(" + ", ".join(str(d) for d in t.shape) + ")"


def json_args(*args: object) -> tuple:
    """Arguments as a JSON-friendly tuple (lists become tuples), for an op's workload attribute."""

    def convert(v: object) -> object:
        if isinstance(v, (list, tuple)):
            return tuple(convert(x) for x in v)
        return v

    return tuple(convert(a) for a in args)
