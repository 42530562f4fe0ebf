"""Tuning throughput: adaptive repeats, slow configs cut short, builds overlapped with runs.

No timing assertions: the runner's decisions are tested on scripted timings, and the tuning loop
on fake builders and runners whose costs are a function of the config.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import autotune
import tensorlang as tl
from autotune import artifact
from autotune.artifact import Artifact, TaskSpec, ci_half_width
from autotune.record import decode, encode, load_records
from autotune.result import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.tuner import RandomTuner, XGBTuner
from autotune.workers import Job, WorkerPool
from scripted_timings import ScriptedModule, scripted_settings


@autotune.template("test_adaptive/scale")
def scale(n: int) -> tuple:
    cfg = autotune.get_config()
    cfg.define_knob("tile", [1, 2, 4, 8, 16, 32])
    cfg.define_knob("unroll", [0, 1])
    A = tl.placeholder((n,), "float32", name="A")
    B = tl.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = tl.create_schedule(B.op)
    s[B].split(s[B].op.axis[0], factor=cfg["tile"].val)
    return s, [A, B]


@pytest.fixture(scope="module")
def task() -> autotune.Task:
    return autotune.create_task("test_adaptive/scale", (64,))


# -- adaptive repeats on scripted timings -------------------------------------------------------


def test_steady_timings_stop_at_the_fewest_repeats() -> None:
    module = ScriptedModule([1.0, 1.001, 1.0, 1.0, 1.0, 1.0])
    costs, slow = artifact._time(module, [], scripted_settings())  # type: ignore[arg-type]
    assert costs == [1.0, 1.001] and not slow


def test_noisy_timings_repeat_up_to_the_bound() -> None:
    noisy = [1.0, 1.5, 0.8, 1.4, 0.9, 1.3, 1.0, 1.0]
    costs, slow = artifact._time(ScriptedModule(noisy), [],  # type: ignore[arg-type]
                                 scripted_settings())
    assert costs == noisy[:6] and not slow
    costs, _ = artifact._time(ScriptedModule(noisy), [],  # type: ignore[arg-type]
                              scripted_settings(repeat=3))
    assert len(costs) == 3


def test_moderate_noise_repeats_until_the_interval_is_tight() -> None:
    costs = [1.0, 1.06, 1.02, 1.03, 1.01, 1.02, 1.0, 1.0]
    got, _ = artifact._time(ScriptedModule(costs), [],  # type: ignore[arg-type]
                            scripted_settings())
    assert 2 < len(got) < 6
    assert ci_half_width(got) <= 0.05 < ci_half_width(got[:-1])


def test_without_a_target_every_repeat_is_timed() -> None:
    costs, slow = artifact._time(ScriptedModule([1.0] * 6), [],  # type: ignore[arg-type]
                                 scripted_settings(ci_target=0.0, repeat=4))
    assert costs == [1.0] * 4 and not slow


def test_repeats_above_the_cutoff_stop_as_slow() -> None:
    costs, slow = artifact._time(ScriptedModule([3.0, 2.0, 5.0, 1.0]), [],  # type: ignore[arg-type]
                                 scripted_settings(), cutoff=1.5)
    assert costs == [3.0, 2.0] and slow


def test_confidence_interval_width() -> None:
    assert ci_half_width([1.0]) == float("inf")
    assert ci_half_width([2.0, 2.0, 2.0]) == 0.0
    assert ci_half_width([1.0, 3.0]) == pytest.approx(12.71 * np.sqrt(2) / np.sqrt(2) / 2)


def test_runner_settings_carry_the_adaptive_bounds() -> None:
    runner = autotune.LocalRunner(number=2, repeat=5, ci_target=0.1, min_repeat=3)
    settings = runner.settings(0.01)
    assert (settings.repeat, settings.min_repeat, settings.ci_target) == (5, 3, 0.1)
    assert settings.relative_cutoff == 2.0 and settings.best_seconds == 0.01
    with pytest.raises(ValueError, match="min_repeat"):
        autotune.LocalRunner(min_repeat=0)


# -- slow configs: cut short, recorded, learnt from ------------------------------------------------


def test_a_config_far_slower_than_the_best_is_cut_short_as_slow(task: autotune.Task) -> None:
    builder = autotune.LocalBuilder(n_parallel=1)
    runner = autotune.LocalRunner(number=50, repeat=3)
    try:
        (built,) = builder.build([MeasureInput(task, task.config_space.get(0))])
        assert isinstance(built, Artifact)
        (worker,) = builder._pool.workers  # type: ignore[union-attr]
        base = os.getpriority(os.PRIO_PROCESS, worker.process.pid)
        with builder.timing():  # builds overlapped with a timing yield the cores to it
            assert os.getpriority(os.PRIO_PROCESS, worker.process.pid) == base + builder.nice
        (full,) = runner.run([built])
        (cut,) = runner.run([built], best_seconds=1e-12)
    finally:
        builder.close()
        runner.close()
    assert full.ok and not full.slow and len(full.costs) >= 2
    assert cut.ok and cut.slow and len(cut.costs) == 1  # one call told enough


def test_measured_slow_is_logged_and_read_back(task: autotune.Task) -> None:
    inp = MeasureInput(task, task.config_space.get(3))
    line = encode(inp, MeasureResult((0.5,), MeasureErrorNo.NO_ERROR, slow=True))
    assert '"slow":true' in line
    back = decode(line).result
    assert back.slow and back.ok and back.costs == (0.5,)
    plain = decode(encode(inp, MeasureResult((0.5,), MeasureErrorNo.NO_ERROR))).result
    assert not plain.slow and '"slow"' not in encode(inp, plain)


def test_the_model_learns_from_slow_configs(task: autotune.Task, tmp_path: Path) -> None:
    def measure(inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        return [MeasureResult((1.0 + i.config.index,), MeasureErrorNo.NO_ERROR,
                              slow=i.config.index % 2 == 1) for i in inputs]

    tuner = XGBTuner(task, seed=0, plan_size=4, feature_type="knob")
    log = tmp_path / "log.jsonl"
    tuner.tune(8, measure, callbacks=[autotune.log_to_file(str(log))], remeasure_top=0)
    records = [r for r in load_records(str(log)) if not r.remeasured]
    assert any(r.result.slow for r in records) and any(not r.result.slow for r in records)
    assert all(y > 0 for y in tuner.ys)  # slow configs are training points, not failures


# -- overlapped builds -----------------------------------------------------------------------------


class _FakeBuilder:
    """Builds nothing: an artifact per config whose "code" is its index."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.called = threading.Condition()

    def build(self, inputs: Sequence[MeasureInput],
              feature_kind: str | None = None) -> list[Artifact]:
        with self.called:
            self.calls.append([i.config.index for i in inputs])
            self.called.notify_all()
        return [Artifact(TaskSpec.of(i.task), i.config.index, None, (),  # type: ignore[arg-type]
                         f"hash{i.config.index}", 0.0) for i in inputs]

    def close(self) -> None:
        pass


