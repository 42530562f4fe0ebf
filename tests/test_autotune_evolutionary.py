"""Evolutionary search: mutation and crossover stay inside the config space, the population
climbs the cost model's score, and a tuning run with it writes records that replay."""

from __future__ import annotations

import numpy as np
import pytest

import autotune
import tensorlang as tl
from autotune.auto_schedule import AutoTask
from autotune.cost_model import XGBoostCostModel
from autotune.features import knob_features
from autotune.space import InstantiationError, SplitKnob
from autotune.tuner import EvolutionaryTuner
from autotune.tuner.evolutionary import EvolutionarySearch, Mutator

import auto_schedule_workloads as W  # noqa: E402 (tests/ is on sys.path under pytest)

AVX2 = "llvm -mcpu=haswell"


@pytest.fixture(scope="module")
def gemm_task() -> AutoTask:
    # primes and a non-dividing split: 37 rows, 24 columns, a reduction of 29
    return autotune.create_task(W.gemm, (37, 24, 29), target=AVX2)


@pytest.fixture(scope="module")
def big_gemm_task() -> AutoTask:
    # a space of some 10^5 configs, where search matters
    return autotune.create_task(W.gemm, (120, 96, 64), target=AVX2)


@pytest.mark.parametrize("which", ["gemm_task", "big_gemm_task"])
def test_mutation_keeps_configs_in_the_space_and_changes_one_knob(which, request):
    gemm_task = request.getfixturevalue(which)
    space = gemm_task.config_space
    mutator = Mutator(space)
    rng = np.random.default_rng(0)
    knobs = list(space.knobs.values())
    changed = 0
    for index in space.sample(rng, 40):
        parent = space.point2knob(int(index))
        child_index = mutator.mutate(int(index), rng)
        assert 0 <= child_index < space.range_length and space.is_valid(child_index)
        child = space.point2knob(child_index)
        diff = [k for k, (a, b) in enumerate(zip(parent, child)) if a != b]
        assert len(diff) <= 1
        changed += len(diff)
        for k in diff:
            if isinstance(knobs[k], SplitKnob):  # a factor moved: one or two levels differ
                a, b = knobs[k][parent[k]].size[1:], knobs[k][child[k]].size[1:]
                assert 1 <= sum(x != y for x, y in zip(a, b)) <= 2
        # a mutant either builds or is rejected by the sketch itself before any build
        try:
            gemm_task.instantiate(child_index)
        except InstantiationError as exc:
            assert "register block" in str(exc)
    assert changed >= 35


def test_crossover_takes_each_stage_from_one_parent(big_gemm_task):
    space = big_gemm_task.config_space
    mutator = Mutator(space)
    rng = np.random.default_rng(1)
    names = list(space.knobs)
    for a, b in space.sample(rng, 40).reshape(20, 2):
        child = space.point2knob(mutator.crossover(int(a), int(b), rng))
        da, db = space.point2knob(int(a)), space.point2knob(int(b))
        for stage in {n.split(".")[0] for n in names}:
            ks = [k for k, n in enumerate(names) if n.split(".")[0] == stage]
            assert [child[k] for k in ks] in ([da[k] for k in ks], [db[k] for k in ks])


def test_population_climbs_the_cost_model_score(big_gemm_task):
    """An XGBoost model fitted on a synthetic speed (register blocks near 4x16 fast) scores
    each generation higher on average, and the best found beat the first population's."""
    space = big_gemm_task.config_space
    rng = np.random.default_rng(2)
    train = space.sample(rng, 200)

    def speed(indices):
        configs = [space.get(int(i)) for i in indices]
        return np.asarray([1.0 / (1 + abs(c["C.tile0"].size[-1] - 4)
                                  + abs(c["C.tile1"].size[-1] - 16) / 8) for c in configs])

    model = XGBoostCostModel("reg", seed=0)
    model.fit(knob_features(space, train.tolist()), speed(train))

    def score(points):
        return model.predict(knob_features(space, [int(p) for p in points]))

    search = EvolutionarySearch(space, population=32, generations=5, seed=3)
    best = search.find_maximums(score, 8, exclude=[])
    assert len(best) == 8 and len(set(best)) == 8
    assert search.history[-1] > search.history[0]
    first = search.space.sample(np.random.default_rng(3), 32)
    assert score(np.asarray(best[:1]))[0] >= score(first).max()
    assert speed(best[:4]).mean() > speed(first).mean()


def test_search_excludes_measured_configs_and_skips_unlowerable_ones(big_gemm_task):
    space = big_gemm_task.config_space
    search = EvolutionarySearch(space, population=16, generations=2, seed=4)
    bad = set(int(i) for i in space.sample(np.random.default_rng(5), 2000))

    def score(points):
        return np.asarray([np.nan if int(p) in bad else float(int(p) % 97) for p in points])

    excluded = set(int(i) for i in space.sample(np.random.default_rng(6), 50))
    found = search.find_maximums(score, 10, excluded)
    assert found and not set(found) & excluded and not set(found) & bad


def test_bad_search_settings_are_refused(gemm_task):
    with pytest.raises(ValueError, match="population"):
        EvolutionarySearch(gemm_task.config_space, population=1)


def test_evolutionary_is_the_default_tuner_of_auto_tasks_and_its_records_replay(tmp_path,
                                                                            gemm_task):
    assert gemm_task.default_tuner == "evolutionary"
    log = tmp_path / "gemm.jsonl"
    option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                     runner=autotune.LocalRunner(number=2, repeat=1))
    seen = []
    result = autotune.tune(gemm_task, trials=10, log_file=str(log), measure_option=option,
                           progress=False, seed=0, remeasure_top=0,
                           callbacks=[lambda tuner, i, r: seen.append(type(tuner))])
    assert seen and set(seen) == {EvolutionaryTuner}
    assert result.config is not None
    records = autotune.load_records(str(log))
    assert len(records) == 10 and all(r.trace for r in records if r.result.ok)
    s, tensors = gemm_task.apply_best(str(log))
    best = gemm_task.best_record(str(log))
    s_cfg, tensors_cfg = gemm_task.instantiate(best.config_index)
    with gemm_task.compile_target:
        assert str(tl.lower(s, tensors)) == str(tl.lower(s_cfg, tensors_cfg))
    f = tl.build(s, tensors, target=AVX2)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((37, 29)).astype("float32")
    b = rng.standard_normal((29, 24)).astype("float32")
    c = np.zeros((37, 24), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    # by name too, and a resumed run continues the same log
    more = autotune.tune(gemm_task, trials=14, tuner="evolutionary", log_file=str(log),
                         measure_option=option, progress=False, seed=1, remeasure_top=0)
    assert more.n_results == 14
