"""Graph ops of elementwise math beyond the core set: comparisons and logic (bool results),
`where`, rounding and remainders, and the activations that real models use; each registered once
with its topi compute, x86 schedule and numpy reference (the pattern of `ops.py`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import nn, testing, x86
from .ops import OpPattern, register_op

P = OpPattern
T = testing
_INJ = x86.schedule_injective
_RED = x86.schedule_reduce

for _name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
              "logical_and", "logical_or", "logical_xor", "where", "mod", "fmod",
              "floor_divide", "trunc_divide", "prelu"):
    register_op(_name, getattr(nn, _name), _INJ, P.BROADCAST,
                reference=getattr(T, f"{_name}_python"))

for _name in ("logical_not", "isnan", "isinf", "sign", "floor", "ceil", "round", "trunc",
              "mish", "silu", "softsign", "sin", "cos", "log1p", "expm1"):
    register_op(_name, getattr(nn, _name), _INJ, P.ELEMWISE,
                reference=getattr(T, f"{_name}_python"))


def _alpha(fn: Callable) -> Callable:
    return lambda x, alpha=1.0: fn(x, alpha)


def _selu(fn: Callable) -> Callable:
    return lambda x, alpha=1.6732632423543772, gamma=1.0507009873554805: fn(x, alpha, gamma)


def _softplus(fn: Callable) -> Callable:
    return lambda x, beta=1.0, threshold=20.0: fn(x, beta, threshold)


for _name, _attrs in (("elu", _alpha), ("celu", _alpha), ("selu", _selu),
                      ("softplus", _softplus)):
    register_op(_name, _attrs(getattr(nn, _name)), _INJ, P.ELEMWISE,
                reference=_attrs(getattr(T, f"{_name}_python")))


def _reduce(fn: Callable) -> Callable:
    return lambda x, axis=None, keepdims=False: fn(x, axis, keepdims)


for _name in ("prod", "any", "all"):
    register_op(_name, _reduce(getattr(nn, _name)), _RED, P.REDUCTION,
                reference=_reduce(getattr(T, f"{_name}_python")))


def _int64_index(fn: Callable, cast: Callable) -> Callable:
    """argmax/argmin as the frontends want them: int64 indices (topi's are int32)."""
    return lambda x, axis=None, keepdims=False: cast(fn(x, axis, keepdims), "int64")


for _name in ("argmax", "argmin"):
    register_op(_name, _int64_index(getattr(nn, _name), nn.cast), _RED, P.REDUCTION,
                reference=_int64_index(getattr(T, f"{_name}_python"), np.asarray))
