"""What a model-based plan may cost: features from the loop structure, shared between extractors,
and a budget of new lowerings per plan."""

from __future__ import annotations

import math

import numpy as np
import pytest

import autotune
import tensorlang as tl
from autotune.result import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.tuner import XGBTuner
from tensorlang.ir import For, ForKind
from tensorlang.lower import finish_lowering, lower_structure
from tensorlang.visitor import children


@autotune.template("test_plan_budget/matmul")
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
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, k, yi, xi)
    s[C].unroll(yi)
    s[C].vectorize(xi)
    return s, [A, B, C]


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
    task = autotune.create_task("test_plan_budget/matmul", (n,))
    for index in range(0, len(task.config_space), max(1, len(task.config_space) // 5)):
        s, args = task.instantiate(index)
        whole = tl.lower(s, args, name="f").main
        s, args = task.instantiate(index)
        structure = lower_structure(s, args, name="f")
        assert str(finish_lowering(structure).main) == str(whole)


def test_the_structure_keeps_the_loops_marked_vectorize_and_unroll() -> None:
    task = autotune.create_task("test_plan_budget/matmul", (32,))
    config = next(c for c in (task.config_space.get(i) for i in range(len(task.config_space)))
                  if c["tile_y"].size[-1] == 4 and c["tile_x"].size[-1] == 8)
    s, args = task.instantiate(config)
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
    task = autotune.create_task("test_plan_budget/matmul", (30,))
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
    first = autotune.FeatureExtractor(autotune.create_task("test_plan_budget/matmul", (20,)))
    rows = first.get([1, 2, 3])
    second = autotune.FeatureExtractor(autotune.create_task("test_plan_budget/matmul", (20,)))
    lowered = _counting(second)
    np.testing.assert_array_equal(second.get([3, 2, 1]), rows[::-1])
    assert lowered == []
    other_size = autotune.FeatureExtractor(autotune.create_task("test_plan_budget/matmul", (21,)))
    lowered = _counting(other_size)
    other_size.get([1])
    assert lowered == [1]


def _measure(inputs: list[MeasureInput]) -> list[MeasureResult]:
    """A bowl with its minimum at tile_y=4, tile_x=16."""
    return [MeasureResult((1e-3 * (1 + (math.log2(i.config["tile_y"].size[-1]) - 2) ** 2
                                   + (math.log2(i.config["tile_x"].size[-1]) - 4) ** 2),),
                          MeasureErrorNo.NO_ERROR) for i in inputs]


@pytest.mark.parametrize("per_trial, budget", [(0.5, 64), (12.0, 96)])
def test_a_plan_lowers_at_most_its_budget_and_still_plans_unvisited_configs(
        per_trial: float, budget: int) -> None:
    task = autotune.create_task("test_plan_budget/matmul", (5040,))
    assert len(task.config_space) > max(4 * budget, 512)  # a space the plans do not score whole
    tuner = XGBTuner(task, plan_size=8, refit_every=8, lowerings_per_trial=per_trial, seed=3)
    lowered = _counting(tuner.extractor)
    first = tuner.next_batch(8)
    tuner.update([MeasureInput(task, c) for c in first], _measure(
        [MeasureInput(task, c) for c in first]))
    tuner._plan.clear()
    before = len(lowered)
    tuner._fit_and_plan()
    assert len(lowered) - before <= budget
    assert tuner._plan and not set(tuner._plan) & tuner.visited
    assert tuner.extractor.budget is None  # the budget holds for the plan only


def test_a_budget_must_be_positive() -> None:
    task = autotune.create_task("test_plan_budget/matmul", (16,))
    with pytest.raises(ValueError, match="lowerings_per_trial"):
        XGBTuner(task, lowerings_per_trial=0)
