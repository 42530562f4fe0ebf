"""Target-independent compute definitions of the operator inventory (TVM's conventions).

Each function checks its arguments, builds tensorlang computes and returns the output tensor;
the stages carry tags ("elemwise", "broadcast", "injective", "conv2d_nchw", ...) by which the
schedules in `topi.x86` recognise them.
"""

from .conv2d import (
    conv2d_nchw,
    conv2d_nhwc,
    depthwise_conv2d_nchw,
    group_conv2d_nchw,
    window_geometry,
)
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
from .pooling import (
    avg_pool2d,
    global_avg_pool2d,
    global_max_pool2d,
    global_pool2d,
    max_pool2d,
    pool2d,
)
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
]
