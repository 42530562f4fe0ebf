"""topi.graph.extract_tasks and tune: distinct workloads, the gradient task scheduler, a tiny
tuning budget end to end (resumable from the log) and building with the tuned records."""

from __future__ import annotations

import io
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import autotune
import topi.graph as tg
from topi.graph.reference import run_reference
from topi.graph.tune import TaskState, choose, fallback_index, gradient


def trials_in(log: Path) -> list[autotune.Record]:
    """The tuning trials of a log (the re-measured verdicts at the end of runs are not)."""
    return [r for r in autotune.load_records(log) if not r.remeasured]


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype("float32")


def small_cnn(rng: np.random.Generator) -> tg.Graph:
    g = tg.Graph()
    y = g.input("x", (1, 4, 9, 9))
    for _ in range(2):  # the same conv workload twice
        y = g.relu(g.conv2d(y, g.constant(_w(rng, 4, 4, 3, 3)), padding=1))
    y = g.conv2d(y, g.constant(_w(rng, 8, 4, 3, 3)), stride=2)
    g.output(g.dense(g.reshape(y, (1, 128)), g.constant(_w(rng, 5, 128))))
    return g


def test_extract_tasks_counts_distinct_workloads(rng: np.random.Generator) -> None:
    """The workloads of the graph as built for the target: on AVX-512, 4 output channels are
    too few for a block (the first two convs stay NCHW) and 8 make a half vector (NCHW8c, read
    from the NCHW input); on AVX2 every conv runs in NCHW[x]c."""
    tasks = tg.extract_tasks(small_cnn(rng), "llvm -mcpu=skylake-avx512")
    assert [(t.name, t.args, c) for t, c in tasks] == [
        ("conv2d_nchw.x86", ((1, 4, 9, 9), (4, 4, 3, 3), 1, 1, 1, "float32"), 2),
        ("conv2d_NCHWc.x86", ((1, 4, 9, 9), (1, 4, 3, 3, 8), 2, 0, 1, "float32"), 1),
        ("dense.x86", ((1, 128), (5, 128), "float32"), 1),
    ]
    tasks = tg.extract_tasks(small_cnn(rng), "llvm -mcpu=haswell")
    assert [(t.name, t.args, c) for t, c in tasks] == [
        ("conv2d_NCHWc.x86", ((1, 1, 9, 9, 4), (1, 4, 3, 3, 4), 1, 1, 1, "float32"), 2),
        ("conv2d_NCHWc.x86", ((1, 1, 9, 9, 4), (1, 4, 3, 3, 8), 2, 0, 1, "float32"), 1),
        ("dense.x86", ((1, 128), (5, 128), "float32"), 1),
    ]
    assert all(len(t.config_space) > 1 and t.flop > 0 for t, _ in tasks)
    with pytest.raises(TypeError, match="takes a topi.graph.Graph"):
        tg.extract_tasks([])


def _state(task: autotune.Task, count: int, trials: int, best: float,
           history: list[tuple[int, float]] | None = None) -> TaskState:
    return TaskState(task, count, trials, best, history or [(trials, best)])


def test_scheduler_warms_up_then_follows_the_latency_gradient() -> None:
    conv = autotune.create_task("conv2d_nchw.x86", ((1, 8, 8, 8), (8, 8, 3, 3), 1, 1, 1,
                                                    "float32"))
    other = autotune.create_task("conv2d_nchw.x86", ((1, 8, 8, 8), (16, 8, 1, 1), 1, 0, 1,
                                                     "float32"))
    dense = autotune.create_task("dense.x86", ((4, 8), (8, 8), "float32"))
    # A task never measured goes first, whatever its weight.
    fresh = _state(dense, 1, 0, math.inf, [])
    assert choose([_state(conv, 50, 32, 1e-3), fresh]) is fresh
    # Same latency and progress: the task that runs ten times more often is worth more.
    often, rarely = _state(conv, 10, 32, 1e-3), _state(dense, 1, 32, 1e-3)
    assert choose([rarely, often]) is often
    assert gradient(often, [often, rarely]) < gradient(rarely, [often, rarely]) < 0
    # A task far below the throughput of a similar task (same template) has more to gain.
    fast = _state(conv, 1, 32, conv.flop / 100e9)
    slow = _state(other, 1, 32, other.flop / 10e9)
    assert choose([fast, slow]) is slow
    # Recent improvement counts: a task that just got faster is chosen over a stalled one.
    improving = _state(dense, 1, 64, 1e-3, [(32, 2e-3), (64, 1e-3)])
    stalled = _state(other, 1, 64, 1e-3, [(32, 1e-3), (64, 1e-3)])
    assert choose([stalled, improving]) is improving
    # Exhausted tasks drop out.
    stalled.exhausted = improving.exhausted = True
    assert choose([stalled, improving]) is None


