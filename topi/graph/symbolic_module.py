"""The executor of a model with symbolic dims: one build, any size within the bounds.

Every kernel was compiled once with symbolic extents; a call binds the shape variables from the
actual input shapes (checking them against each other and against the bounds), and runs the
same kernels with the variables' values appended to their packed arguments. Per distinct size
the arena plan, the buffer views and the packed argument arrays are made once (plain Python:
nothing is compiled at call time) and kept for the next call at that size. Inputs are read
where the caller holds them when they are C-contiguous (`bindings.read_in_place`): a decode
step's KV cache is not copied into the arena at every call.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorlang.runtime.threadpool import native
from tensorlang.runtime.toolchain import require_native

from autotune.buckets import pick

from ..symbolic import evaluate_shape, free_vars
from .bindings import Bindings, address, find_bindings, read_in_place
from .graph import Graph, Node, NodeKind
from .model_io import ModelBase, TensorInfo, bind_sizes, check_inputs, random_inputs
from .module import Step, batched_calls, profile_calls
from .passes import MemoryPlan, plan_memory

#: How many sizes keep their prepared calls.
SIZE_CACHE = 64


@dataclass
class _Prepared:
    arena: np.ndarray
    plan: MemoryPlan
    input_buffers: list[np.ndarray]
    output_buffers: list[np.ndarray]
    calls: list[tuple[Any, Any, Any]]
    keep: list[Any]
    runs: list[tuple[Any, Any, Any]]  # `calls` batched (module.batched_calls)
    bindings: Bindings  # where the inputs can be read in the caller's memory


class SymbolicModule(ModelBase):
    """A built model whose inputs have symbolic dims: `m(**inputs)` at any size within
    `bounds` (a ValueError naming the input and the dim otherwise).

    Attributes:
        graph: the optimised graph.
        steps: the kernel calls (their arrays: constants and pre-packed weights, None where a
            buffer of the arena goes).
        bounds: shape variable -> (low, high), inclusive.
        shape_vars: the names of the graph's shape variables.
        target: the target it was built for.
    """

    def __init__(self, graph: Graph, steps: list[Step], operands: list[list[Any]],
                 bounds: Mapping[str, tuple[int, int]], target: Any,
                 serial: Sequence[Any] | None = None,
                 variants: Sequence[Sequence[tuple[dict[str, int], Any, str, int]]] | None = None
                 ) -> None:
        self.graph = graph
        self.steps = steps
        self.target = target
        self.bounds = dict(bounds)
        self.inputs = [TensorInfo(n.name, n.shape, n.dtype) for n in graph.inputs]
        self.outputs = [TensorInfo(n.name, n.shape, n.dtype) for n in graph.outputs]
        self.shape_vars = free_vars([d for n in graph.inputs for d in n.shape])
        self._operands = operands
        # Per step: the kernel run below the L2 size (its elementwise stages serial), or None.
        self._serial = list(serial) if serial is not None else [None] * len(steps)
        #: Per step: (bucket sizes, kernel, task, config index) of each size bucket tuned
        #: (`buckets.bucket_kernels`); the call runs the one of the actual sizes' bucket.
        self.variants = [list(v) for v in variants] if variants is not None else \
            [[] for _ in steps]
        self._prepared: collections.OrderedDict[tuple[int, ...], _Prepared] = \
            collections.OrderedDict()
        self._arena = np.empty(0, np.uint8)
        #: the prepared calls of input shapes already seen (a call at a known size neither
        #: binds the variables nor looks its size up)
        self._by_shapes: dict[tuple[tuple[int, ...], ...], _Prepared] = {}
        self.plan: MemoryPlan | None = None

    @property
    def kernels(self) -> int:
        return len({s.kernel.key for s in self.steps})

    # -- binding -------------------------------------------------------------------------------

    def bind(self, arrays: Sequence[np.ndarray]) -> dict[str, int]:
        """The shape variables' values from the input arrays (see `bind_sizes`)."""
        return bind_sizes(self.inputs, self.bounds, arrays)

    # -- per size ------------------------------------------------------------------------------

    def _prepare(self, values: dict[str, int]) -> _Prepared:
        key = tuple(values[v] for v in self.shape_vars)
        hit = self._prepared.get(key)
        if hit is not None:
            self._prepared.move_to_end(key)
            return hit
        plan = plan_memory(self.graph, values)
        if plan.arena_bytes + 64 > self._arena.nbytes:
            self._arena = np.empty(plan.arena_bytes + 64, np.uint8)
            self._prepared.clear()  # their views point into the old arena
            self._by_shapes.clear()
        start = -self._arena.__array_interface__["data"][0] % 64
        arena = self._arena[start:start + plan.arena_bytes]
        views: dict[str, np.ndarray] = {}
        for node in self.graph.nodes:
            if node.kind is NodeKind.CONSTANT:
                continue
            b = plan.buffers[node.name]
            shape = evaluate_shape(node.shape, values)
            views[node.name] = arena[b.offset:b.offset + node.nbytes_at(values)].view(
                node.dtype).reshape(shape)
        ffi = native().ffi
        calls, keep = [], []
        l2 = self.target.caches.l2
        for step, operands, serial, variants in zip(self.steps, self._operands, self._serial,
                                                    self.variants):
            small = serial is not None and self.graph.node(step.name).nbytes_at(values) < l2
            kernel = serial if small else step.kernel
            if variants:
                kernel = pick([(sizes, k) for sizes, k, _, _ in variants], values)
            arrays = [views[o] if isinstance(o, str) else o for o in operands]
            sig = kernel.signature
            shape_values = [values[v] for v in sig.shape_vars]
            if sig.checks:
                types = ["void *"] * len(arrays) + ["int64_t"] * len(shape_values)
                fn = ffi.cast(f"int32_t (*)({', '.join(types)})", kernel.address)
                args = [*(ffi.cast("void *", address(a)) for a in arrays), *shape_values]
                calls.append((fn, args, (step, sig)))
            else:
                argv = ffi.new("int64_t[]", [address(a) for a in arrays] + shape_values or [0])
                fn = ffi.cast("void (*)(int64_t *)", kernel.packed_address)
                calls.append((fn, argv, None))
            keep.append(arrays)
        prepared = _Prepared(arena, plan, [views[i.name] for i in self.inputs],
                             [n.value if n.kind is NodeKind.CONSTANT else views[n.name]
                              for n in self.graph.outputs], calls, keep, batched_calls(calls),
                             find_bindings(self.graph, plan, views, calls, keep))
        self._prepared[key] = prepared
        if len(self._prepared) > SIZE_CACHE:
            self._prepared.popitem(last=False)
        self.plan = plan
        return prepared

    def _execute(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        require_native("this model", self.target)
        shapes = tuple(a.shape for a in arrays)
        prepared = self._by_shapes.get(shapes)
        if prepared is None:
            prepared = self._prepare(self.bind(arrays))
            if len(self._by_shapes) >= SIZE_CACHE:
                self._by_shapes.clear()
            self._by_shapes[shapes] = prepared
        moved = read_in_place(prepared.bindings.inputs, prepared.input_buffers, arrays)
        try:
            for fn, argv, checked in prepared.runs:
                if checked is None:
                    fn(argv)
                else:
                    status = fn(*argv)
                    if status:
                        raise checked[1].index_error(status)
        finally:
            for sites in moved:
                sites.restore()
        return [b.copy() for b in prepared.output_buffers]

    def dispatch(self, **sizes: int) -> list[tuple[str, dict[str, int], str, int]]:
        """Which size bucket's kernel each bucketed step runs at `sizes` (shape variable ->
        size): (step, bucket sizes, task, config index) per step that has buckets."""
        out = []
        for step, variants in zip(self.steps, self.variants):
            if variants:
                bucket, _, task, index = pick([(v[0], v) for v in variants], sizes)
                out.append((step.name, bucket, task, index))
        return out

    def profile(self, number: int = 10, inputs: Mapping[str, np.ndarray] | None = None) -> str:
        """`Module.profile` at the size of `inputs` (default: `sample_inputs()`): the mean time
        of each kernel call, slowest first."""
        arrays = check_inputs(self.inputs, inputs if inputs is not None else self.sample_inputs())
        self._execute(arrays)
        prepared = self._prepare(self.bind(arrays))
        return profile_calls(prepared.calls, self.steps, number, prepared.input_buffers, arrays)

    def sample_inputs(self, values: Mapping[str, int] | None = None,
                      seed: int = 0) -> dict[str, np.ndarray]:
        """Random inputs at the sizes `values` (default: each variable at its upper bound, or 1
        when unbounded)."""
        sizes = {v: self.bounds.get(v, (1, 1))[1] for v in self.shape_vars}
        sizes.update(values or {})
        infos = [TensorInfo(i.name, evaluate_shape(i.shape, sizes), i.dtype) for i in self.inputs]
        return random_inputs(infos, seed)

    def benchmark(self, repeat: int = 10, number: int | None = None,
                  min_repeat_ms: float = 50.0,
                  inputs: Mapping[str, np.ndarray] | None = None) -> Any:
        return super().benchmark(repeat, number, min_repeat_ms,
                                 inputs if inputs is not None else self.sample_inputs())

    def __call__(self, **inputs: Any) -> list[np.ndarray]:
        return self._execute(check_inputs(self.inputs, inputs))

    def export_library(self, path: str) -> None:
        """Write the model as one shared library that runs every size within the bounds (its
        entry point takes the shape variables' values; see `export_symbolic.py`);
        `topi.graph.load_module(path)` loads it in any process and binds the sizes from the
        inputs.

        Raises:
            ValueError: a shape variable without an upper bound.
        """
        from .export_symbolic import export_symbolic

        export_symbolic(self, path)

    def __str__(self) -> str:
        ins = ", ".join(str(i) for i in self.inputs)
        outs = ", ".join(str(o) for o in self.outputs)
        bounds = ", ".join(f"{v} in [{lo}, {hi}]" for v, (lo, hi) in self.bounds.items())
        return (f"topi.graph.Module({ins}) -> ({outs}): {len(self.steps)} kernel calls, "
                f"{self.kernels} distinct kernels, symbolic ({bounds}), target {self.target}")


def symbolic_inputs(g: Graph) -> bool:
    """Whether any node of `g` has a symbolic shape."""
    return any(n.symbolic for n in g.nodes)


def node_operands(node: Node, weights: Mapping[int, np.ndarray]) -> list[Any]:
    """A kernel call's operands: arrays for constants and packed weights, buffer names else."""
    out: list[Any] = []
    for k, i in enumerate(node.inputs):
        if k in weights:
            out.append(weights[k])
        elif i.kind is NodeKind.CONSTANT:
            out.append(i.value)
        else:
            out.append(i.name)
    return [*out, node.name]
