"""Compiled kernels, cached in memory and on disk by what their code depends on.

A kernel is keyed by its computation (ops, attrs, shapes), its tuning config (for a record of an
auto-scheduled node: its template, index, knob values and sketch rules), the target and the
compiler version (a hash of the tensorlang, autotune and topi sources, llvmlite's version and
the host CPU). The disk entry holds the optimised object code, the LLVM IR (for
export_library) and the kernel's signature; loading one links the object into an MCJIT engine
without running LLVM's optimiser, so a warm build compiles nothing.
"""

from __future__ import annotations

import collections
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

_PACKAGES = ("tensorlang", "autotune", "topi")


@dataclass
class CompiledKernel:
    """A kernel ready to call: its entry points, signature and the IR it came from.

    Attributes:
        key: the cache key.
        symbol: the C name of the kernel (`<symbol>_packed` takes a packed argument array).
        signature: its parameters (and bound-check sites, when its status must be checked).
        address, packed_address: the entry points in this process.
        ll_path: where its LLVM IR is kept (for export_library).
    """

    key: str
    symbol: str
    signature: Signature
    address: int
    packed_address: int
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
    hit = _MEMORY.get(key)
    if hit is not None:
        STATS["memory"] += 1
        return hit
    directory = kernel_dir(root)
    symbol = f"tlk_{key[:24]}"
    meta_path = directory / f"{key}.json"
    if meta_path.exists():
        STATS["disk"] += 1
    else:
        _compile(make, symbol, target, directory, key)
        STATS["compiled"] += 1
    kernel = _load(directory, key, symbol, target)
    _MEMORY[key] = kernel
    return kernel


def _compile(make: Lowerable, symbol: str, target: tl.Target, directory: Path, key: str) -> None:
    with target:  # the schedule and the lowering both read the target being compiled for
        s, params = make()
        func = tl.lower(s, list(params), name=symbol).main
    ll = codegen(func, target, symbol)
    obj = emit_object(ll, symbol, target)
    meta = {"symbol": symbol, "signature": json.loads(Signature.from_primfunc(func).to_json())}
    # The JSON goes last: its presence says the entry is complete.
    _write_atomic(directory / f"{key}.o", obj)
    _write_atomic(directory / f"{key}.ll.gz", gzip.compress(ll.encode(), compresslevel=1))
    _write_atomic(directory / f"{key}.json", json.dumps(meta).encode())


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _load(directory: Path, key: str, symbol: str, target: tl.Target) -> CompiledKernel:
    meta = json.loads((directory / f"{key}.json").read_text())
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
