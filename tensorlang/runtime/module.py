"""`Module`: a compiled kernel as a safe Python callable on arrays.

The last stage of the data flow. Plain numpy arguments are checked and passed to the native
function in C (runtime/fastcall.c); anything else is checked or converted by runtime/args.py and
passed through a cffi function pointer. A kernel with bound checks returns a status, which becomes
an IndexError after the call. A kernel compiled for another architecture has no address here: it
is shown and exported, and calling it raises.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..codegen.target import Target
from ..ir import PrimFunc
from .args import ArgChecker, Signature
from .export import export_library, open_library
from .fastcall import fast_caller
from .threadpool import native
from .toolchain import require_native


@dataclass(frozen=True)
class BenchmarkResult:
    """Seconds per call: `results` has one mean per repeat."""

    results: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results)

    def __str__(self) -> str:
        return (
            f"mean {self.mean * 1e3:.4f} ms, median {self.median * 1e3:.4f} ms, "
            f"min {self.min * 1e3:.4f} ms over {len(self.results)} repeats"
        )


class Module:
    """A compiled kernel: call it with arrays, time it, show its code, export it.

    Attributes:
        func: the PrimFunc it was compiled from (None for a module loaded from a library).
        target: the Target it was compiled for.
        signature: what each argument must look like.
    """

    def __init__(
        self,
        signature: Signature,
        target: Target,
        address: int | None,
        packed_address: int | None,
        func: PrimFunc | None = None,
        ll: str | None = None,
        assembly: Callable[[], str] | None = None,
        export_ll: Callable[[], str] | None = None,
        keepalive: Any = None,
    ) -> None:
        self.signature = signature
        self.target = target
        self.func = func
        self._ll = ll
        self._assembly = assembly
        self._export_ll = export_ll
        self._keepalive = keepalive
        self._checker = ArgChecker(signature)
        if address is None or packed_address is None:  # code for another architecture
            self._fn = self._packed = self._fast = None
            return
        ffi = native().ffi
        self._ffi = ffi
        arg_types = ["void *"] * len(signature.params) + ["int64_t"] * len(signature.shape_vars)
        ret = "int32_t" if signature.checks else "void"
        self._fn = ffi.cast(f"{ret} (*)({', '.join(arg_types) or 'void'})", address)
        self._packed = ffi.cast("void (*)(int64_t *)", packed_address)
        self._fast = fast_caller(signature, address)

    @property
    def name(self) -> str:
        """The kernel's name (the `name` given to `build`)."""
        return self.signature.name

    def __repr__(self) -> str:
        params = ", ".join(f"{p.name}: {p.dtype}{p.shape_str()}" for p in self.signature.params)
        return f"<tensorlang.Module {self.name}({params}) target={self.target}>"

    def __call__(self, *args: Any) -> None:
        """Run the kernel on `args` (outputs are written in place).

        Raises:
            TypeError, ValueError: an argument does not match the kernel's signature.
            IndexError: an index read from data fell outside its buffer; the kernel ran to the
                end with such reads giving 0 and such writes skipped.
        """
        fast = self._fast
        if fast is not None:
            # Plain numpy arrays are checked and passed in C; anything else (other array types,
            # any argument that fails a check) gives NotImplemented and takes the Python path,
            # which converts it or raises the error naming the argument.
            status = fast(args)
            if status is None:
                return
            if status is not NotImplemented:
                raise self.signature.index_error(status)
        self._require_native()
        arrays, shape_values = self._checker.check(args)
        from_buffer = self._ffi.from_buffer
        status = self._fn(*[from_buffer(a) for a in arrays], *shape_values)
        if status:
            raise self.signature.index_error(status)

    def time_evaluator(
        self, number: int = 10, repeat: int = 3, min_repeat_ms: float = 0
    ) -> Callable[..., BenchmarkResult]:
        """A function that runs the kernel `number` times per repeat and reports seconds per call.

        Args:
            number: calls per repeat (raised until a repeat lasts `min_repeat_ms`).
            repeat: how many means are measured.
            min_repeat_ms: the shortest duration of one repeat, in milliseconds.
        """
        if number < 1 or repeat < 1:
            raise ValueError(f"number and repeat must be >= 1, got {number} and {repeat}")
        self._require_native()

        def evaluate(*args: Any) -> BenchmarkResult:
            arrays, shape_values = self._checker.check(args)
            ffi, lib = self._ffi, native().lib
            keep = [ffi.from_buffer(a) for a in arrays]
            packed = ffi.new(
                "int64_t[]",
                [int(ffi.cast("intptr_t", b)) for b in keep] + shape_values or [0],
            )
            calls = number
            lib.tl_time_packed(self._packed, packed, 1)  # warm caches and the thread pool
            results = []
            for _ in range(repeat):
                seconds = lib.tl_time_packed(self._packed, packed, calls)
                while min_repeat_ms > 0 and seconds * calls * 1e3 < min_repeat_ms:
                    spent = max(seconds * calls * 1e3, 1e-6)
                    calls = max(
                        calls + 1, math.ceil(calls * min(10.0, 1.2 * min_repeat_ms / spent))
                    )
                    seconds = lib.tl_time_packed(self._packed, packed, calls)
                results.append(seconds)
            return BenchmarkResult(tuple(results))

        return evaluate

    def _require_native(self) -> None:
        """Raise unless this machine can run the kernel's code."""
        if self._fn is None:
            require_native(f"kernel {self.name}", self.target)

    def get_source(self, fmt: str = "ll") -> str:
        """The kernel's code: "ll" (LLVM IR), "asm" (assembly) or "ir" (the loop IR)."""
        if fmt == "ir":
            if self.func is None:
                raise ValueError(f"module {self.name} was loaded from a library; it has no loop IR")
            return str(self.func)
        if fmt == "ll" and self._ll is not None:
            return self._ll
        if fmt == "asm" and self._assembly is not None:
            return self._assembly()
        if fmt not in ("ll", "asm"):
            raise ValueError(f"unknown source format {fmt!r}; use 'll', 'asm' or 'ir'")
        raise ValueError(f"module {self.name} was loaded from a library; its {fmt} is not kept")

    def export_library(self, path: str | Path) -> None:
        """Write a shared library with a plain C ABI, a header (`.h`) and a signature (`.json`).

        The library exports `void <name>(T* arg..., int64_t shape_var...)` (`int32_t`, a status,
        for a kernel with bound checks; the header lists what each status means) and the runtime's
        `tl_set_num_threads`; `tensorlang.runtime.load_module(path)` loads it back with argument
        checks.
        """
        if self._export_ll is None:
            raise ValueError(f"module {self.name} was loaded from a library; export the original")
        export_library(self._export_ll(), self.signature, self.target, Path(path))


def load_module(path: str | Path) -> Module:
    """Load a library written by `Module.export_library` as a Module with argument checks.

    Raises:
        FileNotFoundError: the library or its `.json` signature is missing.
    """
    lib = open_library(path)
    return Module(lib.signature, lib.target, lib.address, lib.packed_address, keepalive=lib.library)
