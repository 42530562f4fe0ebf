"""Auto-scheduled tasks of a model's kernels that have no template.

Why: softmax, layer_norm, fused elementwise chains, pooling, reductions and the like ran their
untuned default schedules; the auto-scheduler (`autotune.auto_schedule`) can tune any compute.
A node becomes a workload whose one argument is its computation as JSON (input shapes and
dtypes, then each op with its attrs and operands), so the task travels to measurement workers
and logs like any other; the workload is registered under "topi.graph/<ops>" (for example
"topi.graph/softmax", "topi.graph/add+tanh") so that the task scheduler compares a task with
its own kind and a log reads plainly. `tune` tunes these tasks with the template tasks, and
`build` compiles a node with its record's schedule (`kernel.kernel_spec`), else with its
default schedule as before.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import autotune
import tensorlang as tl
from autotune import FallbackConfig, query_config
from autotune.auto_schedule import auto_template, generate
from autotune.space import ConfigEntity
from autotune.task import Template, count_flop

from .graph import FUSED, Node, op_label
from .ops import OpDef, call_compute, get_op

#: The prefix of the workload names of graph nodes.
PREFIX = "topi.graph/"


def _json_tuples(value: Any) -> Any:
    """JSON's lists back as the tuples the ops' attrs were given as."""
    if isinstance(value, list):
        return tuple(_json_tuples(v) for v in value)
    return value


def node_workload(text: str, carried: Mapping[str, OpDef] | None = None) -> list[tl.Tensor]:
    """The workload function of every graph node: its input placeholders ("in0", "in1", ...)
    and its computes rebuilt from the JSON of `describe_node`, inputs first, output last.
    `carried`: the ops that a measurement worker cannot look up by name (`OpDef.portable`)."""
    spec = json.loads(text)
    inputs = [tl.placeholder(tuple(shape), dtype, name=f"in{k}")
              for k, (shape, dtype) in enumerate(spec["inputs"])]
    values: list[tl.Tensor] = list(inputs)
    for op, attrs, operands in spec["ops"]:
        op_def = (carried or {}).get(op) or get_op(op)
        values.append(call_compute(op_def, [values[k] for k in operands],
                                   {k: _json_tuples(v) for k, v in attrs.items()}))
    return [*inputs, values[spec["output"]]]


def describe_node(node: Node) -> str | None:
    """The JSON of `node`'s computation that `node_workload` rebuilds, or None when the node
    cannot be a workload (symbolic dims, attrs that are not plain JSON values, an op whose
    author wrote its schedule: `OpDef.auto_schedule`)."""
    if node.symbolic or any(i.symbolic for i in node.inputs):
        return None
    if node.op == FUSED:
        assert node.body is not None
        sources = list(node.body.inputs)
        body = node.body.ops
        output = node.body.outputs[0]
    else:
        sources, body, output = list(node.inputs), [node], node
    if not all(get_op(n.op).auto_schedule for n in body):
        return None
    slot = {n: k for k, n in enumerate(sources)}
    ops = []
    for n in body:
        slot[n] = len(sources) + len(ops)
        ops.append([n.op, dict(n.attrs), [slot[i] for i in n.inputs]])
    spec = {"inputs": [[list(i.shape), i.dtype] for i in node.inputs], "ops": ops,
            "output": slot[output]}
    try:
        return json.dumps(spec, sort_keys=True)
    except (TypeError, ValueError):
        return None


def workload_name(node: Node) -> str:
    """The workload name of `node` ("topi.graph/<its ops>"), registered on first use."""
    name = PREFIX + op_label(node)
    if not autotune.auto_schedule.is_workload(name):
        ops = node.body.ops if node.op == FUSED and node.body is not None else [node]
        carried = {n.op: get_op(n.op) for n in ops if not get_op(n.op).portable}
        if not carried:
            autotune.workload(name)(node_workload)
        else:  # the ops travel to the workers with the workload, by value

            def carried_workload(text: str) -> list[tl.Tensor]:
                return node_workload(text, carried)

            autotune.workload(name)(carried_workload)
    return name


def auto_workload(node: Node) -> tuple[str, tuple[str]] | None:
    """(workload name, args) of an untemplated `node`'s auto-scheduled task, or None when it
    has nothing to tune (no arithmetic: a reshape, a transpose, a copy) or cannot be
    described."""
    text = describe_node(node)
    if text is None or count_flop(node_workload(text)[-1:]) == 0:
        return None
    return workload_name(node), (text,)


def tuned_config(node: Node) -> tuple[Template, tuple[str], ConfigEntity] | None:
    """(template, args, config) of `node`'s auto-scheduled record in the active
    `autotune.apply_history_best` context for the current target, or None without one, or
    when the record's config is the sketch's own fallback: no trial beat the untuned sketch,
    so the node keeps the default schedule that an untuned build compiles (a tuned build then
    differs from an untuned one only where tuning found something faster)."""
    text = describe_node(node)
    if text is None:
        return None
    template = auto_template(workload_name(node))
    with warnings.catch_warnings():  # no record is the common case: the default schedule
        warnings.simplefilter("ignore")
        config = query_config(template.name, (text,))
    if isinstance(config, FallbackConfig):
        return None
    fallback = FallbackConfig()
    template.run(fallback, (text,), tl.Target.current())
    untuned = config.space.find(fallback.knob_values())
    if untuned is not None and untuned.index == config.index:
        return None
    return template, (text,), config


def schedule_tuned(template: Template, config: ConfigEntity,
                   tensors: Sequence[tl.Tensor]) -> tl.Schedule:
    """The schedule `config` gives the workload's `tensors` (those of `node_workload`), by
    the template's sketch rules."""
    s, _ = generate(tensors, config, template.func.sketch_rules)
    return s
