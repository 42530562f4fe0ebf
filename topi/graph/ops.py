"""The graph op registry: every graph op is one topi compute plus its x86 schedule.

A graph node names an op of this registry. The registry is the single source of truth about an
op: its compute (building placeholders of the input shapes and calling it gives the node's output
shape and dtype: shape inference comes from topi itself, never duplicated), its schedule, its
fusion pattern, and, for tunable ops, how to read the autotune task out of the compute.

Adding an op is one `register_op` call, in any module imported by `topi.graph` (or appended to
the "Registrations" section at the end of this file):

    register_op(
        "sum",                                           # the graph op name (Graph.apply)
        lambda x, axis=None, keepdims=False: topi.nn.sum(x, axis, keepdims),
        topi.x86.schedule_reduce,                        # schedule(outs) -> tl.Schedule
        OpPattern.REDUCTION,                             # how it fuses (see OpPattern)
        reference=lambda x, axis=None, keepdims=False: np.sum(x, axis, keepdims=keepdims),
    )

The compute takes the input tensors positionally (all of them as `*xs` for a variadic op such as
concatenate) and the node's attrs as keyword arguments. Attrs are plain values (ints, floats,
strings, bools, None and tuples of them); lists are turned into tuples. A tunable op also passes
`tasks={"<stage tag>": "<template name>"}`: the stage of its compute with that tag records its
tuning-task arguments in `attrs["workload"]` (as the topi convolutions and GEMMs do).
`reference` (optional, but give one) is the numpy version with the compute's signature; the graph
tests run whole graphs through it (`topi.graph.reference.run_reference`).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tensorlang as tl
from tensorlang.arith import const_value

from .. import nn, testing, x86
from ..symbolic import canon


class OpPattern(enum.IntEnum):
    """How an op fuses with its neighbours (TVM's OpPattern, same order of generality).

    ELEMWISE: same shape in and out, each output reads its inputs at the same index.
    BROADCAST: elementwise with numpy broadcasting (add, bias_add, batch_norm).
    INJECTIVE: each output element is one input element moved (reshape, transpose, pad, concat).
    REDUCTION: reduces over some axes (pooling, softmax, layer_norm); an elementwise tail fuses.
    OUT_FUSABLE: a compute-heavy op (conv, dense, matmul) whose elementwise tail is fused into
        its output stage by its schedule, so bias, relu and residual adds cost no extra pass.
    OPAQUE: never fused.
    """

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCTION = 3
    OUT_FUSABLE = 4
    OPAQUE = 5


Compute = Callable[..., tl.Tensor]
ScheduleFn = Callable[[Sequence[tl.Tensor]], tl.Schedule]


@dataclass(frozen=True)
class OpDef:
    """A registered graph op.

    Attributes:
        name: the graph op name.
        compute: `compute(*input_tensors, **attrs) -> tl.Tensor`.
        schedule: the topi.x86 schedule function, `schedule(outs) -> tl.Schedule`.
        pattern: how the op fuses.
        tasks: stage tag -> autotune template name, for tunable ops.
        variadic: takes any number (at least one) of inputs, e.g. concatenate.
        reference: the numpy reference with the compute's signature (arrays for tensors), used
            by `topi.graph.reference` to check whole graphs; None when there is none.
        auto_schedule: whether the auto-scheduler may tune its kernels (False for an op whose
            schedule its author wrote).
        portable: whether a fresh process has the op once it imports topi (False for ops that
            user code registers at run time: their tuning workloads carry them by value).
    """

    name: str
    compute: Compute
    schedule: ScheduleFn
    pattern: OpPattern
    tasks: Mapping[str, str] = field(default_factory=dict)
    variadic: bool = False
    reference: Callable[..., np.ndarray] | None = None
    auto_schedule: bool = True
    portable: bool = True

    @property
    def tunable(self) -> bool:
        return bool(self.tasks)


_REGISTRY: dict[str, OpDef] = {}


def register_op(
    name: str,
    compute: Compute,
    schedule: ScheduleFn,
    pattern: OpPattern,
    tasks: Mapping[str, str] | None = None,
    variadic: bool = False,
    reference: Callable[..., np.ndarray] | None = None,
    auto_schedule: bool = True,
    portable: bool = True,
) -> OpDef:
    """Register the graph op `name` (see the module docstring).

    Raises:
        ValueError: `name` is already registered (ops are registered exactly once).
        TypeError: an argument has the wrong type.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"register_op: name must be an identifier string, got {name!r}")
    if name in _REGISTRY:
        raise ValueError(f"register_op: op {name!r} is already registered")
    if not callable(compute) or not callable(schedule):
        raise TypeError(f"register_op {name!r}: compute and schedule must be callable")
    if not isinstance(pattern, OpPattern):
        raise TypeError(f"register_op {name!r}: pattern must be an OpPattern, got {pattern!r}")
    op = OpDef(name, compute, schedule, pattern, dict(tasks or {}), variadic, reference,
               auto_schedule, portable)
    _REGISTRY[name] = op
    return op


