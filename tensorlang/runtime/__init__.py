"""The runtime: JIT compilation, safe callables on arrays, the thread pool, shared libraries."""

from __future__ import annotations

from ..codegen import codegen
from ..codegen.target import Target, as_target
from ..ir import PrimFunc
from .args import Signature
from .export import load_module
from .jit import compile_ir
from .module import BenchmarkResult, Module
from .threadpool import get_num_threads, set_num_threads


def build_module(func: PrimFunc, target: Target | str | None = None) -> Module:
    """Compile a lowered PrimFunc for `target` (default: the current target) into a callable
    Module.

    Raises:
        TypeError: `func` is not a PrimFunc or `target` is not a target.
        ValueError: a bad target string, or a signature that cannot be checked at call time.
    """
    if not isinstance(func, PrimFunc):
        raise TypeError(f"build_module takes a PrimFunc, got {type(func).__name__}")
    tgt = as_target(target)
    symbol = f"__tl_{func.name}"
    ll = codegen(func, tgt, symbol)
    jit = compile_ir(ll, symbol, tgt)
    return Module(
        Signature.from_primfunc(func),
        tgt,
        jit.address,
        jit.packed_address,
        func=func,
        ll=ll,
        export_ll=lambda: codegen(func, tgt),
        assembly=jit.assembly,
        keepalive=jit,
    )


__all__ = [
    "BenchmarkResult",
    "Module",
    "build_module",
    "get_num_threads",
    "load_module",
    "set_num_threads",
]
