"""`extract_tasks`: the distinct tunable workloads of a model, with how often each occurs.

A node is tunable when its op (a fused node: its anchor op) names autotune templates in the
registry; its task arguments are read from the workload its topi compute records, so they are
exactly what the schedule will look up at build time. A node without a template (softmax,
layer_norm, an elementwise chain, pooling, a reduction) is tunable too, as an auto-scheduled
task of its computation (`auto_tasks`), unless it has no arithmetic to schedule. The layout
pass changes workloads (a conv becomes a conv2d_NCHWc whose blocks depend on the target), so
tasks are read from the graph optimized for the target, as `build` optimizes it.
"""

from __future__ import annotations

import tensorlang as tl
from autotune import Task, create_task

from .auto_tasks import auto_workload
from .build import as_target
from .graph import Graph, Node
from .kernel import anchor_op, node_compute
from .ops import find_workload
from .passes import optimize


def template_workload(node: Node) -> tuple[str, tuple] | None:
    """(template, args) of `node`'s tunable stage, or None when its op has no template for it."""
    tasks = anchor_op(node).tasks
    if not tasks:
        return None
    inputs = [tl.placeholder(i.shape, i.dtype) for i in node.inputs]
    return find_workload(node_compute(node, inputs), tasks)


def workloads(g: Graph) -> list[tuple[tuple[str, tuple], int]]:
    """((template, args), count) of every tunable workload of `g`, in order of first use."""
    counts: dict[str, list] = {}
    for node in g.ops:
        found = template_workload(node)
        if found is None:
            continue
        key = repr(found)
        counts.setdefault(key, [found, 0])[1] += 1
    return [(found, count) for found, count in counts.values()]


def extract_tasks(g: Graph, target: str | tl.Target = "llvm",
                  auto: bool = True) -> list[tuple[Task, int]]:
    """The distinct tunable workloads of `g` as autotune tasks for `target`, with their counts,
    in order of first use.

    Args:
        g: the model.
        target: the target the tasks are for.
        auto: also the auto-scheduled tasks of the nodes without a template.

    Raises:
        TypeError: `g` is not a Graph.
    """
    if not isinstance(g, Graph):
        raise TypeError(f"extract_tasks takes a topi.graph.Graph, got {type(g).__name__}")
    target = as_target(target)
    counts: dict[str, list] = {}
    with target:
        for node in optimize(g).ops:
            found = template_workload(node)
            if found is None and auto:
                found = auto_workload(node)
            if found is not None:
                counts.setdefault(repr(found), [found, 0])[1] += 1
    return [(create_task(name, args, target=str(target)), count)
            for (name, args), count in counts.values()]
