"""Auto-scheduling: tune a kernel written as a plain compute, with no template.

Data flow: a workload (a function of shapes returning tensors, inputs first and outputs last;
`registry`) -> compute-DAG analysis (`dag`) -> sketch rules, applied stage by stage from the
outputs back, each choice a knob of the config (`sketch`) -> the schedule recorded as a trace of
primitives (`trace`) -> an `AutoTask` that the same tuner loop, cost model, builders, runners
and JSON-lines log tune like a template task (`task`); its records hold the trace, which
`AutoTask.apply_best` replays.
"""

from .registry import is_workload, resolve, workload
from .sketch import SKETCH_RULES, SketchRule, SketchState, generate
from .task import AutoSchedule, AutoTask, auto_template, create_auto_task
from .trace import Trace, Tracer, TraceStep, replay

__all__ = [
    "SKETCH_RULES",
    "AutoSchedule",
    "AutoTask",
    "SketchRule",
    "SketchState",
    "Trace",
    "TraceStep",
    "Tracer",
    "auto_template",
    "create_auto_task",
    "generate",
    "is_workload",
    "replay",
    "resolve",
    "workload",
]
