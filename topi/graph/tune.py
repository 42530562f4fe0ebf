"""`tune`: one trial budget spread over a model's tasks by a gradient task scheduler.

The objective is the model's estimated latency, the sum over tasks of count x best latency. As
in Ansor's task scheduler (Zheng et al., OSDI 2020, section 6), every task is first tuned for one
round; then each round goes to the task whose next trials are expected to lower the objective
most, estimated per task as count x (a blend of the recent improvement per trial and an optimistic
forecast: either the latency would keep falling like 1/trials, or the task would reach the best
throughput seen on a task of the same template). Tasks whose configs run out drop out.

The first trial of every task measures its fallback config (the one `build` uses untuned), and
at the end of the run every task tuned in it re-measures its fallback and its fastest configs side
by side, round-robin (`autotune.remeasure`): the median per-round ratio to the fallback decides
the task's best, so that neither a lucky one-shot timing on a busy machine nor a config slower
than the fallback is what `build` applies. Every measurement goes to the log, and the log is
where a run resumes: the trials already recorded for a task count against the budget and its best
record (its latest verdict's winner, once re-measured) is its starting latency.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import autotune
import tensorlang as tl
from autotune import FallbackConfig, Task
from autotune.measure import kept_open
from autotune.tuner import Tuner
from autotune.tuner.base import REMEASURE_ROUNDS, REMEASURE_TOP

from .auto_tasks import PREFIX
from .build import as_target
from .buckets import bucket_tasks, tuning_buckets
from .graph import Graph
from .model_verdict import settle_in_model
from .passes import optimize
from .tasks import extract_tasks

#: Weight of the observed improvement against the optimistic forecast (Ansor's alpha).
ALPHA = 0.2
#: How far beyond the best similar task's throughput a task may be hoped to go (Ansor's beta).
BETA = 2.0


@dataclass
class TaskState:
    """What the scheduler knows about one task.

    Attributes:
        task: the autotune task.
        count: how many times the model runs it.
        trials: measurements made so far (the log's included).
        best: the best latency in seconds (inf before any valid measurement).
        history: (trials, best) after each round, for the improvement per trial.
        exhausted: its config space has nothing left to measure.
    """

    task: Task
    count: int
    trials: int = 0
    best: float = math.inf
    history: list[tuple[int, float]] = field(default_factory=list)
    exhausted: bool = False

    @property
    def weighted(self) -> float:
        """Its share of the model's latency: count x best."""
        return self.count * self.best

    @property
    def gflops(self) -> float:
        return self.task.flop / self.best / 1e9 if math.isfinite(self.best) else 0.0


def gradient(state: TaskState, states: Sequence[TaskState]) -> float:
    """The expected change of the model latency per extra trial of `state` (negative: gain)."""
    if state.trials == 0:
        return -math.inf  # the warm-up round: every task is measured once first
    if not math.isfinite(state.best):
        return 0.0  # every config failed so far: no evidence of a gain
    backward = 0.0
    if len(state.history) >= 2:
        (t0, g0), (t1, g1) = state.history[-2], state.history[-1]
        if t1 > t0 and math.isfinite(g0):
            backward = (g1 - g0) / (t1 - t0)
    forward = -state.best / state.trials
    similar = [s.task.flop / s.best for s in states
               if s.task.name == state.task.name and math.isfinite(s.best)]
    if similar and state.task.flop:
        forward = min(forward, BETA * state.task.flop / max(similar) - state.best)
    return state.count * (ALPHA * backward + (1 - ALPHA) * forward)


def choose(states: Sequence[TaskState]) -> TaskState | None:
    """The task to tune next: the steepest expected descent of the model latency (ties: the
    largest share of it), or None when every task is exhausted."""
    active = [s for s in states if not s.exhausted]
    if not active:
        return None
    return min(active, key=lambda s: (gradient(s, states), -s.weighted))


@dataclass
class TuneResult:
    """The outcome of `tune`: per task its count, trials and best latency."""

    states: list[TaskState]
    seconds: float

    @property
    def trials(self) -> int:
        return sum(s.trials for s in self.states)

    @property
    def estimated_latency(self) -> float:
        """Sum of count x best latency over the tasks (inf while one has no valid record)."""
        return sum(s.weighted for s in self.states)

    def __str__(self) -> str:
        lines = [f"{'task':<60} {'count':>5} {'trials':>6} {'best ms':>9} {'GFLOP/s':>8}"]
        for s in self.states:
            lines.append(f"{_label(s.task):<60} {s.count:>5} {s.trials:>6} "
                         f"{_ms(s.best):>9} {s.gflops:>8.1f}")
        lines.append(f"{self.trials} trials in {self.seconds:.1f} s; tuned kernels' latency "
                     f"sum (count x best): {_ms(self.estimated_latency)} ms")
        return "\n".join(lines)


def _label(task: Task) -> str:
    args = list(task.args)
    if task.name.startswith("auto/" + PREFIX):  # the node's JSON: show its input shapes
        args = [shape for shape, _ in json.loads(args[0])["inputs"]]
    text = f"{task.name} {args}"
    return text if len(text) <= 60 else text[:57] + "..."


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4f}" if math.isfinite(seconds) else "-"


