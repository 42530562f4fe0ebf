"""The device runner's jobs in this machine's isolated worker processes: a config exported as a
shared library for the device, and the reference outputs its results are checked against.

Both run the user's template, so they run where a template error or a hang costs one typed
result (autotune/workers.py), never the tuner.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensorlang.runtime import build_module

from ..artifact import TaskSpec, instantiate, lower_config, reference_outputs
from ..result import MeasureErrorNo
from ..workers import StageFailure


def export_job(payload: tuple[TaskSpec, int, str], stage: Callable[..., None]) -> None:
    """Export config `index` of the task as the shared library `path` for the task's target,
    lowered exactly as the builder lowered it (the same code that the artifact's hash names)."""
    spec, index, path = payload
    task = spec.task()
    s, args = instantiate(task, index)
    try:
        _, func = lower_config(task, s, args)
        build_module(func, task.target).export_library(path)
    except Exception as err:  # noqa: BLE001 - reported as a compile error of this config
        raise StageFailure(MeasureErrorNo.COMPILE_ERROR, f"{type(err).__name__}: {err}") from None


def reference_job(spec: TaskSpec, stage: Callable[..., None]
                  ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The task's random inputs and its outputs under the default schedule, computed on this
    machine: the device's outputs must match them."""
    return reference_outputs(spec, target="llvm")
