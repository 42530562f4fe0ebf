"""Codegen: loop IR (PrimFunc) -> LLVM IR text for a Target."""

from __future__ import annotations

from .llvm import codegen
from .target import Target, as_target

__all__ = ["Target", "as_target", "codegen"]