def get_op(name: str) -> OpDef:
    """The registered op called `name`.

    Raises:
        ValueError: no op has that name (the message lists the registered ones).
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise ValueError(f"unknown graph op {name!r} (registered: {known})") from None


def registered_ops() -> list[str]:
    """The names of all registered ops, sorted."""
    return sorted(_REGISTRY)


def freeze_attr(value: Any, where: str) -> Any:
    """An attr value as a hashable plain value (lists become tuples, numpy scalars Python ones).

    Raises:
        TypeError: the value is not a plain value.
    """
    if isinstance(value, (bool, int, float, str, type(None))):
        return value
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    if isinstance(value, (tuple, list)):
        return tuple(freeze_attr(v, where) for v in value)
    if isinstance(value, tl.Expr):  # a symbolic dim (a reshape's newshape entry)
        return canon(value)
    raise TypeError(
        f"{where}: attrs must be ints, floats, strings, bools, None or tuples of them, "
        f"got {type(value).__name__} {value!r}"
    )


TensorSpec = tuple[tuple[int, ...], str]


@functools.lru_cache(maxsize=4096)
def _infer(name: str, specs: tuple[TensorSpec, ...], attrs: tuple) -> TensorSpec:
    tensors = [tl.placeholder(shape, dtype, name=f"in{k}") for k, (shape, dtype) in
               enumerate(specs)]
    out = call_compute(get_op(name), tensors, dict(attrs))
    return tensor_spec(out, name)


def tensor_spec(out: tl.Tensor, what: str) -> TensorSpec:
    """The static (shape, dtype) of a compute's output tensor."""
    shape = []
    for d in out.shape:
        value = d if isinstance(d, int) else const_value(d)
        shape.append(canon(d) if value is None else int(value))  # symbolic dims, canonical
    return tuple(shape), out.dtype


def call_compute(op: OpDef, tensors: Sequence[tl.Tensor], attrs: Mapping[str, Any]) -> tl.Tensor:
    """Run `op`'s compute on `tensors`; a result that is not one tensor is an error."""
    out = op.compute(*tensors, **attrs)
    if not isinstance(out, tl.Tensor):
        raise TypeError(
            f"graph op {op.name!r}: compute returned {type(out).__name__}, not a Tensor")
    return out


def infer_output(name: str, specs: Sequence[TensorSpec], attrs: Mapping[str, Any]) -> TensorSpec:
    """The output (shape, dtype) of op `name` on inputs of `specs` with `attrs`, from topi's
    compute (cached). Errors of the compute (bad shapes, bad attrs) propagate as they are."""
    op = get_op(name)
    if not op.variadic and not specs:
        raise ValueError(f"graph op {name!r} needs inputs")
    frozen = tuple(sorted(attrs.items()))
    return _infer(name, tuple((tuple(s), str(d)) for s, d in specs), frozen)


def find_workload(out: tl.Tensor, tasks: Mapping[str, str]) -> tuple[str, tuple] | None:
    """(template name, task args) of the first stage under `out` whose tag is a key of `tasks`
    and that records a workload, or None (a shape the template cannot take)."""
    seen: set[int] = set()
    stack = [out.op]
    while stack:
        op = stack.pop()
        if id(op) in seen or not isinstance(op, tl.ComputeOp):
            continue
        seen.add(id(op))
        if op.tag in tasks and op.attrs.get("workload") is not None:
            return tasks[op.tag], tuple(op.attrs["workload"])
        stack.extend(t.op for t in op.input_tensors)
    return None


