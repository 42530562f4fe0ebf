"""What every runnable model shares: its inputs and outputs by name, the checks of a call, and
latency statistics. A built `Module` and a `LoadedModule` (an exported library) both derive from
`ModelBase`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorlang.expr import Var
from tensorlang.runtime import BenchmarkResult

from ..symbolic import dim_str, evaluate


@dataclass(frozen=True)
class TensorInfo:
    """The name, shape and dtype of a model input or output."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{list(self.shape)}"

    @functools.cached_property
    def numpy_dtype(self) -> np.dtype | None:
        """The dtype as numpy's (an array's is compared with it at every call: comparing the
        names took 4 us, a decode step's 60 inputs a quarter of a millisecond), or None for
        one numpy does not know without its extension (bfloat16 before ml_dtypes loads)."""
        try:
            return np.dtype(self.dtype)
        except TypeError:
            return None

    @functools.cached_property
    def static(self) -> bool:
        """Whether every dim is a number."""
        return all(isinstance(d, int) for d in self.shape)


def as_array(info: TensorInfo, value: Any) -> np.ndarray:
    """`value` (a numpy array, a PyTorch tensor, anything with DLPack or the array interface) as
    a numpy array of `info`'s dtype and shape, viewing its memory where it can (no copy).

    Raises:
        TypeError: a value that is no array, cannot be viewed (a tensor on another device or one
            that requires grad), or has the wrong dtype.
        ValueError: the wrong shape.
    """
    array = value
    if not isinstance(value, np.ndarray):
        kind = type(value).__name__
        if not (hasattr(value, "__dlpack__") or hasattr(value, "__array_interface__")):
            raise TypeError(f"input {info.name!r} must be a numpy array or an object with DLPack "
                            f"or the array interface ({info}), got {kind}")
        try:
            # DLPack first: it views a tensor's memory and says when it cannot (another device)
            array = (np.from_dlpack(value) if hasattr(value, "__dlpack__")
                     else np.asarray(value))
        except (TypeError, ValueError, BufferError, RuntimeError) as err:
            if not hasattr(value, "__array_interface__"):
                raise TypeError(f"input {info.name!r}: cannot view {kind} as a numpy array "
                                f"({info}): {err}") from err
            array = np.asarray(value)
    if array.dtype != info.numpy_dtype and str(array.dtype) != info.dtype:
        raise TypeError(f"input {info.name!r} must have dtype {info.dtype}, got {array.dtype}")
    # (symbolic dims are checked by the module's bind; a tuple compare would build expressions)
    if info.static and array.shape != info.shape:
        raise ValueError(f"input {info.name!r} must have shape {info.shape}, got {array.shape}")
    return array


def check_inputs(infos: Sequence[TensorInfo], inputs: Mapping[str, Any]) -> list[np.ndarray]:
    """The inputs in the model's order as numpy arrays (`as_array`), checked against `infos`.

    Raises:
        TypeError: a missing or unknown input name, a value that is not an array, or the wrong
            dtype.
        ValueError: the wrong shape.
    """
    expected = {i.name for i in infos}
    unknown = sorted(set(inputs) - expected)
    missing = [i.name for i in infos if i.name not in inputs]
    if unknown or missing:
        listing = ", ".join(str(i) for i in infos)
        what = f"unknown model input(s) {unknown}" if unknown else \
            f"missing model input(s) {missing}"
        raise TypeError(f"{what}; the model takes {listing}")
    return [as_array(info, inputs[info.name]) for info in infos]


def random_inputs(infos: Sequence[TensorInfo], seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs of the right shapes and dtypes (normal floats, zero integers) for benchmarking."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in infos:
        kind = np.dtype(i.dtype).kind
        value = rng.standard_normal(i.shape) if kind == "f" else np.zeros(i.shape)
        out[i.name] = value.astype(i.dtype)
    return out


class ModelBase:
    """Calling and timing a model; subclasses say how the inputs become outputs."""

    inputs: list[TensorInfo]
    outputs: list[TensorInfo]

    def _execute(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError

    def __call__(self, **inputs: Any) -> list[np.ndarray]:
        """Run the model on inputs given by name: numpy arrays, PyTorch tensors, or anything
        with DLPack or the array interface (viewed without a copy where the layout allows).
        Returns the outputs, in order, as numpy arrays of their own (a later call does not
        overwrite them).

        Raises:
            TypeError, ValueError: see `check_inputs`.
        """
        return self._execute(check_inputs(self.inputs, inputs))

    def benchmark(self, repeat: int = 10, number: int | None = None,
                  min_repeat_ms: float = 50.0,
                  inputs: Mapping[str, np.ndarray] | None = None) -> BenchmarkResult:
        """Latency statistics of whole-model runs, in seconds per run.

        Args:
            repeat: how many timed repeats (each gives one mean).
            number: runs per repeat (default: enough for `min_repeat_ms`).
            min_repeat_ms: the shortest repeat when `number` is not given.
            inputs: by name (default: random inputs).
        """
        if repeat < 1 or (number is not None and number < 1):
            raise ValueError(f"repeat and number must be >= 1, got {repeat} and {number}")
        arrays = check_inputs(self.inputs, inputs or random_inputs(self.inputs))
        start = time.perf_counter()
        self._execute(arrays)  # warm caches and the thread pool
        once = max(time.perf_counter() - start, 1e-7)
        if number is None:
            number = max(1, int(min_repeat_ms / 1e3 / once))
        results = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                self._execute(arrays)
            results.append((time.perf_counter() - start) / number)
        return BenchmarkResult(tuple(results))


def bind_sizes(inputs: Sequence[TensorInfo], bounds: Mapping[str, tuple[int, int]],
               arrays: Sequence[np.ndarray]) -> dict[str, int]:
    """The shape variables' values from the input arrays of a model with symbolic `inputs`.

    Raises:
        ValueError: a wrong rank, a static dim that differs, two inputs that disagree on a
            variable, or a size outside the bounds (the message names the input and dim).
    """
    values: dict[str, int] = {}
    where: dict[str, str] = {}
    for info, a in zip(inputs, arrays):
        if a.ndim != len(info.shape):
            raise ValueError(f"input {info.name!r} must have {len(info.shape)} dimensions "
                             f"{_shape_text(info.shape)}, got shape {a.shape}")
        for axis, (d, actual) in enumerate(zip(info.shape, a.shape)):
            if isinstance(d, Var):
                if d.name in values and values[d.name] != actual:
                    raise ValueError(
                        f"input {info.name!r} dim {axis} ({d.name}) is {actual}, but "
                        f"{where[d.name]} gives {d.name} = {values[d.name]}")
                low, high = bounds.get(d.name, (1, 2**31 - 1))
                if not low <= actual <= high:
                    raise ValueError(
                        f"input {info.name!r} dim {axis} ({d.name}) is {actual}, outside "
                        f"the bounds [{low}, {high}] the model was built for")
                values[d.name] = actual
                where[d.name] = f"input {info.name!r} dim {axis}"
    for info, a in zip(inputs, arrays):
        for axis, (d, actual) in enumerate(zip(info.shape, a.shape)):
            if isinstance(d, Var):
                continue
            try:
                expected = evaluate(d, values)
            except (KeyError, ValueError):
                raise ValueError(f"input {info.name!r} dim {axis} ({dim_str(d)}) cannot be "
                                 "bound from the input shapes") from None
            if expected != actual:
                raise ValueError(f"input {info.name!r} dim {axis} must be {dim_str(d)} = "
                                 f"{expected}, got {actual} (shape {a.shape})")
    return values


def _shape_text(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(dim_str(d) for d in shape) + ")"
