"""A custom op's template: its author's schedule with knobs, as an autotune template.

The template "custom/<namespace>::<name>" takes the op's input specs, attrs and kernel
fingerprint (JSON values) and returns the op's compute scheduled by `template(cfg, outs)`.
In a graph the op's output stage carries the tag `TAG` and those arguments as its workload, so
`extract_tasks` lists the template task, `tune` tunes it (the workers get the template by value)
and `build` schedules the node with the best config of the log, as for topi's convolutions.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import autotune
import tensorlang as tl
from tensorlang.arith import const_value

from ...x86.config import config_for
from .op import CustomOp, Spec, fingerprint_of

#: The tag of a template op's output stage.
TAG = "custom_template"


def register_template(op: CustomOp) -> None:
    """Register `op`'s autotune template (it must have one)."""

    def template(specs: Sequence[Any], attrs: Sequence[Any], fingerprint: str) -> tuple:
        placeholders, outs = op.trace([(tuple(shape), dtype) for shape, dtype in specs],
                                      {k: v for k, v in attrs})
        return op.default_schedule(outs, autotune.get_config()), [*placeholders, *outs]

    template.__name__ = op.name
    autotune.template(op.template_name)(template)


def workload(specs: Sequence[tuple[Sequence[Any], str]], attrs: Mapping[str, Any],
             fingerprint: str) -> tuple | None:
    """The template's arguments for inputs of `specs`, or None for symbolic shapes."""
    shapes = [[d if isinstance(d, int) else const_value(d) for d in shape] for shape, _ in specs]
    if any(d is None for shape in shapes for d in shape):
        return None
    return (tuple((tuple(int(d) for d in shape), str(dtype))
                  for shape, (_, dtype) in zip(shapes, specs)),
            tuple((k, v) for k, v in sorted(attrs.items())), fingerprint)


def tagged(out: tl.Tensor, specs: Sequence[tuple[Sequence[Any], str]], attrs: Mapping[str, Any],
           fingerprint: str) -> tl.Tensor:
    """`out` with its stage tagged `TAG`, recording the template's workload (when static)."""
    op = out.op
    found = workload(specs, attrs, fingerprint)
    extra = {} if found is None else {"workload": found}
    return tl.ComputeOp(op.name, TAG, {**op.attrs, **extra}, op.axis, op.body).output(0)


def template_config(op: CustomOp, stage: tl.Operation) -> Any:
    """The config that schedules `op`'s tagged `stage`: the tuned one of the active
    `apply_history_best` context, else the fallback config."""
    return config_for(op.template_name, stage)


def call_config(op: CustomOp, specs: Sequence[Spec], attrs: Mapping[str, Any]) -> Any:
    """The config of an eager call: the tuned one of the active `apply_history_best` context for
    the workload a graph node of these inputs has, else the fallback config (silently: eager
    calls are untuned unless asked otherwise)."""
    args = workload(specs, attrs, fingerprint_of(op, tuple(specs), tuple(sorted(attrs.items()))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return autotune.query_config(op.template_name, args)
