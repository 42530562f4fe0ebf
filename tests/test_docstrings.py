"""Every public function, class, method and property of the API has a docstring."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Undocumented in modules another change is restructuring; document them there, then drop them.
KNOWN_GAPS = {
    "autotune.MeasureOption.close",
    "autotune.MeasureOption.overlapping",
    "autotune.Record.template_name",
}


def test_public_names_have_docstrings() -> None:
    spec = importlib.util.spec_from_file_location("check_docstrings",
                                                  ROOT / "tools" / "check_docstrings.py")
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    new_gaps = set(checker.missing()) - KNOWN_GAPS
    assert not new_gaps, f"public names without a docstring: {sorted(new_gaps)}"