def fallback_index(task: Task) -> int | None:
    """The index of `task`'s fallback config in its space, or None when the space lacks it."""
    fallback = FallbackConfig()
    task.template.run(fallback, task.args, task.target)
    space = task.config_space
    digits = []
    for name, knob in space.knobs.items():
        chosen = fallback[name].to_json()
        digit = next((k for k, e in enumerate(knob.entities) if e.to_json() == chosen), None)
        if digit is None:
            return None
        digits.append(digit)
    index = space.knob2point(digits)
    return index if space.is_valid(index) else None


class _Given(Tuner):
    """Proposes the given configs, in order (to measure a task's fallback config)."""

    def __init__(self, task: Task, indices: Sequence[int]):
        super().__init__(task)
        self.todo = list(indices)

    def next_batch(self, n: int) -> list[Any]:
        batch, self.todo = self.todo[:n], self.todo[n:]
        return [self.space.get(i) for i in batch if i not in self.visited]

    def has_next(self) -> bool:
        return bool(self.todo)


def _resume(states: Sequence[TaskState], log_file: str) -> None:
    """Trials and best latencies already in the log (re-measurements are not trials)."""
    if not os.path.exists(log_file):
        return
    by_key = {(s.task.key, s.task.target): s for s in states}
    records = autotune.load_records(log_file)
    for record in records:
        state = by_key.get((record.key, record.target))
        if state is not None and not record.remeasured:
            state.trials += 1
    for key, best in autotune.best_records(records).items():
        if key in by_key:
            by_key[key].best = best.result.mean
    for s in states:
        if s.trials:
            s.history.append((s.trials, s.best))


def tune(g: Graph, trials: int = 2000, log_file: str | os.PathLike[str] | None = None,
         target: str | tl.Target = "llvm", tuner: str | None = None, per_round: int = 32,
         measure_option: Any = None, early_stopping: int | None = None,
         seed: int | None = None, progress: bool = True,
         stream: TextIO | None = None, remeasure_top: int = REMEASURE_TOP,
         remeasure_rounds: int = REMEASURE_ROUNDS,
         buckets: Mapping[str, Sequence[int]] | None = None,
         in_model: bool = True) -> TuneResult:
    """Tune the tasks of `g` with one budget of `trials` measurements in all.

    Args:
        g: the model.
        trials: the budget, counting the trials of these tasks already in `log_file` (a rerun
            with the same log resumes instead of starting over).
        log_file: the JSON-lines log to append to and resume from (a temporary one if None:
            then the results are only in the returned summary).
        target: the target the tasks are measured for.
        tuner: the autotune tuner of every task ("xgb", "evolutionary", "ga", "random", ...);
            None: each task's default (xgb for a template task, evolutionary search for an
            auto-scheduled one).
        per_round: trials a task gets each time it is chosen.
        measure_option: from `autotune.measure_option` (default builder and runner if None).
        early_stopping: per round, stop a task after this many trials without improvement.
        seed: passed to the tuners.
        progress: print a line per round (and the summary) to `stream` (stderr by default).
        remeasure_top, remeasure_rounds: at the end, each task tuned in this run re-measures
            its fallback, its previous verdict's winner and its `remeasure_top` fastest configs
            `remeasure_rounds` times, round-robin (no trials of the budget); 0 turns it off.
        buckets: for a graph with symbolic dims, shape variable -> sizes ({"seq": [16, 32,
            64]}): every tunable node is tuned at each bucket of its variables (a variable
            without buckets at the upper bound of `g.bounds`), the budget shared by all
            buckets' tasks; `build` with the log compiles a kernel per bucket, and the module
            runs the one of the smallest bucket >= the actual size (see `buckets.py`).
        in_model: at the end, build the model untuned and tuned and time the two in turn: a
            workload whose tuned kernels are slower where they run in the model gets a verdict
            that chooses its fallback (`model_verdict.py`). Not with a measure function (its
            timings are not this machine's) nor with buckets.

    Raises:
        ValueError: a non-positive budget or round size; `buckets` naming an unknown variable,
            or a symbolic variable with neither buckets nor a bound.
    """
    if trials < 0 or per_round < 1:
        raise ValueError(f"tune: trials must be >= 0 and per_round >= 1, got {trials}, "
                         f"{per_round}")
    start = time.perf_counter()
    if remeasure_top < 0 or remeasure_rounds < 0:
        raise ValueError(f"tune: remeasure_top and remeasure_rounds must be >= 0, got "
                         f"{remeasure_top}, {remeasure_rounds}")
    if buckets is not None:
        tgt = as_target(target)
        sizes = tuning_buckets(g, buckets)
        with tgt:
            pairs = bucket_tasks(optimize(g), sizes, tgt)
    else:
        pairs = extract_tasks(g, target)
    states = [TaskState(task, count) for task, count in pairs]
    out = stream if stream is not None else sys.stderr
    # One set of measurement workers for every round of every task.
    with tempfile.TemporaryDirectory() as tmp, kept_open(measure_option) as option:
        log = str(log_file) if log_file is not None else os.path.join(tmp, "tune.jsonl")
        _resume(states, log)
        resumed = [s.trials for s in states]
        rounds = 0
        while (remaining := trials - sum(s.trials for s in states)) > 0:
            state = choose(states)
            if state is None:
                break
            budget = state.trials + min(per_round, remaining)
            common = {"log_file": log, "measure_option": option, "progress": False,
                      "remeasure_top": 0}  # once per task, at the end
            fallback = fallback_index(state.task) if state.trials == 0 else None
            if fallback is not None:
                autotune.tune(state.task, trials=1, tuner=_Given(state.task, [fallback]),
                              **common)
            result = autotune.tune(state.task, trials=budget, tuner=tuner, seed=seed,
                                   early_stopping=early_stopping, **common)
            state.exhausted = result.n_results <= state.trials
            state.trials = result.n_results
            state.best = min(state.best, result.cost)
            state.history.append((state.trials, state.best))
            rounds += 1
            if progress:
                _report(out, rounds, states, state, trials, start)
        for state, before in zip(states, resumed):
            if state.trials > before:
                _settle(state, log, option, remeasure_top, remeasure_rounds,
                        out if progress else None)
        if (in_model and buckets is None and isinstance(option, autotune.MeasureOption)
                and any(s.trials > before for s, before in zip(states, resumed))):
            _settle_in_model(g, log, target, states, out if progress else None)
    summary = TuneResult(states, time.perf_counter() - start)
    if progress:
        print(summary, file=out, flush=True)
    return summary


