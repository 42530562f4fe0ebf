"""Tuning throughput: the cutoff against the best cost applies from the first batch on, and
follows the best cost found within a batch; re-measurements (the verdict) are never cut.

No timing assertions: the decisions are tested on fake runners and a fake worker pool.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import autotune
import tensorlang as tl
from autotune.artifact import Artifact, RunSettings, TaskSpec
from autotune.measure import LocalRunner, Measurer
from autotune.result import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.workers import Job, Outcome


@autotune.template("test_cutoff/scale")
def scale(n: int) -> tuple:
    cfg = autotune.get_config()
    cfg.define_knob("tile", [1, 2, 4, 8, 16, 32, 64])
    A = tl.placeholder((n,), "float32", name="A")
    B = tl.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = tl.create_schedule(B.op)
    s[B].split(s[B].op.axis[0], factor=cfg["tile"].val)
    return s, [A, B]


@pytest.fixture(scope="module")
def task() -> autotune.Task:
    return autotune.create_task("test_cutoff/scale", (67,))


def _artifact(task: autotune.Task, index: int) -> Artifact:
    return Artifact(TaskSpec.of(task), index, None, (), f"hash{index}", 0.0)  # type: ignore[arg-type]


class _Builder:
    def build(self, inputs: Sequence[MeasureInput],
              feature_kind: str | None = None) -> list[Artifact]:
        return [_artifact(i.task, i.config.index) for i in inputs]

    def close(self) -> None:
        pass


class _Runner:
    """Scripted costs by config index (None: a runtime error); records each call's batch size
    and best cost."""

    def __init__(self, costs: dict[int, float | None]):
        self.costs = costs
        self.calls: list[tuple[list[int], float | None]] = []

    def run(self, artifacts: Sequence[Artifact],
            best_seconds: float | None = None) -> list[MeasureResult]:
        self.calls.append(([a.config_index for a in artifacts], best_seconds))
        out = []
        for a in artifacts:
            cost = self.costs[a.config_index]
            out.append(MeasureResult((), MeasureErrorNo.RUNTIME_ERROR, "boom") if cost is None
                       else MeasureResult((cost,), MeasureErrorNo.NO_ERROR))
        return out

    def close(self) -> None:
        pass


def _inputs(task: autotune.Task, indices: Sequence[int]) -> list[MeasureInput]:
    return [MeasureInput(task, task.config_space.get(k)) for k in indices]


def test_the_first_batch_times_configs_alone_until_one_runs_then_cuts_against_it(task):
    runner = _Runner({0: None, 1: None, 2: 0.004, 3: 0.001, 4: 0.002, 5: 0.003, 6: 0.5})
    measurer = Measurer(autotune.measure_option(_Builder(), runner, overlap=False))
    first = measurer.measure(_inputs(task, [0, 1, 2, 3, 4]))
    assert runner.calls == [([0], None), ([1], None), ([2], None), ([3, 4], 0.004)]
    assert [r.error_no for r in first[:2]] == [MeasureErrorNo.RUNTIME_ERROR] * 2
    assert [r.mean for r in first[2:]] == [0.004, 0.001, 0.002]
    measurer.measure(_inputs(task, [5, 6]))  # later batches: one call, against the best so far
    assert runner.calls[-1] == ([5, 6], 0.001)
    # The verdict's re-measurement times every config fully: no best, one call per round.
    runner.calls.clear()
    measurer.keep([2, 3])
    measurer.remeasure(_inputs(task, [2, 3]), rounds=2)
    assert [best for _, best in runner.calls] == [None, None]
    measurer.close()


class _Pool:
    """Stands for the runner's worker process: records each job's settings and returns the
    scripted costs in order (None: the job was stopped past its deadline)."""

    def __init__(self, costs: Sequence[float | None]):
        self.costs = list(costs)
        self.settings: list[RunSettings] = []

    def run(self, jobs: Sequence[Job]) -> list[Outcome]:
        (job,) = jobs
        self.settings.append(job.payload[1])
        cost = self.costs.pop(0)
        if cost is None:
            return [Outcome(error_no=MeasureErrorNo.RUN_TIMEOUT, seconds=job.timeout)]
        return [Outcome(value=([cost], False), seconds=cost)]

    def close(self) -> None:
        pass


def _run(best: float | None, costs: Sequence[float | None], task) -> tuple[list, _Pool]:
    runner = LocalRunner(number=1, repeat=1)
    pool = _Pool(costs)
    runner._pools = {True: pool, False: pool}  # type: ignore[dict-item]
    results = runner.run([_artifact(task, k) for k in range(len(costs))], best)
    return results, pool


def test_the_local_runner_cuts_against_the_best_cost_of_its_batch_too(task):
    results, pool = _run(0.02, [0.01, 0.03, 0.002, None, 0.05], task)
    assert [s.best_seconds for s in pool.settings] == [0.02, 0.01, 0.01, 0.002, 0.002]
    timeouts = [s.run_timeout for s in pool.settings]
    assert timeouts[3] < timeouts[0]  # a tighter best, an earlier stop
    assert results[3].slow and results[3].ok  # stopped: a lower bound, recorded as slow
    assert [r.mean for r in results[:3]] == [0.01, 0.03, 0.002]


def test_the_local_runner_without_a_best_never_cuts(task):
    results, pool = _run(None, [0.01, 0.002, 0.05], task)
    assert [s.best_seconds for s in pool.settings] == [None, None, None]
    assert [r.mean for r in results] == [0.01, 0.002, 0.05] and not any(r.slow for r in results)
