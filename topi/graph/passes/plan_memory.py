"""Memory planning: every intermediate buffer gets an offset in one arena, reusing the memory
of buffers that are dead by the time it is written.

Kernels run in graph order, one per op node. A buffer lives from the kernel that writes it (the
start, for graph inputs) to the last kernel that reads it (the end, for graph outputs). Buffers
are placed largest first at the lowest offset that overlaps no placed buffer alive at the same
time (a greedy interval packing, as TFLite's arena planner does). A kernel's inputs and output
are alive at the same step, so an output never overlaps an input it reads.

Concatenations in place (`concat_in_place`, static plans only): the inputs of such a
concatenation get the slices of its buffer, so their producers write the concatenation and it
runs no kernel (`MemoryPlan.in_place`). A buffer and the values inside it form one interval, from
the first write of any of them to the last read; each byte is written by one kernel only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..graph import Graph, Node, NodeKind
from .concat_in_place import Slices, concat_slices

#: Offsets are aligned for full-width vector loads (and cache lines).
ALIGN = 64


@dataclass(frozen=True)
class Buffer:
    name: str
    size: int
    start: int
    end: int
    offset: int
    #: the value whose buffer this one is a slice of (a concatenation in place), or None.
    inside: str | None = None


@dataclass(frozen=True)
class MemoryPlan:
    """Where each input and op output lives in the arena.

    Attributes:
        buffers: by node name.
        arena_bytes: the arena's size: the peak memory of the plan.
        unplanned_bytes: what one buffer per node would take.
        in_place: the concatenations whose inputs' producers write their buffer: they need no
            kernel.
    """

    buffers: dict[str, Buffer]
    arena_bytes: int
    unplanned_bytes: int
    in_place: frozenset[str] = frozenset()

    def __str__(self) -> str:
        head = (f"memory plan: peak {_mib(self.arena_bytes)} for {len(self.buffers)} buffers "
                f"(one buffer each: {_mib(self.unplanned_bytes)})")
        if self.in_place:
            head += f", {len(self.in_place)} concatenations in place"
        lines = [head]
        width = max((len(n) for n in self.buffers), default=4)
        for b in sorted(self.buffers.values(), key=lambda b: (b.start, b.name)):
            inside = f"  in %{b.inside}" if b.inside else ""
            lines.append(f"  {b.name:<{width}}  offset {b.offset:>12,}  {b.size:>12,} B  "
                         f"steps {b.start}..{b.end}{inside}")
        return "\n".join(lines)


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def plan_memory(g: Graph, values: Mapping[str, int] | None = None) -> MemoryPlan:
    """Plan the arena of `g` (run it after fusion: each op node is then one kernel). A graph
    with symbolic dims is planned for the sizes at `values` (the upper bounds of its shape
    variables, by name): a buffer is never larger at smaller sizes, so any call within the
    bounds fits the same offsets. Concatenations are planned in place only without `values`
    (the static executor skips their kernels; the symbolic ones run every kernel)."""
    nbytes = {n: n.nbytes_at(values or {}) for n in g.nodes if n.kind is not NodeKind.CONSTANT}
    step = {n: k for k, n in enumerate(g.ops)}
    last = len(step)
    start: dict[Node, int] = {}
    end: dict[Node, int] = {}
    for node in g.nodes:
        if node.kind is NodeKind.CONSTANT:
            continue
        start[node] = -1 if node.kind is NodeKind.INPUT else step[node]
        end[node] = start[node]
    for node in g.ops:
        for i in node.inputs:
            if i in end:
                end[i] = max(end[i], step[node])
    for node in g.outputs:
        if node in end:
            end[node] = last
    slices = concat_slices(g) if values is None else Slices({}, frozenset())
    for node, (root, _) in slices.alias.items():
        start[root] = min(start[root], start[node])
        end[root] = max(end[root], end[node])
    placed: list[Buffer] = []
    order = sorted((n for n in start if n not in slices.alias),
                   key=lambda n: (-nbytes[n], start[n]))
    # the placed buffers' lifetimes and extents as arrays: finding those whose lifetime
    # overlaps a node's is one vector compare (a Python scan over every placed buffer for
    # every node took a decode graph of 1,100 values 0.1 s a size)
    lives = np.empty((len(order), 4), np.int64)  # start, end, offset, size
    for k, node in enumerate(order):
        size = _aligned(max(nbytes[node], 1))
        offset = 0
        held = lives[:k]
        clashes = held[(held[:, 0] <= end[node]) & (start[node] <= held[:, 1])]
        if len(clashes):
            # the lowest gap between the clashing buffers (by offset) that fits the node
            clashes = clashes[np.argsort(clashes[:, 2], kind="stable")]
            ends = np.maximum.accumulate(clashes[:, 2] + clashes[:, 3])
            before = np.concatenate(([0], ends[:-1]))
            fits = np.flatnonzero(before + size <= clashes[:, 2])
            offset = int(before[fits[0]] if len(fits) else ends[-1])
        lives[k] = (start[node], end[node], offset, size)
        placed.append(Buffer(node.name, size, start[node], end[node], offset))
    buffers = {b.name: b for b in placed}
    for node, (root, at) in slices.alias.items():
        whole = buffers[root.name]
        buffers[node.name] = Buffer(node.name, nbytes[node], whole.start, whole.end,
                                    whole.offset + at, root.name)
    arena = max((b.offset + b.size for b in placed), default=0)
    unplanned = sum(_aligned(max(nbytes[n], 1)) for n in start)
    return MemoryPlan(buffers, arena, unplanned, frozenset(n.name for n in slices.in_place))
