"""Argument checking: every array is validated before native code touches it.

A kernel's `Signature` (parameter names, dtypes, shapes with symbolic dimensions, which
parameters are written, the bound checks whose failure its status reports) comes from its
PrimFunc, or from the JSON sidecar of an exported library, so both kinds of Module check
arguments the same way. Checks are precomputed per
parameter. A call with plain numpy arrays is checked in C first (runtime/fastcall.c); this checker
takes every call that the C path declines, converts other array types and raises the errors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from ..expr import Binary, BinaryOp, Cast, Const, Expr, Var
from ..ir import BufferStore, PrimFunc
from ..lower.bound_check import CheckSite, checks_of
from ..visitor import post_order_visit

ShapeEntry = Union[int, str, tuple]
"""A dimension: a constant, the name of a shape variable, or `(op, left, right)` of entries."""

_INT32_MAX = 2**31 - 1

_OPS = {
    BinaryOp.ADD.value: lambda a, b: a + b,
    BinaryOp.SUB.value: lambda a, b: a - b,
    BinaryOp.MUL.value: lambda a, b: a * b,
    BinaryOp.FLOORDIV.value: lambda a, b: a // b if b else 0,
    BinaryOp.FLOORMOD.value: lambda a, b: a % b if b else 0,
    BinaryOp.MIN.value: min,
    BinaryOp.MAX.value: max,
}


def _shape_entry(e: Expr, shape_vars: set[str], where: str) -> ShapeEntry:
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        if e.name not in shape_vars:
            raise ValueError(f"{where}: dimension {e.name} is not one of the shape variables")
        return e.name
    if isinstance(e, Cast):
        return _shape_entry(e.value, shape_vars, where)
    if isinstance(e, Binary) and e.op.value in _OPS:
        return (
            e.op.value,
            _shape_entry(e.a, shape_vars, where),
            _shape_entry(e.b, shape_vars, where),
        )
    raise ValueError(f"{where}: unsupported dimension expression {e}")


def evaluate(entry: ShapeEntry, values: dict[str, int]) -> int:
    """The value of a dimension given the shape variables' values."""
    if isinstance(entry, int):
        return entry
    if isinstance(entry, str):
        return values[entry]
    op, a, b = entry
    return _OPS[op](evaluate(a, values), evaluate(b, values))


def _linear(entry: ShapeEntry) -> tuple[str, int, int] | None:
    """`(var, scale, offset)` when `entry` is `var * scale + offset`, else None."""
    if isinstance(entry, str):
        return entry, 1, 0
    if not isinstance(entry, tuple):
        return None
    op, a, b = entry
    if op in ("+", "-", "*") and isinstance(b, int):
        inner = _linear(a)
        if inner is None:
            return None
        var, scale, offset = inner
        if op == "*":
            return var, scale * b, offset * b
        return var, scale, offset + (b if op == "+" else -b)
    if op in ("+", "*") and isinstance(a, int):
        return _linear((op, b, a))
    return None


def _entry_str(entry: ShapeEntry) -> str:
    if isinstance(entry, tuple):
        op, a, b = entry
        if op in ("min", "max"):
            return f"{op}({_entry_str(a)}, {_entry_str(b)})"
        return f"({_entry_str(a)} {op} {_entry_str(b)})"
    return str(entry)


@dataclass(frozen=True)
class ParamSpec:
    """What one argument must look like."""

    name: str
    dtype: np.dtype
    shape: tuple[ShapeEntry, ...]
    is_output: bool

    def shape_str(self) -> str:
        return (
            "("
            + ", ".join(_entry_str(e) for e in self.shape)
            + ("," if len(self.shape) == 1 else "")
            + ")"
        )


def _to_list(entry: ShapeEntry) -> Any:
    return [entry[0], _to_list(entry[1]), _to_list(entry[2])] if isinstance(entry, tuple) else entry


def _from_list(entry: Any) -> ShapeEntry:
    return (
        (entry[0], _from_list(entry[1]), _from_list(entry[2])) if isinstance(entry, list) else entry
    )


