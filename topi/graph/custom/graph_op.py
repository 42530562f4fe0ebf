"""A custom op as a graph op: registered on first use, applied by the frontends' converters.

The graph op ("<namespace>_<name>") computes one output of the op (attr `output`, for an op
of several outputs: each is a node, and a kernel, of its own). Its pattern is the compute's
(`CustomOp.pattern_of`), so elementwise neighbours fuse into it as they do into softmax or an
elementwise chain; its schedule is its author's or the graph's for that pattern; its numpy reference
runs the op's eager kernel. Every node also records the `fingerprint` of the kernel its compute
and schedule lower to, so that the kernels cached on disk and the tuning records of a model
follow edits of the op's code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import tensorlang as tl

from ..importer import GraphWriter, Value, dtype_of, shape_of
from ..ops import register_op, registered_ops
from .analysis import check_reads
from .eager import run
from .op import CustomOp, Spec, fingerprint_of
from .template import TAG, tagged, template_config

_GRAPH_OPS: dict[int, tuple[CustomOp, str]] = {}


def graph_op_name(op: CustomOp, specs: Sequence[Spec], attrs: Mapping[str, Any]) -> str:
    """The graph op of `op`, registered the first time (its pattern read from the compute on
    inputs of `specs`)."""
    found = _GRAPH_OPS.get(id(op))
    if found is not None:
        return found[1]
    _, outs = op.trace(specs, attrs)
    pattern = op.pattern_of(outs)
    name = _free_name(f"{op.namespace}_{op.name}")

    def compute(*tensors: tl.Tensor, output: int = 0, fingerprint: str = "",
                **node_attrs: Any) -> tl.Tensor:
        outs = op.apply(tensors, node_attrs)
        check_reads(outs, op.qualname)
        if op.template is None:
            return outs[output]
        return tagged(outs[0], [(t.shape, t.dtype) for t in tensors], node_attrs, fingerprint)

    def schedule(outs: Sequence[tl.Tensor]) -> tl.Schedule:
        cfg = template_config(op, outs[0].op) if op.template is not None else None
        return op.default_schedule(outs, cfg)

    def reference(*arrays: np.ndarray, output: int = 0, fingerprint: str = "",
                  **node_attrs: Any) -> np.ndarray:
        result = run(op, [np.ascontiguousarray(a) for a in arrays], node_attrs)
        return result[output] if isinstance(result, tuple) else result

    register_op(name, compute, schedule, pattern, reference=reference,
                tasks={TAG: op.template_name} if op.template is not None else None,
                auto_schedule=op.schedule is None and op.template is None, portable=False)
    _GRAPH_OPS[id(op)] = (op, name)
    return name


def _free_name(base: str) -> str:
    """`base`, or `base_<k>` where an op already has that name."""
    taken = set(registered_ops())
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


def apply(writer: GraphWriter, op: CustomOp, inputs: Sequence[Value],
          attrs: Mapping[str, Any]) -> list[Value]:
    """The graph values of `op`'s outputs on `inputs` (nodes or arrays) with `attrs`: one node
    per output (or arrays, computed now, when every input is an array)."""
    op.check_count(len(inputs))
    specs = tuple((shape_of(v), dtype_of(v)) for v in inputs)
    name = graph_op_name(op, specs, attrs)
    key = fingerprint_of(op, specs, tuple(sorted(attrs.items())))
    node_attrs = {**attrs, "fingerprint": key}
    if op.outputs == 1:
        return [writer.op(name, *inputs, **node_attrs)]
    return [writer.op(name, *inputs, output=k, **node_attrs) for k in range(op.outputs)]
