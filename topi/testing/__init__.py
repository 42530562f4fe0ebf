"""numpy reference implementations, one `<op>_python` per topi.nn op, for tests and tuning checks.

They favour obvious correctness over speed (float64 accumulation, direct loops over windows).
"""

from .argreduce import argmax_python, argmin_python
from .conv2d import (
    conv2d_nchw_python,
    conv2d_nhwc_python,
    depthwise_conv2d_nchw_python,
    group_conv2d_nchw_python,
)
from .dense import batch_matmul_python, dense_python, matmul_python
from .elemwise import (
    add_python,
    batch_norm_inference_python,
    bias_add_python,
    concatenate_python,
    divide_python,
    gelu_python,
    layer_norm_python,
    leaky_relu_python,
    log_softmax_python,
    multiply_python,
    pad_python,
    relu_python,
    reshape_python,
    softmax_python,
    subtract_python,
    transpose_python,
)
from .pooling import (
    avg_pool2d_python,
    global_avg_pool2d_python,
    global_max_pool2d_python,
    global_pool2d_python,
    max_pool2d_python,
    pool2d_python,
)

__all__ = [
    "add_python", "avg_pool2d_python", "batch_matmul_python", "batch_norm_inference_python",
    "bias_add_python", "concatenate_python", "conv2d_nchw_python", "conv2d_nhwc_python",
    "dense_python", "depthwise_conv2d_nchw_python", "divide_python", "gelu_python",
    "global_avg_pool2d_python", "global_max_pool2d_python", "global_pool2d_python",
    "group_conv2d_nchw_python", "layer_norm_python", "leaky_relu_python", "log_softmax_python",
    "matmul_python", "max_pool2d_python", "multiply_python", "pad_python", "pool2d_python",
    "relu_python", "reshape_python", "softmax_python", "subtract_python", "transpose_python",
]
__all__ += ["argmax_python", "argmin_python"]
