"""Compiled kernels, cached in memory and on disk by what their code depends on.

A kernel is keyed by its computation (ops, attrs, shapes), its tuning config (for a record of an
auto-scheduled node: its template, index, knob values and sketch rules), the target and the
compiler version (a hash of the tensorlang, autotune and topi sources, llvmlite's version and
the host CPU). The disk entry holds the optimised object code, the LLVM IR (for
export_library) and the kernel's signature; loading one links the object into an MCJIT engine
without running LLVM's optimiser, so a warm build compiles nothing.

A cold build overlaps its two halves of compiling: `request_kernel` schedules, lowers and writes
the LLVM IR of a kernel on the calling thread (Python, holding the GIL) and leaves LLVM's
optimiser and machine code (native code that releases the GIL; llvmlite lets one thread into
LLVM at a time) to one LLVM thread, so that the next kernel is lowered while the last one is
compiled.
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tensorlang as tl
from tensorlang.codegen import codegen
from tensorlang.runtime import Module
from tensorlang.runtime.args import Signature
from tensorlang.runtime.jit import emit_object, link_object, toolchain_version
from tensorlang.runtime.threadpool import cache_dir

#: How many kernels were compiled, loaded from disk, or found in this process's memory.
STATS: collections.Counter[str] = collections.Counter()

_MEMORY: dict[str, CompiledKernel] = {}
_PENDING: dict[str, concurrent.futures.Future[CompiledKernel]] = {}
_LLVM_THREAD = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tl-llvm")

_PACKAGES = ("tensorlang", "autotune", "topi")


@dataclass
class CompiledKernel:
    """A kernel ready to call: its entry points, signature and the IR it came from.

    Attributes:
        key: the cache key.
        symbol: the C name of the kernel (`<symbol>_packed` takes a packed argument array).
        signature: its parameters (and bound-check sites, when its status must be checked).
        address, packed_address: the entry points in this process (None for a kernel of
            another architecture: it is exported, not called).
        ll_path: where its LLVM IR is kept (for export_library).
    """

    key: str
    symbol: str
    signature: Signature
    address: int | None
    packed_address: int | None
    ll_path: Path
    engine: Any

    def ll(self) -> str:
        return gzip.decompress(self.ll_path.read_bytes()).decode()

    def module(self, target: tl.Target) -> Module:
        """The kernel as a tensorlang Module (argument checks on every call)."""
        return Module(self.signature, target, self.address, self.packed_address,
                      keepalive=self.engine)


@functools.cache
def compiler_version() -> str:
    """A hash of everything besides the key's own fields that the machine code depends on."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[2]
    for package in _PACKAGES:
        for path in sorted((root / package).rglob("*")):
            if path.suffix in (".py", ".c") and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode())
                digest.update(path.read_bytes())
    digest.update(toolchain_version().encode())
    return digest.hexdigest()[:24]


def kernel_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """The directory of cached kernels (`$TL_CACHE_DIR/kernels` unless `root` is given)."""
    path = Path(root) if root is not None else cache_dir() / "kernels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def clear_memory() -> None:
    """Forget the kernels loaded in this process (the disk cache stays)."""
    _MEMORY.clear()


Lowerable = Callable[[], tuple[tl.Schedule, Sequence[tl.Tensor]]]


def get_kernel(key: str, make: Lowerable, target: tl.Target,
               root: str | os.PathLike[str] | None = None) -> CompiledKernel:
    """The kernel of `key`: from memory, else from the disk cache, else compiled from the
    schedule and arguments that `make()` returns (and stored on disk)."""
    return request_kernel(key, make, target, root).result()


def request_kernel(key: str, make: Lowerable, target: tl.Target,
                   root: str | os.PathLike[str] | None = None
                   ) -> concurrent.futures.Future[CompiledKernel]:
    """`get_kernel` as a future: a kernel to compile is lowered here and compiled by LLVM on the
    LLVM thread, in the order requested (see the module docstring); errors of the schedule or
    the lowering raise here, LLVM's from the future."""
    hit = _MEMORY.get(key)
    if hit is not None:
        STATS["memory"] += 1
        done: concurrent.futures.Future[CompiledKernel] = concurrent.futures.Future()
        done.set_result(hit)
        return done
    pending = _PENDING.get(key)
    if pending is not None:
        STATS["memory"] += 1
        return pending
    directory = kernel_dir(root)
    symbol = f"tlk_{key[:24]}"
    if (directory / f"{key}.json").exists():
        STATS["disk"] += 1
        lowered = None
    else:
        lowered = _lower(make, symbol, target)
        STATS["compiled"] += 1
    future = _LLVM_THREAD.submit(_finish, lowered, directory, key, symbol, target)
    _PENDING[key] = future
    future.add_done_callback(lambda _: _PENDING.pop(key, None))  # after _MEMORY has it
    return future


def _lower(make: Lowerable, symbol: str, target: tl.Target) -> tuple[str, bytes]:
    """The LLVM IR of the kernel that `make()` schedules, and its cache entry's metadata."""
    with target:  # the schedule and the lowering both read the target being compiled for
        s, params = make()
        func = tl.lower(s, list(params), name=symbol).main
    ll = codegen(func, target, symbol)
    meta = {"symbol": symbol, "signature": json.loads(Signature.from_primfunc(func).to_json())}
    return ll, json.dumps(meta).encode()


def _finish(lowered: tuple[str, bytes] | None, directory: Path, key: str, symbol: str,
            target: tl.Target) -> CompiledKernel:
    """On the LLVM thread: compile `lowered` (None: the entry is on disk) into the cache entry
    of `key`, and load it."""
    if lowered is not None:
        ll, meta = lowered
        obj = emit_object(ll, symbol, target)
        # The JSON goes last: its presence says the entry is complete.
        _write_atomic(directory / f"{key}.o", obj)
        _write_atomic(directory / f"{key}.ll.gz", gzip.compress(ll.encode(), compresslevel=1))
        _write_atomic(directory / f"{key}.json", meta)
    kernel = _load(directory, key, symbol, target)
    _MEMORY[key] = kernel
    return kernel


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _load(directory: Path, key: str, symbol: str, target: tl.Target) -> CompiledKernel:
    meta = json.loads((directory / f"{key}.json").read_text())
    address = packed_address = engine = None
    if target.runs_here:
        address, packed_address, engine = link_object(
            (directory / f"{key}.o").read_bytes(), symbol, target)
    return CompiledKernel(
        key=key,
        symbol=symbol,
        signature=Signature.from_json(meta["signature"]),
        address=address,
        packed_address=packed_address,
        ll_path=directory / f"{key}.ll.gz",
        engine=engine,
    )
