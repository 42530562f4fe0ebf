"""What a custom op's compute is: its fusion pattern, the reads its shapes must
allow, and a fingerprint of the kernel it lowers to.

The pattern decides how the graph fuses the op (`OpPattern`): a compute with a reduction is
REDUCTION (scheduled like softmax or layer_norm: the elementwise ops around it fuse into its
kernel), anything else INJECTIVE (it chains with elementwise and data-movement neighbours). Never
ELEMWISE or BROADCAST by inference: the layout passes hand such ops their inputs in blocked
layouts (NCHW[x]c, channels last), which a compute written for one rank cannot index; an author
whose compute is rank-generic may say so with `custom_op(..., pattern=...)`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import tensorlang as tl
from tensorlang.arith import const_bounds, const_value
from tensorlang.expr import Select, TensorRead
from tensorlang.visitor import Visitor

from ...x86.common import compute_ops
from ..ops import OpPattern


def _unguarded_reads(op: tl.ComputeOp) -> list[TensorRead]:
    """The tensor reads of `op` under no Select (a read that a condition guards, as padding's,
    may lie outside its tensor)."""
    found: list[TensorRead] = []

    class Collect(Visitor):
        def visit_Select(self, node: Select) -> None:
            self.visit(node.cond)

        def visit_TensorRead(self, node: TensorRead) -> None:
            found.append(node)
            self.generic_visit(node)

    for body in op.body:
        Collect().visit(body)
    return found


def infer_pattern(outs: Sequence[tl.Tensor]) -> OpPattern:
    """The fusion pattern of the compute that produces `outs` (see the module docstring)."""
    if any(op.reduce_axis for op in compute_ops(outs)):
        return OpPattern.REDUCTION
    return OpPattern.INJECTIVE


def check_reads(outs: Sequence[tl.Tensor], what: str) -> None:
    """Raise ValueError where a stage reads a tensor outside its shape (inputs whose dims
    disagree: a weight shorter than the row it scales); reads under a condition (padding) and
    symbolic sizes are not checked."""
    for op in compute_ops(outs):
        ranges = {iv.var: (0.0, float(const_value(iv.dom.extent) or 0) - 1)
                  for iv in op.axis if const_value(iv.dom.extent) is not None}
        for iv in op.reduce_axis:
            low, extent = const_value(iv.dom.min), const_value(iv.dom.extent)
            if low is not None and extent is not None:
                ranges[iv.var] = (float(low), float(low + extent - 1))
        for read in _unguarded_reads(op):
            for axis, (index, size) in enumerate(zip(read.indices, read.tensor.shape)):
                size = const_value(size)
                low, high = const_bounds(index, ranges)
                known = math.isfinite(low) and math.isfinite(high)  # symbolic: unchecked
                if size is not None and known and (high >= size or low < 0):
                    raise ValueError(
                        f"{what}: stage {op.name!r} reads {read.tensor.name!r} (shape "
                        f"{dims(read.tensor)}) at indices {low:g}..{high:g} along axis {axis}: "
                        f"the inputs' sizes disagree with what the compute needs")


def dims(t: tl.Tensor) -> tuple:
    """`t`'s shape for messages: ints, and symbolic dims as text."""
    return tuple(const_value(d) if const_value(d) is not None else str(d) for d in t.shape)


def kernel_fingerprint(schedule: tl.Schedule, params: Sequence[tl.Tensor]) -> str:
    """A short hash of the loop IR that `schedule` lowers `params` to: it changes whenever the
    compute or the schedule a user wrote does, so kernels cached on disk and tuning records
    never outlive the code that made them."""
    text = str(tl.lower(schedule, list(params), name="custom"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
