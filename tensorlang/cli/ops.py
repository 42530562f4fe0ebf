"""What `tensorlang tune OP` and `tensorlang lower OP` mean by OP: a topi op or a user template.

A topi operator is known by name (`matmul`, `conv2d_nchw`, ...): its table entry says what the
numbers of `--shape` are, how they become the arguments of its tunable template (the same task
arguments a user would pass to `autotune.create_task`), which numpy function checks its results
and which libraries a user would call instead (numpy, PyTorch) for a side-by-side timing.

A user template is `module:function` or `path/to/file.py:function`, a function decorated with
`@autotune.template`. Its arguments come from `--args` (a Python literal) or from `--shape` (the
numbers, then `--dtype` when the function has one more parameter called `dtype`).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autotune.task import Template, get_template

Arrays = Sequence[np.ndarray]
#: Makes a zero-argument call of a library on our input arrays (the thing that gets timed).
LibraryCall = Callable[[Arrays], Callable[[], object]]


class OpError(ValueError):
    """A bad OP, `--shape` or `--args`: the message is meant for the command line user."""


@dataclass(frozen=True)
class Window:
    """Stride, padding and dilation of a convolution, as `topi.nn` takes them."""

    stride: Any = 1
    padding: Any = 0
    dilation: Any = 1


@dataclass(frozen=True)
class Workload:
    """A tunable template applied to concrete arguments, and how to judge its kernels.

    Attributes:
        label: a short readable name, e.g. "matmul 64x64x64 float32".
        template: the registered autotune template name, or a workload function (tuned with
            no template, `autotune.auto_schedule`).
        args: the task arguments.
        check: the numpy reference of the output, from the input arrays (None: none known).
        libraries: label -> a call of a library computing the same thing, for timing.
    """

    label: str
    template: str | Callable[..., Any]
    args: tuple
    check: Callable[[Arrays], np.ndarray] | None = None
    libraries: Mapping[str, LibraryCall] = field(default_factory=dict)


@dataclass(frozen=True)
class OpSpec:
    """One row of the op table: `--shape` fields, the template and the references."""

    name: str
    fields: tuple[str, ...]
    template: str
    help: str
    workload: Callable[[dict[str, int], str, Window], Workload]


def _torch() -> Any:
    """PyTorch with as many threads as our kernels use, or None when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    import tensorlang as tl

    torch.set_num_threads(tl.get_num_threads())
    return torch


def _gemm_libraries(numpy_call: Callable[..., object],
                    torch_call: Callable[..., object]) -> dict[str, LibraryCall]:
    libs: dict[str, LibraryCall] = {"numpy": lambda xs: lambda: numpy_call(*xs)}
    torch = _torch()
    if torch is not None:
        def make(xs: Arrays) -> Callable[[], object]:
            ts = [torch.from_numpy(x) for x in xs]
            return lambda: torch_call(torch, *ts)

        libs["PyTorch"] = make
    return libs


def _matmul(d: dict[str, int], dtype: str, window: Window) -> Workload:
    from topi.testing import matmul_python

    m, n, k = d["M"], d["N"], d["K"]
    return Workload(f"matmul {m}x{n}x{k} {dtype}", "matmul.x86", ((m, k), (k, n), dtype),
                    lambda xs: matmul_python(*xs),
                    _gemm_libraries(lambda a, b: a @ b, lambda torch, a, b: a @ b))


def _dense(d: dict[str, int], dtype: str, window: Window) -> Workload:
    from topi.testing import dense_python

    m, n, k = d["M"], d["N"], d["K"]
    return Workload(f"dense {m}x{k} -> {n} {dtype}", "dense.x86", ((m, k), (n, k), dtype),
                    lambda xs: dense_python(*xs),
                    _gemm_libraries(lambda a, w: a @ w.T,
                                    lambda torch, a, w: torch.nn.functional.linear(a, w)))


def _batch_matmul(d: dict[str, int], dtype: str, window: Window) -> Workload:
    from topi.testing import batch_matmul_python

    b, m, n, k = d["B"], d["M"], d["N"], d["K"]
    return Workload(f"batch_matmul {b}x{m}x{n}x{k} {dtype}", "batch_matmul.x86",
                    ((b, m, k), (b, n, k), dtype), lambda xs: batch_matmul_python(*xs),
                    _gemm_libraries(lambda x, y: x @ y.transpose(0, 2, 1),
                                    lambda torch, x, y: torch.bmm(x, y.transpose(1, 2))))


