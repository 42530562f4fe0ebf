"""Tuning and targets: logs record the CPU a config was tuned for, apply_history_best keeps
records to their CPU, tasks instantiate in their target's scope, and every tuner measures the
fallback config first (and knob ranges contain it), so tuning never ends below the fallback."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence

import pytest

import autotune
import tensorlang as tl
import topi  # noqa: F401 - registers the x86 templates
from autotune.record import decode, encode
from autotune.result import MeasureErrorNo, MeasureInput, MeasureResult

HASWELL = "llvm -mcpu=haswell"
GEMM_ARGS = ((64, 48), (48, 40), "float32")

TEMPLATE_ARGS = {
    "matmul.x86": ((1024, 1024), (1024, 1024), "float32"),
    "dense.x86": ((1024, 1024), (1024, 1024), "float32"),
    "batch_matmul.x86": ((12, 128, 64), (12, 128, 64), "float32"),
    "conv2d_nchw.x86": ((1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 1, "float32"),
    "conv2d_nhwc.x86": ((1, 14, 14, 256), (3, 3, 256, 256), 1, 1, 1, "float32"),
    "depthwise_conv2d_nchw.x86": ((1, 144, 56, 56), (144, 1, 3, 3), 1, 1, 1, "float32"),
}


def _block(cfg: autotune.ConfigEntity) -> tuple[int, int]:
    return cfg["tile_y"].size[-1], cfg["tile_x"].size[-1]


@pytest.mark.parametrize("target, lanes, registers", [
    ("llvm", 16, 32), (HASWELL, 8, 16), ("llvm -mcpu=x86-64", 4, 16),
])
def test_gemm_task_space_and_fallback_follow_the_target(target, lanes, registers):
    task = autotune.create_task("matmul.x86", TEMPLATE_ARGS["matmul.x86"], target=target)
    fallback = task.fallback_config()
    assert fallback is not None
    rows, cols = _block(fallback)
    vectors = cols // lanes
    assert cols % lanes == 0 and rows * vectors + vectors + 2 <= registers
    widths = {c["tile_x"].size[-1] for c in task.config_space}
    assert widths == {v * lanes for v in (1, 2, 3, 4)}
    s, _ = task.instantiate(fallback)  # the instantiation is in the task's target scope
    packed = [st for st in s.stages if getattr(st.op, "tag", "") == "injective,panel_pack"]
    assert [int(st.op.output(0).shape[-1].value) for st in packed] == [lanes]


@pytest.mark.parametrize("name", sorted(TEMPLATE_ARGS))
@pytest.mark.parametrize("target", ["llvm", HASWELL])
def test_every_template_space_contains_its_fallback(name, target):
    task = autotune.create_task(name, TEMPLATE_ARGS[name], target=target)
    fallback = task.fallback_config()
    assert fallback is not None, f"{name} on {target}: the fallback config is not in the space"
    direct = autotune.FallbackConfig()
    with tl.Target(target):
        task.template.run(direct, task.args)
    assert fallback.to_json()["knobs"] == direct.knob_values()


def _synthetic(inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
    return [MeasureResult((1.0 + (i.config.index % 7),), MeasureErrorNo.NO_ERROR) for i in inputs]


@pytest.mark.parametrize("tuner", ["xgb", "xgb_knob", "ga", "random", "grid"])
def test_every_tuner_measures_the_fallback_first(tuner):
    task = autotune.create_task("matmul.x86", GEMM_ARGS, target=HASWELL)
    fallback = task.fallback_config()
    assert fallback is not None and fallback.index != 0  # grid order alone would not find it
    seen: list[int] = []

    def measure(inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        seen.extend(i.config.index for i in inputs)
        return _synthetic(inputs)

    autotune.tune(task, trials=20, tuner=tuner, measure_option=measure, seed=0, progress=False,
                  remeasure_top=0)  # `seen` counts the trials only
    assert seen[0] == fallback.index
    assert seen.count(fallback.index) == 1 and len(seen) == len(set(seen)) == 20


def test_a_resumed_run_does_not_measure_the_fallback_again(tmp_path):
    task = autotune.create_task("matmul.x86", GEMM_ARGS, target=HASWELL)
    log = tmp_path / "gemm.jsonl"
    autotune.tune(task, trials=3, tuner="random", log_file=log, measure_option=_synthetic,
                  seed=0, progress=False)
    seen: list[int] = []

    def measure(inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        seen.extend(i.config.index for i in inputs)
        return _synthetic(inputs)

    autotune.tune(task, trials=6, tuner="random", log_file=log, measure_option=measure,
                  seed=1, progress=False, remeasure_top=0)  # `seen` counts the trials only
    assert len(seen) == 3 and task.fallback_config().index not in seen


def _log_for(tmp_path, target: str) -> tuple[autotune.Task, autotune.ConfigEntity, str]:
    """A one-record log of a non-fallback GEMM config tuned for `target`, with a block of 32
    columns (a candidate on every target)."""
    task = autotune.create_task("matmul.x86", GEMM_ARGS, target=target)
    fallback = task.fallback_config()
    config = next(c for c in task.config_space
                  if _block(c) != _block(fallback) and _block(c)[1] == 32)
    log = tmp_path / f"{task.compile_target.mcpu}.jsonl"
    result = MeasureResult((1e-4,), MeasureErrorNo.NO_ERROR)
    log.write_text(encode(MeasureInput(task, config), result) + "\n")
    return task, config, str(log)


def _applied(log: str, target: str, **kwargs) -> tuple[tuple[int, int], list[str]]:
    """The GEMM register block that a direct template call picks under `target`, and the
    warnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with autotune.apply_history_best(log, **kwargs), tl.Target(target):
            cfg = autotune.query_config("matmul.x86", GEMM_ARGS)
    block = _block(cfg) if not cfg.is_fallback else (0, 0)
    return block, [str(w.message) for w in caught]


