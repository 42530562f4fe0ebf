"""Cost models, the explorer and the tuners, driven by a synthetic measure function."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

import autotune
import tensorlang as tl
from autotune.cost_model import RandomModel, XGBoostCostModel
from autotune.explorer import SimulatedAnnealing, diverse_pick
from autotune.record import Record
from autotune.result import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.tuner import GATuner, GridSearchTuner, RandomTuner, XGBTuner


@autotune.template("test_search/matmul")
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
    cfg.define_knob("unroll", [0, 1, 2, 3])
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]


def synthetic_cost(config: autotune.ConfigEntity) -> float:
    """A smooth bowl with its unique minimum (1 ms) at tile_y=8, tile_x=32, unroll=2."""
    ty, tx = config["tile_y"].size[-1], config["tile_x"].size[-1]
    u = config["unroll"].val
    return 1e-3 * (1 + (math.log2(ty) - 3) ** 2 + (math.log2(tx) - 5) ** 2 + (u - 2) ** 2)


def synthetic_measure(inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
    return [MeasureResult((synthetic_cost(i.config),), MeasureErrorNo.NO_ERROR) for i in inputs]


@pytest.fixture(scope="module")
def task() -> autotune.Task:
    return autotune.create_task("test_search/matmul", (128,))


def all_costs(task: autotune.Task) -> np.ndarray:
    space = task.config_space
    return np.asarray([synthetic_cost(space.get(i)) for i in range(len(space))])


def test_simulated_annealing_finds_the_optimum_of_a_model(task: autotune.Task) -> None:
    costs = all_costs(task)
    sa = SimulatedAnnealing(task.config_space, n_chains=16, n_iter=200, seed=0)
    best = sa.find_maximums(lambda idx: -costs[idx], 5, exclude=[])
    assert best[0] == int(np.argmin(costs))
    assert len(set(best)) == 5
    excluded = sa.find_maximums(lambda idx: -costs[idx], 3, exclude=[best[0]])
    assert best[0] not in excluded and excluded[0] == best[1]


def test_diverse_pick_keeps_the_best_and_spreads_knob_values(task: autotune.Task) -> None:
    costs = all_costs(task)
    order = list(np.argsort(costs)[:32])
    picked = diverse_pick(task.config_space, order, -costs[order], 8, diversity=1.0)
    assert picked[0] == order[0] and len(set(picked)) == 8
    digits = task.config_space.points2knobs(np.asarray(picked))
    top8 = task.config_space.points2knobs(np.asarray(order[:8]))
    distinct = sum(len(set(digits[:, k])) for k in range(digits.shape[1]))
    assert distinct >= sum(len(set(top8[:, k])) for k in range(top8.shape[1]))


@pytest.mark.parametrize("loss", ["rank", "reg"])
def test_xgboost_model_ranks_held_out_configs(task: autotune.Task, loss: str) -> None:
    rng = np.random.default_rng(0)
    extractor = autotune.FeatureExtractor(task, "knob")
    idx = rng.permutation(len(task.config_space))
    xs = extractor.get(idx)
    ys = 1.0 / all_costs(task)[idx]
    model = XGBoostCostModel(loss, seed=0)
    model.fit(xs[:150], ys[:150] / ys[:150].max())
    pred = model.predict(xs[150:])
    truth = ys[150:]
    i, j = np.triu_indices(len(truth), 1)
    agree = np.mean(np.sign(pred[i] - pred[j]) == np.sign(truth[i] - truth[j]))
    assert agree > 0.8
    assert RandomModel(0).predict(xs).shape == (len(xs),)


def run_tuner(tuner: autotune.tuner.Tuner, n: int, **kwargs: object) -> list[int]:
    seen: list[int] = []
    tuner.tune(n, synthetic_measure,
               callbacks=[lambda t, inputs, results: seen.extend(i.config.index for i in inputs)],
               **kwargs)
    return seen


@pytest.mark.parametrize("make", [RandomTuner, GridSearchTuner, GATuner,
                                  lambda t, seed: XGBTuner(t, feature_type="knob", seed=seed),
                                  lambda t, seed: XGBTuner(t, loss_type="reg", seed=seed)])
def test_each_tuner_measures_distinct_configs_and_tracks_the_best(task: autotune.Task,
                                                                   make: object) -> None:
    tuner = make(task, seed=1)
    seen = run_tuner(tuner, 48)
    assert len(seen) == 48 == len(set(seen)) == tuner.trial_count
    best = min(seen, key=lambda i: synthetic_cost(task.config_space.get(i)))
    assert tuner.best_config.index == best
    assert tuner.best_flops == pytest.approx(task.flop / synthetic_cost(tuner.best_config) / 1e9)


def test_grid_search_covers_a_tiny_space_exactly(task: autotune.Task) -> None:
    tuner = GridSearchTuner(task)
    seen = run_tuner(tuner, 10_000)
    assert sorted(seen) == list(range(len(task.config_space)))
    assert tuner.best_config.index == int(np.argmin(all_costs(task)))
    assert not tuner.has_next()


@pytest.mark.parametrize("feature_type", ["itervar", "curve", "knob"])
def test_model_based_tuner_beats_its_random_start(task: autotune.Task, feature_type: str) -> None:
    tuner = XGBTuner(task, feature_type=feature_type, plan_size=16, seed=0)
    run_tuner(tuner, 64, batch_size=16)
    costs = np.sort(all_costs(task))
    assert synthetic_cost(tuner.best_config) <= costs[2]  # one of the 3 best of 256


def test_early_stopping_ends_the_run(task: autotune.Task) -> None:
    tuner = GridSearchTuner(task)
    seen = run_tuner(tuner, 200, early_stopping=20, batch_size=4)
    assert len(seen) < 200


def test_seed_makes_runs_reproducible(task: autotune.Task) -> None:
    def run(seed: int) -> list[int]:
        return run_tuner(XGBTuner(task, feature_type="itervar", plan_size=16, seed=seed), 24,
                         batch_size=8)

    first, second, other = run(3), run(3), run(4)
    assert first == second
    assert first != other


def test_tune_function_with_a_synthetic_measure(task: autotune.Task) -> None:
    result = autotune.tune(task, trials=32, tuner="random", measure_option=synthetic_measure,
                           seed=0, progress=False)
    assert result.n_results == 32
    assert result.cost == pytest.approx(synthetic_cost(result.config))
    assert result.gflops == pytest.approx(task.flop / result.cost / 1e9)


def test_transfer_learning_from_another_shape(task: autotune.Task) -> None:
    small = autotune.create_task("test_search/matmul", (64,))
    history = [
        Record(small.workload, small.target, i, {}, synthetic_measure(
            [MeasureInput(small, small.config_space.get(i))])[0])
        for i in range(0, len(small.config_space), 3)
    ]
    tuner = XGBTuner(task, feature_type="curve", plan_size=16, seed=0)
    tuner.load_history(history)
    assert tuner.trial_count == 0  # other workloads only teach the model
    first = run_tuner(tuner, 16)
    costs = np.sort(all_costs(task))
    assert min(synthetic_cost(task.config_space.get(i)) for i in first) <= costs[4]


@autotune.template("test_search/sometimes_illegal")
def sometimes_illegal(n: int) -> tuple:
    """Configs with `vectorize` on the reduction axis are illegal (ScheduleError at instantiation)."""
    A = tl.placeholder((n, n), "float32", name="A")
    k = tl.reduce_axis((0, n), name="k")
    R = tl.compute((n,), lambda i: tl.sum(A[i, k], axis=k), name="R")
    s = tl.create_schedule(R.op)
    cfg = autotune.get_config()
    cfg.define_knob("vectorize", ["i", "k"])
    s[R].vectorize(s[R].op.axis[0] if cfg["vectorize"].val == "i" else k)
    return s, [A, R]


def test_configs_without_features_are_counted_and_logged(caplog) -> None:
    task = autotune.create_task("test_search/sometimes_illegal", (16,))
    extractor = autotune.FeatureExtractor(task, "itervar")
    with caplog.at_level("WARNING", logger="autotune.features"):
        rows = extractor.get([0, 1, 1])
    assert not np.isnan(rows[0]).any() and np.isnan(rows[1:]).all()
    assert extractor.failure_count == 1  # computed once per config, then cached
    (reason,) = extractor.failures
    assert reason.startswith("ScheduleError: vectorize: axis k of stage R is a reduction axis")
    assert "config 1 of task" in caplog.text and "scored as invalid" in caplog.text


@autotune.template("test_search/rejects_some")
def rejects_some(n: int) -> tuple:
    """A template that rejects half of its configs itself (`cfg.raise_error`)."""
    A = tl.placeholder((n,), "float32", name="A")
    B = tl.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = tl.create_schedule(B.op)
    cfg = autotune.get_config()
    cfg.define_knob("wide", [0, 1])
    if cfg["wide"].val:
        cfg.raise_error("too wide for this test")
    return s, [A, B]


def test_a_template_rejection_is_counted_without_a_warning(caplog) -> None:
    task = autotune.create_task("test_search/rejects_some", (8,))
    extractor = autotune.FeatureExtractor(task, "itervar")
    with caplog.at_level("WARNING", logger="autotune.features"):
        rows = extractor.get([0, 1])
    assert not np.isnan(rows[0]).any() and np.isnan(rows[1]).all()
    assert extractor.failure_count == 1
    assert "scored as invalid" not in caplog.text
