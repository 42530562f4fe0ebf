"""Data types of tensor elements and expressions, and the rules for mixing them.

The first layer of the data flow: every expression node carries a `DType`. The dtype of a binary
operation on two expressions (`promote`), TVM's rule:

| operands                    | result                     | examples                           |
|-----------------------------|----------------------------|------------------------------------|
| same dtype                  | that dtype                 | f32 * f32 -> f32                   |
| float and integer (or bool) | the float's dtype          | f32 * i32 -> f32, i64 * f16 -> f16 |
| two floats                  | the wider                  | f32 + f64 -> f64                   |
| two integers (or bools)     | numpy's `np.promote_types` | i32 + i64 -> i64, u8 + i8 -> i16   |

So `A[i] * i` stays float32 and an int tensor times a float32 tensor is float32: a float never
widens to float64 because an index or an integer tensor joined it (numpy would say float64).
Python scalars are "weak" (NEP 50): `x * 2` and `x * 0.5` keep a float x's dtype, and `i + 0.5`
on an integer i becomes float64 as in numpy. True division `/` of integers gives float64.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

import numpy as np


class DTypeKind(enum.Enum):
    """The arithmetic family of a dtype."""

    BOOL = "bool"
    INT = "int"
    UINT = "uint"
    FLOAT = "float"
    BFLOAT = "bfloat"
    HANDLE = "handle"


@dataclass(frozen=True, slots=True)
class DType:
    """An element type, optionally a vector of `lanes` elements (used after vectorization)."""

    kind: DTypeKind
    bits: int
    lanes: int = 1

    def __str__(self) -> str:
        if self.kind in (DTypeKind.BOOL, DTypeKind.HANDLE):
            base = self.kind.value
        else:
            base = f"{self.kind.value}{self.bits}"
        return base if self.lanes == 1 else f"{base}x{self.lanes}"

    def __repr__(self) -> str:
        return f"DType({str(self)!r})"

    @property
    def is_float(self) -> bool:
        """Whether this is a floating-point type (bfloat16 included)."""
        return self.kind is DTypeKind.FLOAT or self.kind is DTypeKind.BFLOAT

    @property
    def is_int(self) -> bool:
        """Signed integer."""
        return self.kind is DTypeKind.INT

    @property
    def is_uint(self) -> bool:
        """Whether this is an unsigned integer type."""
        return self.kind is DTypeKind.UINT

    @property
    def is_integer(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.kind in (DTypeKind.INT, DTypeKind.UINT)

    @property
    def is_bool(self) -> bool:
        """Whether this is `bool`."""
        return self.kind is DTypeKind.BOOL

    @property
    def is_vector(self) -> bool:
        """Whether this has more than one lane."""
        return self.lanes > 1

    @property
    def element(self) -> DType:
        """The scalar type of one lane."""
        return self if self.lanes == 1 else DType(self.kind, self.bits, 1)

    def with_lanes(self, lanes: int) -> DType:
        """The same element type with `lanes` lanes."""
        return DType(self.kind, self.bits, lanes)

    @property
    def itemsize(self) -> int:
        """Bytes per scalar element as stored in memory (bool is one byte, as in numpy)."""
        return 1 if self.kind is DTypeKind.BOOL else self.bits // 8

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype of one element (bfloat16: ml_dtypes' type, once imported)."""
        try:
            return np.dtype(str(self.element))
        except TypeError:
            if self.kind is DTypeKind.BFLOAT:
                raise TypeError("bfloat16 arrays need ml_dtypes (import ml_dtypes, then pass "
                                "arrays of dtype ml_dtypes.bfloat16)") from None
            raise

    def min_value(self) -> int | float:
        """The smallest value of the type (of one lane)."""
        return _limits(self)[0]

    def max_value(self) -> int | float:
        """The largest value of the type (of one lane)."""
        return _limits(self)[1]


@functools.cache
def _limits(t: DType) -> tuple[int | float, int | float]:
    if t.is_bool:
        return 0, 1
    if t.is_float:
        return float(-np.inf), float(np.inf)
    info = np.iinfo(t.numpy)
    return int(info.min), int(info.max)


