"""Graph ops that move or normalise data beyond the core set: resizing, padding modes, scans,
tiling and broadcasting, gathers and scatters, triangular masks, group/instance norms, sorting
and counting, and a mixture of experts' grouped matrix product; each
registered once with its topi compute, x86 schedule and numpy reference (the pattern of
`ops.py`)."""

from __future__ import annotations

from collections.abc import Callable

from .. import nn, testing, x86
from ..x86.resize import schedule_resize2d
from .ops import OpPattern, register_op

P = OpPattern
T = testing
_INJ = x86.schedule_injective
_RED = x86.schedule_reduce


def _resize(fn: Callable) -> Callable:
    return lambda x, size, method="nearest", coordinate_transformation_mode="half_pixel", \
        nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75, exclude_outside=False, \
        extrapolation_value=0.0, layout="NCHW": fn(x, size, method,
                                                   coordinate_transformation_mode, nearest_mode,
                                                   cubic_coeff_a, exclude_outside,
                                                   extrapolation_value, layout)


def _cumsum(fn: Callable) -> Callable:
    return lambda x, axis, exclusive=False, reverse=False: fn(x, axis, exclusive, reverse)


def _tile(fn: Callable) -> Callable:
    return lambda x, reps: fn(x, reps)


def _broadcast_to(fn: Callable) -> Callable:
    return lambda x, shape: fn(x, shape)


def _gather_elements(fn: Callable) -> Callable:
    return lambda x, indices, axis=0: fn(x, indices, axis)


def _gather_nd(fn: Callable) -> Callable:
    return lambda x, indices, batch_dims=0: fn(x, indices, batch_dims)


def _scatter_nd(fn: Callable) -> Callable:
    return lambda data, indices, updates: fn(data, indices, updates)


def _scatter_elements(fn: Callable) -> Callable:
    return lambda data, indices, updates, axis=0: fn(data, indices, updates, axis)


def _argsort(fn: Callable) -> Callable:
    return lambda x, axis=-1, descending=False, k=None: fn(x, axis, descending, k)


def _histc(fn: Callable) -> Callable:
    return lambda x, bins, low, high: fn(x, bins, low, high)


def _grouped_matmul(fn: Callable) -> Callable:
    return lambda x, weight, offsets: fn(x, weight, offsets)


def _trilu(fn: Callable) -> Callable:
    return lambda x, k=0, upper=True: fn(x, k, upper)


def _group_norm(fn: Callable) -> Callable:
    return lambda x, gamma, beta, num_groups, epsilon=1e-5: fn(x, gamma, beta, num_groups,
                                                                epsilon)


def _instance_norm(fn: Callable) -> Callable:
    return lambda x, gamma, beta, epsilon=1e-5: fn(x, gamma, beta, epsilon)


# name -> (attr adapter, schedule, pattern); the adapter serves the topi compute and the numpy
# reference alike, since topi.testing follows topi.nn's argument order
_OPS = {
    "resize2d": (_resize, schedule_resize2d, P.INJECTIVE),
    "cumsum": (_cumsum, _RED, P.REDUCTION),
    "tile": (_tile, _INJ, P.INJECTIVE),
    "broadcast_to": (_broadcast_to, _INJ, P.INJECTIVE),
    "gather_elements": (_gather_elements, _INJ, P.INJECTIVE),
    "gather_nd": (_gather_nd, _INJ, P.INJECTIVE),
    "scatter_nd": (_scatter_nd, _RED, P.REDUCTION),
    "scatter_elements": (_scatter_elements, _RED, P.REDUCTION),
    "trilu": (_trilu, _INJ, P.INJECTIVE),
    "argsort": (_argsort, _RED, P.REDUCTION),
    "histc": (_histc, _RED, P.REDUCTION),
    "grouped_matmul": (_grouped_matmul, _RED, P.OPAQUE),
    "group_norm": (_group_norm, _RED, P.REDUCTION),
    "instance_norm": (_instance_norm, _RED, P.REDUCTION),
}
for _name, (_adapt, _schedule, _pattern) in _OPS.items():
    register_op(_name, _adapt(getattr(nn, _name)), _schedule, _pattern,
                reference=_adapt(getattr(T, f"{_name}_python")))
