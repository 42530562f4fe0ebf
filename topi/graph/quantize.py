"""Post-training quantization of a float graph: `quantize(g, calibration_inputs)`.

The result is the QDQ graph that onnxruntime's `quantize_static` would write: each convolution
and dense layer (and 2-D matmul) with a constant float weight reads its data through a
quantize -> dequantize pair (uint8, one scale and zero point per tensor, from the ranges that the
data takes on the calibration inputs) and its weight as dequantize(int8 constant) (symmetric,
one scale per output channel, or one per tensor). Everything else stays float. Building it runs
those layers as int8 kernels: `passes.quantize_ops` recognises exactly this pattern, so a model
quantized here and one quantized by onnxruntime take the same path.

Calibration runs the float model once per calibration input (built with the activations as
extra outputs) and takes, per activation, the minimum and maximum ("minmax") or the
`percentile` and 100 - `percentile` percentiles ("percentile": outliers clipped, finer steps for
the rest). The range always includes 0, so that zero (ReLU's output, padding) is exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from . import ops_qnn  # noqa: F401  (the quantize and dequantize ops)
from .graph import Graph, Node, NodeKind
from .passes.common import copy_node, successor
from .passes.dead_code import remove_dead_nodes

METHODS = ("minmax", "percentile")
#: The ops whose data is quantized, with the weight's output-channel axis.
_WEIGHT_CHANNEL_AXIS = {"conv2d": 0, "dense": 0, "matmul": 1}


def _quantizable(node: Node) -> bool:
    """A float conv2d / dense / 2-D matmul with a constant weight."""
    if node.op not in _WEIGHT_CHANNEL_AXIS or len(node.inputs) != 2:
        return False
    data, weight = node.inputs
    if weight.kind is not NodeKind.CONSTANT or data.dtype != "float32" or \
            weight.dtype != "float32":
        return False
    if node.op == "matmul":
        return len(weight.shape) == 2 and len(data.shape) == 2 and not any(node.attrs.values())
    return node.op == "dense" or node.attrs.get("groups", 1) == 1


def _activation_ranges(g: Graph, activations: list[Node], batches: list[Mapping],
                       method: str, percentile: float, target) -> dict[Node, tuple[float, float]]:
    """(low, high) of each activation over the calibration batches."""
    from .build import build

    probe = Graph()
    mapped: dict[Node, Node] = {}
    for node in g.nodes:
        mapped[node] = copy_node(probe, node, [mapped[i] for i in node.inputs])
    probed = [a for a in activations if a.kind is NodeKind.OP]
    probe.output(*(mapped[n] for n in g.outputs), *(mapped[a] for a in probed))
    module = build(probe, target=target)
    samples: dict[Node, list[np.ndarray]] = {a: [] for a in activations}
    for feeds in batches:
        values = module(**feeds)[len(g.outputs):]
        for a, v in zip(probed, values):
            samples[a].append(np.asarray(v, np.float32).ravel())
        for a in activations:
            if a.kind is NodeKind.INPUT:
                samples[a].append(np.asarray(feeds[a.name], np.float32).ravel())
    ranges = {}
    for a, parts in samples.items():
        values = np.concatenate(parts)
        if method == "minmax":
            low, high = float(values.min()), float(values.max())
        else:
            low, high = (float(v) for v in np.percentile(values, [100 - percentile, percentile]))
        ranges[a] = (min(low, 0.0), max(high, 0.0))
    return ranges


def _uint8_params(low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """Scale and zero point of uint8 over [low, high] (low <= 0 <= high)."""
    scale = np.float32((high - low) / 255 if high > low else 1.0)
    zero = np.uint8(np.clip(np.rint(-low / scale), 0, 255))
    return np.array(scale, np.float32), np.array(zero, np.uint8)


def _int8_weight(weight: np.ndarray, axis: int, per_channel: bool
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 weight and its scales (one per channel along `axis`, or one)."""
    reduce = tuple(i for i in range(weight.ndim) if i != axis) if per_channel else None
    peak = np.abs(weight).max(axis=reduce).astype(np.float32)
    scale = np.where(peak > 0, peak / 127, 1).astype(np.float32)
    shape = [1] * weight.ndim
    if per_channel:
        shape[axis] = -1
    q = np.clip(np.rint(weight / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


def _check(g: Graph, batches: list, method: str, percentile: float) -> None:
    if not isinstance(g, Graph):
        raise TypeError(f"quantize takes a topi.graph.Graph, got {type(g).__name__}")
    if method not in METHODS:
        raise ValueError(f"quantize: method must be one of {METHODS}, got {method!r}")
    if not 50 < percentile <= 100:
        raise ValueError(f"quantize: percentile must be in (50, 100], got {percentile!r}")
    if not batches:
        raise ValueError("quantize: calibration_inputs is empty (give at least one dict of "
                         "inputs by name)")
    names = [i.name for i in g.inputs]
    for k, feeds in enumerate(batches):
        if not isinstance(feeds, Mapping):
            raise TypeError(f"quantize: calibration input {k} must be a dict of inputs by name, "
                            f"got {type(feeds).__name__}")
        missing = [n for n in names if n not in feeds]
        if missing:
            raise ValueError(f"quantize: calibration input {k} lacks the graph inputs {missing}")


def quantize(g: Graph, calibration_inputs: Iterable[Mapping[str, np.ndarray]],
             method: str = "minmax", percentile: float = 99.99, per_channel: bool = True,
             target: str = "llvm") -> Graph:
    """`g` with its convolutions and dense layers quantized to int8 (see the module docstring).

    Args:
        g: a float graph.
        calibration_inputs: dicts of inputs by name, representative of the data the model will
            see (a few dozen are typical).
        method: "minmax" or "percentile", how an activation's range is taken.
        percentile: the upper percentile of the "percentile" method (the lower one is 100 minus
            it).
        per_channel: one weight scale per output channel (else one per tensor).
        target: the target the float model is built for to calibrate.

    Returns:
        A QDQ graph; `topi.graph.build` runs its quantized layers as int8 kernels.

    Raises:
        TypeError: `g` is not a Graph, or a calibration input is not a dict.
        ValueError: a bad method or percentile, no calibration inputs, or one that lacks an
            input of the graph.
    """
    batches = list(calibration_inputs)
    _check(g, batches, method, percentile)
    quantized = {n for n in g.ops if _quantizable(n)}
    activations = list(dict.fromkeys(n.inputs[0] for n in g.ops if n in quantized))
    ranges = _activation_ranges(g, activations, batches, method, percentile, target)

    out = successor(g)
    mapped: dict[Node, Node] = {}
    qdq: dict[Node, Node] = {}  # an activation's quantize -> dequantize, shared by its readers

    def fake_quantized(old: Node) -> Node:
        if old not in qdq:
            scale, zero = (out.constant(v, out.unique_name(f"{old.name}_{what}"))
                           for v, what in zip(_uint8_params(*ranges[old]), ("scale", "zero")))
            q = out.apply("quantize", mapped[old], scale, zero, axis=1, out_dtype="uint8",
                          name=out.unique_name(f"{old.name}_quantized"))
            qdq[old] = out.apply("dequantize", q, scale, zero, axis=1,
                                 name=out.unique_name(f"{old.name}_dequantized"))
        return qdq[old]

    for node in g.nodes:
        if node not in quantized:
            mapped[node] = copy_node(out, node, [mapped[i] for i in node.inputs])
            continue
        data, weight = node.inputs
        axis = _WEIGHT_CHANNEL_AXIS[node.op]
        w8, w_scale = _int8_weight(weight.value, axis, per_channel)
        w = out.apply("dequantize", out.constant(w8, out.unique_name(f"{weight.name}_int8")),
                      out.constant(w_scale, out.unique_name(f"{weight.name}_scale")),
                      out.constant(np.zeros(w_scale.shape, np.int8),
                                   out.unique_name(f"{weight.name}_zero")),
                      axis=axis, name=out.unique_name(f"{weight.name}_dequantized"))
        mapped[node] = copy_node(out, node, [fake_quantized(data), w])
    out.output(*(mapped[n] for n in g.outputs))
    return remove_dead_nodes(out)  # the float weights
