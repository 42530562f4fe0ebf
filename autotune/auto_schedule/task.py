"""Auto-scheduled tasks: a workload function plus arguments, tuned with no template.

The bridge between auto-scheduling and the tuning machinery. `create_auto_task` wraps the
workload in a template generated from the sketch rules (`sketch.generate` reading its knobs
from the config), so the ConfigSpace, tuners, cost model, features, builders, runners and log
of templates serve it unchanged. Its log records also hold the schedule as a trace of
primitives; `AutoTask.apply_best` replays the best one (or instantiates its config, or the
untuned default when the log has none).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

import tensorlang as tl
from tensorlang.codegen.target import Target
from tensorlang.schedule import Schedule
from tensorlang.tensor import Tensor

from ..record import Record, best_records, load_records
from ..space import ConfigEntity, FallbackConfig
from ..task import _REGISTRY, TASK_MAKERS, Task, Template, get_config, query_config
from . import dag
from .registry import PREFIX, WorkloadFunc, is_workload, resolve
from .sketch import SKETCH_RULES, SketchRule, generate
from .trace import Trace, replay


class AutoSchedule:
    """The template function of an auto-scheduled task: runs the workload and schedules its
    tensors by the sketch rules with the current config. It travels to measurement workers
    by value, rules included (a user's extra rules reach them too)."""

    __name__ = "auto_schedule"

    def __init__(self, func: WorkloadFunc, rules: Sequence[SketchRule]):
        # (not `func`: Template copies this object's attributes onto itself)
        self.workload_func = func
        self.sketch_rules = tuple(rules)

    def tensors(self, args: Sequence[Any]) -> list[Tensor]:
        """The workload's tensors for `args` (inputs first, outputs last)."""
        out = self.workload_func(*args)
        tensors = [out] if isinstance(out, Tensor) else list(out)
        if not dag.outputs_of(tensors):
            raise TypeError(f"workload {self.workload_func!r} must return tensors, inputs "
                            f"first and outputs last, got {out!r}")
        return tensors

    def schedule(self, cfg: Any, args: Sequence[Any]) -> tuple[Schedule, list[Tensor], Trace]:
        """The schedule, tensors and trace of `cfg` on `args`."""
        tensors = self.tensors(args)
        s, trace = generate(tensors, cfg, self.sketch_rules)
        return s, tensors, trace

    def __call__(self, *args: Any) -> tuple[Schedule, list[Tensor]]:
        s, tensors, _ = self.schedule(get_config(), args)
        return s, tensors


class AutoTask(Task):
    """A task whose schedule comes from the sketch rules (see `create_auto_task`).

    Attributes:
        workload_name: the workload's registered (or derived) name.
        auto: the template function (`AutoSchedule`).
        default_tuner: what `autotune.tune` uses when given no tuner: evolutionary search
            (annealing scores far more configs per plan, a lowering each, on sketch spaces).
    """

    default_tuner = "evolutionary"

    def __init__(self, name: str, args: Sequence[Any], target: str | Target,
                 template: Template):
        super().__init__(name, args, target, template=template)
        self.auto: AutoSchedule = template.func
        self.workload_name = name.removeprefix(PREFIX)
        self._traces: dict[int, list[Any]] = {}

    def trace(self, config: ConfigEntity | FallbackConfig | int) -> Trace:
        """The trace of primitives that `config` (an index, a config or the fallback) makes."""
        if isinstance(config, int):
            config = self.config_space.get(config)
        with self.compile_target:
            _, _, trace = self.auto.schedule(config, self.args)
        return trace

    def trace_json(self, config: ConfigEntity) -> list[Any] | None:
        """The trace of `config` as JSON, for its log record (None when it cannot be made)."""
        if config.index not in self._traces:
            try:
                self._traces[config.index] = self.trace(config).to_json()
            except Exception:  # noqa: BLE001 - an invalid config has no trace; it is logged
                return None
        return self._traces[config.index]

    def default_schedule(self) -> tuple[Schedule, list[Tensor]]:
        """The untuned schedule (the fallback config of the sketch)."""
        with self.compile_target:
            s, tensors, _ = self.auto.schedule(FallbackConfig(), self.args)
        return s, tensors

    def best_record(self, log: str | os.PathLike[str] | Iterable[Record]) -> Record | None:
        """The best record of this workload in `log` for this task's CPU (or, lacking one,
        for its target string), or None."""
        records = load_records(log) if isinstance(log, (str, os.PathLike)) else list(log)
        mine = [r for r in records if r.key == self.key]
        same_cpu = [r for r in mine if r.cpu_signature == self.compile_target.cpu_signature]
        best = best_records(same_cpu or [r for r in mine if r.target == self.target])
        return min(best.values(), key=lambda r: r.result.mean, default=None) if len(best) > 1 \
            else next(iter(best.values()), None)

    def apply_best(self, log: str | os.PathLike[str] | Iterable[Record] | None = None
                   ) -> tuple[Schedule, list[Tensor]]:
        """The best schedule of this workload and its tensors (inputs first, outputs last).

        Args:
            log: a tuning log (path or records). Its best record is replayed from its trace
                (or rebuilt from its config when it has none). None: the record of the
                current `autotune.apply_history_best` context.

        With no record, the untuned default schedule of the sketch rules.
        """
        if log is None:
            with self.compile_target:
                config = query_config(self.name, self.args)
                s, tensors, _ = self.auto.schedule(config, self.args)
            return s, tensors
        record = self.best_record(log)
        if record is None:
            return self.default_schedule()
        if record.trace:
            return self.replay(Trace.from_json(record.trace))
        config = self.config_space.find(record.knobs) or self.config_space.get(
            record.config_index)
        return self.instantiate(config)

    def replay(self, trace: Trace) -> tuple[Schedule, list[Tensor]]:
        """A fresh schedule of this workload with `trace` applied, and its tensors."""
        tensors = self.auto.tensors(self.args)
        s = tl.create_schedule([t.op for t in dag.outputs_of(tensors)])
        with self.compile_target:
            replay(trace, s)
        return s, tensors

    def __repr__(self) -> str:
        return (f"AutoTask({self.workload_name}, args={self.workload[1]}, "
                f"target={self.target!r}, {len(self.config_space)} configs, {self.flop} flop)")


def create_auto_task(func_or_name: WorkloadFunc | str, args: Sequence[Any],
                     target: str | Target = "llvm",
                     rules: Sequence[SketchRule] | None = None) -> AutoTask:
    """An auto-scheduled task of a workload function (or a registered workload's name).

    Args:
        func_or_name: the workload: a function of `args` returning its tensors, inputs first
            and outputs last.
        args: its arguments (JSON-serialisable: shapes, dtypes, flags).
        target: the target to tune for.
        rules: the sketch rules (default: `SKETCH_RULES` as it is now).
    """
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"create_task: args must be a tuple, got {type(args).__name__}")
    template = auto_template(func_or_name, rules)
    return AutoTask(template.name, args, target, template)


def auto_template(func_or_name: WorkloadFunc | str,
                  rules: Sequence[SketchRule] | None = None) -> Template:
    """The template ("auto/<workload name>") that auto-schedules a workload with `rules`
    (default: `SKETCH_RULES` as it is now), registered so that direct calls and
    `autotune.query_config` find it by name; the registered one while its function and rules
    are the same (it keeps its config spaces)."""
    wname, func = resolve(func_or_name)
    name = PREFIX + wname
    rules = tuple(SKETCH_RULES if rules is None else rules)
    known = _REGISTRY.get(name)
    if known is not None and isinstance(known.func, AutoSchedule) and \
            known.func.workload_func is func and known.func.sketch_rules == rules:
        return known
    template = Template(name, AutoSchedule(func, rules))
    _REGISTRY[name] = template
    return template


def _make_task(name: Any, args: Sequence[Any], target: str | Target) -> AutoTask | None:
    """`create_task`'s maker for workloads: a function (not a template) or a registered
    workload name; None for anything else."""
    if callable(name) and not isinstance(name, Template) or is_workload(name):
        return create_auto_task(name, args, target)
    return None


TASK_MAKERS.append(_make_task)
