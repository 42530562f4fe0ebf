"""Fold activations that exporters spell out as several ops back into the one op they compute.

ONNX exports SiLU as `x * sigmoid(x)`, Hardswish (below opset 14) as `x * hard_sigmoid(x)`,
GELU as `x * (erf(x / sqrt(2)) + 1) * 0.5` and its tanh approximation (GPT-2's, ALBERT's and Phi's
"gelu_new") as `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`. Each reads `x` twice, and a value read by two ops
ends the fusion chain of its producer (`fuse_ops` grows groups along single readers): the
convolution or dense layer before it writes `x` out and a separate kernel makes one more pass
over memory for the activation (EfficientNet-B0: 48 such kernels, 30% of its run time; the GELUs
of ConvNeXt, a quarter). As the single elementwise op (`silu`, `hard_swish`, `gelu`) the
activation joins its producer's output stage. Intermediate values must have no other reader.
The tanh form's products are matched as sets of factors (exporters associate them differently).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..graph import Graph, Node, NodeKind
from .common import copy_node, successor
from .dead_code import remove_dead_nodes

#: What a pattern finds at its final multiply: the activation's input and the op computing it.
Match = tuple[Node, str] | None


def _scalar(node: Node) -> float | None:
    """The value of a constant that holds one number (of any shape), else None."""
    if node.kind is not NodeKind.CONSTANT or node.value is None or node.value.size != 1:
        return None
    return float(node.value.reshape(()))


def _close(value: float | None, expected: float) -> bool:
    return value is not None and math.isclose(value, expected, rel_tol=1e-6)


def _operands(node: Node, op: str) -> Sequence[tuple[Node, Node]]:
    """Both orders of the two inputs of a commutative `op` node; none for another op."""
    if node.op != op or len(node.inputs) != 2:
        return ()
    a, b = node.inputs
    return ((a, b), (b, a))


class _Matcher:
    """The patterns, over one graph's readers (an intermediate value must have one reader)."""

    def __init__(self, g: Graph) -> None:
        users = g.consumers()
        outputs = set(g.outputs)
        self.private = lambda n: len(users.get(n, ())) == 1 and n not in outputs

    def unary(self, node: Node, op: str, x: Node) -> bool:
        """Whether `node` is `op(x)` and only its one reader reads it."""
        return node.op == op and node.inputs == (x,) and self.private(node)

    def match(self, node: Node) -> Match:
        """The activation that `node` completes, if any (of its input's shape: a product that
        broadcasts its input to more dimensions is no activation of it)."""
        for pattern in (self.silu, self.hard_swish, self.gelu, self.gelu_tanh):
            found = pattern(node)
            if found is not None and found[0].shape == node.shape:
                return found
        return None

    def silu(self, mul: Node) -> Match:
        for x, gate in _operands(mul, "multiply"):
            if self.unary(gate, "sigmoid", x):
                return x, "silu"
        return None

    def hard_swish(self, mul: Node) -> Match:
        for x, gate in _operands(mul, "multiply"):
            if (self.unary(gate, "hard_sigmoid", x) and _close(gate.attrs.get("alpha"), 1 / 6)
                    and _close(gate.attrs.get("beta"), 0.5)):
                return x, "hard_swish"
        return None

    def gelu(self, mul: Node) -> Match:
        """x * (erf(x / sqrt 2) + 1) * 0.5, the product in either order of its factors."""
        for inner, half in _operands(mul, "multiply"):
            if not _close(_scalar(half), 0.5) or not self.private(inner):
                continue
            for x, plus in _operands(inner, "multiply"):
                if self.erf_plus_one(plus, x):
                    return x, "gelu"
        return None

    def gelu_tanh(self, mul: Node) -> Match:
        """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), in any association and
        order of the products, x^3 a power or a product."""
        coefficient, factors = self.product(mul, top=True)
        if not _close(coefficient, 0.5) or len(factors) != 2:
            return None
        for x, plus in (factors, factors[::-1]):
            if self.tanh_plus_one(plus, x):
                return x, "gelu_tanh"
        return None

    def tanh_plus_one(self, node: Node, x: Node) -> bool:
        """Whether `node` is 1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)), all its own."""
        if not self.private(node):
            return False
        for tanh, one in _operands(node, "add"):
            if tanh.op != "tanh" or not _close(_scalar(one), 1.0) or not self.private(tanh):
                continue
            coefficient, scaled = self.product(tanh.inputs[0], top=False)
            if (len(scaled) != 1 or not _close(coefficient, math.sqrt(2 / math.pi))
                    or not self.private(inner := scaled[0])):
                continue
            for linear, cubic in _operands(inner, "add"):
                coefficient, cube = self.product(cubic, top=False)
                if (linear is x and _close(coefficient, 0.044715) and len(cube) == 3
                        and all(f is x for f in cube)):
                    return True
        return False

    def product(self, node: Node, top: bool) -> tuple[float, list[Node]]:
        """`node` as a scalar coefficient times its other factors: the multiplies and cubes
        (power(v, 3)) that only the product reads are opened up; `top` opens `node` itself
        whatever reads it."""
        value = _scalar(node)
        if value is not None:
            return value, []
        if not top and not self.private(node):
            return 1.0, [node]
        if node.op == "multiply" and len(node.inputs) == 2:
            (ca, fa), (cb, fb) = (self.product(i, top=False) for i in node.inputs)
            return ca * cb, fa + fb
        if node.op == "power" and len(node.inputs) == 2 and _close(_scalar(node.inputs[1]), 3):
            c, f = self.product(node.inputs[0], top=False)
            return c ** 3, 3 * f
        return 1.0, [node]

    def erf_plus_one(self, node: Node, x: Node) -> bool:
        """Whether `node` is erf(x / sqrt 2) + 1 (or erf(x * 1/sqrt 2) + 1), all its own."""
        if not self.private(node):
            return False
        for erf, one in _operands(node, "add"):
            if erf.op != "erf" or not _close(_scalar(one), 1.0) or not self.private(erf):
                continue
            (scaled,) = erf.inputs
            if not self.private(scaled) or len(scaled.inputs) != 2 or scaled.inputs[0] is not x:
                continue
            factor = _scalar(scaled.inputs[1])
            if (scaled.op == "divide" and _close(factor, math.sqrt(2))) or (
                    scaled.op == "multiply" and _close(factor, math.sqrt(0.5))):
                return True
        return False


def fold_activations(g: Graph) -> Graph:
    """`g` with SiLU, Hardswish and GELU (exact or tanh) written out as products folded into
    `silu`, `hard_swish`, `gelu` and `gelu_tanh` nodes (named as the products were); the ops
    they replace go."""
    # Readers are counted among live nodes: an earlier pass may leave dead readers behind.
    g = remove_dead_nodes(g)
    matcher = _Matcher(g)
    out = successor(g)
    mapped: dict[Node, Node] = {}
    for node in g.nodes:
        found = matcher.match(node)
        if found is None:
            mapped[node] = copy_node(out, node, [mapped[i] for i in node.inputs])
        else:
            x, op = found
            mapped[node] = out.apply(op, mapped[x], name=node.name)
    out.output(*(mapped[n] for n in g.outputs))
    return remove_dead_nodes(out)