class _FakeRunner:
    """Costs are a function of the config; with `wait_for_builds`, the first run waits (up to
    a few seconds) until the next batch's build has begun, as it does when overlapped."""

    def __init__(self, builder: _FakeBuilder, wait_for_builds: bool = False,
                 lucky: int | None = None):
        self.builder = builder
        self.wait_for_builds = wait_for_builds
        self.overlapped = False
        self.lucky = lucky
        self.timed: dict[int, int] = {}

    def run(self, artifacts: Sequence[Artifact],
            best_seconds: float | None = None) -> list[MeasureResult]:
        if self.wait_for_builds and not self.timed:
            with self.builder.called:
                self.overlapped = self.builder.called.wait_for(
                    lambda: len(self.builder.calls) >= 2, timeout=5)
        out = []
        for a in artifacts:
            k = a.config_index
            self.timed[k] = self.timed.get(k, 0) + 1
            cost = 1e-3 * (1 + (k * 7) % 12)
            if k == self.lucky and self.timed[k] == 1:
                cost = 1e-6  # a one-shot timing far too good to be true
            out.append(MeasureResult((cost,), MeasureErrorNo.NO_ERROR))
        return out

    def close(self) -> None:
        pass


def _tune(task: autotune.Task, overlap: bool, **runner_kw: object
          ) -> tuple[list[tuple[int, float]], RandomTuner, _FakeRunner]:
    builder = _FakeBuilder()
    runner = _FakeRunner(builder, **runner_kw)  # type: ignore[arg-type]
    seen: list[tuple[int, float]] = []
    tuner = RandomTuner(task, seed=3)
    tuner.tune(12, autotune.measure_option(builder, runner, overlap=overlap), batch_size=4,
               callbacks=[lambda t, ins, res: seen.extend(
                   (i.config.index, r.mean) for i, r in zip(ins, res))])
    return seen, tuner, runner


def test_overlapped_builds_change_no_result(task: autotune.Task) -> None:
    serial, serial_tuner, _ = _tune(task, overlap=False)
    overlapped, overlapped_tuner, runner = _tune(task, overlap=True, wait_for_builds=True)
    assert runner.overlapped  # the next batch was being built while this one ran
    assert overlapped == serial and len(serial) == 12
    assert overlapped_tuner.best_config.index == serial_tuner.best_config.index


def test_the_verdict_still_protects_the_result_when_overlapped(task: autotune.Task) -> None:
    fastest = min(range(len(task.config_space)), key=lambda k: (k * 7) % 12)
    seen, tuner, runner = _tune(task, overlap=True, lucky=None)
    lucky = next(k for k, _ in seen if k != fastest and k != tuner.fallback.index)
    seen, tuner, runner = _tune(task, overlap=True, lucky=lucky)
    assert min(seen, key=lambda s: s[1])[0] == lucky  # its one-shot timing read the fastest
    assert tuner.verdict is not None and tuner.best_config.index != lucky
    assert tuner.best_result.mean >= 1e-3


# -- a killed runner worker is replaced by a started spare ----------------------------------------


def _pid_after(seconds: float, stage: object) -> int:
    time.sleep(seconds)
    return os.getpid()


def _job(seconds: float, timeout: float) -> Job:
    return Job(_pid_after, seconds, timeout, MeasureErrorNo.RUN_TIMEOUT,
               MeasureErrorNo.RUNTIME_ERROR)


def test_a_worker_killed_by_a_timeout_is_replaced_by_its_standby() -> None:
    pool = WorkerPool(1, standby=True)
    try:
        (first,) = pool.run([_job(0.0, 60)])
        spare = pool.workers[0]._spare
        assert spare is not None and first.value != spare[0].pid
        (hung,) = pool.run([_job(30.0, 0.5)])
        assert hung.error_no is MeasureErrorNo.RUN_TIMEOUT
        (after,) = pool.run([_job(0.0, 60)])
        assert after.error_no is MeasureErrorNo.NO_ERROR and after.value == spare[0].pid
        assert pool.workers[0]._spare is not None  # and a new spare is on its way
    finally:
        pool.close()
    assert spare[0].poll() is not None and pool.workers[0]._spare is None
