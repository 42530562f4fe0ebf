"""Default x86 schedules of the ops that have no tunable template: elementwise, broadcast, data
movement, pooling and the normalisations. Reductions along the trailing axes they read (softmax,
layer_norm, a mean over the last axis) take the row schedule of `rows.schedule_rows`; the rest
use `common.generic_schedule`: inline what is injective, vectorize the innermost axis by one
vector of the current target, parallelise the fused outer loops."""

from __future__ import annotations

from collections.abc import Sequence

import tensorlang as tl

from .common import generic_schedule
from .rows import schedule_rows
from .symbolic_rows import schedule_symbolic_rows


def schedule_injective(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule elementwise, broadcast and data-movement ops (and chains of them)."""
    return generic_schedule(outs)


def schedule_reduce(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule ops built from reductions: pooling, softmax, layer_norm. Reductions along the
    trailing axes (softmax, layer_norm, a mean over the last axis) run row by row
    (`rows.schedule_rows`)."""
    return schedule_rows(outs) or schedule_symbolic_rows(outs) or generic_schedule(outs)


# One public name per op, as TVM's topi exposes them; they share the two schedules above.
schedule_elemwise = schedule_broadcast = schedule_injective
schedule_relu = schedule_leaky_relu = schedule_gelu = schedule_injective
schedule_add = schedule_subtract = schedule_multiply = schedule_divide = schedule_injective
schedule_bias_add = schedule_batch_norm_inference = schedule_injective
schedule_pad = schedule_reshape = schedule_transpose = schedule_concatenate = schedule_injective
schedule_pool = schedule_max_pool2d = schedule_avg_pool2d = schedule_reduce
schedule_global_pool = schedule_global_avg_pool2d = schedule_global_max_pool2d = schedule_reduce
schedule_softmax = schedule_log_softmax = schedule_layer_norm = schedule_reduce