_BY_NAME: dict[str, DType] = {
    "bool": DType(DTypeKind.BOOL, 1),
    "int8": DType(DTypeKind.INT, 8),
    "int16": DType(DTypeKind.INT, 16),
    "int32": DType(DTypeKind.INT, 32),
    "int64": DType(DTypeKind.INT, 64),
    "uint8": DType(DTypeKind.UINT, 8),
    "uint16": DType(DTypeKind.UINT, 16),
    "uint32": DType(DTypeKind.UINT, 32),
    "uint64": DType(DTypeKind.UINT, 64),
    "float16": DType(DTypeKind.FLOAT, 16),
    "bfloat16": DType(DTypeKind.BFLOAT, 16),
    "float32": DType(DTypeKind.FLOAT, 32),
    "float64": DType(DTypeKind.FLOAT, 64),
}

BOOL = _BY_NAME["bool"]
INT32 = _BY_NAME["int32"]
INT64 = _BY_NAME["int64"]
FLOAT32 = _BY_NAME["float32"]
FLOAT64 = _BY_NAME["float64"]
HANDLE = DType(DTypeKind.HANDLE, 64)
"""The dtype of pointer variables (buffer data)."""

SUPPORTED = tuple(_BY_NAME)


def as_dtype(value: str | DType | np.dtype | type) -> DType:
    """Parse a dtype given as a string ("float32", "float32x16"), a numpy dtype or a DType.

    Raises:
        TypeError: `value` names no supported dtype.
    """
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        name, _, lanes = value.partition("x")
        if name in _BY_NAME and (not lanes or lanes.isdigit()):
            base = _BY_NAME[name]
            return base.with_lanes(int(lanes)) if lanes else base
        raise TypeError(f"unknown dtype {value!r}; supported: {', '.join(SUPPORTED)}")
    try:
        name = np.dtype(value).name
    except TypeError as exc:
        raise TypeError(f"unknown dtype {value!r}; supported: {', '.join(SUPPORTED)}") from exc
    if name not in _BY_NAME:
        raise TypeError(f"unsupported dtype {name!r}; supported: {', '.join(SUPPORTED)}")
    return _BY_NAME[name]


def promote(a: DType, b: DType) -> DType:
    """The dtype of a binary operation on `a` and `b` (the table in the module docstring): a
    float next to an integer keeps the float's dtype, otherwise numpy's promotion."""
    lanes = max(a.lanes, b.lanes)
    if a.element == b.element:
        return a.element.with_lanes(lanes)
    if a.is_float != b.is_float:
        return (a if a.is_float else b).element.with_lanes(lanes)
    if a.is_float and (a.kind is DTypeKind.BFLOAT or b.kind is DTypeKind.BFLOAT):
        wider = a if a.bits > b.bits else b if b.bits > a.bits else as_dtype("float32")
        return wider.element.with_lanes(lanes)  # bfloat16 with float16 meet in float32
    return as_dtype(np.promote_types(a.numpy, b.numpy)).with_lanes(lanes)


def scalar_dtype_for(value: bool | int | float, other: DType | None) -> DType:
    """The dtype a Python scalar takes next to an operand of dtype `other` (NEP 50 weak scalars).

    A bool stays bool unless `other` is numeric; an int takes `other`'s dtype when that is numeric
    (int64 when alone or next to a bool); a float takes `other`'s dtype when that is a float and
    float64 otherwise, so an integer operand is promoted rather than the float truncated.
    """
    if isinstance(value, bool):
        return other.element if other is not None else BOOL
    if isinstance(value, int):
        if other is not None and not other.is_bool:
            return other.element
        return INT64 if not -(2**31) <= value < 2**31 else INT32
    if isinstance(value, float):
        if other is not None and other.is_float:
            return other.element
        return FLOAT64
    raise TypeError(f"cannot use {type(value).__name__} {value!r} as a scalar expression")
