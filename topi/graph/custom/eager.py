"""A custom op run at once on CPU tensors or numpy arrays: one kernel compiled per signature.

The kernel of a signature (the inputs' shapes and dtypes, the attrs, the current target) is
the op's compute on placeholders of exactly those shapes, scheduled as the op says
(`CustomOp.default_schedule`; a template op with the config of the `apply_history_best` context
active at the first call), built once and kept. A call hands the inputs to it without a
copy (PyTorch tensors by DLPack) and the kernel writes its outputs, allocated here as tensors
of the inputs' kind, in place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import tensorlang as tl

from .analysis import check_reads
from .op import CustomOp, Spec
from .template import call_config

#: The dtypes an eager call takes (bfloat16 tensors have no DLPack view the runtime reads).
DTYPES = frozenset(("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32",
                    "float64"))

_KERNELS: dict[tuple, tuple[tl.Module, list[Spec]]] = {}


def kernel(op: CustomOp, specs: Sequence[Spec], attrs: Mapping[str, Any]
           ) -> tuple[tl.Module, list[Spec]]:
    """The compiled kernel of `op` on inputs of `specs` with `attrs`, and its outputs' specs."""
    target = tl.Target.current()
    key = (id(op), tuple(specs), tuple(sorted(attrs.items())), str(target))
    found = _KERNELS.get(key)
    if found is None:
        placeholders, outs = op.trace(specs, attrs)
        check_reads(outs, op.qualname)
        cfg = call_config(op, specs, attrs) if op.template is not None else None
        module = tl.build(op.default_schedule(outs, cfg), [*placeholders, *outs], target=target,
                          name=op.name)
        found = _KERNELS[key] = module, [(tuple(int(d) for d in t.shape), t.dtype) for t in outs]
    return found


def _spec(op: CustomOp, k: int, value: Any) -> Spec:
    """(shape, dtype) of input `k`, checked: a CPU tensor or array, contiguous, of a dtype that
    kernels take."""
    where = f"{op.qualname}: input {k} ({op.inputs[k]!r})"
    if _is_torch(value):
        if value.device.type != "cpu":
            raise ValueError(f"{where} is on {value.device}; tensorlang kernels run on the CPU "
                             f"(move it with .cpu())")
        if str(value.layout) != "torch.strided":
            raise TypeError(f"{where} is a {value.layout} tensor; only dense tensors are taken")
        dtype = str(value.dtype).removeprefix("torch.")
    elif isinstance(value, np.ndarray):
        dtype = str(value.dtype)
    else:
        raise TypeError(f"{where} must be a torch.Tensor or a numpy array, got "
                        f"{type(value).__name__}")
    if dtype not in DTYPES:
        raise TypeError(f"{where} has the dtype {dtype}, which kernels do not take "
                        f"(one of {sorted(DTYPES)})")
    contiguous = value.is_contiguous() if _is_torch(value) else value.flags.c_contiguous
    if not contiguous:
        raise ValueError(f"{where} is not contiguous (strides {_strides(value)}); pass "
                         f".contiguous() (numpy: np.ascontiguousarray) to copy it")
    if any(d == 0 for d in value.shape):
        raise ValueError(f"{where} is empty (shape {tuple(value.shape)}); kernels need every "
                         f"dim >= 1")
    return tuple(int(d) for d in value.shape), dtype


def _is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "is_contiguous")


def _strides(value: Any) -> tuple[int, ...]:
    return tuple(value.stride()) if _is_torch(value) else tuple(value.strides)


def run(op: CustomOp, args: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    """`op` on `args` (CPU tensors or numpy arrays): its output, or a tuple of its outputs, of
    the inputs' kind.

    Raises:
        TypeError: a wrong number of inputs, an input of another kind or of a dtype kernels
            do not take, or dtypes the compute does not take.
        ValueError: an input on another device, non-contiguous or empty, or shapes the compute
            cannot take (a wrong rank, dims that must agree and do not).
    """
    op.check_count(len(args))
    specs = [_spec(op, k, a) for k, a in enumerate(args)]
    module, out_specs = kernel(op, specs, attrs)
    if args and _is_torch(args[0]):
        import torch

        outs = [torch.empty(shape, dtype=getattr(torch, dtype)) for shape, dtype in out_specs]
    else:
        outs = [np.empty(shape, dtype) for shape, dtype in out_specs]
    # a parameter is read through a view without autograd (DLPack refuses it otherwise)
    module(*(a.detach() if _is_torch(a) else a for a in args), *outs)
    return outs[0] if len(outs) == 1 else tuple(outs)
