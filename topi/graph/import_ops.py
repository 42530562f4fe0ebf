"""Graph ops the importers need beyond the core set of `ops.py`: reductions, elementwise math,
slicing, gathering, adaptive pooling and the transposed convolution, each registered once with
its topi compute, x86 schedule and numpy reference (the pattern of `ops.py`'s registrations).

Imported by the frontends (and so by `topi.graph`), which makes these ops available to
`Graph.apply` as well.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import nn, testing, x86
from . import ops_data, ops_math, ops_se, ops_symbolic  # noqa: F401  (their registrations)
from .ops import OpPattern, register_op

P = OpPattern
T = testing
_INJ = x86.schedule_injective
_RED = x86.schedule_reduce


def _reduce(fn: Callable) -> Callable:
    return lambda x, axis=None, keepdims=False: fn(x, axis, keepdims)


for _name in ("sum", "max", "min", "mean"):
    register_op(_name, _reduce(getattr(nn, _name)), _RED, P.REDUCTION,
                reference=_reduce(getattr(T, f"{_name}_python")))

for _name in ("sqrt", "exp", "log", "tanh", "sigmoid", "erf", "abs", "negative", "reciprocal",
              "hard_swish", "gelu_tanh"):
    register_op(_name, getattr(nn, _name), _INJ, P.ELEMWISE,
                reference=getattr(T, f"{_name}_python"))

for _name in ("power", "maximum", "minimum"):
    register_op(_name, getattr(nn, _name), _INJ, P.BROADCAST,
                reference=getattr(T, f"{_name}_python"))

register_op("clip", lambda x, a_min=None, a_max=None: nn.clip(x, a_min, a_max), _INJ,
            P.ELEMWISE, reference=lambda x, a_min=None, a_max=None: T.clip_python(x, a_min, a_max))
register_op("hard_sigmoid", lambda x, alpha=0.2, beta=0.5: nn.hard_sigmoid(x, alpha, beta), _INJ,
            P.ELEMWISE,
            reference=lambda x, alpha=0.2, beta=0.5: T.hard_sigmoid_python(x, alpha, beta))
register_op("cast", lambda x, dtype: nn.cast(x, dtype), _INJ, P.ELEMWISE,
            reference=lambda x, dtype: T.cast_python(x, dtype))


def _slice(fn: Callable) -> Callable:
    return lambda x, begin, end, strides=None, axes=None: fn(x, begin, end, strides, axes)


register_op("strided_slice", _slice(nn.strided_slice), _INJ, P.INJECTIVE,
            reference=_slice(T.strided_slice_python))
register_op("take", lambda x, indices, axis=0: nn.take(x, indices, axis), _INJ, P.INJECTIVE,
            reference=lambda x, indices, axis=0: T.take_python(x, indices, axis))


def _adaptive(fn: Callable) -> Callable:
    return lambda data, output_size, pool_type="avg": fn(data, output_size, pool_type)


register_op("adaptive_pool2d", _adaptive(nn.adaptive_pool2d), _RED, P.REDUCTION,
            reference=_adaptive(T.adaptive_pool2d_python))


def _conv_transpose(fn: Callable) -> Callable:
    return lambda data, kernel, stride=1, padding=0, output_padding=0, dilation=1, groups=1: fn(
        data, kernel, stride, padding, output_padding, dilation, groups)


register_op("conv2d_transpose", _conv_transpose(nn.conv2d_transpose_nchw),
            x86.schedule_conv2d_transpose_nchw, P.OUT_FUSABLE,
            reference=_conv_transpose(T.conv2d_transpose_nchw_python))
