"""The verdict at the end of a tuning run: the fallback and the fastest trials re-measured side by
side, round-robin, the median deciding the best, and every reader of the log keeping it.

Driven by simulated measure functions in which some configs read fast the first time they are
timed (a lucky timing on a loaded machine) and slow ever after.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

import autotune
import tensorlang as tl
from autotune.record import merge
from autotune.result import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.tuner import GridSearchTuner, XGBTuner
from autotune.tuner.base import REMEASURE_MARGIN, Verdict

N = 60  # not a power of two: its splits are 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60


@autotune.template("test_remeasure/scale")
def scale(n: int) -> tuple:
    A = tl.placeholder((n,), "float32", name="A")
    B = tl.compute((n,), lambda i: A[i] * 3.0 + 1.0, name="B")
    s = tl.create_schedule(B.op)
    cfg = autotune.get_config()
    cfg.define_split("t", s[B].op.axis[0], num_outputs=2)
    cfg.define_knob("unroll", [0, 1])
    _, inner = cfg["t"].apply(s, B, s[B].op.axis[0])
    if cfg["unroll"].val:
        s[B].unroll(inner)
    return s, [A, B]


@pytest.fixture(scope="module")
def task() -> autotune.Task:
    return autotune.create_task("test_remeasure/scale", (N,))


class Lucky:
    """A measure function: each config's true cost, except that the configs in `lucky` read
    `luck` times their cost the first time they are timed. Records every call's order."""

    def __init__(self, cost: Callable[[autotune.ConfigEntity], float], lucky: set[int],
                 luck: float = 0.1):
        self.cost, self.lucky, self.luck = cost, lucky, luck
        self.timed: Counter[int] = Counter()
        self.calls: list[list[int]] = []

    def __call__(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        self.calls.append([i.config.index for i in inputs])
        out = []
        for i in inputs:
            index = i.config.index
            self.timed[index] += 1
            cost = self.cost(i.config)
            if index in self.lucky and self.timed[index] == 1:
                cost *= self.luck
            out.append(MeasureResult((cost,), MeasureErrorNo.NO_ERROR))
        return out


def bowl(config: autotune.ConfigEntity) -> float:
    """Fastest (1 ms) at an inner tile of 12 without unrolling."""
    inner, unroll = config["t"].size[-1], config["unroll"].val
    return 1e-3 * (1 + abs(np.log2(inner / 12)) + unroll)


def fallback_fastest(task: autotune.Task) -> Callable[[autotune.ConfigEntity], float]:
    """The fallback config runs in 1 ms, every other config in 2 ms or more."""
    fallback = task.fallback_config().index
    return lambda c: 1e-3 if c.index == fallback else 2e-3 + bowl(c)


def test_a_lucky_first_timing_loses_to_the_truly_faster_config(task: autotune.Task) -> None:
    space = task.config_space
    fastest = min(range(len(space)), key=lambda i: bowl(space.get(i)))
    slow = max(range(len(space)), key=lambda i: bowl(space.get(i)))
    assert bowl(space.get(slow)) > 3 * bowl(space.get(fastest))
    # Without re-measuring, the slow config's lucky timing would be the best.
    naive = GridSearchTuner(task)
    naive.tune(len(space), Lucky(bowl, {slow}), remeasure_top=0)
    assert naive.best_config.index == slow and naive.verdict is None

    measure = Lucky(bowl, {slow})
    tuner = GridSearchTuner(task)
    seen: list[int] = []
    tuner.tune(len(space), measure, callbacks=[lambda t, inputs, _: seen.extend(
        i.config.index for i in inputs)], remeasure_top=3, remeasure_rounds=5)
    # Re-measurements are not trials: the callbacks and the count see the budget only.
    assert len(seen) == len(space) == tuner.trial_count
    verdict = tuner.verdict
    contenders = [i.config.index for i in verdict.inputs]
    fallback = task.fallback_config().index
    assert contenders[0] == fallback and slow in contenders and fastest in contenders
    assert len(contenders) == len(set(contenders)) == 4  # the fallback and the 3 fastest
    assert tuner.best_config.index == fastest == contenders[verdict.chosen]
    assert tuner.best_result.costs == (bowl(space.get(fastest)),)  # the median of 5 rounds
    assert verdict.rounds[contenders.index(slow)] == [bowl(space.get(slow))] * 5
    assert measure.timed[slow] == 1 + 5
    # Round-robin: every round times every contender, each round starting one later.
    rounds = measure.calls[-5:]
    assert [r[0] for r in rounds] == [contenders[k % 4] for k in range(5)]
    assert all(sorted(r) == sorted(contenders) for r in rounds)


def test_when_nothing_beats_the_fallback_it_stays_the_best_and_is_applied(
        task: autotune.Task, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    fallback = task.fallback_config()
    everyone_else = set(range(len(task.config_space))) - {fallback.index}
    result = autotune.tune(task, trials=10, tuner="random", log_file=log, seed=0,
                           measure_option=Lucky(fallback_fastest(task), everyone_else),
                           progress=False)
    records = autotune.load_records(log)
    trials = [r for r in records if not r.remeasured]
    assert len(trials) == 10 == result.n_results
    assert min(r.result.mean for r in trials) < 1e-3  # lucky one-shot timings beat it
    assert result.config.index == fallback.index and result.cost == 1e-3
    (best,) = autotune.best_records(records).values()
    assert best.chosen and best.config_index == fallback.index and best.rounds == (1e-3,) * 5
    # apply_history_best builds the fallback config, and it computes the right thing.
    with autotune.apply_history_best(log):
        s, args = scale(N)
    fallback_s, fallback_args = task.instantiate(fallback)
    assert str(tl.lower(s, args)) == str(tl.lower(fallback_s, fallback_args))
    a = np.random.default_rng(0).uniform(-1, 1, N).astype("float32")
    b = np.empty(N, "float32")
    tl.build(s, args)(a, b)
    np.testing.assert_allclose(b, a * 3.0 + 1.0, rtol=1e-6)


def _tuned_log(task: autotune.Task, path: Path, measure: Lucky, trials: int = 10,
               **kwargs: object) -> autotune.Result:
    return autotune.tune(task, trials=trials, tuner="random", log_file=path, seed=0,
                         measure_option=measure, progress=False, **kwargs)


def test_merge_and_resume_keep_the_verdict(task: autotune.Task, tmp_path: Path) -> None:
    fallback = task.fallback_config().index
    everyone_else = set(range(len(task.config_space))) - {fallback}
    verdict_log, one_shots, merged = (tmp_path / n for n in ("v.jsonl", "o.jsonl", "m.jsonl"))
    _tuned_log(task, verdict_log, Lucky(fallback_fastest(task), everyone_else))
    # Another log whose one-shot timings are all faster than the verdict's median.
    _tuned_log(task, one_shots, Lucky(fallback_fastest(task), everyone_else, 0.01),
               remeasure_top=0)
    assert not any(r.remeasured for r in autotune.load_records(one_shots))

    def best(path: Path) -> autotune.Record:
        (record,) = autotune.best_records(autotune.load_records(path)).values()
        return record

    for inputs in ([verdict_log, one_shots], [one_shots, verdict_log]):
        merge(inputs, merged)
        assert best(merged).chosen and best(merged).config_index == fallback
        merge([one_shots, merged], merged)  # merged again, over one of its inputs
        assert best(merged).chosen and best(merged).config_index == fallback

    # A later verdict wins over an earlier one, in whichever order the logs are merged.
    later = tmp_path / "later.jsonl"
    later_result = _tuned_log(task, later, Lucky(bowl, set()), trials=len(task.config_space))
    assert later_result.config.index != fallback
    for inputs in ([later, verdict_log], [verdict_log, later]):
        merge(inputs, merged)
        assert best(merged).config_index == later_result.config.index

    # Resuming with nothing left to do: the verdict, not the fastest one-shot record.
    lines = len(autotune.load_records(verdict_log))
    again = _tuned_log(task, verdict_log, Lucky(fallback_fastest(task), everyone_else))
    assert (again.config.index, again.cost, again.n_results) == (fallback, 1e-3, 10)
    assert again.verdict is None and len(autotune.load_records(verdict_log)) == lines
    # Resuming with more trials: the old winner is a contender of the new verdict and wins.
    more = _tuned_log(task, verdict_log, Lucky(fallback_fastest(task), everyone_else),
                      trials=16)
    assert more.n_results == 16 and more.config.index == fallback
    assert [i.config.index for i in more.verdict.inputs].count(fallback) == 1
    assert [r.chosen for r in autotune.load_records(verdict_log)].count(True) == 2


def test_re_measurements_are_no_training_points(task: autotune.Task, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    tuner = XGBTuner(task, feature_type="knob", plan_size=8, seed=0)
    autotune.tune(task, trials=16, tuner=tuner, log_file=log, progress=False,
                  measure_option=Lucky(bowl, set()))
    assert tuner.verdict is not None and len(tuner.ys) == 16 == tuner.trial_count
    resumed = XGBTuner(task, feature_type="knob", plan_size=8, seed=0)
    resumed.load_history(autotune.load_records(log))
    assert len(resumed.ys) == 16 == resumed.trial_count
    assert resumed.best_config.index == tuner.best_config.index
    # Nor do they teach the model of another shape of the template.
    other = XGBTuner(autotune.create_task("test_remeasure/scale", (2 * N,)))
    other.load_history(autotune.load_records(log))
    assert [len(ys) for ys in other._transfer_ys] == [16]


def ok(*costs: float) -> list[MeasureResult]:
    """One successful round result per cost (one repeat each), as a verdict receives them."""
    return [MeasureResult((c,), MeasureErrorNo.NO_ERROR) for c in costs]


def test_the_verdict_compares_rounds_pairwise_and_a_failed_round_disqualifies(
        task: autotune.Task) -> None:
    inputs = [MeasureInput(task, task.config_space.get(i)) for i in range(4)]
    timeout = MeasureResult((), MeasureErrorNo.RUN_TIMEOUT, "too slow")
    # The load rose in rounds 2 and 3 for everyone, and once more for the second contender
    # alone: 10% faster than the fallback in 4 rounds of 5, it wins, although the median of
    # its times (2.7) is above the fallback's (1.0). The third was lucky once, then 10% slower.
    verdict = Verdict.judge(inputs, [ok(1.0, 3.0, 3.0, 1.0, 1.0),
                                     ok(0.9, 2.7, 2.7, 2.7, 0.9),
                                     ok(0.5, 3.3, 3.3, 1.1, 1.1),
                                     ok(0.1, 0.1) + [timeout] + ok(0.1, 0.1)])
    assert verdict.chosen == 1 and verdict.best[1].costs == (2.7,)
    assert verdict.ratios[:3] == pytest.approx([1.0, 0.9, 1.1])
    assert verdict.results[3].error_no is MeasureErrorNo.RUN_TIMEOUT
    assert verdict.rounds[3][2] == float("inf") and verdict.ratios[3] == float("inf")
    tie = Verdict.judge(inputs[:2], [ok(1.0), ok(1.0)])
    assert tie.chosen == 0  # the first contender (the fallback) wins ties
    # Without a fallback that ran every round, the next contender is the reference.
    without = Verdict.judge(inputs[:3], [[timeout] + ok(1.0), ok(2.0, 2.0), ok(1.0, 3.0)])
    assert without.ratios[1:] == [1.0, 1.0] and without.chosen == 1
    assert Verdict.judge(inputs[:1], [[timeout]]) is None


def test_the_verdict_keeps_the_fallback_unless_beaten_by_the_margin(
        task: autotune.Task) -> None:
    inputs = [MeasureInput(task, task.config_space.get(i)) for i in range(3)]
    fallback = ok(1.0, 1.0, 1.0)
    below_margin = 1.0 - REMEASURE_MARGIN / 2  # faster in every round, but within the noise
    tied = Verdict.judge(inputs[:2], [fallback, ok(*[below_margin] * 3)])
    assert tied.chosen == 0 and tied.ratios[1] == pytest.approx(below_margin)
    beaten = 1.0 - 2 * REMEASURE_MARGIN
    verdict = Verdict.judge(inputs, [fallback, ok(*[below_margin] * 3),
                                     ok(*[beaten] * 3)])
    assert verdict.chosen == 2 and verdict.best[1].costs == (pytest.approx(beaten),)


def test_a_verdict_round_takes_the_fastest_repeat(task: autotune.Task) -> None:
    inputs = [MeasureInput(task, task.config_space.get(i)) for i in range(2)]
    done = MeasureErrorNo.NO_ERROR
    # The contender's every round had one repeat hit by a burst of load (5x): its mean would
    # lose to the fallback in every round, its fastest repeat wins each one by 10%.
    verdict = Verdict.judge(inputs, [[MeasureResult((1.0, 1.0, 1.0), done)] * 3,
                                     [MeasureResult((0.9, 4.5, 0.9), done)] * 3])
    assert verdict.rounds[1] == [0.9, 0.9, 0.9]
    assert verdict.chosen == 1 and verdict.ratios[1] == pytest.approx(0.9)


def test_bad_re_measurement_settings_are_rejected(task: autotune.Task) -> None:
    with pytest.raises(ValueError, match="rounds >= 0"):
        GridSearchTuner(task).tune(4, Lucky(bowl, set()), remeasure_rounds=-1)
    with pytest.raises(ValueError, match="top >= 0"):
        autotune.tune(task, trials=4, measure_option=Lucky(bowl, set()), remeasure_top=-2,
                      progress=False)


def test_remeasure_settles_a_log_without_tuning(task: autotune.Task, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    fallback = task.fallback_config().index
    everyone_else = set(range(len(task.config_space))) - {fallback}
    _tuned_log(task, log, Lucky(fallback_fastest(task), everyone_else), remeasure_top=0)
    (lucky,) = autotune.best_records(autotune.load_records(log)).values()
    assert lucky.config_index != fallback and not lucky.remeasured
    measure = Lucky(fallback_fastest(task), set())
    result = autotune.remeasure(task, log, measure, top=2, rounds=3)
    assert result.config.index == fallback and result.n_results == 10
    assert len(measure.calls) == 3 and all(len(c) == 3 for c in measure.calls)
    (settled,) = autotune.best_records(autotune.load_records(log)).values()
    assert settled.chosen and settled.config_index == fallback
