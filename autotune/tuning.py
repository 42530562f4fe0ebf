"""`autotune.tune`: the one-call entry point (tuner + measurement + log + resume + progress)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import tensorlang as tl

from .buckets import BucketedTask
from .measure import LocalRunner, MeasureOption
from .progress import Progress
from .record import Record, load_records, log_to_file
from .result import MeasureErrorNo, MeasureInput, MeasureResult, gflops
from .space import ConfigEntity
from .task import Task
from .tuner import EvolutionaryTuner, GATuner, GridSearchTuner, RandomTuner, Tuner, XGBTuner
from .tuner.base import REMEASURE_ROUNDS, REMEASURE_TOP, Callback, MeasureFn, Verdict

_TUNERS = {
    "xgb": XGBTuner,
    "xgb_knob": lambda task, seed=None: XGBTuner(task, feature_type="knob", seed=seed),
    "evolutionary": EvolutionaryTuner,
    "ga": GATuner,
    "random": RandomTuner,
    "grid": GridSearchTuner,
}


@dataclass(frozen=True)
class Result:
    """The outcome of `tune`.

    Attributes:
        config: the fastest config (None if nothing ran successfully): the winner of the
            end-of-run re-measurement, or of the log's latest one, when there was one.
        cost: its time in seconds (re-measured: the median of the rounds; inf if none).
        gflops: its throughput.
        n_results: trials of this task in total (including resumed ones; re-measurements are
            not trials).
        task: the task.
        verdict: this run's end-of-run re-measurement (None when it made none).
    """

    config: ConfigEntity | None
    cost: float
    gflops: float
    n_results: int
    task: Task
    verdict: Verdict | None = None

    def __str__(self) -> str:
        how = "" if self.verdict is None else (
            f"; re-measured: median of {len(self.verdict.rounds[0])} rounds against "
            f"{len(self.verdict.inputs) - 1} other configs")
        return (f"best {self.config} : {self.cost * 1e3:.4f} ms, {self.gflops:.2f} GFLOP/s "
                f"({self.n_results} measurements){how}")


class TuningError(RuntimeError):
    """Every trial of a tuning run failed for the same reason: the setup is broken, not the
    configs (a template that cannot run, a missing compiler, a runner that cannot start)."""


class _FailureWatch:
    """A callback that counts this run's successes and the reasons of its failures."""

    def __init__(self) -> None:
        self.successes = 0
        self.failures: Counter[tuple[MeasureErrorNo, str]] = Counter()

    def __call__(self, tuner: Any, inputs: Sequence[MeasureInput],
                 results: Sequence[MeasureResult]) -> None:
        for r in results:
            if r.ok:
                self.successes += 1
            else:
                self.failures[(r.error_no, r.error_msg)] += 1

    def raise_if_all_failed_alike(self, task: Task) -> None:
        kinds = {error_no for error_no, _ in self.failures}
        if self.successes or len(kinds) != 1:
            return
        (kind,) = kinds
        (_, message), count = self.failures.most_common(1)[0]
        total = sum(self.failures.values())
        raise TuningError(f"all {total} trials of {task.name} failed with {kind.name}: "
                          f"{message or 'no message'}"
                          + (f" ({count} of them with this message)" if count < total else ""))


def _make_tuner(task: Task, tuner: str | Tuner | None, seed: int | None) -> Tuner:
    if isinstance(tuner, Tuner):
        return tuner
    if tuner is None:
        tuner = getattr(task, "default_tuner", "xgb")
    if tuner not in _TUNERS:
        raise ValueError(f"unknown tuner {tuner!r} (use one of {sorted(_TUNERS)} or a Tuner)")
    return _TUNERS[tuner](task, seed=seed)


