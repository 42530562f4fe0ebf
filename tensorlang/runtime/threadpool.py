"""The native runtime (threadpool.c), compiled with cffi on first use and shared with the JIT.

The compiled extension is cached in `~/.cache/tensorlang/` (or `$TL_CACHE_DIR`) under a hash of the
C source, so a process pays for the C compiler only once per source version. Its functions are
registered with `llvmlite.binding.add_symbol` so that generated code can call them by name.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import llvmlite.binding as llvm

from ..codegen.intrinsics import LIBM_SYMBOLS

SOURCE_PATHS = (Path(__file__).with_name("threadpool.c"), Path(__file__).with_name("copy.c"))
"""The runtime's C sources: the thread pool and allocation, and the box copy of copy stages."""

CDEF = """
typedef void (*tl_task_fn)(int32_t, int32_t, void *);
void tl_parallel_for(tl_task_fn fn, void *closure, int32_t n);
int tl_get_num_threads(void);
void tl_set_num_threads(int n);
void *tl_aligned_alloc(int64_t size);
void tl_free(void *ptr);
double tl_time_packed(void (*fn)(int64_t *), int64_t *args, int number);
void *tl_half_helper(int which);
void tl_copy_box(void *dst, const void *src, const int64_t *desc);
"""
_HALF_HELPERS = ("__truncdfhf2", "__truncsfhf2", "__extendhfsf2")
EXPORTED = (
    "tl_parallel_for",
    "tl_get_num_threads",
    "tl_set_num_threads",
    "tl_aligned_alloc",
    "tl_free",
    "tl_time_packed",
    "tl_copy_box",
)


def cache_dir() -> Path:
    """Where compiled runtime pieces are kept between processes."""
    root = os.environ.get("TL_CACHE_DIR") or os.path.join(Path.home(), ".cache", "tensorlang")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_extension(target: Path, compile_in: Callable[[str], str]) -> None:
    """Run `compile_in(tmpdir)` (which returns the path of the extension it built) in a private
    directory and move the result to `target` atomically, so that processes starting together
    never load a half-written file."""
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        os.replace(compile_in(tmp), target)


def load_extension(module_name: str, path: Path) -> ModuleType:
    """Import the extension module at `path` (whose init function is `PyInit_<module_name>`)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build(source: str, module_name: str, target: Path) -> None:
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source(module_name, source, extra_compile_args=["-O2"], libraries=["pthread"])
    build_extension(target, lambda tmp: ffi.compile(tmpdir=tmp, verbose=False))


@functools.cache
def native() -> ModuleType:
    """The loaded cffi extension (`.ffi`, `.lib`), built on first use."""
    source = "\n".join(path.read_text() for path in SOURCE_PATHS)
    digest = hashlib.sha256((source + CDEF + sys.version).encode()).hexdigest()[:16]
    module_name = f"_tl_runtime_{digest}"
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    path = cache_dir() / f"{module_name}{suffix}"
    if not path.exists():
        _build(source, module_name, path)
    module = load_extension(module_name, path)
    _register(module)
    return module


def _register(module: ModuleType) -> None:
    ffi, lib = module.ffi, module.lib
    for name in EXPORTED:
        llvm.add_symbol(name, int(ffi.cast("uintptr_t", ffi.addressof(lib, name))))
    for k, name in enumerate(_HALF_HELPERS):
        address = int(ffi.cast("uintptr_t", lib.tl_half_helper(k)))
        if address:
            llvm.add_symbol(name, address)
    libm_name = ctypes.util.find_library("m")
    libm = ctypes.CDLL(libm_name) if libm_name else ctypes.CDLL(None)
    for name in LIBM_SYMBOLS:
        llvm.add_symbol(name, ctypes.cast(getattr(libm, name), ctypes.c_void_p).value)


def set_num_threads(n: int) -> None:
    """Use `n` threads (the caller included) for parallel loops; n <= 0 means all cores."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"set_num_threads takes an int, got {type(n).__name__}")
    native().lib.tl_set_num_threads(n)


def get_num_threads() -> int:
    """The number of threads parallel loops use (TL_NUM_THREADS, default all cores)."""
    return int(native().lib.tl_get_num_threads())
