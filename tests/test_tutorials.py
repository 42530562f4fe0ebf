"""The tutorials run as scripts and their schedules stay correct.

Every tutorial runs as a script with TL_TUTORIAL_SMALL=1 (small sizes, a few trials); each one
checks its own results against numpy and fails loudly when they differ. The full-size runs are
manual. The GEMM ladder and the primitive lessons are also checked step by step at awkward sizes.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorlang as tl

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = ROOT / "tutorials"


# The tutorials that need an optional extra: tutorial -> (module, extra).
NEEDS = {"06_tuning_farm": ("distributed", "distributed"), "07_models": ("onnx", "onnx"),
         "09_custom_ops": ("torch", "torch")}


@pytest.mark.parametrize("script", sorted(TUTORIALS.glob("[0-9][0-9]_*.py")), ids=lambda p: p.stem)
def test_tutorial_runs_as_a_script_at_small_size(script: Path, tmp_path: Path) -> None:
    if script.stem in NEEDS:
        module, extra = NEEDS[script.stem]
        pytest.importorskip(module, reason=f"{script.name} needs the {extra} extra")
    env = dict(os.environ, TL_TUTORIAL_SMALL="1", TMPDIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.splitlines()[-1]
    assert "match" in last and "numpy" in last  # each one's closing check


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, TUTORIALS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEMM_LADDER = load("03_optimize_gemm")


@pytest.mark.parametrize("name,step", GEMM_LADDER.STEPS, ids=[n for n, _ in GEMM_LADDER.STEPS])
@pytest.mark.parametrize("shape", [(64, 64, 64), (37, 45, 29)])
def test_gemm_ladder_step_is_correct(name, step, shape):
    M, N, K = shape
    s, args = step(M, N, K)
    f = tl.build(s, args)
    rng = np.random.default_rng(1)
    a = rng.random((M, K), dtype=np.float32)
    b = rng.random((K, N), dtype=np.float32)
    c = np.zeros((M, N), "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)


PRIMITIVES = load("02_schedule_primitives")


@pytest.mark.parametrize("lesson", PRIMITIVES.LESSONS, ids=lambda f: f.__name__)
def test_schedule_primitive_lesson_is_correct(lesson):
    s, args = lesson()
    PRIMITIVES.check(s, args)
    assert str(tl.lower(s, args))  # the lesson prints this
