"""The in-model verdict: a tuned config that is slower where it runs in the model than the
untuned kernel gives way to its fallback; a faster one stays."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import autotune
import topi.graph as tg
from autotune.record import encode
from autotune.result import MeasureErrorNo, MeasureInput, MeasureResult
from topi.graph.model_verdict import MARGIN, KernelVerdict, settle_in_model
from topi.graph.reference import run_reference


def conv_model(rng: np.random.Generator, channels: int = 32, size: int = 19) -> tg.Graph:
    g = tg.Graph()
    x = g.input("x", (1, channels, size, size))
    w = g.constant(rng.uniform(-1, 1, (channels, channels, 3, 3)).astype("float32"))
    g.output(g.relu(g.conv2d(x, w, padding=1)))
    return g


def _slowest_looking(task: autotune.Task) -> int:
    """A config with one-row, one-column, one-vector register blocks over one input channel at
    a time: several times slower than the fallback's block."""
    space = task.config_space
    for index in range(len(space)):
        knobs = space.get(index).to_json()["knobs"]
        if (knobs["tile_ow"][-1], knobs["tile_oh"][-1], knobs["tile_oc"], knobs["tile_ic"][-1],
                knobs["unroll_kw"]) == (1, 1, 1, 1, False):
            return index
    raise AssertionError("no such config")


def _log_of(task: autotune.Task, index: int, path: Path) -> Path:
    path.write_text(encode(MeasureInput(task, task.config_space.get(index)),
                           MeasureResult((1e-6,), MeasureErrorNo.NO_ERROR)) + "\n")
    return path


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_a_config_slower_in_the_model_gives_way_to_its_fallback(rng, tmp_path: Path,
                                                               target: str) -> None:
    g = conv_model(rng)
    ((task, _),) = tg.extract_tasks(g, target)
    slow = _slowest_looking(task)
    log = _log_of(task, slow, tmp_path / "slow.jsonl")
    (verdict,) = settle_in_model(g, log, target)
    assert verdict.task.key == task.key and verdict.calls == 1
    assert verdict.tuned > 2 * verdict.untuned and not verdict.kept
    best = autotune.best_records(autotune.load_records(log))[(task.key, task.target)]
    assert best.chosen and best.config_index == task.fallback_config().index
    m = tg.build(g, log_file=log, target=target)
    x = rng.uniform(-1, 1, (1, 32, 19, 19)).astype("float32")
    np.testing.assert_allclose(m(x=x)[0], run_reference(g, {"x": x})[0], rtol=1e-4, atol=1e-4)
    # settled: nothing tuned is left to time
    assert settle_in_model(g, log, target) == []


def test_the_margin_keeps_a_tuned_config_within_noise() -> None:
    task = autotune.create_task("dense.x86", ((1, 8), (4, 8), "float32"))
    assert KernelVerdict(task, 2, 1.0, 1.0 + MARGIN / 2).kept
    assert KernelVerdict(task, 2, 1.0, 0.5).kept
    assert not KernelVerdict(task, 2, 1.0, 1.0 + 2 * MARGIN).kept


def test_tune_settles_in_the_model_only_with_real_measurements(rng, tmp_path: Path,
                                                               monkeypatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(sys.modules["topi.graph.tune"], "settle_in_model",
                        lambda g, log, target: calls.append(log) or [])
    g = conv_model(rng, 16, 9)
    tg.tune(g, trials=2, per_round=2, tuner="random", log_file=tmp_path / "a.jsonl",
            progress=False)
    assert calls == [str(tmp_path / "a.jsonl")]

    def measure(inputs):
        return [MeasureResult((1e-3,), MeasureErrorNo.NO_ERROR) for _ in inputs]

    tg.tune(g, trials=2, per_round=2, tuner="random", log_file=tmp_path / "b.jsonl",
            measure_option=measure, progress=False)
    tg.tune(g, trials=4, per_round=2, tuner="random", log_file=tmp_path / "c.jsonl",
            progress=False, in_model=False)
    assert calls == [str(tmp_path / "a.jsonl")]
