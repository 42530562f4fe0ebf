"""Tuning throughput: a slow first call is waited for (and recorded slow by the worker) up to
what a kill and a fresh worker cost, a cold first call marks a config slow at a tighter
multiple of the cutoff, and the runner's standby worker imports at idle priority.

No timing assertions: run_job runs on a fake clock and a fake module, the runner on a fake pool.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import pytest

from autotune import artifact
from autotune.artifact import (REPORT_SECONDS, Artifact, RunSettings, TaskSpec, first_call_limit,
                               slow_first_call)
from autotune.measure import LocalRunner
from autotune.result import MeasureErrorNo
from autotune.workers import SPARE_NICE, Job, Outcome, WorkerPool, _can_raise_priority


def _settings(best: float | None, **kw: float) -> RunSettings:
    return RunSettings(number=1, repeat=3, min_repeat_ms=0, run_timeout=10.0, flush_cache=False,
                       check_correctness=False, max_seconds=100.0, best_seconds=best, **kw)


def test_the_first_call_limit_is_the_slow_mark_or_the_probe_whichever_is_later() -> None:
    tight = _settings(0.01, cold_factor=1.25, probe_seconds=0.5)
    assert slow_first_call(tight) == pytest.approx(1.25 * 2.0 * 0.01 + artifact.COLD_CALL_SECONDS)
    assert first_call_limit(tight) == 0.5  # a call ending before a restart would is waited for
    slow_best = _settings(1.0, cold_factor=1.25, probe_seconds=0.5)
    assert first_call_limit(slow_best) == slow_first_call(slow_best)  # past the probe: the mark
    assert first_call_limit(_settings(0.01)) == slow_first_call(_settings(0.01))  # no probe


class _Clock:
    """time.perf_counter for run_job: advanced by the fake module's calls only."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def _run_job(monkeypatch: pytest.MonkeyPatch, call_seconds: Sequence[float],
             settings: RunSettings) -> tuple[tuple[list[float], bool], list[float], int]:
    """run_job on a module whose calls take `call_seconds` in turn: its result, the stage
    deadlines it announced, and the calls made."""
    clock = _Clock()
    calls = iter(call_seconds)
    made = 0

    def module(*arrays: object) -> None:
        nonlocal made
        made += 1
        clock.now += next(calls)

    monkeypatch.setattr(artifact, "time", clock)
    monkeypatch.setattr(artifact, "_link", lambda code: module)
    monkeypatch.setattr(artifact, "_cached_random_arrays", lambda a: [])
    stages: list[float] = []
    art = Artifact(TaskSpec("t", "[]", "llvm", "k"), 0, b"", (), "h", 0.0)  # type: ignore[arg-type]
    out = artifact.run_job((art, settings), lambda seconds, *errors: stages.append(seconds))
    return out, stages, made


def test_a_slow_first_call_within_the_probe_returns_slow_without_a_second_call(monkeypatch) -> None:
    settings = _settings(0.01, cold_factor=1.25, probe_seconds=0.5)
    (costs, slow), stages, made = _run_job(monkeypatch, [0.3, 0.01], settings)
    assert slow and costs == [0.3] and made == 1  # recorded by the worker: nothing to kill
    assert stages[0] == pytest.approx(0.5 + REPORT_SECONDS)  # the worker lives up to the probe


def test_a_cold_call_past_the_tight_mark_is_slow_at_once(monkeypatch) -> None:
    # 0.04 s against a best of 0.01: slow past 1.25 x the 2x cutoff, no warm call needed
    (costs, slow), _, made = _run_job(monkeypatch, [0.04, 0.01],
                                      _settings(0.01, cold_factor=1.25, probe_seconds=0.5))
    assert slow and costs == [0.04] and made == 1
    # with the old factor of 2 it took a warm call to tell
    (costs, slow), _, made = _run_job(monkeypatch, [0.04, 0.03],
                                      _settings(0.01, cold_factor=2.0))
    assert slow and costs == [pytest.approx(0.03)] and made == 2


class _KilledPool:
    """The runner's worker stopped past its first call's deadline."""

    def __init__(self) -> None:
        self.settings: list[RunSettings] = []

    def run(self, jobs: Sequence[Job]) -> list[Outcome]:
        (job,) = jobs
        self.settings.append(job.payload[1])
        return [Outcome(error_no=MeasureErrorNo.RUN_TIMEOUT, seconds=job.timeout)]

    def close(self) -> None:
        pass


def test_a_killed_config_is_recorded_slow_at_the_limit_it_ran_past() -> None:
    runner = LocalRunner(number=1, repeat=1, probe_seconds=0.5)
    pool = _KilledPool()
    runner._pools = {True: pool, False: pool}  # type: ignore[dict-item]
    art = Artifact(TaskSpec("t", "[]", "llvm", "k"), 0, b"", (), "h", 0.0)  # type: ignore[arg-type]
    (result,) = runner.run([art], best_seconds=0.01)
    (settings,) = pool.settings
    assert (settings.cold_factor, settings.probe_seconds) == (1.25, 0.5)
    assert result.ok and result.slow and result.costs == (first_call_limit(settings),)


def _nice_after(seconds: float, stage: object) -> int:
    time.sleep(seconds)
    return os.getpriority(os.PRIO_PROCESS, 0)


def _nice_job(seconds: float, timeout: float) -> Job:
    return Job(_nice_after, seconds, timeout, MeasureErrorNo.RUN_TIMEOUT,
               MeasureErrorNo.RUNTIME_ERROR)


def test_the_standby_waits_at_idle_priority_and_times_at_full_priority() -> None:
    pool = WorkerPool(1, standby=True)
    own = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        (first,) = pool.run([_nice_job(0.0, 60)])
        spare = pool.workers[0]._spare
        assert spare is not None and first.value == own
        waiting = os.getpriority(os.PRIO_PROCESS, spare[0].pid)
        assert waiting == (min(own + SPARE_NICE, 19) if _can_raise_priority() else own)
        (hung,) = pool.run([_nice_job(30.0, 0.5)])
        assert hung.error_no is MeasureErrorNo.RUN_TIMEOUT
        (after,) = pool.run([_nice_job(0.0, 60)])  # the spare, swapped in: back to full priority
        assert after.error_no is MeasureErrorNo.NO_ERROR and after.value == own
        assert pool.workers[0].process is spare[0]
    finally:
        pool.close()
