"""The import boundaries of DESIGN.md, read from the source with `ast`.

tensorlang imports neither autotune nor topi; autotune does not import topi; inside tensorlang
the layers run dtype -> expr -> tensor -> schedule -> ir -> lower -> codegen -> runtime, and no
module imports a later layer at module level (function-level imports are allowed for printing).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Layer of each tensorlang module or subpackage; a module may import its own layer or earlier.
LAYERS = {
    "dtype": 0,
    "expr": 1,
    "intrin": 1,
    "visitor": 1,
    "arith": 1,
    "printer": 4,
    "tensor": 2,
    "schedule": 3,
    "ir": 4,
    "lower": 5,
    "codegen": 6,
    "runtime": 7,
    "build": 8,
    "benchmark": 0,
    "__init__": 9,
}


def module_level_imports(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, level) of every import at module level (not inside functions)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            found += [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((name, node.level))
    return found


def all_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", sources("tensorlang"), ids=lambda p: str(p.relative_to(ROOT)))
def test_tensorlang_imports_neither_autotune_nor_topi(path):
    for name in all_imports(path):
        assert name.split(".")[0] not in ("autotune", "topi"), f"{path} imports {name}"


@pytest.mark.parametrize("path", sources("autotune"), ids=lambda p: str(p.relative_to(ROOT)))
def test_autotune_does_not_import_topi(path):
    for name in all_imports(path):
        assert name.split(".")[0] != "topi", f"{path} imports {name}"


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "tensorlang":
        return None
    key = parts[1] if len(parts) > 1 else "__init__"
    return LAYERS[key]


@pytest.mark.parametrize("path", sources("tensorlang"), ids=lambda p: str(p.relative_to(ROOT)))
def test_tensorlang_layers_only_import_earlier_layers(path):
    own = layer_of(".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert own is not None, f"{path} is not assigned to a layer"
    for name, _ in module_level_imports(path):
        other = layer_of(name)
        if other is not None:
            assert other <= own, f"{path} (layer {own}) imports {name} (layer {other})"


def test_third_party_dependencies_are_declared():
    allowed = {
        "tensorlang": {"numpy", "llvmlite", "cffi"},
        "autotune": {"numpy", "xgboost", "tensorlang"},
        # onnx and torch: the optional extras of topi.graph's importers and model zoo.
        "topi": {"numpy", "tensorlang", "autotune", "onnx", "torch"},
    }
    stdlib = set(__import__("sys").stdlib_module_names)
    for package, deps in allowed.items():
        for path in sources(package):
            for name in all_imports(path):
                top = name.split(".")[0]
                if top in stdlib or top == package:
                    continue
                assert top in deps, f"{path} imports undeclared dependency {name}"