def tune(task: Task, trials: int = 1000, tuner: str | Tuner | None = None,
         log_file: str | os.PathLike[str] | None = None,
         measure_option: MeasureOption | MeasureFn | None = None,
         early_stopping: int | None = None, callbacks: Iterable[Callback] = (),
         seed: int | None = None, progress: bool = True,
         history: Iterable[Record] = (), remeasure_top: int = REMEASURE_TOP,
         remeasure_rounds: int = REMEASURE_ROUNDS) -> Result:
    """Tune `task` and return the best config found.

    At the end of a run that measured anything, the fallback config, the previous verdict's
    winner and the `remeasure_top` fastest trials are re-measured side by side,
    `remeasure_rounds` times each, round-robin; the lowest median of the per-round time ratios
    to the fallback is the best if it beats the fallback by `REMEASURE_MARGIN` (1%), else the
    fallback stays (see `Verdict`), and the verdict goes to the log, where `apply_history_best`,
    `best_records`, `merge` and a resumed run find it (`Tuner.remeasure`). It costs
    `remeasure_rounds` timings of a few configs, a few seconds, and counts no trials.

    Args:
        task: from `autotune.create_task`.
        trials: the measurement budget of this task, counting those already in `log_file`
            (a rerun with the same log resumes instead of starting over).
        tuner: "xgb", "xgb_knob", "evolutionary", "ga", "random", "grid", or a Tuner object;
            None: the task's default, "xgb" for a template, "evolutionary" for an
            auto-scheduled task (`task.default_tuner`).
        log_file: JSON-lines log to append to (and resume from, when it exists).
        measure_option: from `autotune.measure_option`, or a function `measure(inputs)`.
        early_stopping: stop after this many trials without improvement.
        callbacks: extra `callback(tuner, inputs, results)` functions.
        seed: makes the run reproducible up to timing noise.
        progress: show a progress bar (trials, current and best GFLOP/s, ETA) on stderr
            when it is a terminal; False hides it.
        history: records of other workloads of the same template, for transfer learning.
        remeasure_top, remeasure_rounds: the end-of-run re-measurement; 0 turns it off.

    A `BucketedTask` (`create_task` with `buckets=`) tunes each bucket's task with an equal
    share of `trials` and returns {bucket values: Result}.

    Raises:
        TuningError: no valid measurement exists and every trial of this run failed with the
            same error kind (the message names it): the setup is broken, not the configs.
    """
    if isinstance(task, BucketedTask):
        return tune_buckets(task, trials, tuner=tuner, log_file=log_file,  # type: ignore
                            measure_option=measure_option, early_stopping=early_stopping,
                            callbacks=callbacks, seed=seed, progress=progress,
                            history=history, remeasure_top=remeasure_top,
                            remeasure_rounds=remeasure_rounds)
    _check_runs_here(task, measure_option)
    t = _resumed(_make_tuner(task, tuner, seed), log_file, history)
    already = t.trial_count
    todo = max(0, trials - already)
    cbs = list(callbacks)
    shown = min(todo, max(0, len(task.config_space) - len(t.visited)))  # a small space ends early
    bar = Progress(shown, name=task.name) if progress and shown else None
    if bar is not None:
        cbs.append(bar)
    if log_file is not None:
        cbs.insert(0, log_to_file(log_file))
    watch = _FailureWatch()
    cbs.append(watch)
    try:
        if todo:
            t.tune(todo, measure_option, early_stopping=early_stopping, callbacks=cbs,
                   remeasure_top=remeasure_top, remeasure_rounds=remeasure_rounds)
    finally:
        for cb in cbs:
            close = getattr(cb, "close", None) or getattr(cb, "finish", None)
            if close is not None:
                close()
    if t.best_result is None:
        watch.raise_if_all_failed_alike(task)
    return _result(t)


def _check_runs_here(task: Task, measure_option: MeasureOption | MeasureFn | None) -> None:
    """Refuse at once a task for another architecture measured by this machine (the default
    runner): every trial would fail, or, worse, time code compiled for the host in its place."""
    runner = measure_option.runner if isinstance(measure_option, MeasureOption) else None
    if measure_option is not None and not isinstance(runner, LocalRunner):
        return
    arch, here = tl.Target(task.target).arch, tl.Target("llvm").arch
    if arch != here:
        raise TuningError(f"{task.name} is compiled for {arch} ({task.target}) and this "
                          f"machine ({here}) cannot run it: measure it with "
                          "autotune.DeviceRunner on such a device, or a DaskRunner with a "
                          "worker there")


def remeasure(task: Task, log_file: str | os.PathLike[str],
              measure_option: MeasureOption | MeasureFn | None = None,
              top: int = REMEASURE_TOP, rounds: int = REMEASURE_ROUNDS) -> Result:
    """Re-measure the contenders for `task`'s best in `log_file` (its fallback, the latest
    verdict's winner and the `top` fastest trials), `rounds` times each, round-robin, and
    append the verdict to the log (see `Tuner.remeasure`); no trial is made.

    `topi.graph.tune` settles each task's best this way at the end of a run; it also settles a
    log tuned on a busy machine, run again on a quiet one.
    """
    t = _resumed(Tuner(task), log_file, ())
    writer = log_to_file(log_file)
    try:
        t.remeasure(measure_option, top, rounds, callbacks=[writer])
    finally:
        writer.close()
    return _result(t)


def _resumed(t: Tuner, log_file: str | os.PathLike[str] | None,
             history: Iterable[Record]) -> Tuner:
    """`t` after learning from `history` and from `log_file` (when it exists)."""
    records = list(history)
    if log_file is not None and os.path.exists(log_file):
        records += load_records(log_file)
    if records:
        t.load_history(records)
    return t


def _result(t: Tuner) -> Result:
    best = t.best_result
    return Result(
        config=t.best_config,
        cost=best.mean if best is not None else float("inf"),
        gflops=gflops(t.task.flop, best) if best is not None else 0.0,
        n_results=t.trial_count,
        task=t.task,
        verdict=t.verdict,
    )


def tune_buckets(task: BucketedTask, trials: int, **options: Any) -> dict[tuple, Any]:
    """`autotune.tune` of each bucket's task with an equal share of `trials`; bucket values
    (in the variables' order) -> its Result."""
    results = {}
    for k, t in enumerate(task.tasks):
        share = trials // len(task.tasks) + (k < trials % len(task.tasks))
        results[tuple(t.bucket["values"].values())] = tune(t, trials=share, **options)
    return results