def test_tiny_budget_tunes_every_task_resumes_and_builds(rng: np.random.Generator,
                                                         tmp_path: Path) -> None:
    g = small_cnn(rng)
    log = tmp_path / "model.jsonl"
    progress = io.StringIO()
    result = tg.tune(g, trials=9, per_round=3, tuner="random", log_file=log, seed=0,
                     stream=progress)
    assert result.trials == 9 == len(trials_in(log))
    assert [s.trials for s in result.states] == [3, 3, 3]  # the warm-up round
    # Each task's first trial is its fallback config: tuned never means slower than untuned.
    first = {}
    for record in trials_in(log):
        first.setdefault(record.key, record.config_index)
    assert [first[s.task.key] for s in result.states] == [fallback_index(s.task)
                                                          for s in result.states]
    assert all(fallback_index(s.task) is not None for s in result.states)
    assert all(math.isfinite(s.best) for s in result.states)
    assert result.estimated_latency == sum(s.count * s.best for s in result.states)
    lines = progress.getvalue().splitlines()
    assert lines[0].startswith("[tune") and "round 1: task 1/3 conv2d_nchw.x86 x2" in lines[0]
    assert "budget 9/9" in lines[2] and "trials in" in lines[-1]
    # At the end each task re-measured its contenders: its best is its verdict's median.
    assert sum("re-measured" in line for line in lines) == 3
    verdicts = autotune.best_records(autotune.load_records(log))
    assert all(verdicts[(s.task.key, s.task.target)].chosen for s in result.states)
    assert [s.best for s in result.states] == [verdicts[(s.task.key, s.task.target)].result.mean
                                               for s in result.states]
    # Rerunning with the same budget resumes from the log: nothing left to do.
    lines = len(autotune.load_records(log))
    again = tg.tune(g, trials=9, per_round=3, tuner="random", log_file=log, progress=False)
    assert again.trials == 9 == len(trials_in(log)) and len(autotune.load_records(log)) == lines
    assert [s.best for s in again.states] == [s.best for s in result.states]
    # A larger budget adds only the difference.
    more = tg.tune(g, trials=12, per_round=3, tuner="random", log_file=log, progress=False)
    assert more.trials == 12 == len(trials_in(log))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = tg.build(g, log_file=log)
    assert not [w for w in caught if "fallback" in str(w.message)]
    inputs = {"x": _w(rng, 1, 4, 9, 9)}
    np.testing.assert_allclose(m(**inputs)[0], run_reference(g, inputs)[0], rtol=1e-4,
                               atol=1e-5)


