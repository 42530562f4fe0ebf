"""Default x86 schedules of the ops with no tunable template that the model importers need:
reductions along axes, adaptive pooling, the transposed convolution, slicing and the elementwise
math ops. All share `injective.schedule_reduce` / `schedule_injective` (reductions along the
trailing axes row by row, other reductions parallel over the kept axes and vectorized along the
innermost one; injective stages inlined or given one vectorized, parallel loop nest).

The transposed convolution's spread input is tagged as no injective op, so it is materialised
once at root instead of putting its stride conditions inside the reduction.
"""

from __future__ import annotations

from .injective import schedule_injective, schedule_reduce

schedule_sum = schedule_max = schedule_min = schedule_mean = schedule_reduce
schedule_adaptive_pool = schedule_adaptive_avg_pool2d = schedule_adaptive_max_pool2d = \
    schedule_reduce
schedule_conv2d_transpose_nchw = schedule_reduce
schedule_strided_slice = schedule_take = schedule_split = schedule_cast = schedule_injective
schedule_math = schedule_clip = schedule_power = schedule_maximum = schedule_minimum = \
    schedule_injective
