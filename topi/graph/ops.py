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
    )

The compute takes the input tensors positionally (all of them as `*xs` for a variadic op such as
concatenate) and the node's attrs as keyword arguments. Attrs are plain values (ints, floats,
strings, bools, None and tuples of them); lists are turned into tuples. A tunable op also passes
`tasks={"<stage tag>": "<template name>"}`: the stage of its compute with that tag records its
tuning-task arguments in `attrs["workload"]` (as the topi convolutions and GEMMs do).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tensorlang as tl
from tensorlang.arith import const_value

from .. import nn, x86


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
    """

    name: str
    compute: Compute
    schedule: ScheduleFn
    pattern: OpPattern
    tasks: Mapping[str, str] = field(default_factory=dict)
    variadic: bool = False

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
    op = OpDef(name, compute, schedule, pattern, dict(tasks or {}), variadic)
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
        if value is None:
            raise ValueError(f"{what}: the output shape {out.shape} is not static")
        shape.append(int(value))
    return tuple(shape), out.dtype


def call_compute(op: OpDef, tensors: Sequence[tl.Tensor], attrs: Mapping[str, Any]) -> tl.Tensor:
    """Run `op`'s compute on `tensors`; a result that is not one tensor is an error."""
    out = op.compute(*tensors, **attrs)
    if not isinstance(out, tl.Tensor):
        raise TypeError(f"graph op {op.name!r}: compute returned {type(out).__name__}, not a Tensor")
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

P = OpPattern
_INJ = x86.schedule_injective
_RED = x86.schedule_reduce


def _conv2d(data, kernel, stride=1, padding=0, dilation=1):
    return nn.conv2d_nchw(data, kernel, stride, padding, dilation)


def _depthwise_conv2d(data, kernel, stride=1, padding=0, dilation=1):
    return nn.depthwise_conv2d_nchw(data, kernel, stride, padding, dilation)


def _group_conv2d(data, kernel, stride=1, padding=0, dilation=1, groups=1):
    return nn.group_conv2d_nchw(data, kernel, stride, padding, dilation, groups)


def _conv2d_nhwc(data, kernel, stride=1, padding=0, dilation=1):
    return nn.conv2d_nhwc(data, kernel, stride, padding, dilation)


register_op("conv2d", _conv2d, x86.schedule_conv2d_nchw, P.OUT_FUSABLE,
            tasks={"conv2d_nchw": "conv2d_nchw.x86"})
register_op("depthwise_conv2d", _depthwise_conv2d, x86.schedule_depthwise_conv2d_nchw,
            P.OUT_FUSABLE, tasks={"depthwise_conv2d_nchw": "depthwise_conv2d_nchw.x86"})
register_op("group_conv2d", _group_conv2d, x86.schedule_group_conv2d_nchw, P.OUT_FUSABLE)
register_op("conv2d_nhwc", _conv2d_nhwc, x86.schedule_conv2d_nhwc, P.OUT_FUSABLE,
            tasks={"conv2d_nhwc": "conv2d_nhwc.x86"})
register_op("dense", lambda data, weight: nn.dense(data, weight), x86.schedule_dense,
            P.OUT_FUSABLE, tasks={"dense": "dense.x86"})
_GEMM_TASKS = {"matmul": "matmul.x86", "batch_matmul": "batch_matmul.x86"}
register_op("matmul", lambda a, b, transpose_a=False, transpose_b=False:
            nn.matmul(a, b, transpose_a, transpose_b),
            x86.schedule_matmul, P.OUT_FUSABLE, tasks=_GEMM_TASKS)
register_op("batch_matmul", lambda x, y: nn.batch_matmul(x, y), x86.schedule_batch_matmul,
            P.OUT_FUSABLE, tasks={"batch_matmul": "batch_matmul.x86"})

register_op("add", nn.add, _INJ, P.BROADCAST)
register_op("subtract", nn.subtract, _INJ, P.BROADCAST)
register_op("multiply", nn.multiply, _INJ, P.BROADCAST)
register_op("divide", nn.divide, _INJ, P.BROADCAST)
register_op("relu", nn.relu, _INJ, P.ELEMWISE)
register_op("leaky_relu", lambda x, alpha=0.01: nn.leaky_relu(x, alpha), _INJ, P.ELEMWISE)
register_op("gelu", nn.gelu, _INJ, P.ELEMWISE)
register_op("bias_add", lambda data, bias, axis=1: nn.bias_add(data, bias, axis), _INJ,
            P.BROADCAST)
register_op("batch_norm", lambda data, gamma, beta, mean, var, epsilon=1e-5, axis=1:
            nn.batch_norm_inference(data, gamma, beta, mean, var, epsilon, axis),
            _INJ, P.BROADCAST)

register_op("softmax", lambda x, axis=-1: nn.softmax(x, axis), _RED, P.REDUCTION)
register_op("log_softmax", lambda x, axis=-1: nn.log_softmax(x, axis), _RED, P.REDUCTION)
register_op("layer_norm", lambda x, gamma, beta, axis=-1, epsilon=1e-5:
            nn.layer_norm(x, gamma, beta, axis, epsilon), _RED, P.REDUCTION)
register_op("max_pool2d", lambda data, kernel, stride=1, padding=0, dilation=1, ceil_mode=False:
            nn.max_pool2d(data, kernel, stride, padding, dilation, ceil_mode), _RED, P.REDUCTION)
register_op("avg_pool2d", lambda data, kernel, stride=1, padding=0, dilation=1, ceil_mode=False,
            count_include_pad=True: nn.avg_pool2d(data, kernel, stride, padding, dilation,
                                                  ceil_mode, count_include_pad=count_include_pad),
            _RED, P.REDUCTION)
register_op("global_avg_pool2d", nn.global_avg_pool2d, _RED, P.REDUCTION)

register_op("reshape", lambda data, newshape: nn.reshape(data, newshape), _INJ, P.INJECTIVE)
register_op("transpose", lambda x, axes=None: nn.transpose(x, axes), _INJ, P.INJECTIVE)
register_op("concatenate", lambda *xs, axis=0: nn.concatenate(list(xs), axis), _INJ,
            P.INJECTIVE, variadic=True)
register_op("pad", lambda data, pad_before, pad_after=None, pad_value=0.0:
            nn.pad(data, pad_before, pad_after, pad_value), _INJ, P.INJECTIVE)
