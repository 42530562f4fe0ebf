"""List the public functions, classes and methods that have no docstring.

    python tools/check_docstrings.py          # exit status 1 when something is missing

"Public" is what users reach: the names in `__all__` of tensorlang, autotune, autotune.tuner,
topi.nn, topi.x86 and topi.testing (shared/API.md), and the public methods and properties of
the public classes. tests/test_docstrings.py runs this in CI.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator

PACKAGES = ("tensorlang", "autotune", "autotune.tuner", "topi.nn", "topi.x86", "topi.testing")


def _own_members(cls: type) -> Iterator[tuple[str, object]]:
    """Public methods and properties defined in the class itself (not inherited, not dunder)."""
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value) or isinstance(value, property):
            yield name, value


def _documented(obj: object) -> bool:
    """Whether it has a docstring of its own or inherits one (an override of a documented
    method or property)."""
    return bool(inspect.getdoc(obj))


def missing() -> list[str]:
    """Dotted names of the public objects without a docstring."""
    gaps: list[str] = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.ismodule(obj) or not callable(obj):
                continue  # submodules and constants
            where = f"{package}.{name}"
            if not _documented(obj):
                gaps.append(where)
            if inspect.isclass(obj):
                gaps += [f"{where}.{m}" for m, value in _own_members(obj)
                         if not _documented(value)]
    return sorted(set(gaps))


def main() -> int:
    gaps = missing()
    for name in gaps:
        print(name)
    print(f"{len(gaps)} public names without a docstring", file=sys.stderr)
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())
