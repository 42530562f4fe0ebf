"""The in-model verdict: each tuned workload against its untuned kernel, timed inside the model.

Why: the tuner times a kernel alone, call after call, with its weights and inputs kept in the
caches; in the model each layer's weights come from memory and its input from the kernel
before. A config that wins alone can lose there (one that re-reads a weight block that no
longer stays in L2, say), and an auto-scheduled node's baseline in the tuner is its sketch's
fallback, not the hand-written schedule an untuned build compiles. So after tuning, the model
is built untuned and tuned, the two run in turn (each kernel's time its fastest call of a
round, the median of the rounds), and every workload whose tuned kernels take
longer in the model than its untuned ones, summed over its calls, gets a verdict record that
chooses its fallback config: the build then compiles the untuned kernel for it (for an
auto-scheduled node, its default schedule).
"""

from __future__ import annotations

import os
import statistics
import warnings
from dataclasses import dataclass

import autotune
import tensorlang as tl
from autotune.auto_schedule.registry import PREFIX as AUTO_PREFIX
from autotune.record import encode
from autotune.result import MeasureErrorNo, MeasureInput, MeasureResult

from .build import as_target, build
from .graph import Graph
from .model_io import random_inputs

#: How much slower in the model (summed over a workload's calls) its tuned kernels may be.
MARGIN = 0.02
#: Untuned and tuned rounds alternate this many times; a kernel's time in a round is its
#: fastest call (a preemption on a busy machine costs a 20 us kernel ten times its time), and
#: its time is the median of its rounds.
ROUNDS = 7
#: Whole-model runs per round, at least one: a round lasts about this many seconds.
ROUND_SECONDS = 0.05


@dataclass
class KernelVerdict:
    """One tuned workload timed in the model: the mean seconds of one of its `calls` there."""

    task: autotune.Task
    calls: int
    untuned: float
    tuned: float

    @property
    def kept(self) -> bool:
        """Whether the tuned config stays (else its fallback was chosen)."""
        return self.tuned <= self.untuned * (1 + MARGIN)


def settle_in_model(g: Graph, log_file: str | os.PathLike[str], target: str | tl.Target = "llvm",
                    rounds: int = ROUNDS) -> list[KernelVerdict]:
    """Time `g` built untuned and with `log_file`'s records, in turn, and append to the log a
    verdict choosing the fallback of every workload whose tuned kernels are slower in the
    model (by more than `MARGIN`). Returns the verdict of each tuned workload."""
    tgt = as_target(target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the untuned build lists its fallback workloads
        untuned = build(g, target=tgt)
        tuned = build(g, log_file=log_file, target=tgt)
    inputs = random_inputs(untuned.inputs)
    number = max(1, int(ROUND_SECONDS / max(sum(untuned.step_seconds(1, inputs)), 1e-6)))
    runs: tuple[list[list[float]], list[list[float]]] = ([], [])  # untuned, tuned
    for _ in range(rounds):
        runs[0].append(untuned.step_seconds(number, inputs, fastest=True))
        runs[1].append(tuned.step_seconds(number, inputs, fastest=True))
    plain_at = {step.name: k for k, step in enumerate(untuned.steps)}
    tasks: dict[tuple[str, tuple], tuple[autotune.Task, int | None]] = {}  # and its fallback
    totals: dict[tuple[str, tuple], list[float]] = {}  # workload -> [calls, untuned, tuned]
    for k, step in enumerate(tuned.steps):
        if step.tuned is None or step.name not in plain_at:
            continue
        name, args, index = step.tuned
        if (name, args) not in tasks:
            task = _task(name, args, str(tgt))
            fallback = task.fallback_config()
            tasks[name, args] = task, None if fallback is None else fallback.index
        if index == tasks[name, args][1]:
            continue  # the fallback's own record: the untuned kernel
        sums = totals.setdefault((name, args), [0, 0.0, 0.0])
        sums[0] += 1
        sums[1] += statistics.median(run[plain_at[step.name]] for run in runs[0])
        sums[2] += statistics.median(run[k] for run in runs[1])
    verdicts = [KernelVerdict(tasks[workload][0], int(calls), plain / calls, fast / calls)
                for workload, (calls, plain, fast) in totals.items()]
    lines = [_fallback_line(v.task, v.untuned) for v in verdicts if not v.kept]
    if any(lines):
        with open(log_file, "a") as f:
            f.write("".join(line + "\n" for line in lines if line is not None))
    return verdicts


def _task(name: str, args: tuple, target: str) -> autotune.Task:
    """The task of a workload as its tuner had it: an auto-scheduled one (named
    "auto/<workload>") is made from its workload, so that its records carry their traces."""
    if name.startswith(AUTO_PREFIX):
        return autotune.create_task(name.removeprefix(AUTO_PREFIX), args, target)
    return autotune.create_task(name, args, target)


def _fallback_line(task: autotune.Task, untuned: float) -> str | None:
    """A verdict record choosing `task`'s fallback config, timed `untuned` in the model; None
    (with a warning) when the fallback is no config of the task's space."""
    config = task.fallback_config()
    if config is None:
        warnings.warn(f"{task.name}: slower tuned than untuned in the model, but its fallback "
                      f"is no config of its space; the tuned config stays", stacklevel=3)
        return None
    return encode(MeasureInput(task, config), MeasureResult((untuned,), MeasureErrorNo.NO_ERROR),
                  rounds=(untuned,), chosen=True)
