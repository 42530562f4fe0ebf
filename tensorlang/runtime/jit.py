"""LLVM IR text -> optimised machine code in this process (MCJIT), cached by the IR text.

The runtime stage of the data flow. `TL_DEBUG=1` prints compile timings, `3` the LLVM IR and
`4` the assembly, to stderr.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import threading
import time
from dataclasses import dataclass

import llvmlite
import llvmlite.binding as llvm

from ..codegen.intrinsics import _libmvec
from ..codegen.target import Target, _target_machine
from .threadpool import native


def debug_level() -> int:
    try:
        return int(os.environ.get("TL_DEBUG", "0") or 0)
    except ValueError:
        return 0


@dataclass
class JitFunction:
    """A compiled kernel: the addresses of `name` and `name_packed`, kept alive by `engine`."""

    name: str
    ll: str
    target: Target
    address: int
    packed_address: int
    engine: llvm.ExecutionEngine

    def assembly(self) -> str:
        """The optimised machine code as assembly text (recompiled on demand)."""
        return assembly(self.ll, self.target)


_CACHE: dict[str, JitFunction] = {}
_fresh_target_machine = _target_machine.__wrapped__
_LOCK = threading.Lock()


def parse_and_optimize(ll: str, target: Target, pic: bool = False) -> llvm.ModuleRef:
    """Parse and verify LLVM IR text and run the O3 pipeline on it."""
    mod = llvm.parse_assembly(ll)
    mod.verify()
    tm = target.target_machine(pic)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def assembly(ll: str, target: Target) -> str:
    """The assembly text of LLVM IR `ll` optimised for `target` (any architecture)."""
    return target.target_machine().emit_assembly(parse_and_optimize(ll, target))


def _engine(mod: llvm.ModuleRef, target: Target) -> llvm.ExecutionEngine:
    """An MCJIT engine for `mod`. The engine owns (and frees) its TargetMachine, so it gets a
    fresh one: a kernel that is dropped (a compile of the same kernel that lost the race for
    the cache) must not free the cached machine that every later compile uses."""
    return llvm.create_mcjit_compiler(mod, _fresh_target_machine(target.mcpu, target.features,
                                                                 False))


def compile_ir(ll: str, name: str, target: Target) -> JitFunction:
    """Compile LLVM IR text holding `name` and `name_packed` to machine code (cached).

    Raises:
        RuntimeError: LLVM rejects the IR (a codegen bug); the message carries LLVM's reason.
    """
    key = hashlib.sha256(f"{target}\0{ll}".encode()).hexdigest()
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    native()  # the runtime's symbols must be registered before MCJIT links
    level = debug_level()
    if level >= 3:
        print(ll, file=sys.stderr)
    t0 = time.perf_counter()
    try:
        mod = parse_and_optimize(ll, target)
    except RuntimeError as exc:
        raise RuntimeError(f"LLVM rejected the code generated for {name}: {exc}") from exc
    t1 = time.perf_counter()
    engine = _engine(mod, target)
    engine.finalize_object()
    t2 = time.perf_counter()
    jf = JitFunction(
        name=name,
        ll=ll,
        target=target,
        address=engine.get_function_address(name),
        packed_address=engine.get_function_address(f"{name}_packed"),
        engine=engine,
    )
    if level >= 1:
        print(
            f"[tensorlang] {name}: llvm opt {1e3 * (t1 - t0):.1f} ms, "
            f"machine code {1e3 * (t2 - t1):.1f} ms",
            file=sys.stderr,
        )
    if level >= 4:
        print(jf.assembly(), file=sys.stderr)
    with _LOCK:
        _CACHE.setdefault(key, jf)
    return jf


def emit_object(ll: str, name: str, target: Target) -> bytes:
    """Optimised machine code of LLVM IR text as a relocatable object file: a kernel compiled
    once, to be linked by `link_object` in another process or on another machine with this CPU."""
    t0 = time.perf_counter()
    mod = parse_and_optimize(ll, target)
    t1 = time.perf_counter()
    code = target.target_machine().emit_object(mod)
    if debug_level() >= 1:
        print(f"[tensorlang] {name}: llvm opt {1e3 * (t1 - t0):.1f} ms, "
              f"machine code {1e3 * (time.perf_counter() - t1):.1f} ms", file=sys.stderr)
    return bytes(code)


def link_object(code: bytes, name: str, target: Target) -> tuple[int, int, llvm.ExecutionEngine]:
    """Link an object from `emit_object` into this process: the addresses of `name` and
    `name_packed`, and the engine that keeps the code alive (the code is freed with it)."""
    native()  # the runtime's and libm's symbols must be registered before linking, and
    _libmvec()  # libmvec loaded: the code may call it (codegen loads it only where it runs)
    engine = _engine(llvm.parse_assembly(""), target)
    engine.add_object_file(llvm.ObjectFileRef.from_data(code))
    engine.finalize_object()
    return (engine.get_function_address(name), engine.get_function_address(f"{name}_packed"),
            engine)


@functools.cache
def toolchain_version() -> str:
    """llvmlite's version and the host CPU: what object code depends on besides its source."""
    features = llvm.get_host_cpu_features().flatten()
    return f"llvmlite {llvmlite.__version__}; {llvm.get_host_cpu_name()}; {features}"
