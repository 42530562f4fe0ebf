"""The README's Python examples run as written (they form one script, in order)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import tensorlang as tl

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples_run_and_compute_the_right_values() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 2
    names: dict[str, object] = {}
    exec(compile("\n".join(blocks), str(README), "exec"), names)  # the first one checks itself
    # The last example schedules a dot product without running it.
    f = tl.build(names["s"], [names["A"], names["B"], names["C"]])
    a, b = np.random.default_rng(0).random((2, 1000), dtype=np.float32)
    c = np.zeros(1, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c[0], a @ b, rtol=1e-4)
    assert "zmm" in f.get_source("asm") or "ymm" in f.get_source("asm")


def test_readme_opens_with_the_two_setup_commands() -> None:
    """The first command tunes with the command line; the second is exactly CI's test run."""
    first, second = re.search(r"```bash\n(.*?)```", README.read_text(),
                              flags=re.DOTALL).group(1).splitlines()[:2]
    assert first.startswith("pip install -e . && tensorlang tune ")
    ci_lines = [line.strip() for line in (README.parent / ".ci" / "run").read_text().splitlines()]
    assert second.split(" && ") == [line for line in ci_lines if line.startswith("python -m")]