def _settle(state: TaskState, log: str, measure_option: Any, top: int, rounds: int,
            out: TextIO | None) -> None:
    """Re-measure a task's contenders for the best; the verdict's median is its latency."""
    result = autotune.remeasure(state.task, log, measure_option, top, rounds)
    if result.verdict is None:
        return
    state.best = result.cost
    if out is not None:
        verdict, index = result.verdict, fallback_index(state.task)
        fallback = next((r for i, r in zip(verdict.inputs, verdict.results)
                         if i.config.index == index), None)
        print(f"[tune] re-measured {state.task.name} ({len(verdict.inputs)} configs x "
              f"{rounds}): best {_ms(state.best)} ms ({state.gflops:.1f} GFLOP/s)"
              + ("" if fallback is None else f", fallback {_ms(fallback.mean)} ms"),
              file=out, flush=True)


def _settle_in_model(g: Graph, log: str, target: str | tl.Target,
                     states: Sequence[TaskState], out: TextIO | None) -> None:
    """`model_verdict.settle_in_model`; a task whose fallback it chose takes the fallback's
    time in the model as its best."""
    by_key = {s.task.key: s for s in states}
    for verdict in settle_in_model(g, log, target):
        state = by_key.get(verdict.task.key)
        if verdict.kept or state is None:
            continue
        state.best = verdict.untuned
        if out is not None:
            print(f"[tune] in the model, {verdict.task.name} ran {_ms(verdict.tuned)} ms tuned "
                  f"against {_ms(verdict.untuned)} ms untuned a call: its fallback is chosen",
                  file=out, flush=True)


def _report(out: TextIO, rounds: int, states: Sequence[TaskState], state: TaskState,
            budget: int, start: float) -> None:
    index = states.index(state) + 1
    total = sum(s.trials for s in states)
    done = sum(1 for s in states if math.isfinite(s.best))
    print(f"[tune {time.perf_counter() - start:7.1f}s] round {rounds}: task {index}/{len(states)} "
          f"{state.task.name} x{state.count} | {state.trials} trials | best {_ms(state.best)} ms "
          f"({state.gflops:.1f} GFLOP/s) | {done}/{len(states)} tasks measured | "
          f"budget {total}/{budget}", file=out, flush=True)