def _torch_padding(window: Window, kernel_hw: tuple[int, int]) -> tuple[int, int] | None:
    """The padding as PyTorch takes it (symmetric (h, w)), or None when it is asymmetric."""
    from topi.nn.utils import as_pair, get_pad_tuple

    dh, dw = as_pair(window.dilation, "dilation")
    top, left, bottom, right = get_pad_tuple(
        window.padding, ((kernel_hw[0] - 1) * dh + 1, (kernel_hw[1] - 1) * dw + 1))
    return (top, left) if (top, left) == (bottom, right) else None


def _torch_conv(window: Window, kernel_hw: tuple[int, int], groups: int = 1,
                nhwc: bool = False) -> dict[str, LibraryCall]:
    torch = _torch()
    padding = _torch_padding(window, kernel_hw)
    if torch is None or padding is None:
        return {}

    def make(xs: Arrays) -> Callable[[], object]:
        data, kernel = (torch.from_numpy(x) for x in xs)
        if nhwc:  # PyTorch's channels-last layout is NHWC memory behind NCHW indexing
            data = data.permute(0, 3, 1, 2)
            kernel = kernel.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
        elif groups > 1:  # depthwise: (C, M, R, S) is PyTorch's (C * M, 1, R, S)
            kernel = kernel.reshape(-1, 1, *kernel.shape[2:])
        def conv() -> object:
            out = torch.nn.functional.conv2d(data, kernel, stride=window.stride,
                                             padding=padding, dilation=window.dilation,
                                             groups=groups)
            return out.permute(0, 2, 3, 1) if nhwc else out  # a view: free

        return conv

    return {"PyTorch": make}


def _conv(op: str, data_order: str, kernel_order: str, depthwise: bool = False,
          nhwc: bool = False) -> Callable[[dict[str, int], str, Window], Workload]:
    """The workload builder of a convolution whose data and kernel shapes list the `--shape`
    fields in these orders (e.g. "NCHW", "KCRS"); its numpy reference is `<op>_python`."""

    def workload(d: dict[str, int], dtype: str, window: Window) -> Workload:
        import topi.testing

        reference = getattr(topi.testing, f"{op}_python")
        data, kernel = tuple(d[f] for f in data_order), tuple(d[f] for f in kernel_order)
        outputs = f"x{d['M']}" if depthwise else f"-> {d['K']}"
        return Workload(
            f"{op} {'x'.join(map(str, data))} {outputs} {d['R']}x{d['S']} {dtype}", f"{op}.x86",
            (data, kernel, window.stride, window.padding, window.dilation, dtype),
            lambda xs: reference(*xs, window.stride, window.padding, window.dilation),
            _torch_conv(window, (d["R"], d["S"]), groups=d["C"] if depthwise else 1, nhwc=nhwc))

    return workload


OPS: dict[str, OpSpec] = {spec.name: spec for spec in (
    OpSpec("matmul", ("M", "N", "K"), "matmul.x86", "A (M, K) @ B (K, N)", _matmul),
    OpSpec("dense", ("M", "N", "K"), "dense.x86", "data (M, K) x weight (N, K)^T", _dense),
    OpSpec("batch_matmul", ("B", "M", "N", "K"), "batch_matmul.x86",
           "x (B, M, K) @ y (B, N, K)^T", _batch_matmul),
    OpSpec("conv2d_nchw", ("N", "C", "H", "W", "K", "R", "S"), "conv2d_nchw.x86",
           "data (N, C, H, W), kernel (K, C, R, S)", _conv("conv2d_nchw", "NCHW", "KCRS")),
    OpSpec("conv2d_nhwc", ("N", "H", "W", "C", "K", "R", "S"), "conv2d_nhwc.x86",
           "data (N, H, W, C), kernel (R, S, C, K)",
           _conv("conv2d_nhwc", "NHWC", "RSCK", nhwc=True)),
    OpSpec("depthwise_conv2d_nchw", ("N", "C", "H", "W", "M", "R", "S"),
           "depthwise_conv2d_nchw.x86", "data (N, C, H, W), kernel (C, M, R, S)",
           _conv("depthwise_conv2d_nchw", "NCHW", "CMRS", depthwise=True)),
)}


