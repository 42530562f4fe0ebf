"""The native runtime (threadpool.c), compiled with cffi on first use and shared with the JIT.

The compiled extension is cached in `~/.cache/tensorlang/` (or `$TL_CACHE_DIR`) under a hash of the
C source, so a process pays for the C compiler only once per source version. Its functions are
registered with `llvmlite.binding.add_symbol` so that generated code can call them by name.

Extensions are built by one thread of one process at a time (a thread lock and a file lock next
to the target), each in a private directory given to the compiler as an absolute path, and moved
into the cache atomically. cffi's `FFI.compile` is not used: it changes the working directory of
the whole process while the compiler runs, which broke the build (or any relative path) of
another thread, such as the LLVM thread that asks for the runtime while the main thread does.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

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
void tl_run_packed(int64_t *desc);
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


_BUILD_LOCK = threading.Lock()
_T = TypeVar("_T")


def once(make: Callable[[], _T]) -> Callable[[], _T]:
    """`make()` computed on the first call and kept, also when several threads make the first
    call together (functools.cache would run `make` in each of them)."""
    lock = threading.Lock()
    made: list[_T] = []

    @functools.wraps(make)
    def cached() -> _T:
        if not made:
            with lock:
                if not made:
                    made.append(make())
        return made[0]

    return cached


@contextmanager
def _building(target: Path) -> Iterator[None]:
    """Hold this process's build lock and the file lock of `target` (other processes)."""
    with _BUILD_LOCK, open(target.parent / f".{target.name}.lock", "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def build_extension(target: Path, compile_in: Callable[[str], str]) -> None:
    """Build `target` unless it exists: run `compile_in(tmpdir)` (which returns the path of the
    extension it built) in a private directory (an absolute path) and move the result to
    `target` atomically, one builder at a time, so that threads and processes starting together
    neither build twice nor load a half-written file."""
    with _building(target):
        if target.exists():
            return
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            os.replace(compile_in(os.path.abspath(tmp)), target)


def compile_c(tmp: str, c_file: str, module_name: str, **options: Any) -> str:
    """Compile the C extension `module_name` from `c_file` in the directory `tmp` with cffi's
    compiler driver (distutils' options such as `include_dirs`, `libraries`,
    `extra_compile_args`); the path of the extension built."""
    from cffi import ffiplatform

    ext = ffiplatform.get_extension(c_file, module_name, **options)
    return ffiplatform.compile(tmp, ext)


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
    ffi.set_source(module_name, source)

    def compile_in(tmp: str) -> str:
        c_file = os.path.join(tmp, f"{module_name}.c")
        ffi.emit_c_code(c_file)
        return compile_c(tmp, c_file, module_name, extra_compile_args=["-O2"],
                         libraries=["pthread"])

    build_extension(target, compile_in)


@once
def native() -> ModuleType:
    """The loaded cffi extension (`.ffi`, `.lib`), built on first use."""
    source = "\n".join(path.read_text() for path in SOURCE_PATHS)
    digest = hashlib.sha256((source + CDEF + sys.version).encode()).hexdigest()[:16]
    module_name = f"_tl_runtime_{digest}"
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    path = cache_dir() / f"{module_name}{suffix}"
    if not path.exists():
        _build(source, module_name, path)  # the build checks again, holding the lock
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
