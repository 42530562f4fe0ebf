"""Templates travel to the measurement workers by value, and a run that cannot work says why.

A template typed into a notebook, read from stdin or defined in a script without a main guard
must tune: workers never import the user's `__main__`. These run real scripts in subprocesses.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import autotune
import tensorlang as tl
from tensorlang.runtime import load_object

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = '''
import autotune
import tensorlang as tl

print("script body ran")


@autotune.template("travel/scale")
def scale(n):
    A = tl.placeholder((n, n), "float32", name="A")
    B = tl.compute((n, n), lambda i, j: A[i, j] * FACTOR, name="B")
    s = tl.create_schedule(B.op)
    cfg = autotune.get_config()
    cfg.define_split("tile", s[B].op.axis[1], num_outputs=2)
    cfg["tile"].apply(s, B, s[B].op.axis[1])
    return s, [A, B]


FACTOR = 3.0  # a global of __main__: travels with the template
task = autotune.create_task("travel/scale", (24,))
option = autotune.measure_option(
    builder=autotune.LocalBuilder(n_parallel=1),
    runner=autotune.LocalRunner(number=1, repeat=1, check_correctness=True))
result = autotune.tune(task, trials=4, tuner="random", measure_option=option, progress=False)
print("RESULT", result.n_results, result.cost)
'''


def _run(args: list[str], tmp_path: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300)


def _check_tuned(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.count("script body ran") == 1, proc.stdout  # workers never re-run it
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("RESULT")]
    _, n, cost = line.split()
    assert int(n) == 4 and math.isfinite(float(cost)) and float(cost) > 0


def test_a_template_defined_in_a_script_read_from_stdin_tunes(tmp_path: Path) -> None:
    _check_tuned(_run(["-"], tmp_path, stdin=SCRIPT))


def test_a_script_without_a_main_guard_tunes_and_runs_once(tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(SCRIPT)
    _check_tuned(_run([str(script)], tmp_path))


def test_every_trial_failing_alike_raises_naming_the_cause() -> None:
    def broken(n: int) -> tuple:
        cfg = autotune.get_config()
        cfg.define_knob("k", [0, 1, 2, 3])
        A = tl.placeholder((n,), "float32", name="A")
        B = tl.compute((n,), lambda i: A[i] + 1.0, name="B")
        if not cfg.is_fallback and not isinstance(cfg, autotune.ConfigSpace):
            raise RuntimeError("this template lost its lookup table")
        return tl.create_schedule(B.op), [A, B]

    autotune.template("travel/broken")(broken)  # defined in a function: travels by value
    task = autotune.create_task("travel/broken", (8,))
    option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                     runner=autotune.LocalRunner(number=1, repeat=1))
    with pytest.raises(autotune.TuningError,
                       match="all 4 trials .* INSTANTIATION_ERROR: RuntimeError: this template "
                             "lost its lookup table"):
        autotune.tune(task, trials=4, tuner="grid", measure_option=option, progress=False)


class InProcessRunner:
    """A Runner of our own: links each artifact into this process and times one call."""

    def __init__(self) -> None:
        self.seen: list[autotune.Artifact] = []

    def run(self, artifacts, best_seconds=None):
        results = []
        for artifact in artifacts:
            self.seen.append(artifact)
            module = load_object(artifact.code)
            arrays = [np.ones(a.shape, a.dtype) for a in artifact.arg_specs]
            seconds = module.time_evaluator(number=1, repeat=1)(*arrays).results
            results.append(autotune.MeasureResult(tuple(seconds), autotune.MeasureErrorNo.NO_ERROR))
        return results

    def close(self) -> None:
        pass


def test_measure_option_takes_any_builder_and_runner_that_follow_the_protocols() -> None:
    @autotune.template("travel/double")
    def double(n: int) -> tuple:
        cfg = autotune.get_config()
        cfg.define_knob("tile", [1, 2, 4, 8])
        A = tl.placeholder((n,), "float32", name="A")
        B = tl.compute((n,), lambda i: A[i] * 2.0, name="B")
        s = tl.create_schedule(B.op)
        s[B].split(s[B].op.axis[0], factor=cfg["tile"].val)
        return s, [A, B]

    runner = InProcessRunner()
    assert isinstance(runner, autotune.Runner) and not isinstance(runner, autotune.Builder)
    task = autotune.create_task("travel/double", (37,))
    option = autotune.measure_option(autotune.LocalBuilder(n_parallel=1), runner)
    result = autotune.tune(task, trials=4, tuner="grid", measure_option=option, progress=False)
    assert result.n_results == 4 and math.isfinite(result.cost)
    assert sorted(a.config_index for a in runner.seen[:4]) == [0, 1, 2, 3]
    assert len(runner.seen) == 4 + 5 * 4  # the trials, then the verdict: 5 rounds of all 4
    assert all(a.target.startswith("llvm -mcpu=") and a.code.code for a in runner.seen)
