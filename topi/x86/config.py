"""How a schedule function finds its config: the tuned one of the current
`autotune.apply_history_best` context for the op's workload, else the fallback config."""

from __future__ import annotations

import autotune
from autotune.task import query_config

import tensorlang as tl


def workload_of(op: tl.ComputeOp, what: str) -> tuple | None:
    """The tuning-task arguments the compute recorded (None: symbolic shapes, not tunable)."""
    return op.attrs.get("workload")


def config_for(task_name: str, op: tl.ComputeOp) -> autotune.space.ConfigSpace:
    """The config to schedule `op` with: tuned for its workload if a record is active."""
    workload = workload_of(op, task_name)
    if workload is None:
        return autotune.space.FallbackConfig()
    return query_config(task_name, workload)