def op_table() -> str:
    """The known ops and their `--shape` fields, one per line (for `--help`)."""
    return "\n".join(f"  {s.name:<22} --shape {','.join(s.fields):<14} {s.help}"
                     for s in OPS.values())


def parse_shape(text: str) -> tuple[int, ...]:
    """`"64,64,64"` (or `"64x64x64"`) as positive ints."""
    parts = [p.strip() for p in text.replace("x", ",").split(",")]
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        raise OpError(f"--shape {text!r} is not a list of integers like 64,64,64") from None
    if any(v < 1 for v in values):
        raise OpError(f"--shape {text!r}: every size must be >= 1")
    return values


def parse_args(text: str) -> tuple:
    """`--args`: the template's arguments as a Python literal, e.g. `"((64, 64), 'float32')"`."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise OpError(f"--args {text!r} is not a Python literal") from None
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _load_template(spec: str) -> Template | Callable[..., Any]:
    """The template of `module:function` or `path.py:function`, or the plain workload
    function there (a function of shapes returning tensors, tuned with no template)."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise OpError(f"{spec!r} is neither a known op ({', '.join(OPS)}) nor module:function")
    if where.endswith(".py"):
        path = Path(where).resolve()
        if not path.is_file():
            raise OpError(f"{spec!r}: no file {where}")
        # Measurement workers import the template's module by name, with this process's
        # sys.path: put the file's folder on it and import the file as a top-level module.
        sys.path.insert(0, str(path.parent))
        where = path.stem
    try:
        module = importlib.import_module(where)
    except ImportError as err:
        raise OpError(f"{spec!r}: cannot import {where}: {err}") from None
    func = getattr(module, name, None)
    if func is None:
        raise OpError(f"{spec!r}: module {where} has no attribute {name!r}")
    if not isinstance(func, Template) and not callable(func):
        raise OpError(f"{spec!r} is neither an @autotune.template nor a workload function")
    return func


def _user_args(template: Template, shape: tuple[int, ...] | None, dtype: str) -> tuple:
    params = list(inspect.signature(template.func).parameters)[1 if template.takes_cfg else 0:]
    args: tuple = tuple(shape or ())
    if len(params) == len(args) + 1 and params[-1] == "dtype":
        args += (dtype,)
    if len(args) != len(params):
        raise OpError(f"template {template.name!r} takes ({', '.join(params)}); give them with "
                      f"--args, e.g. --args \"(64, 64, 'float32')\"")
    return args


def resolve(op: str, shape: str | None, args: str | None, dtype: str,
            window: Window) -> Workload:
    """The workload of OP given `--shape` or `--args` (exactly one of them)."""
    if (shape is None) == (args is None):
        raise OpError("give the problem size with exactly one of --shape and --args")
    spec = OPS.get(op)
    if spec is not None:
        import topi  # noqa: F401 - registers the x86 templates

        if args is not None:
            return Workload(f"{op} {args}", spec.template, parse_args(args))
        values = parse_shape(shape)  # type: ignore[arg-type]
        if len(values) != len(spec.fields):
            raise OpError(f"{op} takes --shape {','.join(spec.fields)} ({spec.help}), "
                          f"got {len(values)} numbers")
        return spec.workload(dict(zip(spec.fields, values)), dtype, window)
    template = _load_template(op)
    if not isinstance(template, Template):  # a workload function: auto-scheduled
        values = parse_args(args) if args is not None else parse_shape(shape)  # type: ignore
        name = op.rpartition(":")[2]
        return Workload(f"{name} {list(values)}", template, tuple(values))
    if args is not None:
        values = parse_args(args)
    else:
        values = _user_args(template, parse_shape(shape), dtype)  # type: ignore[arg-type]
    return Workload(f"{template.name} {list(values)}", template.name, values)


def template_of(name: str) -> Template:
    """The registered template `name` (importing topi's first); an OpError when unknown."""
    import topi  # noqa: F401 - registers the x86 templates

    try:
        return get_template(name)
    except ValueError as err:
        raise OpError(str(err)) from None

