"""Memory planning: every intermediate buffer gets an offset in one arena, reusing the memory
of buffers that are dead by the time it is written.

Kernels run in graph order, one per op node. A buffer lives from the kernel that writes it (the
start, for graph inputs) to the last kernel that reads it (the end, for graph outputs). Buffers
are placed largest first at the lowest offset that overlaps no placed buffer alive at the same
time (a greedy interval packing, as TFLite's arena planner does). A kernel's inputs and output
are alive at the same step, so an output never overlaps an input it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..graph import Graph, Node, NodeKind

#: Offsets are aligned for full-width vector loads (and cache lines).
ALIGN = 64


@dataclass(frozen=True)
class Buffer:
    name: str
    size: int
    start: int
    end: int
    offset: int


@dataclass(frozen=True)
class MemoryPlan:
    """Where each input and op output lives in the arena.

    Attributes:
        buffers: by node name.
        arena_bytes: the arena's size: the peak memory of the plan.
        unplanned_bytes: what one buffer per node would take.
    """

    buffers: dict[str, Buffer]
    arena_bytes: int
    unplanned_bytes: int

    def __str__(self) -> str:
        head = (f"memory plan: peak {_mib(self.arena_bytes)} for {len(self.buffers)} buffers "
                f"(one buffer each: {_mib(self.unplanned_bytes)})")
        lines = [head]
        width = max((len(n) for n in self.buffers), default=4)
        for b in sorted(self.buffers.values(), key=lambda b: (b.start, b.name)):
            lines.append(f"  {b.name:<{width}}  offset {b.offset:>12,}  {b.size:>12,} B  "
                         f"steps {b.start}..{b.end}")
        return "\n".join(lines)


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def plan_memory(g: Graph, values: Mapping[str, int] | None = None) -> MemoryPlan:
    """Plan the arena of `g` (run it after fusion: each op node is then one kernel). A graph
    with symbolic dims is planned for the sizes at `values` (the upper bounds of its shape
    variables, by name): a buffer is never larger at smaller sizes, so any call within the
    bounds fits the same offsets."""
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
    placed: list[Buffer] = []
    order = sorted(start, key=lambda n: (-nbytes[n], start[n]))
    for node in order:
        size = _aligned(max(nbytes[node], 1))
        offset = 0
        clashes = sorted((b for b in placed if b.start <= end[node] and start[node] <= b.end),
                         key=lambda b: b.offset)
        for b in clashes:
            if offset + size <= b.offset:
                break
            offset = max(offset, b.offset + b.size)
        placed.append(Buffer(node.name, size, start[node], end[node], offset))
    arena = max((b.offset + b.size for b in placed), default=0)
    return MemoryPlan({b.name: b for b in placed}, arena, sum(b.size for b in placed))