# -- Registrations ---------------------------------------------------------------------------------
# Each adapter names the op's attrs (with defaults) once and serves the topi compute and the numpy
# reference alike, since topi.testing follows topi.nn's argument order.

P = OpPattern
_INJ = x86.schedule_injective
_RED = x86.schedule_reduce
T = testing


def _conv(fn: Callable) -> Callable:
    return lambda data, kernel, stride=1, padding=0, dilation=1: fn(data, kernel, stride,
                                                                    padding, dilation)


def _group_conv(fn: Callable) -> Callable:
    return lambda data, kernel, stride=1, padding=0, dilation=1, groups=1: fn(
        data, kernel, stride, padding, dilation, groups)


def _binary(fn: Callable) -> Callable:
    return lambda a, b: fn(a, b)


def _matmul(fn: Callable) -> Callable:
    return lambda a, b, transpose_a=False, transpose_b=False: fn(a, b, transpose_a, transpose_b)


def _axis(fn: Callable, default: int) -> Callable:
    return lambda x, axis=default: fn(x, axis)


def _layer_norm(fn: Callable) -> Callable:
    return lambda x, gamma, beta, axis=-1, epsilon=1e-5: fn(x, gamma, beta, axis, epsilon)


def _batch_norm(fn: Callable) -> Callable:
    return lambda data, gamma, beta, mean, var, epsilon=1e-5, axis=1: fn(
        data, gamma, beta, mean, var, epsilon, axis)


def _max_pool(fn: Callable) -> Callable:
    return lambda data, kernel, stride=1, padding=0, dilation=1, ceil_mode=False, \
        layout="NCHW": fn(data, kernel, stride, padding, dilation, ceil_mode, layout)


def _avg_pool(fn: Callable) -> Callable:
    return lambda data, kernel, stride=1, padding=0, dilation=1, ceil_mode=False, \
        count_include_pad=True, layout="NCHW": fn(data, kernel, stride, padding, dilation,
                                                  ceil_mode, layout, count_include_pad)


def _pad(fn: Callable) -> Callable:
    return lambda data, pad_before, pad_after=None, pad_value=0.0, mode="constant": fn(
        data, pad_before, pad_after, pad_value, mode=mode)


register_op("conv2d", _conv(nn.conv2d_nchw), x86.schedule_conv2d_nchw, P.OUT_FUSABLE,
            tasks={"conv2d_nchw": "conv2d_nchw.x86"}, reference=_conv(T.conv2d_nchw_python))
register_op("depthwise_conv2d", _conv(nn.depthwise_conv2d_nchw),
            x86.schedule_depthwise_conv2d_nchw, P.OUT_FUSABLE,
            tasks={"depthwise_conv2d_nchw": "depthwise_conv2d_nchw.x86"},
            reference=_conv(T.depthwise_conv2d_nchw_python))
# The NCHW[x]c forms that the alter_layout pass puts in (weights packed by the pass).
register_op("conv2d_NCHWc", _conv(nn.conv2d_NCHWc), x86.schedule_conv2d_NCHWc, P.OUT_FUSABLE,
            tasks={"conv2d_NCHWc": "conv2d_NCHWc.x86"}, reference=_conv(T.conv2d_NCHWc_python))
register_op("depthwise_conv2d_NCHWc", _conv(nn.depthwise_conv2d_NCHWc),
            x86.schedule_depthwise_conv2d_NCHWc, P.OUT_FUSABLE,
            tasks={"depthwise_conv2d_NCHWc": "depthwise_conv2d_NCHWc.x86"},
            reference=_conv(T.depthwise_conv2d_NCHWc_python))
register_op("group_conv2d_NCHWc", _group_conv(nn.group_conv2d_NCHWc),
            x86.schedule_group_conv2d_NCHWc, P.OUT_FUSABLE,
            tasks={"group_conv2d_NCHWc": "group_conv2d_NCHWc.x86"},
            reference=_group_conv(T.group_conv2d_NCHWc_python))
