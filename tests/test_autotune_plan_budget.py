"""What a model-based plan may cost: features from the loop structure, shared between extractors,
and a budget of new lowerings per plan."""

from __future__ import annotations

import numpy as np
import pytest

import autotune
import tensorlang as tl
import topi  # noqa: F401 - registers matmul.x86
from autotune.result import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.tuner import XGBTuner
from tensorlang.ir import For, ForKind
from tensorlang.lower import finish_lowering, lower_structure
from tensorlang.visitor import children


def matmul_task(n: int) -> autotune.Task:
    """topi's matmul template: register blocks unrolled, columns vectorized."""
    return autotune.create_task("matmul.x86", ((n, n), (n, n), "float32"))


def _loop_kinds(node: object) -> set[ForKind]:
    kinds: set[ForKind] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, For):
            kinds.add(n.kind)
        stack.extend(c for c in children(n) if not hasattr(c, "dtype"))
    return kinds


@pytest.mark.parametrize("n", [1, 7, 24])
def test_lowering_in_two_halves_is_lowering(n: int) -> None:
    task = matmul_task(n)
    for index in range(0, len(task.config_space), max(1, len(task.config_space) // 5)):
        s, args = task.instantiate(index)
        whole = tl.lower(s, args, name="f").main
        s, args = task.instantiate(index)
        structure = lower_structure(s, args, name="f")
        assert str(finish_lowering(structure).main) == str(whole)


def test_the_structure_keeps_the_loops_marked_vectorize_and_unroll() -> None:
    task = matmul_task(32)
    s, args = task.instantiate(task.fallback_config())
    structure = lower_structure(s, args, name="f")
    assert {ForKind.VECTORIZED, ForKind.UNROLLED} <= _loop_kinds(structure.body)
    assert not {ForKind.VECTORIZED, ForKind.UNROLLED} & _loop_kinds(
        finish_lowering(structure).main.body)


def _counting(extractor: autotune.FeatureExtractor) -> list[int]:
    lowered: list[int] = []
    one = extractor._one

    def counted(index: int):
        lowered.append(index)
        return one(index)

    extractor._one = counted
    return lowered


def test_a_budget_leaves_the_configs_past_it_uncomputed_and_uncached() -> None:
    task = matmul_task(30)
    extractor = autotune.FeatureExtractor(task, "itervar")
    lowered = _counting(extractor)
    extractor.budget = 2
    rows = extractor.get([3, 4, 5, 6, 7])
    assert lowered == [3, 4] and extractor.budget == 0
    assert not np.isnan(rows[:2]).any() and np.isnan(rows[2:]).all()
    extractor.budget = None
    again = extractor.get([3, 4, 5, 6, 7])
    assert lowered == [3, 4, 5, 6, 7]  # the first two cached, the rest computed now
    np.testing.assert_array_equal(again[:2], rows[:2])
    assert not np.isnan(again).any()


def test_extractors_of_one_task_share_their_rows() -> None:
    first = autotune.FeatureExtractor(matmul_task(20))
    rows = first.get([1, 2, 3])
    second = autotune.FeatureExtractor(matmul_task(20))
    lowered = _counting(second)
    np.testing.assert_array_equal(second.get([3, 2, 1]), rows[::-1])
    assert lowered == []
    other_size = autotune.FeatureExtractor(matmul_task(21))
    lowered = _counting(other_size)
    other_size.get([1])
    assert lowered == [1]


def _measure(inputs: list[MeasureInput]) -> list[MeasureResult]:
    """Made-up costs that differ from config to config."""
    return [MeasureResult((1e-3 * (1 + i.config.index % 17 / 17),), MeasureErrorNo.NO_ERROR)
            for i in inputs]


def _first_plan(task: autotune.Task, per_trial: float | None) -> tuple[XGBTuner, int]:
    """A tuner after its first batch of 8, and how many configs its first plan lowered (with
    no rows shared from earlier extractors)."""
    autotune.features._SHARED_ROWS.clear()
    tuner = XGBTuner(task, plan_size=8, refit_every=8, lowerings_per_trial=per_trial, seed=3)
    lowered = _counting(tuner.extractor)
    inputs = [MeasureInput(task, c) for c in tuner.next_batch(8)]
    assert lowered == []  # the first batch is random
    tuner.update(inputs, _measure(inputs))  # fits and plans
    return tuner, len(lowered)


@pytest.fixture(scope="module")
def unbounded() -> int:
    """What the first plan lowers with a budget just past the largest one tested (104 > 96):
    reaching it shows that the annealing alone goes further, without lowering the 5040-config
    space as far as an unbounded plan does (a minute of lowering)."""
    return _first_plan(matmul_task(5040), 13.0)[1]


@pytest.mark.parametrize("per_trial, budget", [(0.5, 64), (12.0, 96)])
def test_a_plan_lowers_at_most_its_budget_and_still_plans_unvisited_configs(
        per_trial: float, budget: int, unbounded: int) -> None:
    task = matmul_task(5040)
    assert len(task.config_space) > 512  # a space the plans do not score whole
    assert unbounded > 8 + budget  # the annealing alone goes further
    tuner, lowered = _first_plan(task, per_trial)
    assert 8 < lowered <= 8 + budget  # the 8 measured (a build worker's rows in a real run)
    assert tuner._plan and not set(tuner._plan) & tuner.visited
    assert tuner.extractor.budget is None  # the budget holds for the plan only


def test_a_budget_must_be_positive() -> None:
    task = matmul_task(16)
    with pytest.raises(ValueError, match="lowerings_per_trial"):
        XGBTuner(task, lowerings_per_trial=0)
