"""Logs from several machines: records name their machine and target, and merge keeps the best."""

from __future__ import annotations

from pathlib import Path

import pytest

import autotune
import tensorlang as tl
from autotune.record import decode, encode, merge
from autotune.result import MeasureErrorNo, MeasureInput, MeasureResult


@autotune.template("test_merge/scale")
def scale(n: int) -> tuple:
    """Five configs: how many times the loop is unrolled."""
    cfg = autotune.get_config()
    cfg.define_knob("unroll", [1, 2, 4, 8, 16])
    A = tl.placeholder((n,), "float32", name="A")
    B = tl.compute((n,), lambda i: A[i] * 3.0, name="B")
    s = tl.create_schedule(B.op)
    s[B].unroll(s[B].split(s[B].op.axis[0], factor=cfg["unroll"].val)[1])
    return s, [A, B]


def _line(n: int, target: str, index: int, cost: float | None, machine: str) -> str:
    task = autotune.create_task("test_merge/scale", (n,), target=target)
    result = (MeasureResult((cost,), MeasureErrorNo.NO_ERROR, machine=machine) if cost
              else MeasureResult((), MeasureErrorNo.RUN_TIMEOUT, "slow", machine=machine))
    return encode(MeasureInput(task, task.config_space.get(index)), result)


def test_records_carry_the_machine_that_measured_them() -> None:
    rec = decode(_line(64, "llvm", 1, 1e-3, "box-a (rocketlake)"))
    assert rec.machine == "box-a (rocketlake)" and rec.target == "llvm"


def test_merge_keeps_the_best_per_workload_and_target_and_counts_broken_lines(
        tmp_path: Path) -> None:
    haswell = "llvm -mcpu=haswell"
    a, b, out = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "merged.jsonl"
    a.write_text("\n".join([
        _line(64, "llvm", 1, 3e-3, "box-a (rocketlake)"),
        _line(64, "llvm", 2, 1e-3, "box-a (rocketlake)"),   # best of (64, llvm)
        _line(64, haswell, 3, 5e-3, "box-a (haswell)"),
        '{"version": 1, "workload": ["test_merge/scale", [6',  # cut off mid-line
    ]) + "\n")
    b.write_text("\n".join([
        _line(64, "llvm", 3, 2e-3, "box-b (rocketlake)"),
        _line(64, haswell, 4, 4e-3, "box-b (haswell)"),     # best of (64, haswell)
        _line(32, "llvm", 1, None, "box-b (rocketlake)"),   # only a failure: nothing to keep
        _line(32, "llvm", 2, 7e-3, "box-b (rocketlake)"),   # best of (32, llvm)
        "not json at all",
    ]) + "\n")
    with pytest.warns(UserWarning, match="skipped 2 broken"):
        summary = merge([a, b], out)
    assert (summary.lines, summary.broken, summary.written) == (9, 2, 3)
    kept = {(r.workload[1][0], r.target): (r.config_index, r.machine)
            for r in autotune.load_records(out)}
    assert kept == {
        (64, "llvm"): (2, "box-a (rocketlake)"),
        (64, haswell): (4, "box-b (haswell)"),
        (32, "llvm"): (2, "box-b (rocketlake)"),
    }


def test_merge_may_write_over_one_of_its_inputs(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(_line(64, "llvm", 1, 3e-3, "x (y)") + "\n" + _line(64, "llvm", 2, 1e-3, "x (y)"))
    assert merge([log], log).written == 1
    (rec,) = autotune.load_records(log)
    assert rec.config_index == 2
