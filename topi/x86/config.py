"""How a schedule function finds its config: the tuned one of the current
`autotune.apply_history_best` context for the op's workload, else the fallback config."""

from __future__ import annotations

import tensorlang as tl
from autotune import ConfigEntity, FallbackConfig, query_config


def config_for(task_name: str, op: tl.ComputeOp) -> ConfigEntity | FallbackConfig:
    """The config to schedule `op` with: the best record of its workload when one is active.

    Ops with symbolic shapes record no workload and always get the fallback config.
    """
    workload = op.attrs.get("workload")
    if workload is None:
        return FallbackConfig()
    return query_config(task_name, workload)
