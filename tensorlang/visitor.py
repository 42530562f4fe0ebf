"""Generic traversal of IR nodes: one Visitor, one Mutator, and the helpers built on them.

Every node is a frozen dataclass whose children are its `Node` fields and tuples of nodes, so
traversal is generic: a pass overrides `visit_<ClassName>` for the nodes it cares about and
inherits the rest. A Mutator rebuilds a node only when a child changed, so unchanged subtrees
keep their identity (cheap sharing, and `is` tells a pass that nothing happened).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any

from .expr import Node, Var


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


# Field types that never hold a node: traversals skip them (they are the bulk of the fields).
_LEAF_TYPES = frozenset({"DType", "str", "int", "bool", "float", "Scalar", "BinaryOp", "CompareOp",
                         "MathFunc", "ForKind", "IterKind", "Scope"})


@cache
def _node_fields(cls: type) -> tuple[str, ...]:
    """The fields of `cls` that may hold nodes (or tuples of them), by their annotations."""
    return tuple(f.name for f in dataclasses.fields(cls)
                 if not (isinstance(f.type, str) and f.type in _LEAF_TYPES))


def children(node: Node) -> list[Node]:
    """The direct child nodes of `node`, in field order."""
    out: list[Node] = []
    for name in _node_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, tuple) and value:
            out += [v for v in value if isinstance(v, Node)]
    return out


def _replace(node: Any, changes: dict[str, Any]) -> Any:
    """`dataclasses.replace(node, **changes)` for IR nodes (whose fields all go to __init__ and
    which have no __post_init__), without its per-call checks: mutators call it for every node
    they rebuild."""
    return type(node)(*[changes[n] if n in changes else getattr(node, n)
                        for n in _field_names(type(node))])


class _Dispatch:
    """Finds `visit_<ClassName>` once per class (falling back to the base classes' names)."""

    _cache: dict[type, Callable[[Any, Any], Any] | None]

    def __init_subclass__(cls) -> None:
        cls._cache = {}

    def _method(self, node: Node) -> Callable[[Any, Any], Any] | None:
        """The function (unbound: call it with self) that visits nodes of `node`'s class."""
        cls = type(self)
        try:
            return cls._cache[type(node)]
        except KeyError:
            function = None
            for klass in type(node).__mro__:
                function = getattr(cls, "visit_" + klass.__name__, None)
                if function is not None:
                    break
            cls._cache[type(node)] = function
            return function


class Visitor(_Dispatch):
    """Read-only traversal. Override `visit_<ClassName>`; call `generic_visit` to descend."""

    def visit(self, node: Node) -> None:
        method = self._method(node)
        if method is None:
            self.generic_visit(node)
        else:
            method(self, node)

    def generic_visit(self, node: Node) -> None:
        for child in children(node):
            self.visit(child)


class Mutator(_Dispatch):
    """Rebuilding traversal. Override `visit_<ClassName>` to return a replacement node.

    Nodes whose class sets `opaque_to_mutators` (buffer declarations) are kept as they are: every
    access refers to its buffer by identity, so rewriting one copy would split it in two.
    """

    def visit(self, node: Any) -> Any:
        method = self._method(node)
        return self.generic_visit(node) if method is None else method(self, node)

    def generic_visit(self, node: Any) -> Any:
        changes: dict[str, Any] = {}
        for name in _node_fields(type(node)):
            value = getattr(node, name)
            if getattr(value, "opaque_to_mutators", False):
                continue
            if isinstance(value, Node):
                new = self.visit(value)
                if new is not value:
                    changes[name] = new
            elif isinstance(value, tuple) and value and any(isinstance(v, Node) for v in value):
                new_items = tuple(self.visit(v) if isinstance(v, Node) else v for v in value)
                if any(a is not b for a, b in zip(new_items, value)):
                    changes[name] = new_items
        return _replace(node, changes) if changes else node


class _Substituter(Mutator):
    def __init__(self, mapping: Mapping[Var, Node]):
        self.mapping = mapping

    def visit_Var(self, node: Var) -> Node:
        return self.mapping.get(node, node)

    def visit_Const(self, node: Node) -> Node:
        return node  # a leaf: nothing to substitute, no need to look for fields


def substitute(node: Any, mapping: Mapping[Var, Node]) -> Any:
    """Replace variables by expressions (keys are Var nodes, compared by identity)."""
    if not mapping:
        return node
    return _Substituter(mapping).visit(node)


def post_order_visit(node: Node, fn: Callable[[Node], None]) -> None:
    """Call `fn` on every node below and including `node`, children first (shared nodes once)."""
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        current, expanded = stack.pop()
        if expanded:
            fn(current)
            continue
        if id(current) in seen:
            continue
        seen.add(id(current))
        stack.append((current, True))
        stack.extend((c, False) for c in reversed(children(current)))


def nodes_below(node: Node, left_to_right: bool = False,
                stop_at: type | tuple[type, ...] = ()) -> Iterator[Node]:
    """`node` and every node below it, parents first, each shared node once (cheaper than
    post_order_visit where only the set matters); `left_to_right` visits children in order, so
    leaves come in the order `post_order_visit` meets them. Nodes of the `stop_at` types are
    yielded but not descended into."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, stop_at):
            continue
        below = children(current)
        stack.extend(reversed(below) if left_to_right else below)


def variables_in_order(node: Node) -> list[Var]:
    """Every Var below `node`, once, in the order of their first occurrence (left to right, the
    order `post_order_visit` meets them)."""
    return [n for n in nodes_below(node, left_to_right=True) if isinstance(n, Var)]


def contains(node: Node, kind: type | tuple[type, ...]) -> bool:
    """Whether `node` or any node below it is an instance of `kind` (e.g. a memory read); stops
    at the first one found."""
    return any(isinstance(n, kind) for n in nodes_below(node))


def free_vars(node: Node) -> set[Var]:
    """Every Var that occurs in `node` (loop variables included)."""
    return set(variables_in_order(node))


def uses_var(node: Node, variables: set[Var] | frozenset[Var]) -> bool:
    """Whether any of `variables` occurs in `node`."""
    if not variables:
        return False
    return any(v in variables for v in free_vars(node))


def structural_equal(a: Any, b: Any) -> bool:
    """Whether two nodes have the same structure and values (variables compare by identity)."""
    if a is b:
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(structural_equal(x, y) for x, y in zip(a, b))
    if not isinstance(a, Node) or not isinstance(b, Node):
        if isinstance(a, Node) or isinstance(b, Node):
            return False
        return type(a) is type(b) and a == b
    if type(a) is not type(b) or isinstance(a, Var):
        return False
    return all(
        structural_equal(getattr(a, n), getattr(b, n)) for n in _field_names(type(a))
    )
