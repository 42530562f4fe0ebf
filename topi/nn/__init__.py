"""Target-independent compute definitions of the operator inventory (TVM's conventions).

Each function checks its arguments, builds tensorlang computes and returns the output tensor;
the stages carry tags ("elemwise", "broadcast", "injective", "conv2d_nchw", ...) by which the
schedules in `topi.x86` recognise them.
"""

from .activation import (
    ceil,
    celu,
    cos,
    elu,
    expm1,
    floor,
    floor_divide,
    fmod,
    log1p,
    mish,
    mod,
    prelu,
    prod,
    round,
    selu,
    silu,
    sin,
    sign,
    softplus,
    softsign,
    trunc,
    trunc_divide,
)
from .adaptive_pool import adaptive_avg_pool2d, adaptive_max_pool2d, adaptive_pool2d
from .argreduce import argmax, argmin
from .conv2d import (
    conv2d_nchw,
    conv2d_nhwc,
    depthwise_conv2d_nchw,
    group_conv2d_nchw,
    window_geometry,
)
from .conv2d_nchwc import (
    conv2d_NCHWc,
    depthwise_conv2d_NCHWc,
    group_conv2d_NCHWc,
    group_conv2d_width,
    pack_group_conv2d_kernel,
)
from .conv2d_transpose import conv2d_transpose_nchw
from .dense import batch_matmul, dense, matmul
from .elemwise import (
    add,
    batch_norm_inference,
    bias_add,
    divide,
    gelu,
    leaky_relu,
    multiply,
    relu,
    subtract,
)
from .indexing import (
    broadcast_to,
    gather_elements,
    gather_nd,
    scatter_elements,
    scatter_nd,
    tile,
    trilu,
)
from .logical import (
    all,
    any,
    equal,
    greater,
    greater_equal,
    isinf,
    isnan,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    not_equal,
    where,
)
from .layout import channel_block, layout_transform, nchwc_block
from .math import (
    abs,
    cast,
    clip,
    erf,
    exp,
    gelu_tanh,
    hard_sigmoid,
    hard_swish,
    log,
    maximum,
    minimum,
    negative,
    power,
    reciprocal,
    sigmoid,
    sqrt,
    tanh,
)
from .norm import group_norm, instance_norm
from .pooling import (
    avg_pool2d,
    global_avg_pool2d,
    global_max_pool2d,
    global_pool2d,
    max_pool2d,
    pool2d,
)
from .reduction import max, mean, min, sum
from .resize import resize2d
from .scan import cumsum
from .sorting import argsort, histc
from .grouped_matmul import grouped_matmul
from .slicing import split, strided_slice, take
from .softmax import layer_norm, log_softmax, softmax
from .transform import concatenate, pad, reshape, transpose
from .utils import get_pad_tuple, pack_width

__all__ = [
    "add", "avg_pool2d", "batch_matmul", "batch_norm_inference", "bias_add",
    "concatenate", "conv2d_nchw", "conv2d_nhwc", "dense", "depthwise_conv2d_nchw", "divide",
    "gelu", "get_pad_tuple", "global_avg_pool2d", "global_max_pool2d", "global_pool2d",
    "group_conv2d_nchw", "layer_norm", "leaky_relu", "log_softmax", "matmul", "max_pool2d",
    "multiply", "pack_width", "pad", "pool2d", "relu", "reshape", "softmax", "subtract",
    "transpose", "window_geometry",
    # reductions, slicing, math, adaptive pooling and the transposed convolution
    "abs", "adaptive_avg_pool2d", "adaptive_max_pool2d", "adaptive_pool2d", "cast", "clip",
    "conv2d_transpose_nchw", "erf", "exp", "gelu_tanh", "hard_sigmoid", "hard_swish", "log",
    "max", "maximum", "mean", "min", "minimum", "negative", "power", "reciprocal", "sigmoid",
    "split", "sqrt", "strided_slice", "sum", "take", "tanh",
]
__all__ += ["argmax", "argmin"]
# the NCHW[x]c layout ops
__all__ += [
    "channel_block", "conv2d_NCHWc", "depthwise_conv2d_NCHWc", "group_conv2d_NCHWc",
    "group_conv2d_width", "pack_group_conv2d_kernel", "layout_transform",
    "nchwc_block",
]
# the data ops: resizing, scans, tiling, gathers and scatters, triangles, group norms
__all__ += [
    "broadcast_to", "cumsum", "gather_elements", "gather_nd", "group_norm", "instance_norm",
    "resize2d", "scatter_elements", "scatter_nd", "tile", "trilu",
]
# sorting and counting, and the grouped (mixture-of-experts) matrix product
__all__ += ["argsort", "grouped_matmul", "histc"]
# the math ops: comparisons and logic, where, rounding, remainders, activations, prod/any/all
__all__ += [
    "all", "any", "ceil", "celu", "cos", "elu", "equal", "expm1", "floor", "floor_divide",
    "fmod", "greater", "greater_equal", "isinf", "isnan", "less", "less_equal", "log1p",
    "logical_and", "logical_not", "logical_or", "logical_xor", "mish", "mod", "not_equal",
    "prelu", "prod", "round", "selu", "sign", "silu", "sin", "softplus", "softsign", "trunc",
    "trunc_divide", "where",
]

from . import qnn  # noqa: E402  (quantize, dequantize, requantize)
from .conv2d_int8 import conv2d_nchw_int8  # noqa: E402
from .dense_int8 import dense_bf16, dense_int8  # noqa: E402

__all__ += ["conv2d_nchw_int8", "dense_bf16", "dense_int8", "qnn"]
