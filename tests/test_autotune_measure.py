"""Measurement with real builds: isolation of failures, correctness checks, end-to-end tuning.

The templates live at module level so that the worker processes can import them by name.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import autotune
import tensorlang as tl
from autotune import workers
from autotune.measure import Measurer
from autotune.result import MeasureErrorNo, MeasureInput

MODES = ["ok", "raise", "crash", "wrong", "slow", "ok_split"]


@autotune.template("test_measure/modes")
def modes(n: int) -> tuple:
    """One config per failure kind (config 0 is the correct reference)."""
    cfg = autotune.get_config()
    cfg.define_knob("mode", MODES)
    mode = cfg["mode"].val
    A = tl.placeholder((n,), "float32", name="A")
    if mode == "raise":
        raise RuntimeError("this template cannot handle the config")
    if mode == "slow":
        r1 = tl.reduce_axis((0, 30000), name="r1")
        r2 = tl.reduce_axis((0, 30000), name="r2")
        B = tl.compute((n,), lambda i: tl.sum(A[(i + r1 + r2) % n], axis=[r1, r2]), name="B")
    elif mode == "wrong":
        B = tl.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    else:
        B = tl.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = tl.create_schedule(B.op)
    if mode == "ok_split":
        s[B].split(s[B].op.axis[0], factor=4)
    if mode == "crash":
        s[B].split(s[B].op.axis[0], factor=2)  # distinct code, so it is not deduplicated
        autotune.before_run(lambda: ctypes.string_at(0))  # reads address 0: a segfault
    return s, [A, B]


@autotune.template("test_measure/matmul")
def matmul(n: int) -> tuple:
    A = tl.placeholder((n, n), "float32", name="A")
    B = tl.placeholder((n, n), "float32", name="B")
    k = tl.reduce_axis((0, n), name="k")
    C = tl.compute((n, n), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tl.create_schedule(C.op)
    y, x = s[C].op.axis
    cfg = autotune.get_config()
    cfg.define_split("tile_y", y)
    cfg.define_split("tile_x", x)
    cfg.define_knob("unused", [0, 1])  # two configs per schedule: identical code
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]


def test_every_failure_kind_is_a_typed_result_and_workers_recover() -> None:
    task = autotune.create_task("test_measure/modes", (16,))
    option = autotune.measure_option(
        builder=autotune.LocalBuilder(timeout=20, n_parallel=2),
        runner=autotune.LocalRunner(number=1, repeat=1, timeout=0.5, check_correctness=True),
    )
    inputs = [MeasureInput(task, task.config_space.get(i)) for i in range(len(MODES))]
    try:
        hang_alone = Measurer(option).measure([inputs[MODES.index("slow")]])
        results = Measurer(option).measure(inputs)
    finally:
        option.close()
    # A hang with no best cost to judge it by runs to the timeout.
    assert [r.error_no for r in hang_alone] == [MeasureErrorNo.RUN_TIMEOUT]
    errors = dict(zip(MODES, (r.error_no for r in results)))
    assert errors == {
        "ok": MeasureErrorNo.NO_ERROR,
        "raise": MeasureErrorNo.INSTANTIATION_ERROR,
        "crash": MeasureErrorNo.RUNTIME_ERROR,
        "wrong": MeasureErrorNo.WRONG_ANSWER,
        "slow": MeasureErrorNo.NO_ERROR,
        "ok_split": MeasureErrorNo.NO_ERROR,
    }, [r.error_msg for r in results]
    # Timed after "ok" (the first config of a batch is timed alone, and cuts the rest short),
    # the hang is stopped as measured slow, its cost a lower bound far above ok's.
    slow = results[MODES.index("slow")]
    assert slow.slow and slow.costs[0] > 2 * results[0].costs[0]
    assert "cannot handle" in results[1].error_msg
    assert all(c > 0 for c in results[0].costs)


def test_a_worker_that_cannot_start_reports_why_and_closes_cleanly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no new processes here")

    monkeypatch.setattr(workers.subprocess, "Popen", refuse)
    pool = workers.WorkerPool(1)
    never_run = workers.Job(func=len, payload=(), timeout=1.0,
                            timeout_error=MeasureErrorNo.RUN_TIMEOUT,
                            crash_error=MeasureErrorNo.RUNTIME_ERROR)
    with pytest.raises(RuntimeError, match="no new processes"):
        pool.run([never_run])
    pool.close()
    assert all(w.process is None and w.conn is None for w in pool.workers)


def test_tune_end_to_end_then_deploy_the_best(tmp_path: object) -> None:
    task = autotune.create_task("test_measure/matmul", (32,))
    assert len(task.config_space) == 72
    log = tmp_path / "mm.jsonl"
    option = autotune.measure_option(
        builder=autotune.LocalBuilder(n_parallel=2),
        runner=autotune.LocalRunner(number=2, repeat=2, check_correctness=True),
    )
    result = autotune.tune(task, trials=24, log_file=log, measure_option=option, seed=0,
                           progress=False)
    records = autotune.load_records(log)
    trials = [r for r in records if not r.remeasured]
    assert len(trials) == 24 == result.n_results
    assert all(r.result.error_no is MeasureErrorNo.NO_ERROR for r in records)
    # The run ends with a verdict: the fallback and the fastest trials re-measured side by side,
    # and its winner (not the fastest one-shot timing) is the result and the log's best.
    (chosen,) = [r for r in records if r.chosen]
    contenders = [r for r in records if r.remeasured]
    assert contenders[0].config_index == task.fallback_config().index
    assert len({r.config_index for r in contenders}) == len(contenders) >= 2
    assert all(len(r.rounds) == 5 for r in contenders)
    assert chosen.result.mean == min(r.result.mean for r in contenders)
    assert (result.config.index, result.cost) == (chosen.config_index, chosen.result.mean)
    assert result.gflops > 0
    with autotune.apply_history_best(log):
        s, args = matmul(32)
    f = tl.build(s, args)
    a, b = np.random.rand(32, 32).astype("float32"), np.random.rand(32, 32).astype("float32")
    c = np.zeros((32, 32), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)
    chosen_s, chosen_args = task.instantiate(result.config)  # the log's best is what applies
    assert str(tl.lower(s, args)) == str(tl.lower(chosen_s, chosen_args))


def test_configs_with_identical_code_are_measured_once() -> None:
    task = autotune.create_task("test_measure/matmul", (16,))
    twins = [task.config_space.get(0), task.config_space.get(1)]  # differ only in "unused"
    option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                     runner=autotune.LocalRunner(number=1, repeat=1))
    measurer = Measurer(option, feature_kind="itervar")
    try:
        results = measurer.measure([MeasureInput(task, c) for c in twins])
    finally:
        option.close()
    assert results[0] is results[1] and results[0].ok
    assert measurer.features[0].shape == measurer.features[1].shape
    assert np.array_equal(measurer.features[0], measurer.features[1])


def test_measure_option_rejects_wrong_types() -> None:
    with pytest.raises(TypeError, match="builder"):
        autotune.measure_option(builder="local")
    with pytest.raises(ValueError, match="timeout"):
        autotune.LocalRunner(timeout=0)
