"""Tuning logs: JSON lines round trip, broken-line recovery, resume, apply_history_best."""

from __future__ import annotations

import io
import json
import sys
import warnings
from collections.abc import Sequence

import pytest

import autotune
import tensorlang as tl
from autotune.record import decode, encode
from autotune.result import MeasureErrorNo, MeasureInput, MeasureResult


@autotune.template("test_record/scale")
def scale(n: int) -> tuple:
    A = tl.placeholder((n,), "float32", name="A")
    B = tl.compute((n,), lambda i: A[i] * 3.0, name="B")
    s = tl.create_schedule(B.op)
    cfg = autotune.get_config()
    cfg.define_split("t", s[B].op.axis[0], num_outputs=2)
    cfg["t"].apply(s, B, s[B].op.axis[0])
    return s, [A, B]


def fake_measure(inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
    """Larger inner tiles are faster; an inner tile of 2 fails to compile."""
    out = []
    for i in inputs:
        inner = i.config["t"].size[-1]
        if inner == 2:
            out.append(MeasureResult((), MeasureErrorNo.COMPILE_ERROR, "boom"))
        else:
            out.append(MeasureResult((1.0 / inner,), MeasureErrorNo.NO_ERROR))
    return out


def test_encode_decode_round_trip() -> None:
    task = autotune.create_task("test_record/scale", (64,))
    inp = MeasureInput(task, task.config_space.get(3))
    res = MeasureResult((1e-3, 2e-3), MeasureErrorNo.NO_ERROR, "", 0.5, 123.0)
    line = encode(inp, res)
    obj = json.loads(line)
    assert obj["config"] == {"index": 3, "knobs": {"t": [-1, 8]}}
    assert obj["feature_version"] == autotune.FEATURE_VERSION
    rec = decode(line)
    assert rec.workload == task.workload and rec.target == "llvm" and rec.config_index == 3
    assert rec.result == res
    with pytest.raises(ValueError):
        decode(line[: len(line) // 2])


def test_log_file_truncation_is_skipped_with_a_warning(tmp_path: object) -> None:
    task = autotune.create_task("test_record/scale", (64,))
    log = tmp_path / "log.jsonl"
    autotune.tune(task, trials=5, tuner="grid", log_file=log, measure_option=fake_measure,
                  progress=False, remeasure_top=0)  # one line per trial
    text = log.read_text()
    assert len(text.splitlines()) == 5
    log.write_text(text[:-20])  # an interrupted write
    with pytest.warns(UserWarning, match="broken log line"):
        records = autotune.load_records(log)
    assert len(records) == 4
    # Appending after the broken line starts a fresh line, so later records stay readable.
    with pytest.warns(UserWarning, match="broken log line"):  # resuming reads the log too
        autotune.tune(task, trials=7, tuner="grid", log_file=log, measure_option=fake_measure,
                      progress=False, remeasure_top=0)
    with pytest.warns(UserWarning):
        assert len(autotune.load_records(log)) == 4 + 3


def test_resume_skips_measured_configs(tmp_path: object) -> None:
    task = autotune.create_task("test_record/scale", (64,))
    log = tmp_path / "log.jsonl"
    first = autotune.tune(task, trials=3, tuner="random", log_file=log,
                          measure_option=fake_measure, seed=0, progress=False, remeasure_top=0)
    measured: list[int] = []

    def spy(inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        measured.extend(i.config.index for i in inputs)
        return fake_measure(inputs)

    second = autotune.tune(task, trials=7, tuner="random", log_file=log, measure_option=spy,
                           seed=0, progress=False, remeasure_top=0)  # spy counts trials only
    logged = [r.config_index for r in autotune.load_records(log)]
    assert len(measured) == 4 and len(set(logged)) == 7 == len(task.config_space)
    assert second.n_results == 7 and second.cost <= first.cost
    assert second.config["t"].size == [-1, 64]
    nothing = autotune.tune(task, trials=7, tuner="random", log_file=log,
                            measure_option=spy, progress=False)
    assert len(measured) == 4 and nothing.config.index == second.config.index


def test_a_log_of_an_older_template_version_is_not_applied(tmp_path: object) -> None:
    """A record whose knobs differ from what its index means in the template's space today
    (the template was changed after tuning) gives the fallback, not some other config."""
    task = autotune.create_task("test_record/scale", (96,))
    log = tmp_path / "log.jsonl"
    autotune.tune(task, trials=4, tuner="grid", log_file=log, measure_option=fake_measure,
                  progress=False, remeasure_top=0)  # the last line is a trial
    (best,) = autotune.best_records(autotune.load_records(log)).values()
    line = json.loads(log.read_text().splitlines()[-1])
    line["config"] = {"index": best.config_index, "knobs": {"tile": [-1, 4]}}
    line["result"]["costs"] = [1e-9]  # the fastest record, so it is the one looked up
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
    with autotune.apply_history_best(log):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s, args = scale(96)
        assert any("does not exist in the current template" in str(w.message) for w in caught)
        assert "range(16)" in str(tl.lower(s, args))  # the fallback's inner factor
    tuner = autotune.tuner.RandomTuner(task)
    tuner.load_history(autotune.load_records(log))
    assert tuner.trial_count == 4  # the stale record is neither resumed nor learnt from


def test_apply_history_best_and_fallback(tmp_path: object) -> None:
    task = autotune.create_task("test_record/scale", (64,))
    log = tmp_path / "log.jsonl"
    autotune.tune(task, trials=7, tuner="grid", log_file=log, measure_option=fake_measure,
                  progress=False)
    with autotune.apply_history_best(log):
        s, args = scale(64)
        assert "range(64)" in str(tl.lower(s, args))  # the best: inner tile 64
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            s2, args2 = scale(48)  # not tuned: fallback, inner factor 16
        assert any("fallback" in str(w.message) for w in caught)
        assert "range(16)" in str(tl.lower(s2, args2))
    best = autotune.best_records(autotune.load_records(log))
    assert [r.config_index for r in best.values()] == [6]
    records = autotune.load_records(log)
    with autotune.apply_history_best(records):
        s, args = scale(64)
        assert "range(64)" in str(tl.lower(s, args))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_counts_to_the_end_of_a_small_space(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    task = autotune.create_task("test_record/scale", (64,))
    size = len(task.config_space)
    autotune.tune(task, trials=1000, tuner="grid", measure_option=fake_measure)
    last = terminal.getvalue().strip().split("\r")[-1]
    assert f"{size}/{size}" in last and "<00:00" in last and "GFLOP/s" in last


def test_progress_is_quiet_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture) -> None:
    task = autotune.create_task("test_record/scale", (64,))
    autotune.tune(task, trials=4, tuner="grid", measure_option=fake_measure)
    assert capsys.readouterr().err == ""
