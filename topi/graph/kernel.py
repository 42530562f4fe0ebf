"""One graph node as one kernel: its compute, schedule, tuning config and cache key.

The bridge between the graph and tensorlang. A node (a registered op or a fused group) becomes
placeholders for its inputs, the topi computes of its ops, and the schedule of its anchor op (the
conv, dense or reduction that the elementwise tail was fused into). A node without a template
whose auto-scheduled task has a record in the active tuning context is scheduled by the record's
config instead (`auto_tasks`), over the compute its workload rebuilds.

Weight pre-packing: the topi convolutions and GEMMs pack their weight inside the compute (a
stage tagged "...kernel_pack" or "...panel_pack" reading only the weight). When that weight is a
constant and the schedule materialises the pack, the pack stage is cut off: the kernel reads an
already packed placeholder instead (the stage becomes an inlined identity read, so the schedule
still finds it by tag), and the pack itself is a kernel of its own, run once at build time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tensorlang as tl
from autotune import FallbackConfig, query_config
from autotune.space import ConfigEntity
from autotune.task import Template
from tensorlang.expr import TensorRead
from tensorlang.schedule import AttachKind
from tensorlang.tensor import ComputeOp
from tensorlang.visitor import Mutator

from ..symbolic import evaluate, is_symbolic
from .auto_tasks import node_workload, schedule_tuned, tuned_config
from .graph import FUSED, Node, NodeKind
from .ops import OpDef, call_compute, find_workload, get_op

#: Tags of the stages that pack a weight into the blocked layout of a topi compute.
PACK_TAGS = ("injective,kernel_pack", "injective,panel_pack")


def anchor_op(node: Node) -> OpDef:
    """The op whose schedule a node's kernel uses: the most compute-heavy op of a fused group
    (the highest fusion pattern, the first one on a tie), or the node's own op."""
    if node.op != FUSED:
        return get_op(node.op)
    assert node.body is not None
    return get_op(node.attrs["anchor"])


def node_compute(node: Node, tensors: Sequence[tl.Tensor],
                 sizes: Mapping[str, int] | None = None) -> tl.Tensor:
    """The topi computes of `node` applied to `tensors` (one per node input); with `sizes`,
    the symbolic dims in the ops' attributes take those values of their variables."""
    if node.op != FUSED:
        return call_compute(get_op(node.op), tensors, _attrs_at(node.attrs, sizes))
    assert node.body is not None
    values: dict[Node, tl.Tensor] = dict(zip(node.body.inputs, tensors))
    for n in node.body.ops:
        values[n] = call_compute(get_op(n.op), [values[i] for i in n.inputs],
                                 _attrs_at(n.attrs, sizes))
    return values[node.body.outputs[0]]


def _attrs_at(attrs: Mapping[str, Any], sizes: Mapping[str, int] | None) -> Mapping[str, Any]:
    if sizes is None:
        return attrs

    def at(v: Any) -> Any:
        if is_symbolic(v):
            return evaluate(v, sizes)
        if isinstance(v, (tuple, list)):
            return type(v)(at(x) for x in v)
        return v

    return {k: at(v) for k, v in attrs.items()}


@dataclass
class Pack:
    """A constant weight (input `index` of the node) packed once at build time: `compute` maps
    the `weight` placeholder to `packed`, which the main kernel reads as `placeholder`."""

    index: int
    weight: tl.Tensor
    packed: tl.Tensor
    placeholder: tl.Tensor

    def canonical(self) -> tuple[tl.Tensor, tl.Tensor, str]:
        """The packing read from a weight placeholder of its own (named as no kernel input is),
        and a text that describes it whole: packs with equal texts pack a weight alike, whatever
        kernel reads the result (a dense alone and the same dense fused with its bias), so a
        weight is packed, and the packing compiled, once."""
        weight = tl.placeholder(self.weight.shape, self.weight.dtype, name="weight")
        packed = replace_tensor(self.packed, self.weight, weight)
        op = packed.op
        text = json.dumps([op.name, op.tag, repr(op.attrs), repr(op.axis), repr(op.body),
                           repr(tuple(weight.shape)), weight.dtype, packed.dtype], default=str)
        return weight, packed, text


@dataclass
class KernelSpec:
    """Everything needed to compile and key one node's kernel.

    Attributes:
        node: the node.
        params: the kernel's input placeholders, one per node input (a packed one where the
            weight is pre-packed), then the output tensor.
        output: the output tensor.
        packs: the pre-packed weights.
        workload: (template, args) of the tunable stage, or None.
        config: the config the schedule will use for it ("fallback", an index, or None; for
            an auto-scheduled record, its template, index, knob values and sketch rules).
        auto: (template, config) of an auto-scheduled record that schedules the kernel.
    """

    node: Node
    params: list[tl.Tensor]
    output: tl.Tensor
    packs: list[Pack]
    workload: tuple[str, tuple] | None
    config: str | int | dict[str, Any] | None
    inline: list[tl.Tensor] = field(default_factory=list)
    auto: tuple[Template, ConfigEntity] | None = None

    def schedule(self) -> tl.Schedule:
        """The anchor op's x86 schedule, with the identity reads of pre-packed weights inlined
        (or the auto-scheduled record's schedule)."""
        if self.auto is not None:
            return schedule_tuned(*self.auto, self.params)
        s = anchor_op(self.node).schedule([self.output])
        for t in self.inline:
            s[t].compute_inline()
        return s

    def key(self, target: str, version: str) -> str:
        """A hash of what the compiled code depends on: the computes, the shapes, the packing,
        the config, the target and the compiler version."""
        text = json.dumps(
            [describe(self.node), [p.index for p in self.packs], self.config, target, version],
            sort_keys=True, default=str,
        )
        return hashlib.sha256(text.encode()).hexdigest()


