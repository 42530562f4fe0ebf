"""The PyTorch frontend: an `nn.Module` captured with `torch.export` as a `Graph` of topi ops.

`torch.export` traces the module on example inputs into ATen ops with static shapes; each ATen op
becomes graph ops (the frontend only translates: numerics live in topi). Parameters, buffers and
lifted constants are numpy arrays, so weight-only arithmetic (a transposed weight for addmm) is
folded at import with the graph ops' numpy references. Both the export IR's high-level ops
(conv2d, linear, batch_norm, layer_norm, ...) and their core-ATen decompositions (convolution,
addmm, _native_batch_norm_legit_no_training, native_layer_norm, ...) are understood. An ATen op or
argument the frontend does not translate raises naming the node and the op.

Example:
    g = topi.graph.from_torch(model.eval(), (torch.randn(1, 3, 224, 224),))
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .graph import Graph
from .importer import (
    GraphWriter,
    UnsupportedError,
    Value,
    compact_padding,
    dtype_of,
    node_name,
    require,
    shape_of,
)

try:
    import torch
    from torch.export import ExportedProgram
    from torch.export.graph_signature import InputKind
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("topi.graph.from_torch needs PyTorch: pip install -e .[torch]") from err


def from_torch(module: torch.nn.Module, example_inputs: Sequence[Any]) -> Graph:
    """Import a PyTorch module (put in eval mode) traced on `example_inputs`.

    Args:
        module: the `nn.Module`, or an already exported `torch.export.ExportedProgram`.
        example_inputs: a tuple of tensors (the positional arguments of `forward`); they fix the
            input shapes and dtypes.

    Returns:
        The Graph, with one input per tensor argument (named as `forward`'s parameters) and the
        module's outputs in order.

    Raises:
        UnsupportedError: an ATen op or argument the frontend does not translate.
        TypeError: a tensor of an unsupported dtype, or arguments of the wrong type.
    """
    if isinstance(module, ExportedProgram):
        program = module
    elif isinstance(module, torch.nn.Module):
        if not isinstance(example_inputs, (tuple, list)) or not all(
                isinstance(t, torch.Tensor) for t in example_inputs):
            raise TypeError("from_torch: example_inputs must be a tuple of tensors")
        with torch.no_grad():
            program = torch.export.export(module.eval(), tuple(example_inputs))
    else:
        raise TypeError(f"from_torch: expected an nn.Module or an ExportedProgram, got "
                        f"{type(module).__name__}")
    return _Importer(program).run()


Converter = Callable[..., Any]
_CONVERTERS: dict[str, Converter] = {}


def _converter(*names: str) -> Callable[[Converter], Converter]:
    """Register a converter for ATen ops by overload name ("aten.conv2d.default") or packet name
    ("aten.relu": all its overloads)."""

    def register(fn: Converter) -> Converter:
        for name in names:
            _CONVERTERS[name] = fn
        return fn

    return register


class _Missing:
    """An output of a multi-output ATen op that the frontend does not produce (the indices of a
    max pool, the statistics of a batch norm): an error only where something reads it."""

    def __init__(self, what: str) -> None:
        self.what = what


def _numpy(t: Any) -> np.ndarray:
    return t.detach().cpu().contiguous().numpy().copy()


class _Importer(GraphWriter):
    """The state of one import: the graph and the value of every FX node by name."""

    def __init__(self, program: ExportedProgram) -> None:
        super().__init__()
        self.program = program
        self.env: dict[str, Any] = {}
        self.where = "from_torch"
        self.current = ""  # the ATen overload being converted (converters of several read it)

    def run(self) -> Graph:
        sig = self.program.graph_signature
        kinds = {spec.arg.name: spec for spec in sig.input_specs}
        state = self.program.state_dict
        constants = getattr(self.program, "constants", {})
        for fx in self.program.graph.nodes:
            self.where = f"torch node {fx.name!r} ({fx.target})"
            self.name = node_name(fx.name)
            try:
                if fx.op == "placeholder":
                    spec = kinds[fx.name]
                    if spec.kind is InputKind.USER_INPUT:
                        self.env[fx.name] = self._input(fx)
                    elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER,
                                       InputKind.CONSTANT_TENSOR):
                        tensor = state[spec.target] if spec.target in state else \
                            constants[spec.target]
                        self.env[fx.name] = self.named_array(_numpy(tensor), spec.target)
                    else:
                        raise UnsupportedError(f"unsupported input kind {spec.kind.name}")
                elif fx.op == "call_function":
                    self.env[fx.name] = self._call(fx)
                elif fx.op == "output":
                    outputs = fx.args[0] if isinstance(fx.args[0], (tuple, list)) else fx.args
                    for out in outputs:
                        self.graph.output(self.as_node(self._arg(out)))
                else:
                    raise UnsupportedError(f"unsupported FX node kind {fx.op!r}")
            except (UnsupportedError, TypeError, ValueError) as err:
                if str(err).startswith(self.where):
                    raise
                raise type(err)(f"{self.where}: {err}") from err
        return self.graph

    def _input(self, fx: Any) -> Value:
        val = fx.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise UnsupportedError("a non-tensor input")
        dtype = str(val.dtype).removeprefix("torch.")
        return self.graph.input(fx.name, tuple(int(d) for d in val.shape), dtype)

    def _arg(self, a: Any) -> Any:
        """An FX argument with nodes replaced by their values."""
        if isinstance(a, torch.fx.Node):
            value = self.env[a.name]
            if isinstance(value, _Missing):
                raise UnsupportedError(f"{value.what} is not supported")
            return value
        if isinstance(a, (tuple, list)):
            return type(a)(self._arg(v) for v in a)
        return a

    def _call(self, fx: Any) -> Any:
        target = fx.target
        if target is operator.getitem:
            seq, index = self._arg(fx.args[0]), fx.args[1]
            value = seq[index]
            return _Missing(f"output {index} of {fx.args[0].target}") if value is None else value
        name = self.current = str(target)
        converter = _CONVERTERS.get(name) or _CONVERTERS.get(name.rsplit(".", 1)[0])
        if converter is None:
            raise UnsupportedError(f"unsupported op {name}")
        args = [self._arg(a) for a in fx.args]
        kwargs = {k: self._arg(v) for k, v in fx.kwargs.items()}
        return converter(self, *args, **kwargs)

    def scalar(self, value: Any, like: Value) -> Value:
        """A Python number as a 0-d array of `like`'s dtype (PyTorch's type promotion for a
        tensor-scalar op keeps the tensor's dtype)."""
        if isinstance(value, (bool, int, float)):
            require(not isinstance(value, float) or dtype_of(like).startswith("float"),
                    f"an integer tensor with the float scalar {value} (PyTorch promotes it)")
            return np.array(value, dtype_of(like))
        return value


def _check_dtype_kwarg(dtype: Any) -> None:
    require(dtype is None, f"dtype={dtype}")


# -- elementwise ---------------------------------------------------------------------------------

_UNARY = {"aten.relu": "relu", "aten.sigmoid": "sigmoid", "aten.tanh": "tanh", "aten.erf": "erf",
          "aten.sqrt": "sqrt", "aten.exp": "exp", "aten.log": "log", "aten.abs": "abs",
          "aten.neg": "negative", "aten.reciprocal": "reciprocal", "aten.hardswish": "hard_swish"}


def _unary(op: str) -> Converter:
    return lambda im, x: im.op(op, x)


for _aten, _op in _UNARY.items():
    _converter(_aten)(_unary(_op))


@_converter("aten.rsqrt")
def _rsqrt(im: _Importer, x: Value) -> Value:
    return im.op("reciprocal", im.op("sqrt", x))


@_converter("aten.gelu")
def _gelu(im: _Importer, x: Value, approximate: str = "none") -> Value:
    require(approximate in ("none", "tanh"), f"approximate={approximate!r}")
    return im.op("gelu" if approximate == "none" else "gelu_tanh", x)


@_converter("aten.leaky_relu")
def _leaky_relu(im: _Importer, x: Value, negative_slope: float = 0.01) -> Value:
    return im.op("leaky_relu", x, alpha=float(negative_slope))


@_converter("aten.hardtanh", "aten.clamp")
def _clamp(im: _Importer, x: Value, lo: Any = None, hi: Any = None, **kw: Any) -> Value:
    if "min" in kw or "max" in kw:
        lo, hi = kw.pop("min", lo), kw.pop("max", hi)
    if "min_val" in kw or "max_val" in kw:
        lo, hi = kw.pop("min_val", lo), kw.pop("max_val", hi)
    require(not kw, f"arguments {sorted(kw)}")
    for bound in (lo, hi):
        require(bound is None or isinstance(bound, (int, float)), "tensor bounds")
    return im.op("clip", x, a_min=None if lo is None else float(lo),
                 a_max=None if hi is None else float(hi))


@_converter("aten.relu6")
def _relu6(im: _Importer, x: Value) -> Value:
    return im.op("clip", x, a_min=0.0, a_max=6.0)


@_converter("aten.hardsigmoid")
def _hardsigmoid(im: _Importer, x: Value) -> Value:
    return im.op("hard_sigmoid", x, alpha=1.0 / 6.0, beta=0.5)


def _binary(op: str) -> Converter:
    def convert(im: _Importer, a: Any, b: Any, alpha: Any = 1, rounding_mode: Any = None) -> Value:
        require(rounding_mode is None, f"rounding_mode={rounding_mode!r}")
        a = im.scalar(a, b)
        b = im.scalar(b, a)
        if alpha != 1:
            require(op in ("add", "subtract"), "alpha")
            b = im.op("multiply", b, np.array(alpha, dtype_of(b)))
        if dtype_of(a) != dtype_of(b):
            raise TypeError(f"operands have different dtypes {dtype_of(a)} and {dtype_of(b)}")
        # PyTorch's true division of integers gives floats; topi's divide keeps the dtype.
        require(op != "divide" or dtype_of(a).startswith("float"), "integer true division")
        return im.op(op, a, b)

    return convert


for _aten, _op in {"aten.add": "add", "aten.sub": "subtract", "aten.mul": "multiply",
                   "aten.div": "divide", "aten.pow": "power", "aten.maximum": "maximum",
                   "aten.minimum": "minimum"}.items():
    _converter(_aten)(_binary(_op))


@_converter("aten.clone", "aten.contiguous", "aten.alias", "aten.detach", "aten.detach_",
            "aten.dropout", "aten.lift_fresh_copy")
def _identity(im: _Importer, x: Value, *args: Any, **kwargs: Any) -> Value:
    if "train" in kwargs or len(args) >= 2:  # dropout(x, p, train)
        require(not (kwargs.get("train") or (len(args) >= 2 and args[1])), "train=True")
    return x


@_converter("aten._assert_tensor_metadata", "aten._assert_scalar")
def _assertion(im: _Importer, *args: Any, **kwargs: Any) -> None:
    """Run-time checks of the traced metadata: the static shapes already hold them."""


@_converter("aten._to_copy", "aten.to")
def _to(im: _Importer, x: Value, *args: Any, dtype: Any = None, **kwargs: Any) -> Value:
    dtype = dtype if dtype is not None else next(
        (a for a in args if isinstance(a, torch.dtype)), None)
    if dtype is None:
        return x
    name = str(dtype).removeprefix("torch.")
    return x if name == dtype_of(x) else im.op("cast", x, dtype=name)


# -- linear algebra ------------------------------------------------------------------------------


@_converter("aten.linear")
def _linear(im: _Importer, x: Value, weight: Value, bias: Value | None = None) -> Value:
    y = im.dense_rows(x, weight)
    return y if bias is None else im.op("bias_add", y, bias, axis=-1)


@_converter("aten.addmm")
def _addmm(im: _Importer, bias: Value, a: Value, b: Value, beta: Any = 1,
           alpha: Any = 1) -> Value:
    require(beta == 1 and alpha == 1, "beta or alpha other than 1")
    y = im.op("dense", a, im.op("transpose", b, axes=(1, 0)))
    if len(shape_of(bias)) == 1:
        return im.op("bias_add", y, bias, axis=-1)
    return im.op("add", y, bias)


@_converter("aten.matmul", "aten.mm", "aten.bmm")
def _matmul(im: _Importer, a: Value, b: Value) -> Value:
    require(len(shape_of(a)) >= 2 and len(shape_of(b)) >= 2, "1-D operands")
    return im.matmul(a, b)


# -- convolution, normalisation, pooling ---------------------------------------------------------


def _pair(v: Any) -> tuple[int, int]:
    v = list(v) if isinstance(v, (tuple, list)) else [v]
    require(len(v) in (1, 2), f"{v} (only 2-D windows are supported)")
    return (int(v[0]), int(v[-1]))


def _four_d(x: Value) -> None:
    require(len(shape_of(x)) == 4, f"input of rank {len(shape_of(x))} (only NCHW images)")


@_converter("aten.conv2d")
def _conv2d(im: _Importer, x: Value, w: Value, bias: Value | None = None, stride: Any = 1,
            padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Value:
    _four_d(x)
    if isinstance(padding, str):
        require(padding in ("same", "valid"), f"padding={padding!r}")
        # PyTorch's "same" puts the odd pixel at the bottom/right (SAME_UPPER).
        pads: Any = (0, 0) if padding == "valid" else compact_padding(
            _same_upper(shape_of(w), dilation))
    else:
        pads = _pair(padding)
    y = im.graph.conv2d(im.as_node(x), im.as_node(w), stride=_pair(stride), padding=pads,
                        dilation=_pair(dilation), groups=int(groups), name=im.name)
    return y if bias is None else im.op("bias_add", y, bias, axis=1)


def _same_upper(w_shape: Sequence[int], dilation: Any) -> tuple[int, int, int, int]:
    totals = [(k - 1) * d for k, d in zip(w_shape[2:], _pair(dilation))]
    return (totals[0] // 2, totals[1] // 2, totals[0] - totals[0] // 2, totals[1] - totals[1] // 2)


@_converter("aten.conv_transpose2d")
def _conv_transpose2d(im: _Importer, x: Value, w: Value, bias: Value | None = None,
                      stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                      groups: int = 1, dilation: Any = 1) -> Value:
    _four_d(x)
    y = im.op("conv2d_transpose", x, w, stride=_pair(stride), padding=_pair(padding),
              output_padding=_pair(output_padding), dilation=_pair(dilation),
              groups=int(groups))
    return y if bias is None else im.op("bias_add", y, bias, axis=1)


@_converter("aten.convolution")
def _convolution(im: _Importer, x: Value, w: Value, bias: Value | None, stride: Any,
                 padding: Any, dilation: Any, transposed: bool, output_padding: Any,
                 groups: int) -> Value:
    if transposed:
        return _conv_transpose2d(im, x, w, bias, stride, padding, output_padding, groups,
                                 dilation)
    require(not any(output_padding), "output_padding of a convolution")
    return _conv2d(im, x, w, bias, stride, padding, dilation, groups)


def _bn(im: _Importer, x: Value, weight: Value | None, bias: Value | None, mean: Value,
        var: Value, eps: float) -> Value:
    channels = shape_of(x)[1]
    weight = np.ones(channels, dtype_of(x)) if weight is None else weight
    bias = np.zeros(channels, dtype_of(x)) if bias is None else bias
    return im.op("batch_norm", x, weight, bias, mean, var, epsilon=float(eps), axis=1)


@_converter("aten.batch_norm")
def _batch_norm(im: _Importer, x: Value, weight: Value | None, bias: Value | None, mean: Value,
                var: Value, training: bool, momentum: float, eps: float,
                cudnn_enabled: bool = True) -> Value:
    require(not training, "training=True")
    return _bn(im, x, weight, bias, mean, var, eps)


@_converter("aten._native_batch_norm_legit_no_training")
def _native_batch_norm(im: _Importer, x: Value, weight: Value | None, bias: Value | None,
                       mean: Value, var: Value, momentum: float, eps: float) -> tuple:
    return (_bn(im, x, weight, bias, mean, var, eps), None, None)


def _layer_norm_value(im: _Importer, x: Value, shape: Sequence[int], weight: Value | None,
                      bias: Value | None, eps: float) -> Value:
    norm = tuple(int(d) for d in shape)
    ndim = len(shape_of(x))
    require(shape_of(x)[ndim - len(norm):] == norm, f"normalized_shape {norm}")
    weight = np.ones(norm, dtype_of(x)) if weight is None else weight
    bias = np.zeros(norm, dtype_of(x)) if bias is None else bias
    return im.op("layer_norm", x, weight, bias, axis=tuple(range(ndim - len(norm), ndim)),
                 epsilon=float(eps))


@_converter("aten.layer_norm")
def _layer_norm(im: _Importer, x: Value, shape: Sequence[int], weight: Value | None = None,
                bias: Value | None = None, eps: float = 1e-5, cudnn_enable: bool = True) -> Value:
    return _layer_norm_value(im, x, shape, weight, bias, eps)


@_converter("aten.native_layer_norm")
def _native_layer_norm(im: _Importer, x: Value, shape: Sequence[int], weight: Value | None,
                       bias: Value | None, eps: float) -> tuple:
    return (_layer_norm_value(im, x, shape, weight, bias, eps), None, None)


@_converter("aten.softmax", "aten._softmax", "aten.log_softmax", "aten._log_softmax")
def _softmax(im: _Importer, x: Value, dim: int, half_to_float: Any = False) -> Value:
    require(half_to_float in (False, None), "half_to_float / dtype")
    op = "log_softmax" if "log" in im.current else "softmax"
    return im.op(op, x, axis=int(dim))


def _pool_args(kernel: Any, stride: Any, padding: Any) -> dict:
    stride = stride if stride not in (None, [], ()) else kernel
    return {"kernel": _pair(kernel), "stride": _pair(stride), "padding": _pair(padding)}


@_converter("aten.max_pool2d", "aten.max_pool2d_with_indices")
def _max_pool2d(im: _Importer, x: Value, kernel: Any, stride: Any = None, padding: Any = 0,
                dilation: Any = 1, ceil_mode: bool = False) -> Any:
    _four_d(x)
    y = im.op("max_pool2d", x, dilation=_pair(dilation), ceil_mode=bool(ceil_mode),
              **_pool_args(kernel, stride, padding))
    return (y, None) if "indices" in im.current else y


@_converter("aten.avg_pool2d")
def _avg_pool2d(im: _Importer, x: Value, kernel: Any, stride: Any = None, padding: Any = 0,
                ceil_mode: bool = False, count_include_pad: bool = True,
                divisor_override: Any = None) -> Value:
    _four_d(x)
    require(divisor_override is None, "divisor_override")
    return im.op("avg_pool2d", x, ceil_mode=bool(ceil_mode),
                 count_include_pad=bool(count_include_pad), **_pool_args(kernel, stride, padding))


@_converter("aten.adaptive_avg_pool2d", "aten._adaptive_avg_pool2d", "aten.adaptive_max_pool2d")
def _adaptive_pool2d(im: _Importer, x: Value, output_size: Any) -> Any:
    _four_d(x)
    size = _pair(output_size)
    if "max" in im.current:
        y = im.op("adaptive_pool2d", x, output_size=size, pool_type="max")
        return (y, None)
    if size == (1, 1):
        return im.op("global_avg_pool2d", x)
    return im.op("adaptive_pool2d", x, output_size=size, pool_type="avg")


# -- reductions ----------------------------------------------------------------------------------


def _reduction(op: str) -> Converter:
    def convert(im: _Importer, x: Value, dim: Any = None, keepdim: bool = False,
                dtype: Any = None) -> Value:
        _check_dtype_kwarg(dtype)
        axes = None if dim in (None, [], ()) else tuple(dim) if isinstance(dim, (list, tuple)) \
            else (int(dim),)
        return im.op(op, x, axis=axes, keepdims=bool(keepdim))

    return convert


for _aten, _op in {"aten.mean": "mean", "aten.sum": "sum", "aten.amax": "max",
                   "aten.amin": "min"}.items():
    _converter(_aten)(_reduction(_op))


# -- shapes and data movement --------------------------------------------------------------------


def _infer_shape(x: Value, shape: Sequence[int]) -> tuple[int, ...]:
    shape = [int(d) for d in shape]
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        shape[shape.index(-1)] = math.prod(shape_of(x)) // known
    return tuple(shape)


@_converter("aten.view", "aten.reshape", "aten._unsafe_view")
def _reshape(im: _Importer, x: Value, shape: Sequence[int]) -> Value:
    return im.reshape(x, _infer_shape(x, shape))


@_converter("aten.flatten")
def _flatten(im: _Importer, x: Value, start_dim: int = 0, end_dim: int = -1) -> Value:
    shape = shape_of(x)
    if not shape:
        return im.reshape(x, (1,))
    start, end = start_dim % len(shape), end_dim % len(shape)
    return im.reshape(x, (*shape[:start], math.prod(shape[start:end + 1]), *shape[end + 1:]))


@_converter("aten.unsqueeze")
def _unsqueeze(im: _Importer, x: Value, dim: int) -> Value:
    shape = list(shape_of(x))
    shape.insert(dim % (len(shape) + 1), 1)
    return im.reshape(x, shape)


@_converter("aten.squeeze")
def _squeeze(im: _Importer, x: Value, dim: Any = None) -> Value:
    shape = shape_of(x)
    dims = range(len(shape)) if dim is None else [d % len(shape) for d in (
        dim if isinstance(dim, (list, tuple)) else [dim])]
    return im.reshape(x, [d for k, d in enumerate(shape) if not (k in dims and d == 1)])


@_converter("aten.permute")
def _permute(im: _Importer, x: Value, dims: Sequence[int]) -> Value:
    return im.op("transpose", x, axes=tuple(int(d) % len(shape_of(x)) for d in dims))


@_converter("aten.transpose")
def _transpose(im: _Importer, x: Value, dim0: int, dim1: int) -> Value:
    axes = list(range(len(shape_of(x))))
    a, b = dim0 % len(axes), dim1 % len(axes)
    axes[a], axes[b] = axes[b], axes[a]
    return im.op("transpose", x, axes=tuple(axes))


@_converter("aten.t")
def _t(im: _Importer, x: Value) -> Value:
    return x if len(shape_of(x)) < 2 else im.op("transpose", x, axes=(1, 0))


@_converter("aten.expand")
def _expand(im: _Importer, x: Value, sizes: Sequence[int], implicit: bool = False) -> Value:
    target = tuple(int(s) if s != -1 else d for s, d in zip(sizes, shape_of(x)))
    require(len(sizes) == len(shape_of(x)) and target == shape_of(x),
            f"expand of {shape_of(x)} to {tuple(sizes)} (only no-op expands)")
    return x


@_converter("aten.cat", "aten.concat")
def _cat(im: _Importer, tensors: Sequence[Value], dim: int = 0) -> Value:
    return im.op("concatenate", *tensors, axis=int(dim))


@_converter("aten.slice")
def _slice(im: _Importer, x: Value, dim: int = 0, start: Any = None, end: Any = None,
           step: int = 1) -> Value:
    n = shape_of(x)[dim]
    start = 0 if start is None else int(start)
    end = n if end is None else min(int(end), n)
    return im.op("strided_slice", x, begin=(start,), end=(end,), strides=(int(step),),
                 axes=(dim % len(shape_of(x)),))


@_converter("aten.select")
def _select(im: _Importer, x: Value, dim: int, index: int) -> Value:
    dim = dim % len(shape_of(x))
    index = int(index) % shape_of(x)[dim]
    piece = im.op("strided_slice", x, begin=(index,), end=(index + 1,), strides=(1,),
                  axes=(dim,))
    return im.reshape(piece, [d for k, d in enumerate(shape_of(x)) if k != dim])


@_converter("aten.embedding")
def _embedding(im: _Importer, weight: Value, indices: Value, *args: Any) -> Value:
    return im.op("take", weight, indices, axis=0)


@_converter("aten.index_select")
def _index_select(im: _Importer, x: Value, dim: int, indices: Value) -> Value:
    return im.op("take", x, indices, axis=int(dim))


@_converter("aten.chunk")
def _chunk(im: _Importer, x: Value, chunks: int, dim: int = 0) -> list:
    n = shape_of(x)[dim % len(shape_of(x))]
    return _split(im, x, -(-n // int(chunks)), dim)


@_converter("aten.split", "aten.split_with_sizes")
def _split(im: _Importer, x: Value, sizes: Any, dim: int = 0) -> list:
    dim = dim % len(shape_of(x))
    n = shape_of(x)[dim]
    if isinstance(sizes, int):
        sizes = [min(sizes, n - k) for k in range(0, n, sizes)]
    bounds = np.cumsum([0, *sizes])
    return [im.op("strided_slice", x, begin=(int(b),), end=(int(e),), strides=(1,), axes=(dim,))
            for b, e in itertools.pairwise(bounds)]

