"""How a schedule function finds its config: the tuned one of the current
`autotune.apply_history_best` context for the op's workload, else the fallback config."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorlang as tl
from autotune import ConfigEntity, FallbackConfig, query_config

from .common import as_tensor_list, traverse


def config_for(task_name: str, op: tl.ComputeOp) -> ConfigEntity | FallbackConfig:
    """The config to schedule `op` with: the best record of its workload when one is active.

    Ops with symbolic shapes record no workload and always get the fallback config.
    """
    workload = op.attrs.get("workload")
    if workload is None:
        return FallbackConfig()
    return query_config(task_name, workload)


ScheduleWith = Callable[[Any, tl.Schedule, tl.Tensor, tl.Tensor], None]


def schedule_tagged(
    outs: tl.Tensor | Sequence[tl.Tensor], tasks: Mapping[str, str], schedule_with: ScheduleWith
) -> tl.Schedule:
    """A schedule of `outs` in which every op whose tag is a key of `tasks` is scheduled by
    `schedule_with(cfg, s, op_output, outs[0])`, with the config of the task `tasks[tag]`;
    injective producers and consumers get the generic treatment of `traverse`."""
    outs = as_tensor_list(outs)
    s = tl.create_schedule([t.op for t in outs])
    found: list[tl.ComputeOp] = []
    traverse(s, outs, lambda op: found.append(op) if op.tag in tasks else None)
    for op in found:
        schedule_with(config_for(tasks[op.tag], op), s, op.output(0), outs[0])
    return s


def template_schedule(cfg: Any, out: tl.Tensor, schedule_with: ScheduleWith) -> tl.Schedule:
    """The schedule a tunable template returns: `out`'s stage scheduled with `cfg`."""
    s = tl.create_schedule(out.op)
    traverse(s, [out], lambda op: None)
    schedule_with(cfg, s, out, out)
    return s
