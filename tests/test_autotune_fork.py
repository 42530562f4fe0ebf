"""Forked timing: a runner job runs in a forked child of its worker, which enforces the stage
deadlines itself, so a hopeless config is stopped at its slow mark and a hang or a crash costs a
child, never the worker; what `prepare` makes in the worker every child inherits. Adaptive
repeats stop at the fewest for a config that cannot be the best.

No timing assertions beyond generous bounds: the deadlines are seconds, the jobs sleep.
"""

from __future__ import annotations

import ctypes
import os
import time

import pytest

from autotune import artifact
from autotune.artifact import first_call_limit, slow_first_call
from autotune.measure import LocalRunner
from autotune.result import MeasureErrorNo
from autotune.workers import FORK_GRACE, Job, WorkerPool
from scripted_timings import ScriptedModule, scripted_settings

_prepared: list[int] = []


def _prepare(payload: object, stage: object) -> None:
    _prepared.append(os.getpid())


def _pid_and_prepared(payload: float, stage) -> tuple[int, int, list[int]]:
    """Sleeps `payload` seconds within a stage of a tenth of a second when it is positive."""
    if payload > 0:
        stage(0.1, MeasureErrorNo.RUN_TIMEOUT, MeasureErrorNo.RUNTIME_ERROR)
        time.sleep(payload)
    seen = list(_prepared)
    _prepared.append(-1)  # the child's own list: the worker's never sees it
    return os.getpid(), os.getppid(), seen


def _segfault(payload: object, stage: object) -> None:
    ctypes.string_at(0)


def _job(func, payload: object, timeout: float = 30.0) -> Job:
    return Job(func, payload, timeout, MeasureErrorNo.RUN_TIMEOUT, MeasureErrorNo.RUNTIME_ERROR,
               fork=True, prepare=_prepare)


def test_a_forked_job_runs_in_a_child_after_its_preparation_in_the_worker() -> None:
    pool = WorkerPool(1)
    try:
        (first,) = pool.run([_job(_pid_and_prepared, 0.0)])
        (second,) = pool.run([_job(_pid_and_prepared, 0.0)])
        worker = pool.workers[0].process.pid
    finally:
        pool.close()
    child, parent, prepared = first.value
    assert parent == worker and child != worker
    assert prepared == [worker]  # prepared in the worker, inherited by the child
    child2, parent2, prepared2 = second.value
    assert parent2 == worker and child2 != child
    assert prepared2 == [worker, worker]  # the first child's own change stayed with it


def test_the_worker_stops_a_hung_child_at_its_stage_deadline_and_lives_on() -> None:
    pool = WorkerPool(1)
    try:
        (warm,) = pool.run([_job(_pid_and_prepared, 0.0)])
        start = time.monotonic()
        (hung,) = pool.run([_job(_pid_and_prepared, 30.0)])
        took = time.monotonic() - start
        (after,) = pool.run([_job(_pid_and_prepared, 0.0)])
    finally:
        pool.close()
    assert hung.error_no is MeasureErrorNo.RUN_TIMEOUT and "timed out" in hung.error_msg
    assert took < 0.1 + FORK_GRACE  # the worker stopped it, not the parent's safety net
    assert after.error_no is MeasureErrorNo.NO_ERROR and after.value[1] == warm.value[1]


def test_a_crash_in_a_forked_child_is_typed_and_costs_no_worker() -> None:
    pool = WorkerPool(1)
    try:
        (warm,) = pool.run([_job(_pid_and_prepared, 0.0)])
        (crash,) = pool.run([_job(_segfault, None)])
        (after,) = pool.run([_job(_pid_and_prepared, 0.0)])
    finally:
        pool.close()
    assert crash.error_no is MeasureErrorNo.RUNTIME_ERROR and "crashed" in crash.error_msg
    assert after.value[1] == warm.value[1]


