"""A custom op registered with `torch.library`: eager kernel, fake kernel, frontend converter.

`torch.ops.<ns>.<name>` runs the op's eager kernel (`eager.run`) on CPU tensors, under every
backend that treats it as opaque (eager PyTorch, inductor). Its fake kernel gives the output
shapes for `torch.compile` and `torch.export` without running it: the op's compute traced once
per input ranks and dtypes on placeholders of symbolic dims, whose output shape expressions are
evaluated on the sizes of the call (sym-ints included, so dynamic shapes stay dynamic). The
`from_torch` converter (`topi.graph.torch.register_converter`) makes the call a graph op.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch

import tensorlang as tl
from tensorlang.expr import Binary, BinaryOp, Cast, Const, Var

from ..torch import register_converter
from .eager import run
from .graph_op import apply
from .op import CustomOp

_LIBRARIES: list[torch.library.Library] = []  # a library's registrations live as long as it

_SIZE_OPS: dict[BinaryOp, Callable[[Any, Any], Any]] = {
    BinaryOp.ADD: operator.add, BinaryOp.SUB: operator.sub, BinaryOp.MUL: operator.mul,
    BinaryOp.DIV: operator.floordiv, BinaryOp.FLOORDIV: operator.floordiv,
    BinaryOp.FLOORMOD: operator.mod, BinaryOp.MIN: torch.sym_min, BinaryOp.MAX: torch.sym_max,
}


def register_torch_op(op: CustomOp, grad: Callable[..., Any] | None = None) -> None:
    """Define `torch.ops.<ns>.<name>` with its eager and fake kernels, its converter and its
    gradient: `grad(*inputs, *output_grads)` returns one gradient per input (without it a
    backward through the op raises naming it)."""
    lib = torch.library.Library(op.namespace, "FRAGMENT")
    returns = "Tensor" if op.outputs == 1 else "(" + ", ".join(["Tensor"] * op.outputs) + ")"
    lib.define(f"{op.name}({', '.join(f'Tensor {n}' for n in op.inputs)}) -> {returns}")

    def eager(*tensors: torch.Tensor) -> Any:
        return run(op, tensors, {})

    def fake(*tensors: torch.Tensor) -> Any:
        shapes = output_specs(op, tensors)
        outs = [tensors[0].new_empty(shape, dtype=getattr(torch, dtype))
                for shape, dtype in shapes]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def convert(importer: Any, *inputs: Any) -> Any:
        outs = apply(importer, op, inputs, {})
        return outs[0] if len(outs) == 1 else tuple(outs)

    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        ctx.save_for_backward(*inputs)

    def backward(ctx: Any, *grads: torch.Tensor) -> tuple:
        if grad is None:
            raise RuntimeError(f"{op.qualname} has no gradient: give its decorator grad=, a "
                               f"custom_op of ({', '.join(op.inputs)}, output gradients)")
        found = grad(*ctx.saved_tensors, *grads)
        return tuple(found) if isinstance(found, (tuple, list)) else (found,)

    lib.impl(op.name, eager, "CompositeExplicitAutograd")
    torch.library.register_fake(op.qualname, fake, lib=lib)
    torch.library.register_autograd(op.qualname, backward, setup_context=setup_context, lib=lib)
    register_converter(f"{op.namespace}.{op.name}", convert)
    _LIBRARIES.append(lib)


def output_specs(op: CustomOp, tensors: Sequence[torch.Tensor]
                 ) -> list[tuple[tuple[Any, ...], str]]:
    """(shape, dtype) of each output of `op` on `tensors`, whose sizes may be sym-ints."""
    signature = tuple((t.dim(), str(t.dtype).removeprefix("torch.")) for t in tensors)
    symbolic = _symbolic_outputs(op, signature)
    if symbolic is not None:
        sizes = {f"{name}_{axis}": size for name, t in zip(op.inputs, tensors)
                 for axis, size in enumerate(t.shape)}
        return [(tuple(_size(d, sizes) for d in shape), dtype) for shape, dtype in symbolic]
    if not all(isinstance(d, int) for t in tensors for d in t.shape):
        raise ValueError(f"{op.qualname}: the compute cannot be traced on symbolic sizes, so "
                         f"its output shapes are unknown for dynamic shapes (it must not read "
                         f"an input's size as a Python int)")
    _, outs = op.trace([(tuple(t.shape), dtype) for t, (_, dtype) in zip(tensors, signature)])
    return [(tuple(int(d) for d in t.shape), t.dtype) for t in outs]


@functools.lru_cache(maxsize=256)
def _symbolic_outputs(op: CustomOp, signature: tuple[tuple[int, str], ...]
                      ) -> list[tuple[tuple[Any, ...], str]] | None:
    """The output shapes (expressions over the variables "<input>_<axis>") and dtypes of `op`
    on inputs of the given ranks and dtypes, or None when the compute needs static sizes or
    its shapes are no plain size arithmetic."""
    specs = [(tuple(tl.var(f"{name}_{axis}") for axis in range(rank)), dtype)
             for name, (rank, dtype) in zip(op.inputs, signature)]
    try:
        _, outs = op.trace(specs)
    except Exception:  # noqa: BLE001 - any failure means: trace on the call's sizes instead
        return None
    shapes = [(tuple(t.shape), t.dtype) for t in outs]
    if not all(_understood(d) for shape, _ in shapes for d in shape):
        return None
    return shapes


def _understood(d: Any) -> bool:
    if isinstance(d, (int, Const, Var)):
        return True
    if isinstance(d, Cast):
        return _understood(d.value)
    return isinstance(d, Binary) and d.op in _SIZE_OPS and _understood(d.a) and _understood(d.b)


def _size(d: Any, sizes: dict[str, Any]) -> Any:
    """The value of the size expression `d` with its variables bound to `sizes` (ints or
    sym-ints: PyTorch's arithmetic keeps a sym-int symbolic)."""
    if isinstance(d, int):
        return d
    if isinstance(d, Const):
        return int(d.value)
    if isinstance(d, Var):
        return sizes[d.name]
    if isinstance(d, Cast):
        return _size(d.value, sizes)
    return _SIZE_OPS[d.op](_size(d.a, sizes), _size(d.b, sizes))
