"""Workloads: plain functions of shapes that return tensors (inputs first, outputs last).

The first stage of auto-scheduling. `@autotune.workload("name")` registers such a function so
that tasks, logs and the command line can name it; an unregistered function is named by its
module and qualified name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

WorkloadFunc = Callable[..., Any]

#: The prefix of the template name of an auto-scheduled task ("auto/<workload name>").
PREFIX = "auto/"

_WORKLOADS: dict[str, WorkloadFunc] = {}


def workload(name: str) -> Callable[[WorkloadFunc], WorkloadFunc]:
    """Register a workload function under `name` (for `create_task(name, args)`).

    The function takes shapes and other JSON-serialisable arguments and returns its tensors,
    inputs first and outputs last, with no schedule and no knobs. It is returned unchanged.
    """
    if not isinstance(name, str) or not name or name.startswith(PREFIX):
        raise TypeError(f"workload name must be a non-empty string not starting with "
                        f"{PREFIX!r}, got {name!r}")

    def register(func: WorkloadFunc) -> WorkloadFunc:
        _WORKLOADS[name] = func
        func.__autotune_workload__ = name  # type: ignore[attr-defined]
        return func

    return register


def is_workload(name: str) -> bool:
    """Whether `name` (with or without the "auto/" prefix) names a registered workload."""
    return isinstance(name, str) and name.removeprefix(PREFIX) in _WORKLOADS


def resolve(func_or_name: WorkloadFunc | str) -> tuple[str, WorkloadFunc]:
    """The (name, function) of a workload given as a function or a registered name.

    Raises:
        ValueError: no workload has that name.
        TypeError: neither a function nor a string.
    """
    if isinstance(func_or_name, str):
        key = func_or_name.removeprefix(PREFIX)
        if key not in _WORKLOADS:
            known = ", ".join(sorted(_WORKLOADS)) or "none"
            raise ValueError(f"no workload named {key!r} (registered: {known})")
        return key, _WORKLOADS[key]
    if not callable(func_or_name):
        raise TypeError(f"a workload is a function or a registered name, got "
                        f"{type(func_or_name).__name__}")
    name = getattr(func_or_name, "__autotune_workload__", None)
    if name is None:
        module = getattr(func_or_name, "__module__", None) or "workload"
        name = f"{module}.{getattr(func_or_name, '__qualname__', 'func')}"
    return name, func_or_name
