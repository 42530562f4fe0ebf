"""How a schedule function finds its config: the tuned one of the current
`autotune.apply_history_best` context for the op's workload, else the fallback config."""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import tensorlang as tl
from autotune import ConfigEntity, FallbackConfig, query_config

from .common import as_tensor_list, static_extent, traverse


#: task name -> the config that ops of symbolic shape of that task take (see `symbolic_configs`).
_SYMBOLIC: contextvars.ContextVar[Mapping[str, ConfigEntity]] = contextvars.ContextVar(
    "topi_symbolic_configs", default={})


@contextlib.contextmanager
def symbolic_configs(configs: Mapping[str, ConfigEntity]) -> Iterator[None]:
    """Within: an op of symbolic shape whose task is a key of `configs` is scheduled with that
    config (a size bucket's tuned config, applied to the kernel that keeps symbolic extents)."""
    token = _SYMBOLIC.set(dict(configs))
    try:
        yield
    finally:
        _SYMBOLIC.reset(token)


def config_for(task_name: str, op: tl.ComputeOp) -> ConfigEntity | FallbackConfig:
    """The config to schedule `op` with: the best record of its workload when one is active.

    Ops with symbolic shapes record no workload: they get the config of `symbolic_configs`
    for their task, else the fallback config.
    """
    workload = op.attrs.get("workload")
    if workload is None:
        found = _SYMBOLIC.get().get(task_name)
        return found if found is not None else FallbackConfig()
    return query_config(task_name, workload)


ScheduleWith = Callable[[Any, tl.Schedule, tl.Tensor, tl.Tensor], None]


def schedule_tagged(
    outs: tl.Tensor | Sequence[tl.Tensor], tasks: Mapping[str, str], schedule_with: ScheduleWith
) -> tl.Schedule:
    """A schedule of `outs` in which every op whose tag is a key of `tasks` is scheduled by
    `schedule_with(cfg, s, op_output, outs[0])`, with the config of the task `tasks[tag]`;
    injective producers and consumers get the generic treatment of `traverse`."""
    outs = as_tensor_list(outs)
    s = tl.create_schedule([t.op for t in outs])
    found: list[tl.ComputeOp] = []
    traverse(s, outs, lambda op: found.append(op) if op.tag in tasks else None)
    for op in found:
        schedule_with(config_for(tasks[op.tag], op), s, op.output(0), outs[0])
    return s


def template_schedule(cfg: Any, out: tl.Tensor, schedule_with: ScheduleWith) -> tl.Schedule:
    """The schedule a tunable template returns: `out`'s stage scheduled with `cfg`."""
    s = tl.create_schedule(out.op)
    traverse(s, [out], lambda op: None)
    schedule_with(cfg, s, out, out)
    return s


def conv_template(cfg: Any, conv: Callable[..., tl.Tensor], schedule_with: ScheduleWith,
                  data_shape: Sequence[int], kernel_shape: Sequence[int], stride: Any,
                  padding: Any, dilation: Any, dtype: str,
                  channel_axis: int | tuple[int, ...], products: int | None = None) -> tuple:
    """The body of a convolution template: `conv(data, kernel, stride, padding, dilation,
    dtype)` scheduled with `cfg`, and its flop count (declared, since a blocked layout's padded
    lanes would inflate a count of the computes). Each output point sums `products` products
    (by default kernel size / output channels, whatever the layout): 2 flop each.
    `channel_axis` is the output's channel axis, or the axes whose extents multiply to the
    channel count (blocks and lanes of NCHW[x]c)."""
    data = tl.placeholder(data_shape, dtype, name="data")
    kernel = tl.placeholder(kernel_shape, dtype, name="kernel")
    out = conv(data, kernel, stride, padding, dilation, dtype)
    s = template_schedule(cfg, out, schedule_with)
    points = [static_extent(a) for a in out.op.axis]
    axes = channel_axis if isinstance(channel_axis, tuple) else (channel_axis,)
    channels = math.prod(points[a] for a in axes)
    if products is None:
        products = math.prod(kernel_shape) // channels
    cfg.add_flop(2 * math.prod(points) * products)
    return s, [data, kernel, out]
