"""The interface that codegen helpers (bounds.py, intrinsics.py) write LLVM IR through.

`llvm.CodeGen` implements it. The helpers depend on this protocol rather than on the code
generator itself, so the generator can import them without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..expr import Expr
from ..ir import PrimFunc
from .irtext import FunctionWriter, Val
from .target import Target


class Emitter(Protocol):
    """What a helper may use of the function being generated."""

    func: PrimFunc
    target: Target
    fw: FunctionWriter
    in_parallel: bool
    status: Val | None

    def declare(self, name: str, text: str) -> None:
        """Add a module-level declaration once (by `name`)."""

    def intrinsic(self, base: str, overloads: list[str], ret: str, args: list[Val]) -> Val:
        """Call the LLVM intrinsic `base` overloaded on `overloads`."""

    def splat(self, v: Val, lanes: int) -> Val:
        """Broadcast a scalar to `lanes` lanes."""

    def match(self, a: Val, b: Val) -> tuple[Val, Val]:
        """Broadcast the scalar one of two values to the other's lanes."""

    def per_lane(self, v: Val, fn: Callable[[Val], Val]) -> Val:
        """Apply a scalar function to each lane of `v`."""

    def index(self, e: Expr) -> Val:
        """An integer expression as an i64 (index mode)."""