def test_closing_the_pool_stops_a_child_still_running() -> None:
    pool = WorkerPool(1)
    (warm,) = pool.run([_job(_pid_and_prepared, 0.0)])
    worker = pool.workers[0]
    worker.start_job(0, _job(_pid_and_prepared, 30.0))
    deadline = time.monotonic() + 10
    children: list[int] = []
    while not children and time.monotonic() < deadline:  # the child is forked by now
        children = [int(p) for p in os.listdir("/proc")
                    if p.isdigit() and _parent(p) == worker.process.pid]
        time.sleep(0.01)
    pool.close()
    assert children and _state(children[0]) in ("", "Z")  # gone, or dead until init reaps it


def _parent(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def _artifact() -> artifact.Artifact:
    return artifact.Artifact(artifact.TaskSpec("t", [], "llvm", "k"), 0,
                             b"", (), "h", 0.0)  # type: ignore[arg-type]


# -- the runner: forked by default, stopping a first call at the slow mark -------------------------


def test_a_forked_runner_stops_a_first_call_at_the_slow_mark() -> None:
    forked = LocalRunner().settings(0.01)
    assert forked.forked and forked.probe_seconds == 0.0
    assert first_call_limit(forked) == slow_first_call(forked)  # 2.5x the best, not 0.5 s
    unforked = LocalRunner(fork=False).settings(0.01)
    assert not unforked.forked and first_call_limit(unforked) == 0.5


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_a_config_three_times_slower_than_the_best_is_cut_after_one_call(monkeypatch) -> None:
    clock = _Clock()
    calls: list[float] = []

    def module(*arrays: object) -> None:
        calls.append(0.03)
        clock.now += 0.03

    monkeypatch.setattr(artifact, "time", clock)
    monkeypatch.setattr(artifact, "_link", lambda code: module)
    monkeypatch.setattr(artifact, "_cached_random_arrays", lambda a: [])
    settings = LocalRunner(number=1, repeat=3).settings(0.01)
    art = _artifact()
    costs, slow = artifact.run_job((art, settings), lambda *a: None)
    assert slow and costs == [0.03] and len(calls) == 1


# -- adaptive repeats: a config that is no contender stops at the fewest -------------------------


@pytest.mark.parametrize("best, repeats", [(1.0, 2), (1.2, 6), (None, 6)])
def test_a_config_clearly_slower_than_the_best_stops_at_the_fewest_repeats(best, repeats) -> None:
    noisy = [1.3, 1.5, 1.2, 1.45, 1.25, 1.4]  # never a tight interval
    settings = scripted_settings(best_seconds=best)
    costs, slow = artifact._time(ScriptedModule(noisy), [], settings)  # type: ignore[arg-type]
    assert len(costs) == repeats and not slow  # a full measurement: the model learns its cost


@pytest.mark.parametrize("speed", [0.5, 0.95, 1.05])
def test_a_config_as_fast_as_the_best_is_never_cut(monkeypatch, speed) -> None:
    clock = _Clock()
    calls: list[float] = []

    class Module:
        def __call__(self, *arrays: object) -> None:
            calls.append(speed * 0.01)
            clock.now += speed * 0.01

        def time_evaluator(self, number: int, repeat: int, min_repeat_ms: float = 0):
            noisy = iter([1.0, 1.04, 0.97, 1.03, 0.99, 1.02])  # never a tight interval at 2

            def evaluate(*arrays: object):
                return type("R", (), {"results": tuple(speed * 0.01 * next(noisy)
                                                       for _ in range(repeat))})()

            return evaluate

    monkeypatch.setattr(artifact, "time", clock)
    monkeypatch.setattr(artifact, "_link", lambda code: Module())
    monkeypatch.setattr(artifact, "_cached_random_arrays", lambda a: [])
    settings = LocalRunner(number=1, repeat=3).settings(0.01)
    art = _artifact()
    costs, slow = artifact.run_job((art, settings), lambda *a: None)
    assert not slow and len(costs) == 3  # every repeat: it may be the best
