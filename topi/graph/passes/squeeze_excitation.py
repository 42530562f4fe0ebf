"""Squeeze-and-excitation blocks as one or two kernels instead of five or six.

After the layout pass an SE block (EfficientNet, MobileNet-V3, RegNet-Y) is: global average
pool of x -> 1x1 conv (+ bias) -> relu or silu -> 1x1 conv (+ bias) -> sigmoid or hard sigmoid
-> multiply by x, the convolutions on a 1 x 1 map (mat-vecs), with layout transforms wherever a
layer's channels made no block. Each is a kernel: the pool, two conv kernels (~0.1 ms each on
Zen 4 for a mat-vec of a few thousand weights) and the multiply, which reads and writes the
whole block once more. Here the pool, both mat-vecs and the gate become one `se_gate` kernel
that writes the gate in x's own layout (no transform of x where the gate's block differed),
and the multiply reads x in its layout.

Where the scaled block is read only by a convolution and the batch is one image, the gate is
folded into that convolution's weight instead (conv(x * s, W) = conv(x, W * s) per input
channel, padding included): `se_scaled_weight` computes the gate and the scaled weight in one
kernel and the convolution reads x itself, so the scaled block is never written or read. That
costs the weight's size (K * C * R * S) where the multiply costs the block's (C * H * W) twice,
so it is done where the weight is a quarter of the block or less: the early, large-plane
blocks (see `_fold_pays`).

Only the real pattern matches: every intermediate value read once, constant weights and biases,
1 x 1 kernels on a 1 x 1 map, and the channels of pool, both layers, gate and x agreeing;
anything else stays as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..graph import Graph, Node, NodeKind
from .common import copy_node, successor
from .dead_code import remove_dead_nodes

_ACTIVATIONS = ("relu", "silu")
_CONVS = ("conv2d", "conv2d_NCHWc")


@dataclass(frozen=True)
class _Block:
    """A matched SE block: its input, the multiply, and the gate's parameters (logical NCHW
    channel order, laid out as `se_gate` reads them)."""

    x: Node
    scale: Node
    squeeze: np.ndarray  # (C, S)
    squeeze_bias: np.ndarray  # (S,)
    excite: np.ndarray  # (S, C)
    excite_bias: np.ndarray  # (C,)
    attrs: dict[str, Any]


def _layout(shape: tuple[int, ...]) -> str:
    return f"NCHW{shape[4]}c" if len(shape) == 5 else "NCHW"


def _channels(shape: tuple[int, ...]) -> int:
    return shape[1] * (shape[4] if len(shape) == 5 else 1)


def _per_channel(value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """A constant broadcast against a value of `shape` (NCHW or NCHW<b>c, 1 x 1 plane) as one
    number per logical channel; None when it varies along the batch."""
    if value.ndim > len(shape) or (value.ndim == len(shape) and value.shape[0] != 1):
        return None
    full = np.broadcast_to(value, shape)[0]
    if len(shape) == 5:
        return full.transpose(0, 3, 1, 2).reshape(-1)
    return full.reshape(-1)


def _scalar(node: Node) -> float | None:
    """The value of a constant holding one number, else None."""
    if node.kind is not NodeKind.CONSTANT or node.value is None or node.value.size != 1:
        return None
    return float(node.value.reshape(()))


#: A step v -> clamp(a * v + b, lo, hi) of a scalar chain, and the value it reads.
Step = tuple[tuple[float, float, float, float], Node]


def _scalar_step(node: Node) -> Step | None:
    """`node` as one step of a hard sigmoid spelt out with scalar constants, or None."""
    inf = np.inf
    if node.op == "hard_sigmoid":
        alpha, beta = node.attrs.get("alpha", 0.2), node.attrs.get("beta", 0.5)
        return (alpha, beta, 0.0, 1.0), node.inputs[0]
    if node.op == "clip":
        low, high = node.attrs.get("a_min"), node.attrs.get("a_max")
        return (1.0, 0.0, -inf if low is None else low, inf if high is None else high), \
            node.inputs[0]
    if node.op == "relu":
        return (1.0, 0.0, 0.0, inf), node.inputs[0]
    if node.op not in ("add", "subtract", "multiply", "divide") or len(node.inputs) != 2:
        return None
    v, c = node.inputs
    k = _scalar(c)
    if k is None and node.op in ("add", "multiply"):
        c, v = node.inputs
        k = _scalar(c)
    if k is None or (node.op == "divide" and k == 0):
        return None
    a, b = {"add": (1.0, k), "subtract": (1.0, -k), "multiply": (k, 0.0),
            "divide": (1.0 / k if k else 0.0, 0.0)}[node.op]
    return (a, b, -inf, inf), v


def _fold_pays(weight: int, block: int) -> bool:
    """Whether scaling a weight of `weight` elements beats scaling a block of `block`.

    Measured per block (the SE kernels and the convolution after them, each kernel's least time
    in the model's run order, loaded 2-core Zen 4): with the weight at 1-13% of the block
    (EfficientNet-B0 and RegNet-Y at 28 x 28 and up) the fold was 1.02-1.8x faster, at 41-80%
    (EfficientNet-B0 and -V2-S at 14 x 14) 0.89-0.97x: the scaled weight is written by one core
    from a weight that comes from memory, the multiply by both from a block still in cache."""
    return 4 * weight <= block


class _Matcher:
    """The SE pattern over one graph's readers."""

    def __init__(self, g: Graph) -> None:
        users = g.consumers()
        outputs = set(g.outputs)
        self.users = users
        self.outputs = outputs
        self.private = lambda n: len(users[n]) == 1 and n not in outputs

    def through_transform(self, node: Node) -> Node:
        """The value a private layout transform reads, or `node` itself."""
        if node.op == "layout_transform" and self.private(node):
            return node.inputs[0]
        return node

    def dense(self, node: Node) -> tuple[np.ndarray, np.ndarray, Node] | None:
        """(W (K, C), bias (K,), input) of a 1x1 convolution on a 1 x 1 map with an optional
        constant bias (an add or a bias_add), in logical channel order."""
        bias = np.zeros(_channels(node.shape), np.float32)
        if node.op in ("add", "bias_add") and len(node.inputs) == 2 and self.private(node):
            conv, const = node.inputs
            if const.kind is not NodeKind.CONSTANT or conv.shape != node.shape:
                return None
            if node.op == "bias_add":
                if node.attrs.get("axis", 1) != 1 or const.value.shape != (bias.size,):
                    return None
                bias = const.value
            else:
                bias = _per_channel(const.value, node.shape)
                if bias is None:
                    return None
            node = conv
        if node.op not in _CONVS or not self.private(node):
            return None
        data, weight = node.inputs
        if weight.kind is not NodeKind.CONSTANT or tuple(node.shape[2:4]) != (1, 1) \
                or tuple(data.shape[2:4]) != (1, 1) or tuple(weight.shape[2:4]) != (1, 1):
            return None
        w = weight.value[:, :, 0, 0]
        if node.op == "conv2d_NCHWc":  # (K/b, C, b) -> (K, C)
            w = w.transpose(0, 2, 1).reshape(-1, w.shape[1])
        return w, bias, data

    def match(self, mul: Node) -> _Block | None:
        """The SE block that the multiply `mul` completes, if it is one."""
        if mul.op != "multiply" or len(mul.inputs) != 2 or mul.symbolic:
            return None
        for data, gate in (mul.inputs, mul.inputs[::-1]):
            found = self.gate(gate, mul.shape)
            if found is None:
                continue
            x, params = found
            moved = data.op == "layout_transform" and data.inputs[0] is x
            if data.shape == mul.shape and (data is x or moved):
                return _Block(x, mul, *params)
        return None

    def gate(self, gate: Node, shape: tuple[int, ...]) -> tuple[Node, tuple] | None:
        """(x, parameters) when `gate` is the SE gate of some x, with a 1 x 1 plane of `shape`
        (the multiply's) and x's channels."""
        if len(shape) < 4 or len(gate.shape) != len(shape) or gate.shape[0] != shape[0] \
                or gate.shape[1:] != (gate.shape[1], 1, 1, *shape[4:]):
            return None
        kind = self.gate_kind(gate)
        if kind is None:
            return None
        attrs, pre_gate = kind
        excite = self.dense(pre_gate)
        if excite is None:
            return None
        w2, b2, act = excite
        act = self.through_transform(act)
        if act.op not in _ACTIVATIONS or not self.private(act):
            return None
        squeeze = self.dense(self.through_transform(act.inputs[0]))
        if squeeze is None:
            return None
        w1, b1, pool = squeeze
        pool = self.through_transform(pool)
        if not self.is_pool(pool):
            return None
        x = self.through_transform(pool.inputs[0])
        channels = _channels(x.shape)
        if len(x.shape) not in (4, 5) or pool.shape[0] != x.shape[0] \
                or w1.shape != (w2.shape[1], channels) or w2.shape[0] != channels \
                or _channels(shape) != channels or x.dtype != "float32":
            return None
        attrs = {"act": act.op, **attrs}
        params = (np.ascontiguousarray(w1.T, np.float32), np.asarray(b1, np.float32),
                  np.ascontiguousarray(w2.T, np.float32), np.asarray(b2, np.float32), attrs)
        return x, params

    def is_pool(self, node: Node) -> bool:
        """Whether `node` is a private global average pool of a 4-D or 5-D value (ONNX's
        GlobalAveragePool, or PyTorch's mean over H and W keeping them, as from_torch imports
        torchvision's adaptive pool to 1)."""
        if not self.private(node) or len(node.inputs) != 1:
            return False
        if node.op == "global_avg_pool2d":
            return node.attrs.get("layout", "NCHW") in ("NCHW", _layout(node.shape))
        axes = node.attrs.get("axis")
        axes = (axes,) if isinstance(axes, int) else tuple(axes or ())
        return (node.op == "mean" and len(node.shape) == 4 and bool(node.attrs.get("keepdims"))
                and sorted(a % 4 for a in axes) == [2, 3])

    def gate_kind(self, gate: Node) -> tuple[dict[str, Any], Node] | None:
        """({"gate": ..., [alpha, beta]}, the gate's input) of a sigmoid, or of a chain of
        private scalar ops computing a hard sigmoid clamp(alpha * v + beta, 0, 1): ONNX's
        HardSigmoid, or PyTorch's hardsigmoid as from_torch imports it (clip(v + 3, 0, 6) / 6).
        """
        if gate.op == "sigmoid" and self.private(gate):
            return {"gate": "sigmoid"}, gate.inputs[0]
        chain = []
        node = gate
        while self.private(node) and _scalar_step(node) is not None:
            chain.append(node)
            node = _scalar_step(node)[1]
        if not chain:
            return None
        # clamp(scale * v + shift, lo, hi) composed from the first op on.
        scale, shift, lo, hi = 1.0, 0.0, -np.inf, np.inf
        for op in reversed(chain):
            (a, b, low, high), _ = _scalar_step(op)
            if a <= 0:
                return None
            scale, shift = a * scale, a * shift + b
            lo, hi = max(a * lo + b, low), min(a * hi + b, high)
        if not (np.isclose(lo, 0.0) and np.isclose(hi, 1.0)):
            return None
        return {"gate": "hard_sigmoid", "alpha": float(scale), "beta": float(shift)}, node

    def reads_any_block(self, node: Node) -> bool:
        """Whether every reader of `node` is an NCHW[x]c convolution reading it as data (which
        takes any input block), and no output is `node`."""
        readers = self.users[node]
        return bool(readers) and node not in self.outputs and all(
            r.op == "conv2d_NCHWc" and r.inputs[0] is node and r.inputs[1] is not node
            for r in readers)

    def folding_conv(self, block: _Block) -> Node | None:
        """The convolution whose weight takes the gate: the only reader of the scaled block,
        reading it as data, with a constant weight small enough (`_fold_pays`), one image."""
        readers = self.users[block.scale]
        x = block.x
        if not self.private(block.scale) or x.shape[0] != 1:
            return None
        (conv,) = readers
        if conv.op not in _CONVS or conv.inputs[0] is not block.scale \
                or conv.inputs[1].kind is not NodeKind.CONSTANT:
            return None
        if conv.op == "conv2d" and len(x.shape) != 4:
            return None
        return conv if _fold_pays(conv.inputs[1].value.size, int(np.prod(x.shape))) else None


def fuse_squeeze_excitation(g: Graph) -> Graph:
    """`g` with each squeeze-and-excitation block's pool, mat-vecs and gate one `se_gate`
    kernel (its multiply reading x in x's layout), or, where cheaper, one `se_scaled_weight`
    kernel feeding the convolution that reads the block (see the module docstring)."""
    g = remove_dead_nodes(g)
    matcher = _Matcher(g)
    blocks = {n: b for n in g.ops if (b := matcher.match(n)) is not None}
    folds = {conv: b for b in blocks.values() if (conv := matcher.folding_conv(b)) is not None}
    folded = {b.scale for b in folds.values()}
    out = successor(g)
    mapped: dict[Node, Node] = {}

    def params(block: _Block) -> list[Node]:
        base = block.scale.name
        return [mapped[block.x]] + [out.constant(v, name=f"{base}_{k}") for k, v in (
            ("squeeze", block.squeeze), ("squeeze_bias", block.squeeze_bias),
            ("excite", block.excite), ("excite_bias", block.excite_bias))]

    for node in g.nodes:
        inputs = [mapped.get(i) for i in node.inputs]
        if node in folds:
            block = folds[node]
            weight = out.apply("se_scaled_weight", *params(block), mapped[node.inputs[1]],
                               name=out.unique_name(f"{block.scale.name}_weight"),
                               **block.attrs)
            mapped[node] = out.apply(node.op, mapped[block.x], weight, name=node.name,
                                     **node.attrs)
        elif node in folded:
            continue  # the convolution reads x instead
        elif node in blocks:
            mapped[node] = _scaled(out, blocks[node], params(blocks[node]),
                                   matcher.reads_any_block(node))
        else:
            mapped[node] = copy_node(out, node, inputs)
    out.output(*(mapped[n] for n in g.outputs))
    return remove_dead_nodes(out)


def _scaled(out: Graph, block: _Block, params: list[Node], any_block: bool) -> Node:
    """x times its gate, computed in x's layout; moved to the multiply's layout where that
    differed (the gate's block had decided it) unless its readers take any block."""
    x = params[0]
    mul = block.scale
    same = x.shape == mul.shape or any_block
    gate = out.apply("se_gate", *params, name=out.unique_name(f"{mul.name}_gate"),
                     **block.attrs)
    name = mul.name if same else out.unique_name(f"{mul.name}_{_layout(x.shape)}")
    scaled = out.apply("multiply", x, gate, name=name)
    if same:
        return scaled
    return out.apply("layout_transform", scaled, src_layout=_layout(x.shape),
                     dst_layout=_layout(mul.shape), name=mul.name)
