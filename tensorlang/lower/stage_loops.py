"""The loops of one stage: extents of every loop variable and the axis values they produce.

Given the ranges of a stage's original axes, split/fuse relations determine the extent of every
derived loop (downwards) and the value of every original axis as an expression of the leaf loop
variables (upwards). Bound inference and the loop-nest builder both need these facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arith import simplify
from ..expr import BinaryOp, Const, Expr, IterVar, binary
from ..schedule import Fuse, Split, Stage


def _ceildiv(a: Expr, b: Expr) -> Expr:
    return simplify(binary(BinaryOp.FLOORDIV, binary(BinaryOp.ADD, a, binary(BinaryOp.SUB, b, 1)), b))


@dataclass
class StageLoops:
    """Extents of all loop variables and original-axis values (relative to the axis minimum)."""

    extents: dict[IterVar, Expr]
    relative_values: dict[IterVar, Expr]
    exact: dict[IterVar, bool]
    inner_guards: list[Expr]

    @staticmethod
    def build(stage: Stage, root_extents: dict[IterVar, Expr]) -> StageLoops:
        extents = dict(root_extents)
        # Whether the leaves below an original axis cover exactly its extent (no guard needed).
        exact_of: dict[IterVar, bool] = {iv: True for iv in root_extents}
        # Splits of derived loops that do not divide: an excess point of such a loop can map to
        # a valid original index (a second time), so it needs a guard of its own.
        uneven: list[IterVar] = []
        for rel in stage.relations:
            if isinstance(rel, Split):
                parent = extents[rel.parent]
                if rel.factor is not None:
                    inner, outer = rel.factor, _ceildiv(parent, rel.factor)
                else:
                    outer, inner = rel.nparts, _ceildiv(parent, rel.nparts)
                extents[rel.outer], extents[rel.inner] = outer, inner
                divides = (
                    isinstance(parent, Const)
                    and isinstance(inner, Const)
                    and int(parent.value) % int(inner.value) == 0
                    and isinstance(outer, Const)
                    and int(outer.value) * int(inner.value) == int(parent.value)
                )
                exact = exact_of[rel.parent] and divides
                if not divides and rel.parent not in root_extents:
                    uneven.append(rel.parent)
                exact_of[rel.outer] = exact_of[rel.inner] = exact
            else:
                extents[rel.fused] = simplify(
                    binary(BinaryOp.MUL, extents[rel.outer], extents[rel.inner])
                )
                exact_of[rel.fused] = exact_of[rel.outer] and exact_of[rel.inner]
        values: dict[IterVar, Expr] = {iv: iv.var for iv in stage.leaf_iter_vars}
        for rel in reversed(stage.relations):
            if isinstance(rel, Split):
                values[rel.parent] = binary(
                    BinaryOp.ADD,
                    binary(BinaryOp.MUL, values[rel.outer], extents[rel.inner]),
                    values[rel.inner],
                )
            else:
                inner_extent = extents[rel.inner]
                values[rel.outer] = binary(BinaryOp.FLOORDIV, values[rel.fused], inner_extent)
                values[rel.inner] = binary(BinaryOp.FLOORMOD, values[rel.fused], inner_extent)
        exact = {iv: _root_exact(stage, iv, exact_of) for iv in root_extents}
        guards = [values[iv] < extents[iv] for iv in uneven]
        return StageLoops(extents, {iv: values[iv] for iv in root_extents}, exact, guards)

    def leaf_extent(self, iv: IterVar) -> Expr:
        return self.extents[iv]


def _root_exact(stage: Stage, root: IterVar, exact_of: dict[IterVar, bool]) -> bool:
    leaves_below = _descendants(stage, root)
    return all(exact_of.get(iv, True) for iv in leaves_below)


def _descendants(stage: Stage, root: IterVar) -> list[IterVar]:
    found = [root]
    frontier = [root]
    while frontier:
        iv = frontier.pop()
        for rel in stage.relations:
            if isinstance(rel, Split) and rel.parent is iv:
                found += [rel.outer, rel.inner]
                frontier += [rel.outer, rel.inner]
            elif isinstance(rel, Fuse) and (rel.outer is iv or rel.inner is iv):
                found.append(rel.fused)
                frontier.append(rel.fused)
    return found

