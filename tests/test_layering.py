"""The import boundaries of DESIGN.md, read from the source with `ast`.

tensorlang imports neither autotune nor topi; autotune does not import topi; inside tensorlang
the layers run dtype -> expr -> tensor -> schedule -> ir -> lower -> codegen -> runtime, and no
module imports a later layer at module level. No two files of tensorlang, autotune and topi import
each other, directly or around a circle, counting imports inside functions and under
TYPE_CHECKING too: each file only imports what lies below it.
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
    "tensor_intrin": 2,
    "reduction_stages": 2,
    "schedule": 3,
    "calls": 4,
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


# The command line is an application on top of all three packages, not part of the library: it
# lives in tensorlang/ for the `python -m tensorlang` entry, sits above every layer (so no library
# module may import it) and is exempt from the library's own import rules.
APPLICATION = ("tensorlang/cli/", "tensorlang/__main__.py")
LAYERS.update(cli=10, __main__=10)


def sources(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py")
                  if not str(p.relative_to(ROOT)).startswith(APPLICATION))


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
        "autotune": {"numpy", "xgboost", "tensorlang", "tqdm", "cloudpickle", "distributed"},
        # onnx and torch: the optional extras of topi.graph's importers and model zoo;
        # ml_dtypes: the "bf16" extra (bfloat16 numpy arrays of bf16 builds); gguf: the "gguf"
        # extra (tg.from_gguf).
        "topi": {"numpy", "tensorlang", "autotune", "onnx", "torch", "ml_dtypes", "gguf"},
    }
    stdlib = set(__import__("sys").stdlib_module_names)
    for package, deps in allowed.items():
        for path in sources(package):
            for name in all_imports(path):
                top = name.split(".")[0]
                if top in stdlib or top == package:
                    continue
                assert top in deps, f"{path} imports undeclared dependency {name}"


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def file_import_graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports anywhere in the file (a package's
    `__init__` stands for `from package import name` unless `name` is a module itself)."""
    files = {_module_name(p): p for package in packages for p in sources(package)}

    def resolve(name: str) -> str | None:
        for candidate in (name, name + ".__init__"):
            if candidate in files:
                return candidate
        return None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module.split(".")[:-1]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                edges |= {r for a in node.names if (r := resolve(a.name))}
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                name = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    target = resolve(f"{name}.{alias.name}") or resolve(name)
                    if target:
                        edges.add(target)
        edges.discard(module)
        graph[module] = edges
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return cycles


def test_no_import_cycles_between_files():
    cycles = import_cycles(file_import_graph(("tensorlang", "autotune", "topi")))
    found = [sorted(c) for c in cycles]
    assert not found, f"files importing each other (directly or in a circle): {found}"


def test_cycle_finder_sees_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [{"a", "b", "c"}]
