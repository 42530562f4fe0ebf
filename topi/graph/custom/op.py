"""`CustomOp`: a function of placeholders that returns its output tensor(s), named
"namespace::name" (as PyTorch names its ops), and what every frontend asks of it.

A `CustomOp` traces its function on placeholders of the shapes and dtypes of a call
(`trace`), schedules the result with the schedule its author gave, the template its author gave
(a schedule with knobs, tuned as the autotune template "custom/<namespace>::<name>", see
`template.py`) or, by default, the graph's schedule for the compute's pattern
(`default_schedule`), and becomes one graph op the first time a graph uses it
(`graph_op.graph_op_name`).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tensorlang as tl
from autotune import FallbackConfig

from ... import x86
from ..ops import OpPattern
from .analysis import dims, infer_pattern, kernel_fingerprint

Spec = tuple[tuple[Any, ...], str]
ScheduleFn = Callable[[Sequence[tl.Tensor]], tl.Schedule]
TemplateFn = Callable[[Any, Sequence[tl.Tensor]], tl.Schedule]

_NAME = re.compile(r"^([A-Za-z_]\w*)::([A-Za-z_]\w*)$")


@dataclass(frozen=True, eq=False)
class CustomOp:
    """A kernel written in the DSL, callable as an op of PyTorch and of the graph frontends.

    Attributes:
        qualname: "namespace::name".
        fn: `fn(*placeholders, **attrs) -> tl.Tensor | tuple[tl.Tensor, ...]`.
        inputs: the names of its tensor inputs (fn's positional parameters without defaults).
        outputs: how many tensors fn returns.
        schedule: `schedule(outs) -> tl.Schedule` from its author, or None (the default).
        pattern: how it fuses, or None to infer it from the compute (`analysis.infer_pattern`).
        template: `template(cfg, outs) -> tl.Schedule` from its author, a schedule whose choices
            are knobs of `cfg` (`define_split`, `define_knob`, ...), or None.
    """

    qualname: str
    fn: Callable[..., Any]
    inputs: tuple[str, ...]
    outputs: int
    schedule: ScheduleFn | None
    pattern: OpPattern | None
    template: TemplateFn | None = None

    @property
    def namespace(self) -> str:
        return self.qualname.split("::")[0]

    @property
    def name(self) -> str:
        return self.qualname.split("::")[1]

    def trace(self, specs: Sequence[Spec], attrs: Mapping[str, Any] | None = None
              ) -> tuple[list[tl.Tensor], list[tl.Tensor]]:
        """(input placeholders, output tensors) of fn on inputs of `specs` ((shape, dtype) each;
        dims may be symbolic)."""
        self.check_count(len(specs))
        placeholders = [tl.placeholder(tuple(shape), dtype, name=name)
                        for name, (shape, dtype) in zip(self.inputs, specs)]
        return placeholders, self.apply(placeholders, attrs)

    def check_count(self, given: int) -> None:
        """Raise TypeError unless `given` is the op's number of tensor inputs."""
        if given != len(self.inputs):
            raise TypeError(f"{self.qualname} takes {len(self.inputs)} tensor(s) "
                            f"({', '.join(self.inputs)}), got {given}")

    def apply(self, tensors: Sequence[tl.Tensor], attrs: Mapping[str, Any] | None = None
              ) -> list[tl.Tensor]:
        """fn's output tensors on `tensors`; an error of the compute (inputs of ranks or dtypes
        it cannot take) is re-raised naming the op and its inputs' shapes."""
        try:
            return self.as_outputs(self.fn(*tensors, **(attrs or {})))
        except (TypeError, ValueError, IndexError, tl.ScheduleError) as err:
            shown = ", ".join(f"{n}: {t.dtype}{list(dims(t))}"
                              for n, t in zip(self.inputs, tensors))
            kind = ValueError if isinstance(err, IndexError) else type(err)
            raise kind(f"{self.qualname}({shown}): {err}") from err

    def as_outputs(self, result: Any) -> list[tl.Tensor]:
        """fn's result as a list of `outputs` tensors (TypeError otherwise)."""
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(outs) != self.outputs or not all(isinstance(t, tl.Tensor) for t in outs):
            kinds = [type(t).__name__ for t in outs]
            raise TypeError(f"{self.qualname}: the function must return {self.outputs} "
                            f"tl.Tensor(s) (outputs={self.outputs}), got {kinds}")
        return outs

    def pattern_of(self, outs: Sequence[tl.Tensor]) -> OpPattern:
        """Its fusion pattern: OPAQUE under its author's schedule or template (they know only
        the op's own stages), else the one given, else the compute's."""
        if self.schedule is not None or self.template is not None:
            return OpPattern.OPAQUE
        return self.pattern if self.pattern is not None else infer_pattern(outs)

    @property
    def template_name(self) -> str:
        """The name of its autotune template (when it has one)."""
        return f"custom/{self.qualname}"

    def default_schedule(self, outs: Sequence[tl.Tensor], cfg: Any = None) -> tl.Schedule:
        """Its author's schedule of `outs`, its template's with `cfg` (default: the fallback
        config), or the graph's schedule for its pattern."""
        if self.schedule is not None or self.template is not None:
            s = self.schedule(list(outs)) if self.schedule is not None else self.template(
                cfg if cfg is not None else FallbackConfig(), list(outs))
            if not isinstance(s, tl.Schedule):
                raise TypeError(f"{self.qualname}: the schedule function returned "
                                f"{type(s).__name__}, not a tl.Schedule")
            return s
        if self.pattern_of(outs) is OpPattern.REDUCTION:
            return x86.schedule_reduce(list(outs))
        return x86.schedule_injective(list(outs))


def tensor_inputs(fn: Callable[..., Any], what: str) -> tuple[str, ...]:
    """The names of fn's tensor inputs: its positional parameters without defaults."""
    if not callable(fn):
        raise TypeError(f"{what}: expected a function of placeholders, got {type(fn).__name__}")
    params = inspect.signature(fn).parameters.values()
    names = tuple(p.name for p in params if p.default is p.empty and p.kind in (
        p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    if not names:
        raise TypeError(f"{what}: the function takes no tensor inputs (one positional "
                        f"parameter per input)")
    return names


@functools.lru_cache(maxsize=1024)
def fingerprint_of(op: CustomOp, specs: tuple[Spec, ...], attrs: tuple) -> str:
    """The fingerprint of `op`'s kernel on inputs of `specs` with `attrs` (sorted items) under
    its default schedule (`analysis.kernel_fingerprint`)."""
    placeholders, outs = op.trace(specs, dict(attrs))
    return kernel_fingerprint(op.default_schedule(outs), [*placeholders, *outs])


def make_op(qualname: str, fn: Callable[..., Any], schedule: ScheduleFn | None = None,
            outputs: int = 1, pattern: OpPattern | None = None,
            template: TemplateFn | None = None) -> CustomOp:
    """A CustomOp, checked (not registered anywhere)."""
    if not isinstance(qualname, str) or not _NAME.match(qualname):
        raise ValueError(f"custom_op: the name must be 'namespace::name' (identifiers), "
                         f"got {qualname!r}")
    if schedule is not None and not callable(schedule):
        raise TypeError(f"custom_op {qualname!r}: schedule must be a function of the output "
                        f"tensors, got {type(schedule).__name__}")
    if isinstance(outputs, bool) or not isinstance(outputs, int) or outputs < 1:
        raise ValueError(f"custom_op {qualname!r}: outputs must be a positive int, "
                         f"got {outputs!r}")
    if template is not None and (not callable(template) or schedule is not None or outputs != 1):
        raise TypeError(f"custom_op {qualname!r}: template must be a function (cfg, outs) of an "
                        f"op with one output and no schedule, got {template!r}")
    if pattern is not None and not isinstance(pattern, OpPattern):
        raise TypeError(f"custom_op {qualname!r}: pattern must be an OpPattern, got {pattern!r}")
    return CustomOp(qualname, fn, tensor_inputs(fn, f"custom_op {qualname!r}"), outputs,
                    schedule, pattern, template)
