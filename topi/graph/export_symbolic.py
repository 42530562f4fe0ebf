"""A model with symbolic dims as one shared library that runs every size within its bounds.

As `export.py`, with the entry point

    int tlg_run(void *const *inputs, void *const *outputs, const int64_t *sizes);

where `sizes` holds the shape variables' values (in the order of the library's `tlg_meta`
"vars"; `load_module` binds them from the input shapes and checks the bounds, as the built
module does). The arena is planned once at the upper bounds: a buffer is never larger at smaller
sizes, so the same offsets serve every call. Each kernel call passes the sizes its kernel's
symbolic extents need, and the driver makes the module's choices in C: the kernel of the size
bucket (the smallest bucket >= the sizes) where the step was tuned by bucket, the serial variant
below the L2 size, else the one kernel.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from autotune.buckets import pick

from ..symbolic import dim_json
from .export import META_FORMAT, _Weights, entry_source, write_library
from .graph import NodeKind
from .passes import plan_memory


def _c_dim(d: Any, index: Mapping[str, int]) -> str:
    if isinstance(d, int):
        return f"{d}LL"
    terms = ["*".join([f"{c}LL", *(f"S[{index[v]}]" for v in m)])
             for m, c in dim_json(d)["poly"]]
    return "(" + " + ".join(terms or ["0LL"]) + ")"


def _c_nbytes(shape: Sequence[Any], dtype: str, index: Mapping[str, int]) -> str:
    return "(" + "*".join([*(_c_dim(d, index) for d in shape),
                           f"{np.dtype(dtype).itemsize}LL"]) + ")"


def symbolic_driver(module: Any, weights: _Weights) -> tuple[str, list[Any]]:
    """The C entry point of a SymbolicModule and every kernel it may call.

    Raises:
        ValueError: a shape variable without an upper bound (the arena could not be sized).
    """
    names = list(module.shape_vars)
    unbounded = [v for v in names if v not in module.bounds]
    if unbounded:
        raise ValueError(f"export_library: the shape variables {unbounded} have no bounds; "
                         "build with bounds={...} to export")
    high = {v: module.bounds[v][1] for v in names}
    index = {v: k for k, v in enumerate(names)}
    graph = module.graph
    plan = plan_memory(graph, high)

    def ref(operand: Any) -> str:
        if isinstance(operand, str):
            return f"A + {plan.buffers[operand].offset}"
        return f"(void *)(W + {weights.offset(operand)})"

    decls: dict[str, str] = {}
    kernels: list[Any] = []

    def call(kernel: Any, operands: Sequence[Any], k: int) -> str:
        sig = kernel.signature
        missing = [v for v in sig.shape_vars if v not in index]
        if missing:
            raise NotImplementedError(f"export_library: kernel call {k} needs the sizes "
                                      f"{missing}, which the inputs do not give")
        ret = "int32_t" if sig.checks else "void"
        types = ["void *"] * len(operands) + ["int64_t"] * len(sig.shape_vars)
        decls[kernel.symbol] = f"{ret} {kernel.symbol}({', '.join(types)});"
        kernels.append(kernel)
        args = [*(ref(o) for o in operands), *(f"S[{index[v]}]" for v in sig.shape_vars)]
        text = f"{kernel.symbol}({', '.join(args)})"
        return f"if ({text}) return {k + 1};" if sig.checks else f"{text};"

    l2 = module.target.caches.l2
    body: list[str] = []
    for k, (step, operands, serial, variants) in enumerate(
            zip(module.steps, module._operands, module._serial, module.variants)):
        if variants:
            ordered = sorted(variants, key=lambda v: tuple(sorted(v[0].items())))
            last = pick([(v[0], v) for v in variants], {v: 2**62 for v in names})
            for sizes, kernel, _, _ in ordered:
                cond = " && ".join(f"S[{index[v]}] <= {n}" for v, n in sizes.items()) or "1"
                body.append(f"  if ({cond}) {{ {call(kernel, operands, k)} }} else")
            body.append(f"  {{ {call(last[1], operands, k)} }}")
        elif serial is not None:
            node = graph.node(step.name)
            body.append(f"  if ({_c_nbytes(node.shape, node.dtype, index)} < {l2}LL) "
                        f"{{ {call(serial, operands, k)} }} else "
                        f"{{ {call(step.kernel, operands, k)} }}")
        else:
            body.append(f"  {call(step.kernel, operands, k)}")
    copy_in = [f"  memcpy({ref(i.name)}, inputs[{k}], {_c_nbytes(i.shape, i.dtype, index)});"
               for k, i in enumerate(module.inputs)]
    copy_out = []
    for k, node in enumerate(graph.outputs):
        source = ref(node.value) if node.kind is NodeKind.CONSTANT else ref(node.name)
        copy_out.append(f"  memcpy(outputs[{k}], {source}, "
                        f"{_c_nbytes(node.shape, node.dtype, index)});")
    meta = {
        "format": META_FORMAT,
        "inputs": [[i.name, [dim_json(d) for d in i.shape], i.dtype] for i in module.inputs],
        "outputs": [[o.name, [dim_json(d) for d in o.shape], o.dtype] for o in module.outputs],
        "target": str(module.target),
        "vars": names,
        "bounds": {v: list(module.bounds[v]) for v in names},
    }
    driver = entry_source(list(decls.values()), meta, plan.arena_bytes, ", const int64_t *S",
                          ["  (void)S;", *copy_in, *body, *copy_out])
    return driver, kernels


def export_symbolic(module: Any, path: str | os.PathLike[str]) -> None:
    """Write a SymbolicModule as the shared library `path` (see the module docstring)."""
    weights = _Weights()
    driver, kernels = symbolic_driver(module, weights)
    write_library(driver, weights, kernels, module.target, path)
