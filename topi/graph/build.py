"""`build`: a Graph -> a callable Module (optimise, plan memory, compile kernels, pre-pack).

The last stage of `topi.graph`. Tuned configs come from the log (through
`autotune.apply_history_best`, as every topi schedule looks them up); the tunable workloads
without one use their fallback configs and are listed in one warning. Each distinct kernel is
compiled once (and cached on disk, see `cache.py`); constant weights are packed into the
kernels' blocked layouts once, here.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

import autotune
import tensorlang as tl

from .. import x86
from .aligned import aligned_empty, memory_key
from .buckets import bucket_kernels, log_buckets
from .cache import compiler_version, get_kernel, request_kernel
from .graph import Graph, Node, NodeKind, op_label
from .kernel import KernelSpec, Pack, kernel_spec
from .module import Module, Step
from .ops import tensor_spec
from .passes import PIPELINE, Pass, optimize, plan_memory
from .passes.bf16 import to_bf16
from .symbolic_module import SymbolicModule, node_operands, symbolic_inputs
from ..symbolic import free_vars

FALLBACK_MESSAGE = r".*using the fallback config"


def as_target(target: str | tl.Target) -> tl.Target:
    """`target` as a tl.Target (a TypeError naming it when it is neither)."""
    if isinstance(target, tl.Target):
        return target
    if not isinstance(target, str):
        raise TypeError(f"target must be a string or a tl.Target, got {type(target).__name__}")
    return tl.Target(target)


@contextlib.contextmanager
def tuning_context(log_file: str | os.PathLike[str] | None,
                   target: tl.Target) -> Iterator[None]:
    """Inside: the target's scope and the best configs of
    `log_file`; the per-workload fallback warnings are silenced (`build` summarises them)."""
    if log_file is not None and not os.path.exists(log_file):
        raise FileNotFoundError(f"tuning log {str(log_file)!r} does not exist")
    records = autotune.load_records(log_file) if log_file is not None else []
    with target, autotune.apply_history_best(records), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=FALLBACK_MESSAGE)
        yield


def build(g: Graph, log_file: str | os.PathLike[str] | None = None,
          target: str | tl.Target = "llvm", cache_dir: str | os.PathLike[str] | None = None,
          verbose: bool = False, pipeline: Sequence[tuple[str, Pass]] = PIPELINE,
          prepack: bool = True,
          bounds: Mapping[str, tuple[int, int] | int] | None = None,
          precision: str = "fp32") -> Module:
    """Compile `g` into a Module callable with numpy inputs by name.

    Args:
        g: the model; it must have outputs.
        log_file: a tuning log (from `topi.graph.tune` or `autotune.tune`); its best configs are
            used, the other tunable workloads get fallback configs (with one warning).
        target: the target string or `tl.Target`.
        cache_dir: the kernel cache directory (default `$TL_CACHE_DIR/kernels`).
        verbose: print the graph after each pass and the memory plan.
        pipeline: the graph passes to run (`passes.PIPELINE` by default; fewer, to measure
            what one buys).
        prepack: pack constant weights into the kernels' layouts once, here (else every call
            packs them).
        bounds: for a graph with symbolic dims, shape variable -> (low, high) (or high): the
            sizes the module accepts (default: the graph's own `bounds`, else any size). Its
            kernels are compiled once, with symbolic extents; the arena is planned per size.
        precision: "fp32", or "bf16": convolutions and dense layers in bfloat16 with float32
            sums, on targets with AVX512-BF16 (`passes.bf16`).

    Raises:
        TypeError: `g` is not a Graph.
        ValueError: `g` has no outputs, or a precision other than "fp32" and "bf16", or "bf16"
            for a target without AVX512-BF16.
        FileNotFoundError: `log_file` does not exist.
    """
    if not isinstance(g, Graph):
        raise TypeError(f"build takes a topi.graph.Graph, got {type(g).__name__}")
    if not g.outputs:
        raise ValueError("build: the graph has no outputs (mark them with g.output(...))")
    tgt = as_target(target)
    prepack = prepack and tgt.runs_here  # packing runs kernels; elsewhere each call packs
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"build: precision must be 'fp32' or 'bf16', got {precision!r}")
    if precision == "bf16":
        g = to_bf16(g, tgt)
    untuned: dict[str, tuple[str, tuple]] = {}
    if symbolic_inputs(g):
        return _build_symbolic(g, log_file, tgt, cache_dir, verbose, pipeline, prepack,
                               check_bounds(g, bounds), untuned)
    with tuning_context(log_file, tgt):
        optimized = optimize(g, verbose=verbose, pipeline=pipeline)
        plan = plan_memory(optimized)
        if verbose:
            print(plan)
        arena, buffers = _arena_views(optimized, plan)
        # A concatenation in place is written by its producers: it has no kernel.
        ops = [n for n in optimized.ops if n.name not in plan.in_place]
        steps = [Step(node.name, op_label(node), kernel, _arguments(node, weights, buffers), tuned)
                 for node, kernel, weights, tuned in _kernels(ops, tgt, cache_dir, prepack,
                                                               untuned)]
    _warn_untuned(untuned, log_file)
    return Module(optimized, plan, steps, arena, buffers, tgt)


def check_bounds(g: Graph, bounds: Mapping[str, Any] | None) -> dict[str, tuple[int, int]]:
    """`bounds` (or the graph's own) as var -> (low, high), checked against the graph's vars."""
    names = free_vars([d for n in g.inputs for d in n.shape])
    given = dict(g.bounds)
    given.update(bounds or {})
    out = {}
    for var, b in given.items():
        if var not in names:
            raise ValueError(f"build: bounds name {var!r}, which is no shape variable of the "
                             f"graph's inputs (they have {names})")
        low, high = (1, b) if isinstance(b, int) else b
        if not 1 <= int(low) <= int(high):
            raise ValueError(f"build: bounds of {var!r} must be 1 <= low <= high, got {b!r}")
        out[var] = (int(low), int(high))
    return out


def _build_symbolic(g: Graph, log_file: Any, tgt: tl.Target, cache_dir: Any, verbose: bool,
                    pipeline: Sequence[tuple[str, Pass]], prepack: bool,
                    bounds: dict[str, tuple[int, int]],
                    untuned: dict[str, tuple[str, tuple]]) -> Module:
    """`build` of a graph with symbolic dims: each kernel compiled once with symbolic extents."""
    with tuning_context(log_file, tgt):
        buckets = log_buckets(autotune.load_records(log_file)) if log_file is not None else {}
        optimized = optimize(g, verbose=verbose, pipeline=pipeline)
        steps, operands, serial, variants = [], [], [], []
        for node, kernel, weights, tuned in _kernels(optimized.ops, tgt, cache_dir, prepack,
                                                     untuned):
            steps.append(Step(node.name, op_label(node), kernel, [], tuned))
            operands.append(node_operands(node, weights))
            variants.append(bucket_kernels(node, kernel.key, buckets, prepack, tgt, cache_dir))
            serial.append(None if variants[-1] else
                          _serial_variant(node, kernel, prepack, tgt, cache_dir))
    _warn_untuned(untuned, log_file)
    return SymbolicModule(optimized, steps, operands, bounds, tgt, serial, variants)


def _serial_variant(node: Node, kernel: Any, prepack: bool, tgt: tl.Target,
                    cache_dir: Any) -> Any:
    """The kernel of an untemplated op of symbolic size scheduled as for a small output (its
    elementwise stages on the calling thread: waking the thread pool costs more than it buys
    below the L2 size), or None (a static size or a template: one kernel serves)."""
    spec = kernel_spec(node, prepack)
    if not node.symbolic or spec.workload is not None:
        return None

    def make() -> tuple[tl.Schedule, Any]:
        with x86.common.symbolic_outputs_small():
            return spec.schedule(), spec.params

    return get_kernel(hashlib.sha256(f"{kernel.key}/serial".encode()).hexdigest(), make, tgt,
                      cache_dir)


def _warn_untuned(untuned: dict[str, tuple[str, tuple]], log_file: Any) -> None:
    if untuned:
        listing = "\n".join(f"  {name} {list(args)}" for name, args in untuned.values())
        where = "in the log" if log_file is not None else "(no log given)"
        warnings.warn(
            f"{len(untuned)} tunable workload(s) have no tuned config {where} and use fallback "
            f"configs (tune them with topi.graph.tune for speed):\n{listing}", stacklevel=3)


def _arena_views(g: Graph, plan: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A 64-byte aligned arena and one view into it per input and op output."""
    arena = aligned_empty((plan.arena_bytes,), np.uint8)
    views = {}
    for node in g.nodes:
        if node.kind is NodeKind.CONSTANT:
            continue
        b = plan.buffers[node.name]
        views[node.name] = arena[b.offset:b.offset + node.nbytes].view(node.dtype).reshape(
            node.shape)
    return arena, views


def _record_of(spec: KernelSpec) -> tuple[str, tuple, int] | None:
    """(template name, args, config index) of the tuning record that schedules `spec`'s
    kernel, or None where none does."""
    if spec.workload is None or spec.config in (None, "fallback"):
        return None
    index = spec.config["index"] if isinstance(spec.config, dict) else spec.config
    return (*spec.workload, int(index))


def _kernels(ops: Sequence[Node], tgt: tl.Target, cache_dir: Any, prepack: bool,
             untuned: dict[str, tuple[str, tuple]]
             ) -> Iterator[tuple[Node, Any, dict[int, np.ndarray], tuple[str, tuple, int] | None]]:
    """Each of the op nodes `ops` with its compiled kernel, its pre-packed weights (by input
    index) and the tuning record that scheduled it (`_record_of`); workloads on fallback
    configs are noted in `untuned`. Every kernel is requested
    before the first is waited for: LLVM compiles one while the next is lowered (cache.py)."""
    requests = []
    for node in ops:
        spec = kernel_spec(node, prepack)
        key = spec.key(str(tgt), compiler_version())
        kernel = request_kernel(key, lambda spec=spec: (spec.schedule(), spec.params), tgt,
                                cache_dir)
        packs = [_pack_kernel(p, tgt, cache_dir) for p in spec.packs]
        requests.append((node, spec, kernel, packs))
        if spec.config == "fallback" and spec.workload is not None:
            untuned[repr(spec.workload)] = spec.workload
    packed: dict[tuple[str, tuple], np.ndarray] = {}
    for node, spec, kernel, packs in requests:
        yield node, kernel.result(), {
            p.index: _prepacked(p, node, pack_key, pack_kernel.result(), tgt, packed)
            for p, (pack_key, pack_kernel) in zip(spec.packs, packs)}, _record_of(spec)


def _arguments(node: Node, weights: dict[int, np.ndarray],
               buffers: dict[str, np.ndarray]) -> list[np.ndarray]:
    return [buffers[o] if isinstance(o, str) else o for o in node_operands(node, weights)]


def _pack_kernel(pack: Pack, target: tl.Target, cache_dir: Any) -> tuple[str, Any]:
    """The key and the requested kernel (a future) that packs a weight as `pack` does (one per
    packing, whichever kernels read the packed weight)."""
    weight, packed, text = pack.canonical()
    pack_key = hashlib.sha256(f"{text}/{target}/{compiler_version()}".encode()).hexdigest()
    return pack_key, request_kernel(pack_key, lambda: (x86.schedule_injective([packed]),
                                                       [weight, packed]), target, cache_dir)


def _prepacked(pack: Pack, node: Node, pack_key: str, kernel: Any, target: tl.Target,
               done: dict[tuple[str, tuple], np.ndarray]) -> np.ndarray:
    """The weight of input `pack.index` of `node` in its kernel's packed layout (packed once per
    weight and packing: the kernels that share a weight share its packed copy)."""
    weight = node.inputs[pack.index]
    memo = (pack_key, memory_key(weight.value))
    if memo not in done:
        shape, dtype = tensor_spec(pack.packed, f"packed weight of {node!r}")
        out = aligned_empty(shape, dtype)
        kernel.module(target)(weight.value, out)
        done[memo] = out
    return done[memo]
