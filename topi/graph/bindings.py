"""Kernel arguments pointed at the caller's memory: a model call reads its inputs where the
caller holds them and writes its outputs where the caller wants them, instead of copying both
through the arena.

A static Module's kernel calls take fixed argument vectors (addresses into the arena). The
places where a graph input or output appears among them ("sites") are found once; a call
writes the caller's addresses there, runs the kernels and writes the arena's back, so anything
else that runs the calls (profiling, timing) still finds the arena. A value is rebound only
where that is exact: an input that is no output and no slice of a concatenation written in
place; an output that an op computes once into a buffer of its own. The caller's memory must be
C-contiguous, of the value's shape and dtype (anything else is copied through the arena).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .graph import Graph, NodeKind
from .passes import MemoryPlan


def address(array: np.ndarray) -> int:
    """Where `array`'s data starts."""
    return array.__array_interface__["data"][0]


@dataclass
class Sites:
    """Where one value's buffer is an argument of a packed kernel call: (argument vector, slot)
    pairs, the vectors being cffi int64 arrays of addresses. Values that a checked call takes
    (a list of arrays) are never rebound."""

    buffer: np.ndarray
    home: int
    packed: list[tuple[Any, int]]

    def point_at(self, where: int) -> None:
        for argv, slot in self.packed:
            argv[slot] = where

    def restore(self) -> None:
        self.point_at(self.home)


@dataclass
class Bindings:
    """The sites of the graph's inputs and outputs, None for a value always copied through its
    buffer."""

    inputs: list[Sites | None]
    outputs: list[Sites | None]


def find_bindings(graph: Graph, plan: MemoryPlan, buffers: Mapping[str, np.ndarray],
                  calls: Sequence[tuple[Any, Any, Any]], step_arrays: Sequence[Sequence[Any]]
                  ) -> Bindings:
    """The sites of `graph`'s inputs and outputs among `calls` (fn, argv, checked: None for a
    packed call, whose argv is an address vector), whose arguments are `step_arrays`."""
    outputs = [n.name for n in graph.outputs]
    sliced = {b.inside for b in plan.buffers.values() if b.inside} | \
        {b.name for b in plan.buffers.values() if b.inside}

    def own_buffer(name: str) -> bool:
        return name in plan.buffers and name not in sliced

    inputs = [n.name for n in graph.inputs]
    rebound = {n for n in inputs if own_buffer(n) and n not in outputs}
    rebound |= {n.name for n in graph.outputs if n.kind is NodeKind.OP and own_buffer(n.name)
                and outputs.count(n.name) == 1}
    sites = {name: Sites(buffers[name], address(buffers[name]), []) for name in rebound}
    by_id = {id(buffers[name]): name for name in rebound}
    for (_, argv, checked), arrays in zip(calls, step_arrays):
        for slot, array in enumerate(arrays):
            name = by_id.get(id(array))
            if name is None:
                continue
            if checked is not None:  # its arguments are arrays: copy this value
                rebound.discard(name)
            else:
                sites[name].packed.append((argv, slot))
    return Bindings([sites[n] if n in rebound else None for n in inputs],
                    [sites[n] if n in rebound else None for n in outputs])


def read_in_place(sites: Sequence[Sites | None], buffers: Sequence[np.ndarray],
                  arrays: Sequence[np.ndarray]) -> list[Sites]:
    """Point the sites of each input at the caller's array where it can be read there (it has
    sites and is C-contiguous), else copy it into its buffer; returns the sites moved, which
    the caller restores after the run."""
    moved = []
    for where, buffer, array in zip(sites, buffers, arrays):
        if where is not None and array.flags.c_contiguous:
            where.point_at(address(array))
            moved.append(where)
        else:
            np.copyto(buffer, array)
    return moved