@dataclass(frozen=True)
class Signature:
    """The parameters of a kernel, in call order, and its shape variables.

    `checks` lists the bound-checked accesses of a kernel that returns a status: status k > 0
    means that the index of `checks[k - 1]` fell outside its buffer.
    """

    name: str
    params: tuple[ParamSpec, ...]
    shape_vars: tuple[str, ...]
    checks: tuple[CheckSite, ...] = ()

    @staticmethod
    def from_primfunc(func: PrimFunc) -> Signature:
        names = {v.name for v in func.shape_vars}
        if len(names) != len(func.shape_vars):
            raise ValueError(f"{func.name}: two shape variables share a name")
        written: set[object] = set()

        def visit(node: object) -> None:
            if isinstance(node, BufferStore):
                written.add(node.buffer.data)
                written.add(node.buffer.name)

        post_order_visit(func.body, visit)
        params = []
        for i, buf in enumerate(func.params):
            where = f"{func.name} argument {i} ({buf.name})"
            shape = tuple(_shape_entry(s, names, where) for s in buf.shape)
            is_output = buf.data in written or buf.name in written
            params.append(ParamSpec(buf.name, buf.dtype.numpy, shape, is_output))
        shape_vars = tuple(v.name for v in func.shape_vars)
        return Signature(func.name, tuple(params), shape_vars, checks_of(func))

    def to_json(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "shape_vars": list(self.shape_vars),
                "params": [
                    {
                        "name": p.name,
                        "dtype": p.dtype.name,
                        "shape": [_to_list(e) for e in p.shape],
                        "is_output": p.is_output,
                    }
                    for p in self.params
                ],
                "checks": [
                    {"buffer": c.buffer, "stage": c.stage, "is_store": c.is_store}
                    for c in self.checks
                ],
            },
            indent=1,
        )

    @staticmethod
    def from_json(data: dict[str, Any]) -> Signature:
        params = tuple(
            ParamSpec(
                p["name"],
                np.dtype(p["dtype"]),
                tuple(_from_list(e) for e in p["shape"]),
                bool(p["is_output"]),
            )
            for p in data["params"]
        )
        checks = tuple(
            CheckSite(c["buffer"], c["stage"], bool(c["is_store"])) for c in data.get("checks", ())
        )
        return Signature(data["name"], params, tuple(data["shape_vars"]), checks)

    def index_error(self, status: int) -> IndexError:
        """The error a kernel's nonzero `status` stands for."""
        if not 0 < status <= len(self.checks):
            return IndexError(f"{self.name}: an index was out of range (status {status})")
        site = self.checks[status - 1]
        shapes = {p.name: p.shape_str() for p in self.params}
        shape = f" (shape {shapes[site.buffer]})" if site.buffer in shapes else ""
        return IndexError(
            f"{self.name}: an index read from data was out of range {site.describe()}"
            f"{shape}; out-of-range reads gave 0 and out-of-range writes were skipped"
        )


