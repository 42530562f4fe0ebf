"""A built model as one shared library, and loading it back.

The library holds every distinct kernel (position-independent object code), the tensorlang
runtime (thread pool), the weights (pre-packed, embedded with `.incbin`), the model's
description as a JSON string `tlg_meta`, and a generated C entry point

    int tlg_run(void *const *inputs, void *const *outputs);

that copies the inputs into its arena, calls the kernels in order and copies the outputs out
(0 on success; k > 0 when the bound checks of kernel call k - 1 failed). It needs neither
Python nor the compiler nor the tuner: `load_module` is a thin ctypes wrapper with the same
call and benchmark interface as a built Module. The arena is allocated on the first call and
shared by later calls, so one library instance runs one model call at a time.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tensorlang.codegen.intrinsics import uses_vector_libm
from tensorlang.runtime.export import c_string
from tensorlang.runtime.jit import parse_and_optimize
from tensorlang.runtime.threadpool import SOURCE_PATHS
from tensorlang.runtime.toolchain import link_shared

from ..symbolic import dim_from_json, evaluate_shape
from .model_io import ModelBase, TensorInfo, bind_sizes

if TYPE_CHECKING:
    from .cache import CompiledKernel
    from .passes import MemoryPlan

ALIGN = 64
META_FORMAT = 1


class KernelCall(Protocol):
    """One step of a built model: a compiled kernel and the arrays it is called on."""

    kernel: CompiledKernel
    arrays: Sequence[np.ndarray]


class BuiltModel(Protocol):
    """What export needs of a built model (`topi.graph.Module`): its kernel calls in order, its
    arena plan and buffers, its inputs and outputs and its target. A protocol, so that this
    module does not import the executor that calls it."""

    steps: Sequence[KernelCall]
    plan: MemoryPlan
    input_buffers: Sequence[np.ndarray]
    output_buffers: Sequence[np.ndarray]
    inputs: Sequence[TensorInfo]
    outputs: Sequence[TensorInfo]
    target: Any

    def arena_offset(self, array: np.ndarray) -> int | None: ...


class _Weights:
    """Constant arrays laid out back to back (64-byte aligned) in one blob."""

    def __init__(self) -> None:
        self.offsets: dict[int, int] = {}
        self.chunks: list[bytes] = []
        self.size = 0

    def offset(self, array: np.ndarray) -> int:
        if id(array) not in self.offsets:
            pad = -self.size % ALIGN
            self.chunks.append(b"\0" * pad)
            self.offsets[id(array)] = self.size + pad
            data = array.tobytes()
            self.chunks.append(data)
            self.size += pad + len(data)
        return self.offsets[id(array)]


def driver_source(module: BuiltModel, weights: _Weights) -> str:
    """The C entry point `tlg_run` of `module` (constants go into `weights`)."""

    def ref(array: np.ndarray) -> str:
        offset = module.arena_offset(array)
        return f"A + {offset}" if offset is not None else f"(void *)(W + {weights.offset(array)})"

    kernels = {}
    calls = []
    for k, step in enumerate(module.steps):
        sig = step.kernel.signature
        ret = "int32_t" if sig.checks else "void"
        kernels[step.kernel.symbol] = (
            f"{ret} {step.kernel.symbol}({', '.join(['void *'] * len(sig.params))});")
        call = f"{step.kernel.symbol}({', '.join(ref(a) for a in step.arrays)})"
        calls.append(f"  if ({call}) return {k + 1};" if sig.checks else f"  {call};")
    copy_in = [f"  memcpy({ref(b)}, inputs[{k}], {b.nbytes});"
               for k, b in enumerate(module.input_buffers)]
    copy_out = [f"  memcpy(outputs[{k}], {ref(b)}, {b.nbytes});"
                for k, b in enumerate(module.output_buffers)]
    meta = {
        "format": META_FORMAT,
        "inputs": [[i.name, list(i.shape), i.dtype] for i in module.inputs],
        "outputs": [[o.name, list(o.shape), o.dtype] for o in module.outputs],
        "target": str(module.target),
    }
    return entry_source(list(kernels.values()), meta, module.plan.arena_bytes, "",
                        [*copy_in, *calls, *copy_out])


def entry_source(decls: Sequence[str], meta: dict[str, Any], arena_bytes: int, params: str,
                 body: Sequence[str]) -> str:
    """The C source of `tlg_run(inputs, outputs<params>)` running `body` over the arena `A`
    (allocated on the first call) and the weights `W`, with the kernels' declarations `decls`
    and the description `meta` as `tlg_meta`."""
    return "\n".join([
        "#include <stdint.h>",
        "#include <string.h>",
        "void *tl_aligned_alloc(int64_t size);",
        "extern const unsigned char tlg_weights[];",
        *decls,
        f"const char tlg_meta[] = {c_string(json.dumps(meta))};",
        "static unsigned char *arena;",
        f"int tlg_run(void *const *inputs, void *const *outputs{params}) {{",
        f"  if (!arena && !(arena = tl_aligned_alloc({max(arena_bytes, ALIGN)})))",
        "    return -1;",
        "  unsigned char *A = arena;",
        "  const unsigned char *W = tlg_weights;",
        "  (void)A; (void)W;",
        *body,
        "  return 0;",
        "}",
        "",
    ])


def export_model(module: BuiltModel, path: str | os.PathLike[str]) -> None:
    """Write `module` as the shared library `path` (see the module docstring).

    Raises:
        RuntimeError: no C compiler, or it failed (its output is in the message).
    """
    weights = _Weights()
    driver = driver_source(module, weights)
    write_library(driver, weights, [s.kernel for s in module.steps], module.target, path)


def write_library(driver: str, weights: _Weights, kernels: Sequence[CompiledKernel],
                  target: Any, path: str | os.PathLike[str]) -> None:
    """Compile the C `driver`, the `weights` blob, the distinct `kernels` and the runtime into
    the shared library `path`.

    Raises:
        RuntimeError: no C compiler, or it failed (its output is in the message).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sources = [tmp / "driver.c", tmp / "weights.S", *SOURCE_PATHS]
        sources[0].write_text(driver)
        (tmp / "weights.bin").write_bytes(b"".join(weights.chunks) or b"\0")
        sources[1].write_text(
            '.section .rodata\n.balign 64\n.globl tlg_weights\ntlg_weights:\n'
            f'.incbin "{tmp / "weights.bin"}"\n.section .note.GNU-stack,"",@progbits\n')
        vector_libm = False
        for kernel in {k.key: k for k in kernels}.values():
            ll = kernel.ll()
            vector_libm |= uses_vector_libm(ll)
            obj = target.target_machine(pic=True).emit_object(
                parse_and_optimize(ll, target, pic=True))
            obj_path = tmp / f"{kernel.symbol}.o"
            obj_path.write_bytes(obj)
            sources.append(obj_path)
        out = tmp / "model.so"
        link_shared(target, sources, out, ["-lmvec"] if vector_libm else [])
        shutil.move(str(out), path)


