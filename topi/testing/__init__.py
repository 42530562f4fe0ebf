"""numpy reference implementations, one `<op>_python` per topi.nn op, for tests and tuning checks.

They favour obvious correctness over speed (float64 accumulation, direct loops over windows).
"""

from .activation import (
    ceil_python,
    celu_python,
    cos_python,
    elu_python,
    expm1_python,
    floor_divide_python,
    floor_python,
    fmod_python,
    log1p_python,
    mish_python,
    mod_python,
    prelu_python,
    prod_python,
    round_python,
    selu_python,
    silu_python,
    sign_python,
    sin_python,
    softplus_python,
    softsign_python,
    trunc_divide_python,
    trunc_python,
)
from .adaptive_pool import (
    adaptive_avg_pool2d_python,
    adaptive_max_pool2d_python,
    adaptive_pool2d_python,
)
from .argreduce import argmax_python, argmin_python
from .conv2d import (
    conv2d_nchw_python,
    conv2d_nhwc_python,
    depthwise_conv2d_nchw_python,
    group_conv2d_nchw_python,
)
from .conv2d_transpose import conv2d_transpose_nchw_python
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
from .indexing import (
    broadcast_to_python,
    gather_elements_python,
    gather_nd_python,
    scatter_elements_python,
    scatter_nd_python,
    tile_python,
    trilu_python,
)
from .logical import (
    all_python,
    any_python,
    equal_python,
    greater_equal_python,
    greater_python,
    isinf_python,
    isnan_python,
    less_equal_python,
    less_python,
    logical_and_python,
    logical_not_python,
    logical_or_python,
    logical_xor_python,
    not_equal_python,
    where_python,
)
from .layout import (
    conv2d_NCHWc_python,
    depthwise_conv2d_NCHWc_python,
    group_conv2d_NCHWc_python,
    layout_transform_python,
    unpack_group_conv2d_kernel,
)
from .math import (
    abs_python,
    cast_python,
    clip_python,
    erf_python,
    exp_python,
    gelu_tanh_python,
    hard_sigmoid_python,
    hard_swish_python,
    log_python,
    maximum_python,
    minimum_python,
    negative_python,
    power_python,
    reciprocal_python,
    sigmoid_python,
    sqrt_python,
    tanh_python,
)
from .norm import group_norm_python, instance_norm_python
from .pooling import (
    avg_pool2d_python,
    global_avg_pool2d_python,
    global_max_pool2d_python,
    global_pool2d_python,
    max_pool2d_python,
    pool2d_python,
)
from .reduction import max_python, mean_python, min_python, sum_python
from .resize import resize2d_python
from .scan import cumsum_python
from .sorting import argsort_python, grouped_matmul_python, histc_python
from .slicing import split_python, strided_slice_python, take_python

__all__ = [
    "add_python", "avg_pool2d_python", "batch_matmul_python", "batch_norm_inference_python",
    "bias_add_python", "concatenate_python", "conv2d_nchw_python", "conv2d_nhwc_python",
    "dense_python", "depthwise_conv2d_nchw_python", "divide_python", "gelu_python",
    "global_avg_pool2d_python", "global_max_pool2d_python", "global_pool2d_python",
    "group_conv2d_nchw_python", "layer_norm_python", "leaky_relu_python", "log_softmax_python",
    "matmul_python", "max_pool2d_python", "multiply_python", "pad_python", "pool2d_python",
    "relu_python", "reshape_python", "softmax_python", "subtract_python", "transpose_python",
    # reductions, slicing, math, adaptive pooling and the transposed convolution
    "abs_python", "adaptive_avg_pool2d_python", "adaptive_max_pool2d_python",
    "adaptive_pool2d_python", "cast_python", "clip_python", "conv2d_transpose_nchw_python",
    "erf_python", "exp_python", "gelu_tanh_python", "hard_sigmoid_python", "hard_swish_python",
    "log_python", "max_python", "maximum_python", "mean_python", "min_python", "minimum_python",
    "negative_python", "power_python", "reciprocal_python", "sigmoid_python", "split_python",
    "sqrt_python", "strided_slice_python", "sum_python", "take_python", "tanh_python",
]
__all__ += ["argmax_python", "argmin_python"]
# the NCHW[x]c layout ops
__all__ += [
    "conv2d_NCHWc_python", "depthwise_conv2d_NCHWc_python", "group_conv2d_NCHWc_python",
    "layout_transform_python", "unpack_group_conv2d_kernel",
]
# the data ops: resizing, scans, tiling, gathers and scatters, triangles, group norms
__all__ += [
    "broadcast_to_python", "cumsum_python", "gather_elements_python", "gather_nd_python",
    "group_norm_python", "instance_norm_python", "resize2d_python", "scatter_elements_python",
    "scatter_nd_python", "tile_python", "trilu_python",
]
# sorting and counting, and the grouped (mixture-of-experts) matrix product
__all__ += ["argsort_python", "grouped_matmul_python", "histc_python"]
# the math ops: comparisons and logic, where, rounding, remainders, activations, prod/any/all
__all__ += [
    "all_python", "any_python", "ceil_python", "celu_python", "cos_python", "elu_python",
    "equal_python", "expm1_python", "floor_divide_python", "floor_python", "fmod_python",
    "greater_equal_python", "greater_python", "isinf_python", "isnan_python",
    "less_equal_python", "less_python", "log1p_python", "logical_and_python",
    "logical_not_python", "logical_or_python", "logical_xor_python", "mish_python",
    "mod_python", "not_equal_python", "prelu_python", "prod_python", "round_python",
    "selu_python", "sign_python", "silu_python", "sin_python", "softplus_python",
    "softsign_python", "trunc_divide_python", "trunc_python", "where_python",
]
