"""Every public function, class, method and property of the API has a docstring."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def test_public_names_have_docstrings() -> None:
    spec = importlib.util.spec_from_file_location("check_docstrings",
                                                  ROOT / "tools" / "check_docstrings.py")
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    gaps = sorted(checker.missing())
    assert not gaps, f"public names without a docstring: {gaps}"