def test_one_set_of_workers_serves_every_round(rng: np.random.Generator, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Measurement workers start once for the model, not once per round of each task (nor for
    each task's fallback measurement), and are stopped when the tuning ends."""
    pools: list[object] = []
    closed: list[object] = []
    real_init, real_close = autotune.workers.WorkerPool.__init__, autotune.workers.WorkerPool.close

    def counted_init(self, *args, **kwargs) -> None:
        pools.append(self)
        real_init(self, *args, **kwargs)

    def counted_close(self) -> None:
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(autotune.workers.WorkerPool, "__init__", counted_init)
    monkeypatch.setattr(autotune.workers.WorkerPool, "close", counted_close)
    result = tg.tune(small_cnn(rng), trials=12, per_round=2, tuner="random",
                     log_file=tmp_path / "model.jsonl", progress=False)
    assert result.trials == 12 and all(s.trials >= 2 for s in result.states)  # 6 rounds
    assert 1 <= len(pools) <= 3  # the builder's, the runner's forked and unforked (verdicts)
    assert set(map(id, pools)) <= set(map(id, closed))


def test_tune_rejects_bad_budgets(rng: np.random.Generator) -> None:
    with pytest.raises(ValueError, match="per_round"):
        tg.tune(small_cnn(rng), trials=4, per_round=0)


def test_each_task_ends_with_its_verdict_even_against_lucky_timings(
        rng: np.random.Generator, tmp_path: Path) -> None:
    """Every config but the fallback reads fast the first time it is timed and is slow after:
    the end-of-run re-measurement gives every task its fallback back, and build applies it."""
    g = small_cnn(rng)
    fallbacks = {task.key: fallback_index(task) for task, _ in tg.extract_tasks(g)}
    timed: set[tuple[str, int]] = set()

    def lucky(inputs: list[autotune.MeasureInput]) -> list[autotune.MeasureResult]:
        out = []
        for i in inputs:
            key = (i.task.key, i.config.index)
            cost = 1e-4 if i.config.index == fallbacks[i.task.key] else (
                2e-4 if key in timed else 1e-5)
            timed.add(key)
            out.append(autotune.MeasureResult((cost,), autotune.MeasureErrorNo.NO_ERROR))
        return out

    log = tmp_path / "model.jsonl"
    progress = io.StringIO()
    result = tg.tune(g, trials=12, per_round=4, tuner="random", log_file=log, seed=0,
                     measure_option=lucky, stream=progress)
    assert result.trials == 12 == len(trials_in(log))
    assert min(r.result.mean for r in trials_in(log)) == 1e-5  # the lucky one-shot timings
    best = autotune.best_records(autotune.load_records(log))
    for state in result.states:
        record = best[(state.task.key, state.task.target)]
        assert record.chosen and record.config_index == fallbacks[state.task.key]
        assert state.best == 1e-4 and record.rounds == (1e-4,) * 5
    assert progress.getvalue().count("re-measured") == 3
    # Without the re-measurement, a lucky config would be each task's best.
    naive = tmp_path / "naive.jsonl"
    timed.clear()
    tg.tune(g, trials=12, per_round=4, tuner="random", log_file=naive, seed=0,
            measure_option=lucky, progress=False, remeasure_top=0)
    assert all(r.result.mean == 1e-5 for r in
               autotune.best_records(autotune.load_records(naive)).values())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = tg.build(g, log_file=log)
    assert not [w for w in caught if "fallback" in str(w.message)]
    inputs = {"x": _w(rng, 1, 4, 9, 9)}
    np.testing.assert_allclose(m(**inputs)[0], run_reference(g, inputs)[0], rtol=1e-4,
                               atol=1e-5)


def test_matmul_ops_tune_and_build_with_their_records(rng: np.random.Generator,
                                                      tmp_path: Path) -> None:
    """A model's matmuls (2-D, transposed, batched) become matmul.x86 tasks whose arguments
    are the ops' workloads, and the build picks the records tuned for them."""
    g = tg.Graph()
    x = g.input("x", (6, 10))
    y = g.matmul(x, g.constant(_w(rng, 10, 12)))
    y = g.matmul(y, g.constant(_w(rng, 9, 12)), transpose_b=True)
    g.output(g.matmul(g.reshape(y, (2, 3, 9)), g.constant(_w(rng, 1, 9, 5))))
    tasks = tg.extract_tasks(g, "llvm -mcpu=haswell")
    assert [(t.name, t.args) for t, _ in tasks] == [
        ("matmul.x86", ((6, 10), (10, 12), "float32")),
        ("matmul.x86", ((6, 12), (9, 12), "float32", False, True)),
        ("matmul.x86", ((2, 3, 9), (1, 9, 5), "float32")),
    ]
    log = tmp_path / "matmuls.jsonl"
    tg.tune(g, trials=6, per_round=2, tuner="random", log_file=log, seed=0,
            target="llvm -mcpu=haswell", progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = tg.build(g, log_file=log, target="llvm -mcpu=haswell")
    assert not [w for w in caught if "fallback" in str(w.message)]
    inputs = {"x": _w(rng, 6, 10)}
    np.testing.assert_allclose(m(**inputs)[0], run_reference(g, inputs)[0], rtol=1e-4,
                               atol=1e-5)
