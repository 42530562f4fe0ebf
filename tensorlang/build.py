"""`tl.build`: lower a schedule (if needed) and compile it into a callable `Module`.

The last layer of the data flow, joining lowering and the runtime.
"""

from __future__ import annotations

from collections.abc import Sequence

from .codegen.target import Target, as_target
from .ir import IRModule, PrimFunc
from .lower import lower
from .runtime import Module, build_module
from .schedule import Schedule
from .tensor import Tensor


def build(
    s_or_module: Schedule | IRModule | PrimFunc,
    args: Sequence[Tensor] | None = None,
    target: str | Target | None = None,
    name: str = "main",
) -> Module:
    """Compile a schedule (with its `args`), a lowered IRModule or a PrimFunc for `target`.

    Without a target it compiles for the current one (`with tl.Target(...):`, else the host);
    an explicit target wins over the scope.

    Returns:
        A `Module`: call it with arrays for the args, in order; outputs are written in place.
    """
    if isinstance(s_or_module, Schedule):
        if args is None:
            raise TypeError("build(schedule, args): args (the tensors, in call order) are required")
        with as_target(target):  # long vectorized loops are chunked by the target's width
            func = lower(s_or_module, args, name).main
    elif isinstance(s_or_module, IRModule):
        func = s_or_module.main
    elif isinstance(s_or_module, PrimFunc):
        func = s_or_module
    else:
        raise TypeError(
            f"build expects a Schedule, an IRModule or a PrimFunc, got {type(s_or_module).__name__}"
        )
    return build_module(func, target)