def describe(node: Node) -> list[Any]:
    """A JSON-able structural description of a node's computation (not its name): two nodes
    with equal descriptions compile to the same kernel."""
    specs = [[list(i.shape), i.dtype] for i in node.inputs]
    if node.op != FUSED:
        return [node.op, sorted(node.attrs.items()), specs]
    assert node.body is not None
    index = {n: k for k, n in enumerate(node.body.nodes)}
    body = [[n.op, sorted(n.attrs.items()), [index[i] for i in n.inputs]] for n in node.body.ops]
    return [FUSED, body, specs]


def kernel_spec(node: Node, prepack: bool = True) -> KernelSpec:
    """Placeholders, computes, pre-packing and tuning config of `node`'s kernel.

    The config is looked up in the active `autotune.apply_history_best` context, exactly as
    the schedule will look it up.
    """
    if node.kind is not NodeKind.OP:
        raise ValueError(f"node {node!r} ({node.op}) is not an op and has no kernel")
    inputs = [tl.placeholder(i.shape, i.dtype, name=f"in{k}") for k, i in enumerate(node.inputs)]
    output = node_compute(node, inputs)
    if find_workload(output, anchor_op(node).tasks) is None:
        tuned = tuned_config(node)
        if tuned is not None:
            return _auto_spec(node, *tuned)
    params: list[tl.Tensor] = list(inputs)
    packs: list[Pack] = []
    inline: list[tl.Tensor] = []
    if prepack:
        for stage in _materialised_packs(node, output):
            (source,) = stage.op.input_tensors
            index = next((k for k, t in enumerate(inputs) if t is source), None)
            if index is None or node.inputs[index].kind is not NodeKind.CONSTANT:
                continue
            packed = tl.placeholder(stage.shape, stage.dtype, name=f"in{index}_packed")
            identity = tl.compute(stage.shape, lambda *i, p=packed: p[i], name=stage.op.name,
                                  tag=stage.op.tag)
            output = replace_tensor(output, stage, identity)
            packs.append(Pack(index, source, stage, packed))
            params[index] = packed
            inline.append(identity)
    workload = find_workload(output, anchor_op(node).tasks)
    config: str | int | None = None
    if workload is not None:
        found = query_config(*workload)
        config = "fallback" if isinstance(found, FallbackConfig) else found.index
    return KernelSpec(node, [*params, output], output, packs, workload, config, inline)


def _auto_spec(node: Node, template: Template, args: tuple[str],
               config: ConfigEntity) -> KernelSpec:
    """The kernel of an untemplated node scheduled by its auto-scheduled record: the
    workload's own tensors (no pre-packing: there is no template layout), keyed by the
    record's config and the sketch rules that interpret it."""
    tensors = node_workload(args[0])
    key = {"auto": template.name, "index": config.index, "knobs": config.to_json()["knobs"],
           "rules": [r.name for r in template.func.sketch_rules]}
    return KernelSpec(node, tensors, tensors[-1], [], (template.name, args), key,
                      auto=(template, config))


def _materialised_packs(node: Node, out: tl.Tensor) -> list[tl.Tensor]:
    """The weight-packing stages that the schedule computes (a schedule may inline one instead,
    as the batch-1 dense does to read the weight rows contiguously: pre-packing that weight
    would only make its reads strided)."""
    stages = _pack_stages(out)
    if not stages:
        return []
    s = anchor_op(node).schedule([out])
    return [t for t in stages if s[t].attach is not AttachKind.INLINE]


def _pack_stages(out: tl.Tensor) -> list[tl.Tensor]:
    """The weight-packing stages under `out` that read exactly one placeholder."""
    found: list[tl.Tensor] = []
    seen: set[int] = set()
    stack = [out.op]
    while stack:
        op = stack.pop()
        if id(op) in seen or not isinstance(op, ComputeOp):
            continue
        seen.add(id(op))
        inputs = op.input_tensors
        if op.tag in PACK_TAGS and len(inputs) == 1 and isinstance(inputs[0].op, tl.PlaceholderOp):
            found.append(op.output(0))
        stack.extend(t.op for t in inputs)
    return found


def replace_tensor(out: tl.Tensor, old: tl.Tensor, new: tl.Tensor) -> tl.Tensor:
    """`out`'s compute DAG rebuilt with every read of `old` reading `new` instead (ops that
    do not depend on `old` are kept as they are)."""
    rebuilt: dict[int, ComputeOp] = {}

    def tensor(t: tl.Tensor) -> tl.Tensor:
        if t.op is old.op:
            return new
        if not isinstance(t.op, ComputeOp):
            return t
        return op(t.op).outputs[t.value_index]

    class Redirect(Mutator):
        def visit_TensorRead(self, node: TensorRead) -> TensorRead:
            indices = tuple(self.visit(i) for i in node.indices)
            target = tensor(node.tensor)
            if target is node.tensor and all(a is b for a, b in zip(indices, node.indices)):
                return node
            return TensorRead(target, indices, node.dtype)

    def op(old_op: ComputeOp) -> ComputeOp:
        if id(old_op) not in rebuilt:
            body = tuple(Redirect().visit(b) for b in old_op.body)
            same = all(a is b for a, b in zip(body, old_op.body))
            rebuilt[id(old_op)] = old_op if same else ComputeOp(
                old_op.name, old_op.tag, old_op.attrs, old_op.axis, body)
        return rebuilt[id(old_op)]

    return tensor(out)

