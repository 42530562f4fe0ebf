"""Size buckets of a model with symbolic dims: its tuning tasks per bucket, and per bucket the
kernel that applies the bucket's tuned config while keeping symbolic extents.

`tune(g, buckets={"seq": [16, 32, 64]})` tunes, for every tunable node whose shapes depend on
the bucketed variables, its workload at each bucket's sizes (a variable without buckets at the
upper bound of the graph's `bounds`: one bucket). The records carry the node's sizes
(`Record.bucket["values"]`). `build` reads the buckets back from the log and compiles, per such
node and bucket, the node's symbolic kernel scheduled with that bucket's tuned config, or with
the fallback config of the node's static workload at the bucket's sizes where the budget did not
reach that workload (the fallback adapts the register block to small sizes: the symbolic
kernel's own fallback computed 64 columns of attention scores for 16); the module runs, at each
call, the kernel of the smallest bucket >= the actual sizes (`autotune.buckets.pick`), the
largest bucket's above them all. A bucket below the largest of each of its variables whose
output at the bucket's sizes is below the L2 size gets its kernel scheduled as a small output
(serial: `x86.common.symbolic_outputs_small`), as the static build of that size is: no size
that it serves is larger.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import autotune
import tensorlang as tl
from autotune import ConfigEntity, InstantiationError, Task, create_task
from autotune.buckets import assignments, check_buckets

from .. import x86
from ..symbolic import evaluate_shape, free_vars
from .cache import get_kernel
from .graph import Graph, Node
from .kernel import anchor_op, kernel_spec, node_compute
from .ops import find_workload


def node_vars(node: Node) -> list[str]:
    """The shape variables of a node's inputs and output."""
    return free_vars([d for n in (*node.inputs, node) for d in n.shape])


def static_workload(node: Node, sizes: Mapping[str, int]) -> tuple[str, tuple] | None:
    """(template, args) of a tunable node's workload at the given sizes of its variables."""
    inputs = [tl.placeholder(evaluate_shape(i.shape, sizes), i.dtype) for i in node.inputs]
    return find_workload(node_compute(node, inputs, sizes), anchor_op(node).tasks)


def tuning_buckets(g: Graph, buckets: Mapping[str, Sequence[int]]) -> dict[str, list[int]]:
    """`buckets` checked against the graph's variables; the others at the upper bound of the
    graph's `bounds`, one bucket each.

    Raises:
        ValueError: an unknown variable, a bad size, or a variable with neither buckets nor a
            bound.
    """
    names = free_vars([d for n in g.inputs for d in n.shape])
    out = check_buckets(buckets, names, "tune")
    for var in names:
        if var not in out:
            if var not in g.bounds:
                raise ValueError(f"tune: the shape variable {var!r} has no buckets and no bound "
                                 f"(give buckets={{{var!r}: [...]}} too)")
            out[var] = [g.bounds[var][1]]
    return out


def bucket_tasks(optimized: Graph, buckets: Mapping[str, Sequence[int]],
                 target: tl.Target) -> list[tuple[Task, int]]:
    """The tasks of `optimized` (a graph optimised for `target`): each static tunable node's
    workload, and each symbolic one's at every bucket of its variables, with counts; the tasks
    of buckets carry `bucket = {"values": sizes}` into their records."""
    found: dict[str, list[Any]] = {}
    for node in optimized.ops:
        if not anchor_op(node).tasks:
            continue
        names = node_vars(node)
        for sizes in assignments({v: buckets[v] for v in names}):
            workload = static_workload(node, sizes)
            if workload is not None:
                found.setdefault(repr(workload), [workload, 0, sizes])[1] += 1
    out = []
    for (name, args), count, sizes in found.values():
        task = create_task(name, args, target=str(target))
        if sizes:
            task.bucket = {"values": sizes}  # type: ignore[attr-defined]
        out.append((task, count))
    return out


def log_buckets(records: Sequence[Any]) -> dict[str, list[int]]:
    """Variable -> the sizes of the buckets that the records of a log were tuned at."""
    out: dict[str, set[int]] = {}
    for rec in records:
        for var, size in ((rec.bucket or {}).get("values") or {}).items():
            out.setdefault(var, set()).add(int(size))
    return {var: sorted(sizes) for var, sizes in out.items()}


def bucket_kernels(node: Node, key: str, buckets: Mapping[str, Sequence[int]], prepack: bool,
                   tgt: tl.Target, cache_dir: Any) -> list[tuple[dict[str, int], Any, str, int]]:
    """Per bucket of the node's variables: (sizes, kernel, task name, config index), the kernel
    being the node's symbolic one (`key`) scheduled with the bucket's tuned config in the active
    `apply_history_best` context, else with the static workload's fallback config at the
    bucket's sizes. Empty for a static node or one whose variables have no buckets."""
    names = node_vars(node)
    if not names or not anchor_op(node).tasks or any(v not in buckets for v in names):
        return []
    packs = [p.index for p in kernel_spec(node, prepack).packs]
    largest = {v: max(buckets[v]) for v in names}
    out = []
    for sizes in assignments({v: buckets[v] for v in names}):
        workload = static_workload(node, sizes)
        if workload is None:
            continue
        config = autotune.query_config(*workload)
        if not isinstance(config, ConfigEntity):
            config = create_task(*workload, target=str(tgt)).fallback_config()
            if config is None:
                continue
        # (keyed by the knobs: an index means other knobs in another bucket's space)
        knobs = json.dumps(config.to_json()["knobs"], sort_keys=True)
        small = (all(sizes[v] < largest[v] for v in names)
                 and node.nbytes_at(sizes) < tgt.caches.l2)
        with x86.config.symbolic_configs({workload[0]: config}), _outputs(small):
            try:
                spec = kernel_spec(node, prepack)
                if [p.index for p in spec.packs] != packs:
                    continue  # another packing: the module's packed weights would not fit
                kernel = get_kernel(
                    hashlib.sha256(f"{key}/{workload[0]}/{knobs}/{small}".encode()).hexdigest(),
                    lambda spec=spec: (spec.schedule(), spec.params), tgt, cache_dir)
            except InstantiationError:
                continue  # the config does not fit the symbolic schedule (a column group)
        out.append((sizes, kernel, workload[0], config.index))
    return out


def _outputs(small: bool) -> contextlib.AbstractContextManager:
    """Symbolic outputs counted as small (serial) within, or as large (the default)."""
    return x86.common.symbolic_outputs_small() if small else contextlib.nullcontext()
