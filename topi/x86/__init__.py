"""x86 schedules: `schedule_<op>(outs)` for every topi.nn op, and the tunable templates
"conv2d_nchw.x86", "conv2d_nhwc.x86", "depthwise_conv2d_nchw.x86", "dense.x86", "matmul.x86",
"batch_matmul.x86", "conv2d_NCHWc.x86", "depthwise_conv2d_NCHWc.x86" and
"group_conv2d_NCHWc.x86" (registered with autotune on import).

Schedules of tunable ops take the best config of the active `autotune.apply_history_best`
context for their workload, and an explicit fallback config otherwise.
"""

from .argreduce import schedule_argmax, schedule_argmin, schedule_argreduce
from .common import generic_schedule
from .conv2d import schedule_conv2d_nchw
from .conv2d_nchwc import schedule_conv2d_NCHWc, schedule_depthwise_conv2d_NCHWc
from .conv2d_nhwc import schedule_conv2d_nhwc
from .dense import schedule_batch_matmul, schedule_dense, schedule_matmul
from .depthwise import schedule_depthwise_conv2d_nchw, schedule_group_conv2d_nchw
from .generic import (
    schedule_adaptive_avg_pool2d,
    schedule_adaptive_max_pool2d,
    schedule_adaptive_pool,
    schedule_cast,
    schedule_clip,
    schedule_conv2d_transpose_nchw,
    schedule_math,
    schedule_max,
    schedule_maximum,
    schedule_mean,
    schedule_min,
    schedule_minimum,
    schedule_power,
    schedule_split,
    schedule_strided_slice,
    schedule_sum,
    schedule_take,
)
from .group_conv2d import schedule_group_conv2d_NCHWc
from .injective import (
    schedule_add,
    schedule_avg_pool2d,
    schedule_batch_norm_inference,
    schedule_bias_add,
    schedule_broadcast,
    schedule_concatenate,
    schedule_divide,
    schedule_elemwise,
    schedule_gelu,
    schedule_global_avg_pool2d,
    schedule_global_max_pool2d,
    schedule_global_pool,
    schedule_injective,
    schedule_layer_norm,
    schedule_leaky_relu,
    schedule_log_softmax,
    schedule_max_pool2d,
    schedule_multiply,
    schedule_pad,
    schedule_pool,
    schedule_reduce,
    schedule_relu,
    schedule_reshape,
    schedule_softmax,
    schedule_subtract,
    schedule_transpose,
)

TEMPLATES = (
    "conv2d_nchw.x86", "conv2d_nhwc.x86", "depthwise_conv2d_nchw.x86", "dense.x86",
    "matmul.x86", "batch_matmul.x86", "conv2d_NCHWc.x86", "depthwise_conv2d_NCHWc.x86",
    "group_conv2d_NCHWc.x86",
)

__all__ = [
    "TEMPLATES", "generic_schedule", "schedule_add", "schedule_avg_pool2d",
    "schedule_batch_matmul", "schedule_batch_norm_inference", "schedule_bias_add",
    "schedule_broadcast", "schedule_concatenate", "schedule_conv2d_nchw", "schedule_conv2d_nhwc",
    "schedule_dense", "schedule_depthwise_conv2d_nchw", "schedule_divide", "schedule_elemwise",
    "schedule_gelu", "schedule_global_avg_pool2d", "schedule_global_max_pool2d",
    "schedule_global_pool", "schedule_group_conv2d_nchw", "schedule_injective",
    "schedule_layer_norm", "schedule_leaky_relu", "schedule_log_softmax", "schedule_matmul",
    "schedule_max_pool2d", "schedule_multiply", "schedule_pad", "schedule_pool",
    "schedule_reduce", "schedule_relu", "schedule_reshape", "schedule_softmax",
    "schedule_subtract", "schedule_transpose",
    # reductions, slicing, math, adaptive pooling and the transposed convolution
    "schedule_adaptive_avg_pool2d", "schedule_adaptive_max_pool2d", "schedule_adaptive_pool",
    "schedule_cast", "schedule_clip", "schedule_conv2d_transpose_nchw", "schedule_math",
    "schedule_max", "schedule_maximum", "schedule_mean", "schedule_min", "schedule_minimum",
    "schedule_power", "schedule_split", "schedule_strided_slice", "schedule_sum",
    "schedule_take",
]
__all__ += ["schedule_argmax", "schedule_argmin", "schedule_argreduce"]
__all__ += ["schedule_conv2d_NCHWc", "schedule_depthwise_conv2d_NCHWc",
            "schedule_group_conv2d_NCHWc"]

from .conv2d_int8 import schedule_conv2d_nchw_int8  # noqa: E402  (int8 conv2d on VNNI)

__all__ += ["schedule_conv2d_nchw_int8"]
