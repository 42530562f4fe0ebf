"""`tensorlang tune FILE.py:func` for a workload function with no template, and `tensorlang
lower` printing the best schedule's trace and loop IR."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import autotune
from tensorlang.cli import main


def test_tune_and_lower_a_workload_function_from_a_file(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    source = tmp_path / "cli_auto_workloads.py"
    source.write_text(textwrap.dedent('''
        import tensorlang as tl

        def row_sum_scale(n, d):
            X = tl.placeholder((n, d), name="X")
            k = tl.reduce_axis((0, d), name="k")
            S = tl.compute((n,), lambda i: tl.sum(X[i, k], axis=k), name="S")
            Y = tl.compute((n, d), lambda i, j: X[i, j] / S[i], name="Y")
            return [X, Y]
    '''))
    log = tmp_path / "rs.jsonl"
    code = main(["tune", f"{source}:row_sum_scale", "--args", "32,48", "--trials", "4",
                 "--no-compare", "-q", "--log", str(log)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "auto/cli_auto_workloads.row_sum_scale" in out
    records = [r for r in autotune.load_records(log) if not r.remeasured]
    assert len(records) == 4 and any(r.trace for r in records)
    code = main(["lower", f"{source}:row_sum_scale", "--args", "32,48", "--log", str(log)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"from {log}" in err and ("S.rf" in err or "S.compute_at" in err)
    assert out.startswith("def kernel(X: float32[32, 48], Y: float32[32, 48])")