register_op("group_conv2d", _group_conv(nn.group_conv2d_nchw), x86.schedule_group_conv2d_nchw,
            P.OUT_FUSABLE, reference=_group_conv(T.group_conv2d_nchw_python))
register_op("conv2d_nhwc", _conv(nn.conv2d_nhwc), x86.schedule_conv2d_nhwc, P.OUT_FUSABLE,
            tasks={"conv2d_nhwc": "conv2d_nhwc.x86"}, reference=_conv(T.conv2d_nhwc_python))
register_op("dense", _binary(nn.dense), x86.schedule_dense, P.OUT_FUSABLE,
            tasks={"dense": "dense.x86"}, reference=_binary(T.dense_python))
register_op("matmul", _matmul(nn.matmul), x86.schedule_matmul, P.OUT_FUSABLE,
            tasks={"matmul": "matmul.x86"},
            reference=_matmul(T.matmul_python))
register_op("batch_matmul", _binary(nn.batch_matmul), x86.schedule_batch_matmul, P.OUT_FUSABLE,
            tasks={"batch_matmul": "batch_matmul.x86"}, reference=_binary(T.batch_matmul_python))

for _name in ("add", "subtract", "multiply", "divide"):
    register_op(_name, getattr(nn, _name), _INJ, P.BROADCAST,
                reference=getattr(T, f"{_name}_python"))
register_op("relu", nn.relu, _INJ, P.ELEMWISE, reference=T.relu_python)
register_op("leaky_relu", lambda x, alpha=0.01: nn.leaky_relu(x, alpha), _INJ, P.ELEMWISE,
            reference=lambda x, alpha=0.01: T.leaky_relu_python(x, alpha))
register_op("gelu", nn.gelu, _INJ, P.ELEMWISE, reference=T.gelu_python)
register_op("bias_add", lambda data, bias, axis=1: nn.bias_add(data, bias, axis), _INJ,
            P.BROADCAST, reference=lambda data, bias, axis=1: T.bias_add_python(data, bias, axis))
register_op("batch_norm", _batch_norm(nn.batch_norm_inference), _INJ, P.BROADCAST,
            reference=_batch_norm(T.batch_norm_inference_python))

register_op("softmax", _axis(nn.softmax, -1), _RED, P.REDUCTION,
            reference=_axis(T.softmax_python, -1))
register_op("log_softmax", _axis(nn.log_softmax, -1), _RED, P.REDUCTION,
            reference=_axis(T.log_softmax_python, -1))
register_op("layer_norm", _layer_norm(nn.layer_norm), _RED, P.REDUCTION,
            reference=_layer_norm(T.layer_norm_python))
register_op("max_pool2d", _max_pool(nn.max_pool2d), _RED, P.REDUCTION,
            reference=_max_pool(T.max_pool2d_python))
register_op("avg_pool2d", _avg_pool(nn.avg_pool2d), _RED, P.REDUCTION,
            reference=_avg_pool(T.avg_pool2d_python))
register_op("global_avg_pool2d", nn.global_avg_pool2d, _RED, P.REDUCTION,
            reference=T.global_avg_pool2d_python)

register_op("reshape", lambda data, newshape: nn.reshape(data, newshape), _INJ, P.INJECTIVE,
            reference=lambda data, newshape: T.reshape_python(data, newshape))
register_op("transpose", lambda x, axes=None: nn.transpose(x, axes), _INJ, P.INJECTIVE,
            reference=lambda x, axes=None: T.transpose_python(x, axes))
register_op("concatenate", lambda *xs, axis=0: nn.concatenate(list(xs), axis), _INJ,
            P.INJECTIVE, variadic=True,
            reference=lambda *xs, axis=0: T.concatenate_python(list(xs), axis))
register_op("pad", _pad(nn.pad), _INJ, P.INJECTIVE, reference=_pad(T.pad_python))
register_op("layout_transform",
            lambda data, src_layout, dst_layout: nn.layout_transform(data, src_layout, dst_layout),
            _INJ, P.INJECTIVE, reference=lambda data, src_layout, dst_layout:
            T.layout_transform_python(data, src_layout, dst_layout))
