"""`custom_op`: the decorator that names a DSL function as an op of PyTorch and of the graph."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import tensorlang as tl

from ..ops import OpPattern
from .eager import run
from .op import CustomOp, ScheduleFn, TemplateFn, make_op
from .template import register_template

_OPS: dict[str, RegisteredOp] = {}


class RegisteredOp:
    """What `custom_op` returns: the op, callable on placeholders (the compute itself, so custom
    ops compose in the DSL), on PyTorch tensors (`torch.ops.<ns>.<name>`, so autograd and
    torch.compile see the op) and on numpy arrays (its eager kernel).

    Attributes:
        op: the CustomOp.
    """

    def __init__(self, op: CustomOp) -> None:
        self.op = op
        self.__doc__ = getattr(op.fn, "__doc__", None)
        self.__name__ = op.name

    @property
    def qualname(self) -> str:
        return self.op.qualname

    def __call__(self, *args: Any, **attrs: Any) -> Any:
        if args and all(isinstance(a, tl.Tensor) for a in args):
            return self.op.fn(*args, **attrs)
        if args and type(args[0]).__module__.startswith("torch") and not attrs:
            import torch

            return getattr(getattr(torch.ops, self.op.namespace), self.op.name)(*args)
        return run(self.op, args, attrs)

    def __repr__(self) -> str:
        return f"<custom_op {self.op.qualname}>"


def custom_op(qualname: str, *, schedule: ScheduleFn | None = None, outputs: int = 1,
              pattern: OpPattern | None = None, grad: RegisteredOp | None = None,
              template: TemplateFn | None = None
              ) -> Callable[[Callable[..., Any]], RegisteredOp]:
    """Decorate a function of placeholders as the op `qualname` ("namespace::name").

    The function takes one `tl.Tensor` per op input (the shapes and dtypes of a call; dims may
    be symbolic) and returns the output tensor, or a tuple of `outputs` of them. The op is
    registered with `torch.library` (when PyTorch is installed): `torch.ops.<ns>.<name>(*tensors)`
    runs it eagerly on CPU tensors, `torch.compile` and `torch.export` trace it (its output shapes
    come from the compute), and `from_torch` / `torch.compile(backend="tensorlang")` import it as
    a graph op that fuses, tunes and builds like any other. `from_onnx(path, custom_ops=...)`
    maps ONNX nodes to it.

    Args:
        qualname: "namespace::name", unique in the process.
        schedule: `schedule(outs) -> tl.Schedule` for the op's kernel (in a graph, `outs` holds
            the one output a node computes); the op then never fuses (OPAQUE) and is not
            auto-scheduled. Default: the graph's schedule for the compute's pattern, and the
            auto-scheduler when the model is tuned.
        outputs: how many tensors the function returns.
        pattern: how the op fuses (default: REDUCTION for a compute with a reduction, else
            INJECTIVE); ELEMWISE or BROADCAST only for a rank-generic compute (`lambda *i`),
            since the layout passes may give such an op blocked (5-D) inputs.
        template: `template(cfg, outs) -> tl.Schedule`, a schedule whose choices are knobs of
            `cfg` (`cfg.define_split`, `cfg.define_knob`, ...): the op is then the autotune
            template "custom/<qualname>", tuned with the model and scheduled by the best
            config of the log (OPAQUE, one output, no `schedule`).
        grad: its gradient for PyTorch's autograd: a custom op of the inputs then the output
            gradients, returning one gradient per input (registered with
            `torch.library.register_autograd`).

    Raises:
        ValueError: a malformed or taken name.
        TypeError: a function without tensor inputs, a schedule that is not callable.
    """

    def register(fn: Callable[..., Any]) -> RegisteredOp:
        op = make_op(qualname, fn, schedule, outputs, pattern, template)
        if qualname in _OPS:
            raise ValueError(f"custom_op: {qualname!r} is already registered")
        if grad is not None and (not isinstance(grad, RegisteredOp) or len(grad.op.inputs) != (
                len(op.inputs) + outputs) or grad.op.outputs != len(op.inputs)):
            raise TypeError(f"custom_op {qualname!r}: grad must be a custom_op of "
                            f"{len(op.inputs) + outputs} tensors (the inputs, then the output "
                            f"gradients) returning {len(op.inputs)}, got {grad!r}")
        if template is not None:
            register_template(op)
        if importlib.util.find_spec("torch") is not None:  # else the op serves from_onnx
            from .torch_library import register_torch_op

            register_torch_op(op, grad)
        _OPS[qualname] = registered = RegisteredOp(op)
        return registered

    return register
