"""The runtime: JIT compilation, safe callables on arrays, the thread pool, shared libraries."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..codegen import codegen
from ..codegen.target import Target, as_target
from ..ir import PrimFunc
from .args import Signature
from .jit import assembly, compile_ir, emit_object, link_object
from .module import BenchmarkResult, Module, load_module
from .threadpool import get_num_threads, set_num_threads
from .toolchain import require_native


def build_module(func: PrimFunc, target: Target | str | None = None) -> Module:
    """Compile a lowered PrimFunc for `target` (default: the current target) into a callable
    Module (for another architecture: a Module to show and export, not to call).

    Raises:
        TypeError: `func` is not a PrimFunc or `target` is not a target.
        ValueError: a bad target string, or a signature that cannot be checked at call time.
    """
    if not isinstance(func, PrimFunc):
        raise TypeError(f"build_module takes a PrimFunc, got {type(func).__name__}")
    tgt = as_target(target)
    if not tgt.runs_here:
        ll = codegen(func, tgt)
        return Module(Signature.from_primfunc(func), tgt, None, None, func=func, ll=ll,
                      export_ll=lambda: ll, assembly=lambda: assembly(ll, tgt))
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


@dataclass(frozen=True)
class ObjectCode:
    """A kernel compiled to machine code once, loadable (`load_object`) in another process or on
    another machine with the same CPU: what the tuner's builders hand to its runners.

    Attributes:
        code: the relocatable object file.
        signature: the kernel's Signature as JSON (argument checks are rebuilt from it).
        target: the target string it was compiled for.
        symbol: the kernel's symbol in `code`.
    """

    code: bytes
    signature: str
    target: str
    symbol: str


def build_object(func: PrimFunc, target: Target | str | None = None) -> ObjectCode:
    """Compile a lowered PrimFunc for `target` into machine code that `load_object` runs."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"build_object takes a PrimFunc, got {type(func).__name__}")
    tgt = as_target(target)
    symbol = f"__tl_{func.name}"
    code = emit_object(codegen(func, tgt, symbol), symbol, tgt)
    return ObjectCode(code, Signature.from_primfunc(func).to_json(), str(tgt), symbol)


def load_object(obj: ObjectCode) -> Module:
    """A callable Module (with argument checks) of machine code from `build_object`.

    Raises:
        RuntimeError: the code is for another architecture than this machine's (a tuner
            measures where the code runs: a runner on such a machine).
    """
    tgt = as_target(obj.target)
    require_native(f"kernel {obj.symbol}", tgt)
    address, packed_address, engine = link_object(obj.code, obj.symbol, tgt)
    return Module(Signature.from_json(json.loads(obj.signature)), tgt, address, packed_address,
                  keepalive=engine)


__all__ = [
    "BenchmarkResult",
    "Module",
    "ObjectCode",
    "build_module",
    "build_object",
    "get_num_threads",
    "load_module",
    "load_object",
    "set_num_threads",
]
