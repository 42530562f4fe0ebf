"""The executor: a built model as a flat list of kernel calls over preallocated buffers.

`build` hands over, per op node, the compiled kernel and the arrays it reads and writes (graph
inputs and intermediates are views into one arena laid out by the memory plan; constants and
pre-packed weights are arrays of their own). A call points the kernels at the caller's inputs
and at fresh output arrays (`bindings`; values that cannot be rebound are copied through their
buffers), runs the kernels in order through their packed entry points (one native call each, no
argument checks: the plan guarantees shapes), and returns the outputs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorlang.runtime.threadpool import native
from tensorlang.runtime.toolchain import require_native

from .bindings import Bindings, address, find_bindings
from .cache import CompiledKernel
from .export import export_model
from .graph import Graph, Node, NodeKind
from .model_io import ModelBase, TensorInfo, check_inputs, random_inputs
from .passes import MemoryPlan


@dataclass
class Step:
    """One kernel call: the node it computes, the ops it runs (`graph.op_label`, e.g.
    "conv2d+bias_add+clip"), the arrays it takes (inputs, then output), and the tuning record
    that scheduled its kernel as (template name, args, config index), None without one."""

    name: str
    op: str
    kernel: CompiledKernel
    arrays: list[np.ndarray]
    tuned: tuple[str, tuple, int] | None = None


def _output_buffer(node: Node, buffers: dict[str, np.ndarray]) -> np.ndarray:
    """Where an output is read from: its buffer, or the value of an output that is a constant."""
    return node.value if node.kind is NodeKind.CONSTANT else buffers[node.name]


class Module(ModelBase):
    """A built model: `m(**inputs)` -> list of numpy outputs.

    Its buffers are allocated once and reused by every call, so one module runs one call at a
    time (build another for concurrent calls).

    Attributes:
        graph: the optimised graph it runs (one kernel per op node).
        plan: the memory plan of its arena.
        steps: the kernel calls, in order.
        target: the target it was built for.
    """

    def __init__(self, graph: Graph, plan: MemoryPlan, steps: list[Step], arena: np.ndarray,
                 buffers: dict[str, np.ndarray], target: Any) -> None:
        self.graph = graph
        self.arena = arena
        self.plan = plan
        self.steps = steps
        self.target = target
        self.inputs = [TensorInfo(n.name, n.shape, n.dtype) for n in graph.inputs]
        self.outputs = [TensorInfo(n.name, n.shape, n.dtype) for n in graph.outputs]
        self.input_buffers = [buffers[i.name] for i in self.inputs]
        self.output_buffers = [_output_buffer(n, buffers) for n in graph.outputs]
        self._runs_here = target.runs_here
        ffi = native().ffi
        self._calls = []
        for step in steps if target.runs_here else ():  # else: exported, not called here
            sig = step.kernel.signature
            if sig.shape_vars:
                raise ValueError(f"kernel of {step.name} has symbolic shapes {sig.shape_vars}")
            argv = ffi.new("int64_t[]", [address(a) for a in step.arrays] or [0])
            if sig.checks:  # its status must be looked at: call the checked entry point
                fn = step.kernel.module(target)
                self._calls.append((fn, tuple(step.arrays), sig))
            else:
                fn = ffi.cast("void (*)(int64_t *)", step.kernel.packed_address)
                self._calls.append((fn, argv, None))
        self._bindings = find_bindings(graph, plan, buffers, self._calls,
                                       [s.arrays for s in steps if target.runs_here])
        self._runs = batched_calls(self._calls)

    @property
    def kernels(self) -> int:
        """The number of distinct compiled kernels."""
        return len({s.kernel.key for s in self.steps})

    def _execute(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        inputs = [address(a) if sites is not None and a.flags.c_contiguous else a
                  for sites, a in zip(self._bindings.inputs, arrays)]
        fresh = [None if sites is None else np.empty(sites.buffer.shape, sites.buffer.dtype)
                 for sites in self._bindings.outputs]
        copies = self.run_at(inputs, [None if a is None else address(a) for a in fresh])
        return [a if c is None else c for a, c in zip(fresh, copies)]

    def run_at(self, inputs: Sequence[np.ndarray | int], outputs: Sequence[int | None]
               ) -> list[np.ndarray | None]:
        """Run the kernels once, reading input k at `inputs[k]` and writing output k at
        `outputs[k]`, without copies where `bindings` allows.

        Args:
            inputs: per input, an array (copied into the input's buffer) or, where
                `bindings.inputs[k]` is not None, the address of C-contiguous memory of the
                input's shape and dtype, read in place.
            outputs: per output, None, or where `bindings.outputs[k]` is not None the address
                of C-contiguous memory of the output's shape and dtype, written in place.

        Returns:
            Per output, a copy of its buffer, or None for one written at its address.
        """
        if not self._runs_here:
            require_native("this model", self.target)
        moved = []
        try:
            for sites, buffer, value in zip(self._bindings.inputs, self.input_buffers, inputs):
                if isinstance(value, int):
                    sites.point_at(value)
                    moved.append(sites)
                else:
                    np.copyto(buffer, value)
            for sites, where in zip(self._bindings.outputs, outputs):
                if where is not None:
                    sites.point_at(where)
                    moved.append(sites)
            for fn, argv, checked in self._runs:
                if checked is None:
                    fn(argv)
                else:
                    fn(*argv)
        finally:
            for sites in moved:
                sites.restore()
        return [None if where is not None else buffer.copy()
                for buffer, where in zip(self.output_buffers, outputs)]

    @property
    def bindings(self) -> Bindings:
        """Where inputs and outputs can be read and written in the caller's memory
        (`run_at`)."""
        return self._bindings

    def profile(self, number: int = 10, inputs: Mapping[str, np.ndarray] | None = None) -> str:
        """A table of the mean time of each kernel call over `number` runs, slowest first, with
        the ops each call computes (a fused kernel is named after its last op: its op column
        says whether it is a lone add or a convolution with the add fused in)."""
        arrays = check_inputs(self.inputs, inputs or random_inputs(self.inputs))
        self._execute(arrays)
        return profile_calls(self._calls, self.steps, number, self.input_buffers, arrays)

    def step_seconds(self, number: int = 10, inputs: Mapping[str, np.ndarray] | None = None,
                     fastest: bool = False) -> list[float]:
        """The mean time of each kernel call (in `steps` order) over `number` whole runs, or
        with `fastest` its fastest run (what a busy machine's preemptions leave undisturbed):
        each kernel timed where it runs in the model, with the caches as the kernels before
        it leave them."""
        arrays = check_inputs(self.inputs, inputs or random_inputs(self.inputs))
        self._execute(arrays)
        runs = call_seconds(self._calls, number, self.input_buffers, arrays)
        return [min(times) if fastest else sum(times) / number for times in runs]

    def arena_offset(self, array: np.ndarray) -> int | None:
        """Where `array` lies in the arena, or None for an array of its own (a weight)."""
        offset = address(array) - address(self.arena)
        return offset if 0 <= offset < max(self.arena.nbytes, 1) else None

    def export_library(self, path: str) -> None:
        """Write the model as one shared library (kernels, runtime, weights and a C entry point
        `int tlg_run(void **inputs, void **outputs)`); `topi.graph.load_module(path)` loads it
        in any process, with no compiler or tuner involved."""
        export_model(self, path)

    def __str__(self) -> str:
        ins = ", ".join(str(i) for i in self.inputs)
        outs = ", ".join(str(o) for o in self.outputs)
        return (f"topi.graph.Module({ins}) -> ({outs}): {len(self.steps)} kernel calls, "
                f"{self.kernels} distinct kernels, arena {self.plan.arena_bytes / 2**20:.2f} MiB, "
                f"target {self.target}")


def batched_calls(calls: Sequence[tuple[Any, Any, Any]]) -> list[tuple[Any, Any, Any]]:
    """`calls` (fn, argv, checked: None for a packed call) with each run of consecutive packed
    calls joined into one packed call of the runtime's `tl_run_packed`, which makes them in
    native code (one crossing from Python per run, not per kernel). A run reads its calls'
    argument arrays where they lie, so it follows slots that bindings point elsewhere; `calls`
    keeps those arrays alive."""
    ffi, lib = native().ffi, native().lib
    run_all = ffi.cast("void (*)(int64_t *)", ffi.addressof(lib, "tl_run_packed"))
    out: list[tuple[Any, Any, Any]] = []
    run: list[tuple[Any, Any, Any]] = []

    def close_run() -> None:
        if len(run) > 1:
            pointers = [int(ffi.cast("intptr_t", p)) for fn, argv, _ in run for p in (fn, argv)]
            out.append((run_all, ffi.new("int64_t[]", [len(run), *pointers]), None))
        else:
            out.extend(run)
        run.clear()

    for call in calls:
        if call[2] is None:
            run.append(call)
        else:
            close_run()
            out.append(call)
    close_run()
    return out


def profile_calls(calls: Sequence[tuple[Any, Any, Any]], steps: Sequence[Step],
                  number: int, input_buffers: Sequence[np.ndarray],
                  inputs: Sequence[np.ndarray]) -> str:
    """The profile table of kernel calls (fn, arguments, checked: None for a packed call) run
    `number` times, slowest first. The inputs are copied into their buffers before each run
    (the kernels read them there): the arena reuses those buffers for later values, and
    kernels timed on such leftovers (ids read as floats, NaNs) ran up to 40x slower than in a
    call."""
    seconds = [sum(times) for times in call_seconds(calls, number, input_buffers, inputs)]
    total = sum(seconds)
    rows = sorted(zip(seconds, steps), key=lambda r: -r[0])
    name_width = max([40, *(len(s.name) + 1 for s in steps)])
    op_width = max([24, *(len(s.op) + 1 for s in steps)])
    lines = [f"{'kernel call':<{name_width}} {'ops':<{op_width}} {'ms':>9} {'share':>6}"]
    for t, step in rows:
        lines.append(f"{step.name:<{name_width}} {step.op:<{op_width}} "
                     f"{t / number * 1e3:>9.3f} {t / total:>6.1%}")
    lines.append(f"{'total':<{name_width}} {'':<{op_width}} {total / number * 1e3:>9.3f}")
    return "\n".join(lines)


def call_seconds(calls: Sequence[tuple[Any, Any, Any]], number: int,
                 input_buffers: Sequence[np.ndarray], inputs: Sequence[np.ndarray]
                 ) -> list[list[float]]:
    """The time of each kernel call in each of `number` runs of them all, in order (see
    `profile_calls` for why the inputs are copied in before each run)."""
    seconds: list[list[float]] = [[] for _ in calls]
    for _ in range(number):
        for buffer, value in zip(input_buffers, inputs):
            np.copyto(buffer, value)
        for k, (fn, argv, checked) in enumerate(calls):
            start = time.perf_counter()
            fn(*argv) if checked is not None else fn(argv)
            seconds[k].append(time.perf_counter() - start)
    return seconds