class LoadedModule(ModelBase):
    """A model loaded from a library written by `Module.export_library`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"no model library at {self.path}")
        self._lib = ctypes.CDLL(str(self.path.resolve()))
        raw = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(self._lib, "tlg_meta")))
        meta = json.loads(raw)
        if meta.get("format") != META_FORMAT:
            raise ValueError(f"{self.path}: unknown model library format {meta.get('format')}")
        #: the shape variables (a library of a model with symbolic dims), else empty
        self.shape_vars: list[str] = list(meta.get("vars", []))
        self.bounds = {v: tuple(b) for v, b in meta.get("bounds", {}).items()}
        self.inputs, self.outputs = (
            [TensorInfo(n, tuple(dim_from_json(d) for d in s), t) for n, s, t in meta[key]]
            for key in ("inputs", "outputs"))
        self.target = meta["target"]
        self._run = self._lib.tlg_run
        self._run.restype = ctypes.c_int
        self._run.argtypes = [ctypes.c_void_p] * (3 if self.shape_vars else 2)

    def _execute(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        inputs = [np.ascontiguousarray(a).reshape(a.shape) for a in arrays]
        sizes: list[Any] = []
        shapes = [o.shape for o in self.outputs]
        if self.shape_vars:
            values = bind_sizes(self.inputs, self.bounds, inputs)
            shapes = [evaluate_shape(s, values) for s in shapes]
            sizes = [np.array([values[v] for v in self.shape_vars], np.int64)]
        outputs = [np.empty(s, o.dtype) for s, o in zip(shapes, self.outputs)]
        pointers = [(ctypes.c_void_p * max(len(xs), 1))(*(x.ctypes.data for x in xs))
                    for xs in (inputs, outputs)]
        status = self._run(*pointers, *(x.ctypes.data for x in sizes))
        if status == -1:
            raise MemoryError(f"{self.path}: could not allocate the model's arena")
        if status:
            raise IndexError(f"{self.path}: an index read from data fell outside its buffer in "
                             f"kernel call {status - 1}")
        return outputs

    def __repr__(self) -> str:
        return f"<topi.graph.LoadedModule {self.path}>"


def load_module(path: str | os.PathLike[str]) -> LoadedModule:
    """Load a model library written by `Module.export_library`."""
    return LoadedModule(path)