class ArgChecker:
    """Validates call arguments against a Signature and returns what the native call needs."""

    def __init__(self, sig: Signature) -> None:
        self.sig = sig
        bare = {e for spec in sig.params for e in spec.shape if isinstance(e, str)}
        # A variable that is never a whole dimension is solved from its first linear use,
        # e.g. n from a dimension n * 16.
        solved: dict[tuple[int, int], tuple[str, int, int]] = {}
        for i, spec in enumerate(sig.params):
            for axis, entry in enumerate(spec.shape):
                lin = _linear(entry) if isinstance(entry, tuple) else None
                if lin is not None and lin[0] not in bare and lin[1] > 0:
                    bare.add(lin[0])
                    solved[(i, axis)] = lin
        self._plans = []
        for i, spec in enumerate(sig.params):
            consts, bound, derived = [], [], []
            for axis, entry in enumerate(spec.shape):
                if isinstance(entry, int):
                    consts.append((axis, entry))
                elif isinstance(entry, str):
                    bound.append((axis, entry, 1, 0))
                else:
                    derived.append((axis, entry))
                    if (i, axis) in solved:
                        bound.append((axis, *solved[(i, axis)]))
            self._plans.append((spec, len(spec.shape), tuple(consts), tuple(bound), tuple(derived)))
        missing = [v for v in sig.shape_vars if v not in bare]
        if missing:
            raise ValueError(
                f"{sig.name}: shape variables {missing} cannot be bound from argument shapes "
                "(they appear in no dimension as var * c + d)"
            )
        self._any_derived = any(plan[4] for plan in self._plans)
        self._outputs = [i for i, spec in enumerate(sig.params) if spec.is_output]

    def _label(self, i: int) -> str:
        return f"argument {i} ({self.sig.params[i].name}) of {self.sig.name}"

    def check(self, args: tuple[Any, ...]) -> tuple[list[np.ndarray], list[int]]:
        """Validate `args`; return them as numpy arrays and the shape variables' values.

        Raises:
            TypeError: wrong number of arguments, an object that is not an array, a wrong dtype.
            ValueError: a wrong ndim or shape, an inconsistent symbolic dimension, a read-only or
                overlapping output, a non-contiguous or misaligned array.
        """
        plans = self._plans
        if len(args) != len(plans):
            names = ", ".join(p.name for p in self.sig.params)
            raise TypeError(
                f"{self.sig.name} takes {len(plans)} arguments ({names}), got {len(args)}"
            )
        arrays: list[np.ndarray] = []
        values: dict[str, int] = {}
        for i, (arg, (spec, ndim, consts, bound, _derived)) in enumerate(
            zip(args, plans, strict=True)
        ):
            if type(arg) is not np.ndarray:
                arg = self._as_array(i, arg)
            if arg.dtype is not spec.dtype and arg.dtype != spec.dtype:
                raise TypeError(f"{self._label(i)}: expected dtype {spec.dtype}, got {arg.dtype}")
            if arg.ndim != ndim:
                raise ValueError(
                    f"{self._label(i)}: expected {ndim} dimensions {spec.shape_str()}, "
                    f"got shape {arg.shape}"
                )
            shape = arg.shape
            for axis, value in consts:
                if shape[axis] != value:
                    raise ValueError(
                        f"{self._label(i)}: expected shape {spec.shape_str()}, got {shape} "
                        f"(dimension {axis} must be {value})"
                    )
            for axis, var, scale, offset in bound:
                have = values.get(var)
                if have is None:
                    if shape[axis] > _INT32_MAX:
                        raise ValueError(f"{self._label(i)}: dimension {axis} exceeds int32")
                    if scale == 1 and offset == 0:
                        values[var] = shape[axis]
                        continue
                    value, rest = divmod(shape[axis] - offset, scale)
                    if rest or value < 0:
                        raise ValueError(
                            f"{self._label(i)}: dimension {axis} must be "
                            f"{_entry_str(spec.shape[axis])}"
                            f" for some {var} >= 0, got {shape[axis]}"
                        )
                    values[var] = value
                elif scale == 1 and offset == 0 and have != shape[axis]:
                    raise ValueError(
                        f"{self._label(i)}: dimension {axis} is {var} = {shape[axis]}, but an "
                        f"earlier argument bound {var} = {have}"
                    )
            flags = arg.flags
            if not flags.c_contiguous:
                raise ValueError(
                    f"{self._label(i)}: the array is not C-contiguous (a transposed or sliced "
                    "view?); pass np.ascontiguousarray(x) instead"
                )
            if not flags.aligned:
                raise ValueError(f"{self._label(i)}: the array's data is not aligned to its dtype")
            if spec.is_output and not flags.writeable:
                raise ValueError(
                    f"{self._label(i)}: the kernel writes this argument but it is read-only"
                )
            arrays.append(arg)
        if self._any_derived:
            self._check_derived(arrays, values)
        if self._outputs:
            self._check_overlap(arrays)
        return arrays, [values[v] for v in self.sig.shape_vars]

    def _as_array(self, i: int, arg: Any) -> np.ndarray:
        if isinstance(arg, np.ndarray):
            return arg
        try:
            if hasattr(arg, "__dlpack__"):
                return np.from_dlpack(arg)
            if hasattr(arg, "__array_interface__"):
                return np.asarray(arg)
        except (TypeError, ValueError, BufferError, RuntimeError) as exc:
            raise TypeError(
                f"{self._label(i)}: cannot view {type(arg).__name__} as an array: {exc}"
            ) from exc
        raise TypeError(
            f"{self._label(i)}: expected a numpy array or an object supporting DLPack or the "
            f"array interface, got {type(arg).__name__}"
        )

    def _check_derived(self, arrays: list[np.ndarray], values: dict[str, int]) -> None:
        for i, (arr, plan) in enumerate(zip(arrays, self._plans, strict=True)):
            spec = plan[0]
            for axis, entry in plan[4]:
                want = evaluate(entry, values)
                if arr.shape[axis] != want:
                    raise ValueError(
                        f"{self._label(i)}: dimension {axis} must be {_entry_str(entry)} = {want} "
                        f"(shape {spec.shape_str()}), got {arr.shape[axis]}"
                    )

    def _check_overlap(self, arrays: list[np.ndarray]) -> None:
        """Outputs must not share memory with other arguments: the kernel assumes no aliasing."""
        for i in self._outputs:
            out = arrays[i]
            if out.size == 0:
                continue
            for j, other in enumerate(arrays):
                if j != i and other.size and np.may_share_memory(out, other):
                    raise ValueError(
                        f"{self._label(i)} shares memory with {self._label(j)}; the kernel "
                        "assumes its outputs do not overlap other arguments (pass a copy)"
                    )
