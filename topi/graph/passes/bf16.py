"""`build(g, precision="bf16")`: convolutions and dense layers in bfloat16, float32 sums.

Each conv2d (one group) and dense layer with a constant float32 weight becomes `conv2d_bf16` /
`dense_bf16`: the same float32 inputs and output, with the data rounded to bfloat16 in the copy
the kernel makes of it anyway (its blocked, padded layout) and the weight in its blocked copy
(packed once, at build time), and the products summed in float32 by AVX512-BF16's `vdpbf16ps`
(two bf16 products per float32 lane, twice the float32 FMA's). Everything else stays float32,
so the graph's tensors keep their dtypes and the usual fusion applies (bias, activation and
residual add in the kernel's epilogue); `int8_layout` keeps the bf16 convolutions' outputs in
NCHW[16]c from one to the next.

Rounding to bfloat16 keeps 8 bits of mantissa: results differ from float32 by about 2^-8
relative per operand, accumulated over the reduction.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl

from ...x86.tensor_intrin import has_bf16_dot
from .. import ops_qnn  # noqa: F401  (conv2d_bf16, dense_bf16)
from ..graph import Graph, Node, NodeKind
from .common import rewrite

#: The float ops that run in bf16, and the op each becomes.
BF16_OPS = {"conv2d": "conv2d_bf16", "dense": "dense_bf16"}


def check_bf16_target(target: tl.Target) -> None:
    """Raise unless `target` has AVX512-BF16 and ml_dtypes (numpy's bfloat16, which the
    pre-packed weights are arrays of) is installed.

    Raises:
        ValueError: the target lacks AVX512-BF16.
        ImportError: ml_dtypes is missing (the "bf16" extra).
    """
    if not has_bf16_dot(target):
        raise ValueError(f"build: precision='bf16' needs AVX512-BF16 (vdpbf16ps), which the "
                         f"target {target} lacks; build with precision='fp32', or for a CPU "
                         f"with it (-mcpu=sapphirerapids, cooperlake, znver4)")
    try:
        import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy)
    except ImportError as err:
        raise ImportError("build: precision='bf16' needs ml_dtypes (pip install "
                          "'tensorlang[bf16]')") from err


def to_bf16(g: Graph, target: tl.Target) -> Graph:
    """`g` with its convolutions and dense layers in bf16 (see the module docstring).

    Raises:
        ValueError: `target` lacks AVX512-BF16.
    """
    check_bf16_target(target)

    def visit(out: Graph, node: Node, inputs: Sequence[Node]) -> Node | None:
        op = BF16_OPS.get(node.op)
        if op is None or inputs[1].kind is not NodeKind.CONSTANT or \
                {i.dtype for i in inputs} != {"float32"}:
            return None
        return out.apply(op, *inputs, name=node.name, **node.attrs)

    return rewrite(g, visit)
