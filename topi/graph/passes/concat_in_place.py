"""Concatenation in place: which concatenations need no kernel, and where their inputs live.

An analysis shared by the fusion pass (which leaves these concatenations unfused) and the memory
plan (which lays their inputs out end to end). A concatenation along an axis with only 1s before
it (the channel axis at batch 1, in NCHW as in NCHW[x]c) is its inputs' buffers one after the
other. So when each input is a kernel's output, that kernel can write straight into its slice of
the concatenation's buffer and the concatenation itself costs nothing: Inception's and GoogLeNet's
branches each write their part of the module's output, and DenseNet's growing feature map is
written once per layer (the layers' concatenations are prefixes of the block's last one, so they
all view the one buffer) instead of being copied again at every layer.

A concatenation stays a copy kernel when an input is a graph input or a constant, appears twice,
or already lives elsewhere (a value two concatenations both want at different places); nested and
prefix concatenations share one buffer. Symbolic shapes and a batch above 1 (strided slices) keep
the copy too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..graph import Graph, Node, NodeKind


@dataclass(frozen=True)
class Slices:
    """The outcome of `concat_slices`.

    Attributes:
        alias: each value that lives inside another one's buffer -> (that root value, byte
            offset in the root's buffer); roots are not keys.
        in_place: the concatenations that need no kernel.
    """

    alias: dict[Node, tuple[Node, int]]
    in_place: frozenset[Node]


def _contiguous(node: Node) -> bool:
    """Whether `node` is a concatenation whose inputs are contiguous pieces of its output."""
    if node.op != "concatenate" or node.symbolic:
        return False
    axis = node.attrs.get("axis", 0) % len(node.shape)
    ids = {id(i) for i in node.inputs}
    return (int(np.prod(node.shape[:axis])) == 1 and len(ids) == len(node.inputs)
            and all(i.kind is NodeKind.OP for i in node.inputs))


def _starts(inputs: Sequence[Node]) -> list[int]:
    """The byte offset of each input in the concatenation."""
    return [sum(i.nbytes for i in inputs[:k]) for k in range(len(inputs))]


def _where(concat: Node, alias: dict[Node, tuple[Node, int]]) -> tuple[Node, int, bool] | None:
    """(root, byte offset, whether its unplaced inputs may be placed) of `concat`'s buffer.

    A concatenation that another one already placed owns its slice there; one whose inputs are
    all placed, consecutively and in order, views them (a DenseNet layer's prefix of the block's
    feature map) but places nothing; one with none placed is a root. Anything else: None."""
    if concat in alias:
        root, base = alias[concat]
        return root, base, True
    placed = [k for k, i in enumerate(concat.inputs) if i in alias]
    if not placed:
        return concat, 0, True
    if len(placed) != len(concat.inputs):
        return None
    root, first = alias[concat.inputs[0]]
    return root, first, False


def concat_slices(g: Graph) -> Slices:
    """The concatenations of `g` that can be computed in place, and the slices their inputs
    then occupy (see the module docstring). Consumers come before producers (reverse graph
    order): a concatenation of concatenations gives each inner one its slice first, and the
    inner one then places its own inputs inside that slice."""
    alias: dict[Node, tuple[Node, int]] = {}
    in_place: set[Node] = set()
    for concat in reversed(g.ops):
        if not _contiguous(concat):
            continue
        starts = _starts(concat.inputs)
        where = _where(concat, alias)
        if where is None:
            continue
        root, base, places = where
        wanted = {i: (root, base + s) for i, s in zip(concat.inputs, starts)}
        fits = all(alias.get(i, spot) == spot if places else alias[i] == spot
                   for i, spot in wanted.items())
        if not fits:
            continue
        if concat is not root and concat not in alias:
            alias[concat] = (root, base)
        alias.update(wanted)
        in_place.add(concat)
    return Slices(alias, frozenset(in_place))
