"""The fast call path of a Module: argument checks and the kernel call in C (fastcall.c).

A Python call of a small kernel used to cost several microseconds in the Python argument checker
alone; fastcall.c does the same checks for the plain case (exact numpy arrays of the kernel's
dtypes, C-contiguous, every dimension a constant or a shape variable) in about a tenth of that and
answers NotImplemented for anything else, so that the Python checker (runtime/args.py) stays the
one place that converts other array types and raises errors. Kernels whose dimensions are
expressions of shape variables (n * 16) keep the Python path.

The extension is compiled on first use like the thread pool and cached in the same directory
under a hash of its source, numpy's version and Python's. Where it cannot be built (no C
compiler), every call takes the Python path, with one warning.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .args import Signature
from .threadpool import build_extension, cache_dir, compile_c, load_extension, once

SOURCE_PATH = Path(__file__).with_name("fastcall.c")
_MODULE = "_tl_fastcall"  # the name PyInit_ in fastcall.c expects; the file name carries the hash


def _compile_in(tmp: str) -> str:
    """Compile fastcall.c in `tmp`; the path of the extension."""
    return compile_c(tmp, str(SOURCE_PATH), _MODULE, include_dirs=[np.get_include()],
                     extra_compile_args=["-O2"])


@once
def extension() -> ModuleType | None:
    """The loaded extension (`Caller`, `MAX_ARGS`), built on first use; None if it cannot be."""
    source = SOURCE_PATH.read_text()
    digest = hashlib.sha256(f"{source}{np.__version__}{sys.version}".encode()).hexdigest()[:16]
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    path = cache_dir() / f"{_MODULE}_{digest}{suffix}"
    try:
        if not path.exists():
            build_extension(path, _compile_in)
        module = load_extension(_MODULE, path)
    except Exception as exc:  # noqa: BLE001 - any build failure leaves the Python path working
        warnings.warn(f"tensorlang: the fast call path could not be built ({exc}); kernel calls "
                      "take the slower Python path", RuntimeWarning, stacklevel=2)
        return None
    return module


def fast_caller(sig: Signature, address: int) -> Callable[[tuple[Any, ...]], Any] | None:
    """`run(args)` of a Caller for the kernel at `address`, or None where the kernel needs the
    Python checker for every call (a dimension that is an expression, too many arguments).

    `run(args)` returns None after a successful call, the kernel's nonzero status, or
    NotImplemented when the arguments need the Python checker (nothing ran then).
    """
    var_index = {v: k for k, v in enumerate(sig.shape_vars)}
    shapes: list[tuple[int, ...]] = []
    for spec in sig.params:
        dims = []
        for entry in spec.shape:
            if isinstance(entry, int) and entry >= 0:
                dims.append(entry)
            elif isinstance(entry, str) and entry in var_index:
                dims.append(-1 - var_index[entry])
            else:
                return None
        shapes.append(tuple(dims))
    bare = {-1 - d for dims in shapes for d in dims if d < 0}
    ext = extension()
    if ext is None or len(bare) != len(var_index):
        return None
    if len(sig.params) + len(var_index) > ext.MAX_ARGS:
        return None
    caller = ext.Caller(address, bool(sig.checks), tuple(p.dtype for p in sig.params),
                        tuple(shapes), tuple(p.is_output for p in sig.params), len(var_index))
    return caller.run
