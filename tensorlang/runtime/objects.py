"""Object code as a unit of caching: compile LLVM IR to an object once, link it into this
process many times (in later processes too) without running the optimiser again.

Used by the model builder's on-disk kernel cache (topi.graph). Each loaded object gets an MCJIT
engine of its own, with a target machine of its own: an engine disposes of its machine when it
is freed, so the compiler's shared, cached machine is never handed over.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import llvmlite
import llvmlite.binding as llvm

from ..codegen.intrinsics import _libmvec
from ..codegen.target import Target
from .jit import parse_and_optimize
from .threadpool import native


@dataclass
class LoadedObject:
    """A kernel linked into this process: `symbol` and `symbol_packed`, kept alive by `engine`."""

    address: int
    packed_address: int
    engine: llvm.ExecutionEngine


def compile_object(ll: str, target: Target) -> bytes:
    """LLVM IR text -> optimised object code for `target`, ready for `load_object`."""
    return target.target_machine().emit_object(parse_and_optimize(ll, target))


def load_object(obj: bytes, symbol: str, target: Target) -> LoadedObject:
    """Link object code from `compile_object` into this process."""
    native()  # the runtime's symbols must be registered before the object is linked
    if b"_ZGV" in obj:  # it calls libmvec, which codegen loads only when it emits such a call
        _libmvec()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=target.mcpu, features=target.features, opt=3, codemodel="jitdefault")
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    return LoadedObject(engine.get_function_address(symbol),
                        engine.get_function_address(f"{symbol}_packed"), engine)


@functools.cache
def toolchain_version() -> str:
    """llvmlite's version and the host CPU: what object code depends on besides its source."""
    features = llvm.get_host_cpu_features().flatten()
    return f"llvmlite {llvmlite.__version__}; {llvm.get_host_cpu_name()}; {features}"