def test_logs_record_the_target_and_its_cpu(tmp_path):
    task, config, log = _log_for(tmp_path, HASWELL)
    obj = json.loads(open(log).read())
    assert obj["target"] == HASWELL
    assert obj["cpu"] == tl.Target(HASWELL).cpu_signature == "haswell avx2-256 fma"
    assert decode(json.dumps(obj)).cpu_signature == "haswell avx2-256 fma"
    del obj["cpu"]  # a log written before the CPU was recorded: the target string decides
    assert decode(json.dumps(obj)).cpu_signature == "haswell avx2-256 fma"


def test_records_apply_only_to_the_cpu_they_were_tuned_for(tmp_path):
    task, config, log = _log_for(tmp_path, HASWELL)
    host = tl.Target("llvm")
    block, messages = _applied(log, HASWELL)
    assert block == _block(config) and messages == []
    block, messages = _applied(log, "llvm")
    assert block == (0, 0)  # the fallback, not the AVX2 record
    assert len(messages) == 1
    assert HASWELL in messages[0] and "haswell avx2-256" in messages[0]
    assert host.cpu_signature in messages[0] and "allow_other_targets" in messages[0]
    block, messages = _applied(log, "llvm", allow_other_targets=True)
    assert block == _block(config)
    assert len(messages) == 1 and "applying a config tuned for" in messages[0]
    assert HASWELL in messages[0] and host.cpu_signature in messages[0]


def test_the_fallback_seeds_the_searches():
    """The GA's first generation holds the fallback; annealing chains restart from given
    configs (the XGBoost tuner passes the fastest measured, the fallback among them)."""
    task = autotune.create_task("matmul.x86", GEMM_ARGS, target=HASWELL)
    fallback = task.fallback_config().index
    ga = autotune.tuner.GATuner(task, pop_size=8, seed=0)
    assert ga._generation[0] == fallback
    sa = autotune.SimulatedAnnealing(task.config_space, n_chains=8, n_iter=1, seed=0)
    sa.start_from([fallback, 3])
    assert list(sa._points[:2]) == [fallback, 3] and len(sa._points) == 8
