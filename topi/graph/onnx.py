"""The ONNX frontend: an ONNX model (opset 13 to 21) as a `Graph` of topi ops.

Each ONNX node becomes graph ops (the frontend only translates: numerics live in topi). Values
known at import time (initializers, Constant nodes, Shape of a static shape, and whatever is
computed only from those) stay numpy arrays and are evaluated with the graph ops' own numpy
references, so shape arithmetic (Shape -> Gather -> Concat -> Reshape) folds away and attribute
inputs (Reshape's shape, Slice's starts, Clip's bounds) are plain values; they become graph
constants only where an op reads them as tensors.

Every attribute an ONNX node carries must be read by its converter, so one the frontend does not
understand raises instead of being silently ignored. Before converting anything, the import
lists every op of the model that has no converter, with its count and first node, in one
UnsupportedError; an unsupported attribute, attribute value or dtype raises an error naming the
node and its op.

Example:
    g = topi.graph.from_onnx("resnet18.onnx")
    print(g)
"""

from __future__ import annotations

import functools
import itertools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..nn.utils import pooled_size
from ..symbolic import canon, dim_var, is_symbolic, quotient
from .einsum import einsum
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
    shape_value,
)
from .volumes import conv3d, pool3d

try:
    import onnx
    from onnx import numpy_helper
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("topi.graph.from_onnx needs onnx: pip install -e .[onnx]") from err

#: The opsets whose semantics the converters follow.
MIN_OPSET, MAX_OPSET = 13, 21

_DTYPES = {
    onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.INT16: "int16", onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT64: "int64", onnx.TensorProto.UINT8: "uint8",
    onnx.TensorProto.BOOL: "bool",
}

def from_onnx(model: str | os.PathLike | Any,
              shapes: Mapping[str, Sequence[int]] | None = None,
              custom_ops: Mapping[tuple[str, str], Any] | None = None) -> Graph:
    """Import an ONNX model.

    Args:
        model: a path to an .onnx file or an `onnx.ModelProto`.
        shapes: input name -> shape, for inputs whose shape the model leaves symbolic.
        custom_ops: (domain, op_type) -> a `topi.graph.custom_op` or a plain function of
            placeholders: the kernels of the model's custom ops (`topi.graph.custom`); a node's
            attributes are the function's keyword arguments.

    Returns:
        The Graph, with one input per non-initializer graph input (same names) and the model's
        outputs in order.

    Raises:
        UnsupportedError: ops the frontend does not translate (all of them, each with its count
            and first node), or an attribute or attribute value it does not translate.
        TypeError: a tensor of an unsupported dtype, or `model` of the wrong type.
        ValueError: a file that is not a readable ONNX model, an opset outside 13..21, a
            symbolic input shape, an inconsistent model.
        Errors of a node name the node and its op.
    """
    if isinstance(model, (str, os.PathLike)):
        model = _load(os.fspath(model))
    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"from_onnx: expected a path or an onnx.ModelProto, got "
                        f"{type(model).__name__}")
    extra = {}
    if custom_ops:
        from .custom.onnx_ops import converters

        extra = converters(custom_ops)
    return _Importer(model, dict(shapes or {}), extra).run()


def _load(path: str) -> Any:
    """The ModelProto in the file `path`; a file that is not one raises ValueError naming it."""
    try:
        model = onnx.load(path)
    except OSError:
        raise
    except Exception as err:  # protobuf's DecodeError, or onnx's errors about external data
        raise ValueError(f"from_onnx: {path!r} is not a readable ONNX model "
                         f"({type(err).__name__}: {err})") from err
    if not model.HasField("graph") or not model.opset_import:
        raise ValueError(f"from_onnx: {path!r} is not a readable ONNX model (it holds no graph "
                         f"or no opset)")
    return model


def onnx_dtype(elem_type: int, where: str) -> str:
    """The numpy dtype name of an ONNX tensor element type."""
    if elem_type not in _DTYPES:
        name = onnx.TensorProto.DataType.Name(elem_type)
        raise TypeError(f"{where}: unsupported dtype {name} (supported: "
                        f"{', '.join(sorted(set(_DTYPES.values())))})")
    return _DTYPES[elem_type]


class _Attrs:
    """A node's attributes; each one read is marked, and `check_all_read` rejects the rest."""

    def __init__(self, node: Any) -> None:
        self._values = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        self._read: set[str] = set()

    def get(self, name: str, default: Any = None) -> Any:
        self._read.add(name)
        value = self._values.get(name, default)
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, list):
            return [v.decode() if isinstance(v, bytes) else v for v in value]
        return value

    def lift_to_rows(self) -> None:
        """Rewrite a 1-D window's attributes as those of the 2-D window one row high
        (`GraphWriter.one_row`): a kernel, a stride and a dilation of 1 and no padding across."""
        lifted = {"kernel_shape": lambda v: [1, *v], "strides": lambda v: [1, *v],
                  "dilations": lambda v: [1, *v], "output_padding": lambda v: [0, *v],
                  "output_shape": lambda v: [1, *v[-1:]], "pads": lambda v: [0, v[0], 0, v[1]]}
        for name, lift in lifted.items():
            value = self._values.get(name)
            if value is not None:
                require(len(value) == (2 if name == "pads" else 1),
                        f"{name}={list(value)} for a 1-D window")
                self._values[name] = lift(list(value))

    def check_all_read(self) -> None:
        unread = sorted(set(self._values) - self._read)
        if unread:
            raise UnsupportedError(f"unsupported attribute {unread[0]!r}")


Converter = Callable[["_Importer", list, _Attrs], list]
_CONVERTERS: dict[str, Converter] = {}


def _op_key(node: Any) -> str:
    """A node's converter: by op type in the default domain, "domain:OpType" in another
    (onnxruntime's com.microsoft ops)."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"


def _converter(*op_types: str) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for op_type in op_types:
            _CONVERTERS[op_type] = fn
        return fn

    return register


class _Importer(GraphWriter):
    """The state of one import: the graph, the values by ONNX name, the node being converted."""

    def __init__(self, model: Any, shapes: dict[str, Sequence[int]],
                 custom: Mapping[str, Converter] | None = None) -> None:
        super().__init__()
        self.converters = {**_CONVERTERS, **(custom or {})}
        self.model = model
        self.shapes = shapes
        self.values: dict[str, Value] = {}
        self.opset = self._opset()
        self.node: Any = None
        self.where = "from_onnx"

    def _opset(self) -> int:
        opsets = {o.domain: o.version for o in self.model.opset_import}
        version = opsets.get("", opsets.get("ai.onnx"))
        if version is None or not MIN_OPSET <= version <= MAX_OPSET:
            raise ValueError(f"from_onnx: the model's opset is {version}; supported: "
                             f"{MIN_OPSET} to {MAX_OPSET}")
        return version

    # -- driving ---------------------------------------------------------------------------------

    def run(self) -> Graph:
        graph = self.model.graph
        self._check_ops(graph)
        for init in graph.initializer:
            self.where = f"initializer {init.name!r}"
            onnx_dtype(init.data_type, self.where)
            self.values[init.name] = self.named_array(numpy_helper.to_array(init), init.name)
        inputs = [inp for inp in graph.input if inp.name not in self.values]
        unknown = sorted(set(self.shapes) - {inp.name for inp in inputs})
        if unknown:
            raise ValueError(f"from_onnx: shapes names {unknown}, which are not inputs of the "
                             f"model (its inputs: {[inp.name for inp in inputs]})")
        for inp in inputs:
            self._add_input(inp)
        for k, node in enumerate(graph.node):
            self.node = node
            self.name = node_name(node.output[0] if node.output else node.op_type)
            self.where = f"ONNX node {node.name or f'#{k}'!r} ({node.op_type})"
            try:
                self._convert(node)
            except (UnsupportedError, TypeError, ValueError) as err:
                if str(err).startswith(self.where):
                    raise
                raise type(err)(f"{self.where}: {err}") from err
        for out in graph.output:
            self.graph.output(self.as_node(self._value(out.name)))
        return self.graph

    def _check_ops(self, graph: Any) -> None:
        """Every op of the model the frontend cannot translate, in one error, before converting
        anything: each with its count and first node."""
        missing: dict[str, list] = {}
        for k, node in enumerate(graph.node):
            op = _op_key(node)
            if op not in self.converters:
                entry = missing.setdefault(op, [0, node.name or f"#{k}"])
                entry[0] += 1
        if missing:
            listed = "; ".join(f"{op} ({count} node{'s' if count > 1 else ''}, first {first!r})"
                               for op, (count, first) in missing.items())
            hint = "" if not any(":" in op for op in missing) else (
                " (ops of other domains run kernels given as from_onnx(..., custom_ops="
                "{(domain, op_type): fn}), see topi.graph.custom)")
            raise UnsupportedError(f"from_onnx: the following operators are not implemented: "
                                   f"{listed}{hint}")

    def _add_input(self, inp: Any) -> None:
        self.where = f"input {inp.name!r}"
        ttype = inp.type.tensor_type
        dtype = onnx_dtype(ttype.elem_type, self.where)
        dims = [d.dim_value if d.HasField("dim_value") else None for d in ttype.shape.dim]
        declared = [d.dim_param or d.dim_value for d in ttype.shape.dim]
        if inp.name in self.shapes:
            shape = tuple(self.shapes[inp.name])
            if len(shape) != len(dims) or any(d is not None and d != v for d, v in
                                              zip(dims, shape)):
                raise ValueError(f"{self.where}: shapes gives {shape} for an input declared "
                                 f"{declared}")
        elif any(d is None for d in dims):  # kept symbolic, named as in the model
            shape = tuple(d if d is not None else dim_var(
                node_name(dim.dim_param) if dim.dim_param else f"{node_name(inp.name)}_{k}")
                for k, (d, dim) in enumerate(zip(dims, ttype.shape.dim)))
        else:
            shape = tuple(dims)  # type: ignore[arg-type]
        self.values[inp.name] = self.graph.input(inp.name, shape, dtype)

    def _value(self, name: str) -> Value:
        if name not in self.values:
            raise ValueError(f"{self.where}: value {name!r} is not defined before it is used")
        return self.values[name]

    def _convert(self, node: Any) -> None:
        converter = self.converters[_op_key(node)]  # _check_ops has vouched for every op
        inputs = [self._value(name) if name else None for name in node.input]
        attrs = _Attrs(node)
        outputs = converter(self, inputs, attrs)
        attrs.check_all_read()
        for k, name in enumerate(node.output):
            if not name:
                continue
            if k >= len(outputs) or outputs[k] is None:
                raise UnsupportedError(f"output {k} ({name!r}) is not supported")
            self.values[name] = outputs[k]

    # -- helpers for converters --------------------------------------------------------------------

    def static(self, value: Value | None, what: str) -> np.ndarray:
        """A value that must be known at import time (a shape, axes, bounds)."""
        if not isinstance(value, np.ndarray):
            raise UnsupportedError(f"input {what!r} must be a constant (an initializer or computed "
                                   f"from constants)")
        return value

    def ints(self, value: Value | None, what: str) -> list[int]:
        """Ints (or symbolic dims, where a shape value holds them)."""
        return [canon(v) for v in self.static(value, what).reshape(-1)]


def _optional(inputs: list, k: int) -> Value | None:
    return inputs[k] if len(inputs) > k else None


# -- elementwise -------------------------------------------------------------------------------

_BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Pow": "power",
           "Equal": "equal", "Less": "less", "Greater": "greater", "LessOrEqual": "less_equal",
           "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or",
           "Xor": "logical_xor", "PRelu": "prelu"}


@_converter(*_BINARY)
def _binary(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    a, b = inputs
    op_type = im.node.op_type
    if op_type == "Pow":
        # ONNX's Pow keeps the base's dtype whatever the exponent's.
        require(dtype_of(a).startswith("float") or not dtype_of(b).startswith("float"),
                "an integer base with a float exponent")
        if dtype_of(b) != dtype_of(a):
            b = im.op("cast", b, dtype=dtype_of(a))
    elif dtype_of(a) != dtype_of(b):
        raise TypeError(f"operands have different dtypes {dtype_of(a)} and {dtype_of(b)}")
    if op_type == "Div" and not dtype_of(a).startswith("float"):
        return [im.op("trunc_divide", a, b)]  # ONNX's integer division truncates
    return [im.op(_BINARY[op_type], a, b)]


@_converter("Mod")
def _mod(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    a, b = inputs
    fmod = int(attrs.get("fmod", 0))
    require(fmod or not dtype_of(a).startswith("float"), "fmod=0 on floats (ONNX requires 1)")
    return [im.op("fmod" if fmod else "mod", a, b)]


_VARIADIC = {"Max": "maximum", "Min": "minimum", "Sum": "add", "Mean": "add"}


@_converter(*_VARIADIC)
def _variadic(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    """Max, Min, Sum, Mean of one or more broadcasting operands, folded pairwise."""
    if len({dtype_of(v) for v in inputs}) > 1:
        raise TypeError(f"operands have different dtypes {[dtype_of(v) for v in inputs]}")
    y = inputs[0]
    for v in inputs[1:]:
        y = im.op(_VARIADIC[im.node.op_type], y, v)
    if im.node.op_type == "Mean" and len(inputs) > 1:
        y = im.op("divide", y, np.array(len(inputs), dtype_of(y)))
    return [y]


@_converter("Where")
def _where(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    cond, x, y = inputs
    if dtype_of(x) != dtype_of(y):
        raise TypeError(f"X and Y have different dtypes {dtype_of(x)} and {dtype_of(y)}")
    return [im.op("where", cond, x, y)]


_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Sqrt": "sqrt",
          "Exp": "exp", "Log": "log", "Abs": "abs", "Neg": "negative",
          "Reciprocal": "reciprocal", "HardSwish": "hard_swish", "Sign": "sign",
          "Floor": "floor", "Ceil": "ceil", "Round": "round", "Sin": "sin", "Cos": "cos",
          "Softsign": "softsign", "Softplus": "softplus", "Mish": "mish", "IsNaN": "isnan",
          "Not": "logical_not"}


@_converter(*_UNARY)
def _unary(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    return [im.op(_UNARY[im.node.op_type], inputs[0])]


#: Activations whose float attributes pass to the graph op as they are: op, attribute defaults.
_ACTIVATIONS = {
    "LeakyRelu": ("leaky_relu", {"alpha": 0.01}),
    "HardSigmoid": ("hard_sigmoid", {"alpha": 0.2, "beta": 0.5}),
    "Elu": ("elu", {"alpha": 1.0}),
    "Celu": ("celu", {"alpha": 1.0}),
    "Selu": ("selu", {"alpha": 1.6732632423543772, "gamma": 1.0507009873554805}),
}


@_converter(*_ACTIVATIONS)
def _activation(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    op, defaults = _ACTIVATIONS[im.node.op_type]
    return [im.op(op, inputs[0], **{k: float(attrs.get(k, v)) for k, v in defaults.items()})]


@_converter("ThresholdedRelu")
def _thresholded_relu(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x = inputs[0]
    above = im.op("greater", x, np.array(attrs.get("alpha", 1.0), dtype_of(x)))
    return [im.op("where", above, x, np.zeros((), dtype_of(x)))]


@_converter("IsInf")
def _is_inf(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x = inputs[0]
    negative, positive = attrs.get("detect_negative", 1), attrs.get("detect_positive", 1)
    y = im.op("isinf", x)
    if negative and positive:
        return [y]
    if not (negative or positive):
        return [np.zeros(shape_of(x), "bool")]
    side = im.op("greater" if positive else "less", x, np.zeros((), dtype_of(x)))
    return [im.op("logical_and", y, side)]


@_converter("Gelu")
def _gelu(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    approximate = attrs.get("approximate", "none")
    require(approximate in ("none", "tanh"), f"unsupported approximate={approximate!r}")
    return [im.op("gelu" if approximate == "none" else "gelu_tanh", inputs[0])]


@_converter("Clip")
def _clip(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    bounds = []
    for k, what in ((1, "min"), (2, "max")):
        v = _optional(inputs, k)
        bounds.append(None if v is None else float(im.static(v, what).reshape(())))
    return [im.op("clip", inputs[0], a_min=bounds[0], a_max=bounds[1])]


@_converter("Cast")
def _cast(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    attrs.get("saturate")  # only concerns float8 targets, which onnx_dtype rejects
    dtype = onnx_dtype(attrs.get("to"), "Cast to")
    x = inputs[0]
    if dtype_of(x) == dtype:
        return [x]
    return [im.op("cast", x, dtype=dtype)]


@_converter("CastLike")
def _cast_like(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    attrs.get("saturate")  # only concerns float8 targets
    x, dtype = inputs[0], dtype_of(inputs[1])
    return [x if dtype_of(x) == dtype else im.op("cast", x, dtype=dtype)]


@_converter("Identity", "Dropout")
def _identity(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    if im.node.op_type == "Dropout":
        attrs.get("seed")
        mode = _optional(inputs, 2)
        require(mode is None or not bool(im.static(mode, "training_mode")),
                 "training_mode=True")
    return [inputs[0]]


@_converter("Constant")
def _constant(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    kinds = {"value": None, "value_float": "float32", "value_floats": "float32",
             "value_int": "int64", "value_ints": "int64"}
    found = [(k, attrs.get(k)) for k in kinds]
    attrs.get("sparse_value")
    attrs.get("value_string")
    attrs.get("value_strings")
    given = [(k, v) for k, v in found if v is not None]
    require(len(given) == 1, "a Constant needs exactly one of value, value_float(s), "
             "value_int(s) (sparse and string constants are unsupported)")
    key, value = given[0]
    if key == "value":
        onnx_dtype(value.data_type, "Constant value")
        return [numpy_helper.to_array(value)]
    return [np.array(value, dtype=kinds[key])]


# -- convolution, dense, pooling ---------------------------------------------------------------


def _spatial(attrs: _Attrs, name: str, default: int = 1, dims: int = 2) -> tuple[int, ...]:
    value = attrs.get(name)
    if value is None:
        return (default,) * dims
    require(len(value) == dims, f"{name}={value} (only 2-D windows and 3-D volumes are "
            "supported)")
    return tuple(int(v) for v in value)


def _window_pads(attrs: _Attrs, in_hw: Sequence[int], kernel: Sequence[int],
                 stride: Sequence[int], dilation: Sequence[int]) -> tuple[int, ...]:
    """The padding before each spatial axis, then after each, from `pads` or `auto_pad`
    (SAME_UPPER puts the odd pixel after, SAME_LOWER before): (top, left, bottom, right) for
    images."""
    auto_pad = attrs.get("auto_pad", "NOTSET")
    pads = attrs.get("pads")
    dims = len(in_hw)
    if auto_pad == "NOTSET":
        if pads is None:
            return (0,) * 2 * dims
        require(len(pads) == 2 * dims, f"pads={pads} for {dims} spatial axes")
        return tuple(int(p) for p in pads)
    if auto_pad == "VALID":
        return (0,) * 2 * dims
    require(auto_pad in ("SAME_UPPER", "SAME_LOWER"), f"unsupported auto_pad={auto_pad!r}")
    before, after = [], []
    for n, k, s, d in zip(in_hw, kernel, stride, dilation):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        small, large = total // 2, total - total // 2
        before.append(small if auto_pad == "SAME_UPPER" else large)
        after.append(large if auto_pad == "SAME_UPPER" else small)
    return (*before, *after)


def _four_d(value: Value, what: str) -> None:
    require(len(shape_of(value)) == 4, f"{what} of rank {len(shape_of(value))} (only 2-D "
             f"images, NCHW, are supported)")


def _conv_window(inputs: list, attrs: _Attrs) -> tuple:
    """(x, weight, bias or None, kernel (h, w), stride, dilation) of a Conv or ConvTranspose."""
    x, w, bias = inputs[0], inputs[1], _optional(inputs, 2)
    _four_d(x, "input")
    kernel = shape_of(w)[2:]
    require(tuple(_spatial(attrs, "kernel_shape", 0)) in ((0, 0), tuple(kernel)),
            f"kernel_shape {attrs.get('kernel_shape')} differs from the weight's {kernel}")
    return x, w, bias, kernel, _spatial(attrs, "strides"), _spatial(attrs, "dilations")


def _one_dimensional_too(convert: Converter) -> Converter:
    """A converter of 2-D windows (Conv, ConvTranspose, pooling) that takes 1-D ones, on
    (N, C, L) inputs, as well: computed one row high (`GraphWriter.one_row`), the row dropped
    from the result."""
    @functools.wraps(convert)
    def converter(im: _Importer, inputs: list, attrs: _Attrs) -> list:
        if len(shape_of(inputs[0])) != 3:
            return convert(im, inputs, attrs)
        attrs.lift_to_rows()
        # The input and a convolution's weight; a bias, (O,), applies along axis 1 either way.
        lifted = [im.one_row(v) if k < 2 and v is not None else v for k, v in enumerate(inputs)]
        return [im.drop_row(y) for y in convert(im, lifted, attrs)]
    return converter


def _volume_window(x: Value, kernel: Sequence[int], attrs: _Attrs) -> tuple:
    """(stride, dilation, pads) of a window over (N, C, D, H, W) volumes."""
    stride, dilation = _spatial(attrs, "strides", dims=3), _spatial(attrs, "dilations", dims=3)
    return stride, dilation, _window_pads(attrs, shape_of(x)[2:], kernel, stride, dilation)


@_converter("Conv")
@_one_dimensional_too
def _conv(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    if len(shape_of(inputs[0])) == 5:  # volumes: one 2-D convolution per depth tap
        x, w, bias = inputs[0], inputs[1], _optional(inputs, 2)
        kernel = shape_of(w)[2:]
        require(_spatial(attrs, "kernel_shape", 0, dims=3) in ((0, 0, 0), tuple(kernel)),
                f"kernel_shape {attrs.get('kernel_shape')} differs from the weight's {kernel}")
        stride, dilation, pads = _volume_window(x, kernel, attrs)
        y = conv3d(im, x, w, stride, pads, dilation, int(attrs.get("group", 1)))
        return [y if bias is None else im.op("bias_add", y, bias, axis=1)]
    x, w, bias, kernel, stride, dilation = _conv_window(inputs, attrs)
    pads = _window_pads(attrs, shape_of(x)[2:], kernel, stride, dilation)
    y = im.graph.conv2d(im.as_node(x), im.as_node(w), stride=stride, padding=compact_padding(pads),
                        dilation=dilation, groups=int(attrs.get("group", 1)), name=im.name)
    return [y if bias is None else im.op("bias_add", y, bias, axis=1)]


@_converter("ConvTranspose")
@_one_dimensional_too
def _conv_transpose(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x, w, bias, kernel, stride, dilation = _conv_window(inputs, attrs)
    out_pad = _spatial(attrs, "output_padding", 0)
    output_shape = attrs.get("output_shape")
    auto_pad = attrs.get("auto_pad", "NOTSET")
    pads = attrs.get("pads")
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # The spec's rule: the total padding that gives the requested (or input * stride) size.
        in_hw = shape_of(x)[2:]
        target = list(output_shape)[-2:] if output_shape is not None else \
            [n * s for n, s in zip(in_hw, stride)]
        total = [s * (n - 1) + op + (k - 1) * d + 1 - t for n, s, op, k, d, t in
                 zip(in_hw, stride, out_pad, kernel, dilation, target)]
        require(all(t >= 0 for t in total), f"output_shape {output_shape} is too large")
        # SAME_UPPER puts the odd pixel at the end, SAME_LOWER and NOTSET at the start.
        upper = auto_pad == "SAME_UPPER"
        before = [t // 2 if upper else t - t // 2 for t in total]
        padding = (before[0], before[1], total[0] - before[0], total[1] - before[1])
    elif auto_pad == "VALID" or pads is None:
        padding = (0, 0, 0, 0)
    else:
        require(auto_pad == "NOTSET", f"unsupported auto_pad={auto_pad!r}")
        require(len(pads) == 4, f"pads={pads} (only 2-D windows are supported)")
        padding = tuple(int(p) for p in pads)
    y = im.op("conv2d_transpose", x, w, stride=stride, padding=padding, output_padding=out_pad,
              dilation=dilation, groups=int(attrs.get("group", 1)))
    return [y if bias is None else im.op("bias_add", y, bias, axis=1)]


@_converter("Gemm")
def _gemm(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    a, b, c = inputs[0], inputs[1], _optional(inputs, 2)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if attrs.get("transA", 0):
        a = im.op("transpose", a, axes=(1, 0))
    weight = b if attrs.get("transB", 0) else im.op("transpose", b, axes=(1, 0))
    y = im.op("dense", a, weight)
    if alpha != 1.0:
        y = im.op("multiply", y, np.array(alpha, dtype_of(y)))
    if c is None or beta == 0.0:
        return [y]
    if beta != 1.0:
        c = im.op("multiply", c, np.array(beta, dtype_of(c)))
    if len(shape_of(c)) == 1 and shape_of(c)[0] == shape_of(y)[1]:
        return [im.op("bias_add", y, c, axis=1)]
    return [im.op("add", y, c)]


@_converter("MatMul")
def _matmul(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    a, b = inputs
    sa, sb = shape_of(a), shape_of(b)
    # numpy's rule: a 1-D operand is a row (on the left) or a column (on the right), dropped
    # from the result.
    a2 = im.reshape(a, (1, *sa)) if len(sa) == 1 else a
    b2 = im.reshape(b, (*sb, 1)) if len(sb) == 1 else b
    y = im.matmul(a2, b2)
    shape = shape_of(y)
    if len(sb) == 1:
        shape = shape[:-1]
    if len(sa) == 1:
        shape = (*shape[:-2], shape[-1]) if len(sb) > 1 else shape[:-1]
    return [im.reshape(y, shape)]


def _pool_common(im: _Importer, x: Value, attrs: _Attrs) -> dict:
    _four_d(x, "input")
    kernel = _spatial(attrs, "kernel_shape", 0)
    require(0 not in kernel, "kernel_shape is required")
    stride, dilation = _spatial(attrs, "strides"), _spatial(attrs, "dilations")
    pads = _window_pads(attrs, shape_of(x)[2:], kernel, stride, dilation)
    return {"kernel": kernel, "stride": stride, "padding": compact_padding(pads),
            "dilation": dilation, "ceil_mode": bool(attrs.get("ceil_mode", 0))}


def _volume_pool(im: _Importer, x: Value, attrs: _Attrs, pool_type: str) -> Value:
    """MaxPool or AveragePool over (N, C, D, H, W) volumes (`volumes.pool3d`)."""
    kernel = _spatial(attrs, "kernel_shape", 0, dims=3)
    require(0 not in kernel, "kernel_shape is required")
    stride, dilation, pads = _volume_window(x, kernel, attrs)
    require(dilation == (1, 1, 1), f"dilations={dilation} of a 3-D pooling")
    return pool3d(im, x, pool_type, kernel, stride, pads, bool(attrs.get("ceil_mode", 0)),
                  bool(attrs.get("count_include_pad", 0)))


@_converter("MaxPool")
@_one_dimensional_too
def _max_pool(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    require(attrs.get("storage_order", 0) == 0, "storage_order=1")
    require(len(im.node.output) < 2 or not im.node.output[1], "the Indices output")
    if len(shape_of(inputs[0])) == 5:
        return [_volume_pool(im, inputs[0], attrs, "max")]
    return [im.op("max_pool2d", inputs[0], **_pool_common(im, inputs[0], attrs))]


@_converter("AveragePool")
@_one_dimensional_too
def _avg_pool(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    if len(shape_of(inputs[0])) == 5:
        return [_volume_pool(im, inputs[0], attrs, "avg")]
    args = _pool_common(im, inputs[0], attrs)
    include = bool(attrs.get("count_include_pad", 0))
    return [im.op("avg_pool2d", inputs[0], count_include_pad=include, **args)]


@_converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x = inputs[0]
    average = im.node.op_type == "GlobalAveragePool"
    rank = len(shape_of(x))
    require(rank >= 3, f"input of rank {rank} (N, C and at least one spatial axis)")
    if rank == 4:  # images: the pooling ops the layout pass keeps blocked
        if average:
            return [im.op("global_avg_pool2d", x)]
        return [im.op("adaptive_pool2d", x, output_size=(1, 1), pool_type="max")]
    # Sequences (AdaptiveAvgPool1d exports) and volumes: a reduction over the spatial axes.
    return [im.op("mean" if average else "max", x, axis=tuple(range(2, rank)), keepdims=True)]


@_converter("BatchNormalization")
def _batch_norm(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    require(not attrs.get("training_mode", 0), "training_mode=1")
    require(len([o for o in im.node.output if o]) == 1, "the running statistics outputs")
    attrs.get("momentum")  # only used in training
    x, scale, bias, mean, var = inputs
    return [im.op("batch_norm", x, scale, bias, mean, var,
                  epsilon=float(attrs.get("epsilon", 1e-5)), axis=1)]


@_converter("LayerNormalization")
def _layer_norm(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    require(len([o for o in im.node.output if o]) == 1, "the Mean and InvStdDev outputs")
    attrs.get("stash_type")  # the precision of the statistics: topi keeps the input's
    x, scale, bias = inputs[0], inputs[1], _optional(inputs, 2)
    ndim = len(shape_of(x))
    axis = int(attrs.get("axis", -1)) % ndim
    axes = tuple(range(axis, ndim))
    norm_shape = shape_of(x)[axis:]
    if bias is None:
        bias = np.zeros(norm_shape, dtype_of(x))
    scale, bias = (v if shape_of(v) == norm_shape else im.op(
        "reshape", v, newshape=norm_shape) for v in (scale, bias))
    return [im.op("layer_norm", x, scale, bias, axis=axes,
                  epsilon=float(attrs.get("epsilon", 1e-5)))]


@_converter("Softmax", "LogSoftmax")
def _softmax(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    op = "softmax" if im.node.op_type == "Softmax" else "log_softmax"
    return [im.op(op, inputs[0], axis=int(attrs.get("axis", -1)))]


# -- reductions --------------------------------------------------------------------------------

_REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
           "ReduceProd": "prod"}


def _reduce_axes(im: _Importer, inputs: list, attrs: _Attrs) -> tuple | None | bool:
    """A reduction's axes: a tuple, None for all, or False for none at all
    (noop_with_empty_axes). ReduceSum takes them as an input from opset 13, the others from 18."""
    if im.node.op_type == "ReduceSum" or im.opset >= 18:
        axes_value = _optional(inputs, 1)
        axes = None if axes_value is None else im.ints(axes_value, "axes")
    else:
        axes = attrs.get("axes")
    noop = attrs.get("noop_with_empty_axes", 0)
    if axes:
        return tuple(axes)
    return False if noop else None


@_converter(*_REDUCE)
def _reduce(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    axes, keepdims = _reduce_axes(im, inputs, attrs), bool(attrs.get("keepdims", 1))
    if axes is False:
        return [inputs[0]]
    return [im.op(_REDUCE[im.node.op_type], inputs[0], axis=axes, keepdims=keepdims)]


@_converter("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
def _reduce_composed(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    """The reductions that are a sum between elementwise ops."""
    op_type, x = im.node.op_type, inputs[0]
    axes, keepdims = _reduce_axes(im, inputs, attrs), bool(attrs.get("keepdims", 1))
    if axes is False:  # no reduction: only the elementwise part, on each element alone
        axes = ()
    peak = None
    if op_type == "ReduceL1":
        x = im.op("abs", x)
    elif op_type in ("ReduceL2", "ReduceSumSquare"):
        x = im.op("multiply", x, x)
    elif op_type == "ReduceLogSumExp":  # shifted by the maximum, so that exp cannot overflow
        peak = im.op("max", x, axis=axes, keepdims=True) if axes != () else x
        x = im.op("exp", im.op("subtract", x, peak))
    y = im.op("sum", x, axis=axes, keepdims=keepdims) if axes != () else x
    if op_type == "ReduceL2":
        y = im.op("sqrt", y)
    elif op_type in ("ReduceLogSum", "ReduceLogSumExp"):
        y = im.op("log", y)
    if peak is not None:
        y = im.op("add", y, peak if keepdims else im.reshape(peak, shape_of(y)))
    return [y]


@_converter("ArgMax", "ArgMin")
def _arg_reduce(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    require(not attrs.get("select_last_index", 0), "select_last_index=1")
    return [im.op(im.node.op_type.lower(), inputs[0], axis=int(attrs.get("axis", 0)),
                  keepdims=bool(attrs.get("keepdims", 1)))]


# -- shapes and data movement --------------------------------------------------------------------


@_converter("Shape")
def _shape(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    dims = shape_of(inputs[0])
    start, end = attrs.get("start", 0), attrs.get("end")
    return [shape_value(dims[slice(start, end)])]


@_converter("Reshape")
def _reshape_op(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x, shape = inputs[0], im.ints(inputs[1], "shape")
    allow_zero = attrs.get("allowzero", 0)
    require(not (allow_zero and 0 in shape), "a zero-sized dimension")
    new = [shape_of(x)[k] if d == 0 and not allow_zero else d for k, d in enumerate(shape)]
    return [im.reshape(x, new)]


@_converter("Flatten")
def _flatten(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    shape = shape_of(inputs[0])
    axis = int(attrs.get("axis", 1)) % (len(shape) + 1) if shape else 0
    return [im.reshape(inputs[0], (math.prod(shape[:axis]), math.prod(shape[axis:])))]


@_converter("Squeeze")
def _squeeze(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    shape = shape_of(inputs[0])
    axes_value = _optional(inputs, 1)
    if axes_value is None:
        axes = [k for k, d in enumerate(shape) if d == 1]
    else:
        axes = [a % len(shape) for a in im.ints(axes_value, "axes")]
    if any(shape[a] != 1 for a in axes):
        raise ValueError(f"cannot squeeze axes {axes} of shape {shape}")
    return [im.reshape(inputs[0], [d for k, d in enumerate(shape) if k not in axes])]


@_converter("Unsqueeze")
def _unsqueeze(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    shape = list(shape_of(inputs[0]))
    rank = len(shape) + len(im.ints(inputs[1], "axes"))
    for a in sorted(a % rank for a in im.ints(inputs[1], "axes")):
        shape.insert(a, 1)
    return [im.reshape(inputs[0], shape)]


@_converter("Transpose")
def _transpose(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    perm = attrs.get("perm")
    return [im.op("transpose", inputs[0], axes=None if perm is None else tuple(perm))]


@_converter("Concat")
def _concat(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    axis = attrs.get("axis")
    require(axis is not None, "the axis attribute is required")
    return [im.op("concatenate", *inputs, axis=int(axis))]


@_converter("Split")
def _split(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x = inputs[0]
    axis = int(attrs.get("axis", 0)) % len(shape_of(x))
    n, outputs = shape_of(x)[axis], len(im.node.output)
    sizes_value = _optional(inputs, 1)
    num_outputs = attrs.get("num_outputs")
    if sizes_value is not None:
        sizes = im.ints(sizes_value, "split")
    elif num_outputs is not None:  # opset 18: the last piece may be smaller
        chunk = -(-n // int(num_outputs))
        sizes = [min(chunk, n - k * chunk) for k in range(int(num_outputs))]
    else:
        if n % outputs:
            raise ValueError(f"{n} elements along axis {axis} do not split into {outputs}")
        sizes = [n // outputs] * outputs
    if sum(sizes) != n or len(sizes) != outputs or min(sizes) < 1:
        raise ValueError(f"split sizes {sizes} do not cut {n} elements into {outputs} pieces")
    starts = np.cumsum([0, *sizes])
    return [im.op("strided_slice", x, begin=(int(b),), end=(int(e),), strides=(1,),
                  axes=(axis,)) for b, e in itertools.pairwise(starts)]


@_converter("Slice")
def _slice(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x = inputs[0]
    starts, ends = im.ints(inputs[1], "starts"), im.ints(inputs[2], "ends")
    axes_value, steps_value = _optional(inputs, 3), _optional(inputs, 4)
    axes = list(range(len(starts))) if axes_value is None else im.ints(axes_value, "axes")
    steps = [1] * len(starts) if steps_value is None else im.ints(steps_value, "steps")
    axes = [a % len(shape_of(x)) for a in axes]
    if any(is_symbolic(d) for d in (*starts, *ends, *(shape_of(x)[a] for a in axes))) and \
            not (isinstance(x, np.ndarray) and x.dtype == object):
        return [im.slice_dims(x, starts, ends, axes, steps)]
    if isinstance(x, np.ndarray):  # folded with numpy, which allows the empty slices of shapes
        return [x[_index(shape_of(x), starts, ends, axes, steps)]]
    return [im.op("strided_slice", x, begin=tuple(starts), end=tuple(ends),
                  strides=tuple(steps), axes=tuple(axes))]


def _index(shape: Sequence[int], starts: list[int], ends: list[int], axes: list[int],
           steps: list[int]) -> tuple[slice, ...]:
    """ONNX Slice's bounds as Python slices: negative bounds count from the end, then clamp
    (to [0, n] going forward, [-1, n - 1] going backward, where -1 is before the first)."""
    index = [slice(None)] * len(shape)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        n = shape[axis]
        start, end = (v + n if v < 0 else v for v in (start, end))
        low, high = (0, n) if step > 0 else (-1, n - 1)
        start, end = min(max(start, low), high), min(max(end, low), high)
        index[axis] = slice(start, None if end < 0 else end, step)
    return tuple(index)


def broadcast_dims(a: Sequence, b: Sequence) -> tuple:
    """numpy's broadcast of two shapes whose dims may be symbolic (equal dims are one object)."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if isinstance(y, int) and y == 1 or x is y:
            out.append(x)
        elif isinstance(x, int) and x == 1:
            out.append(y)
        elif isinstance(x, int) and isinstance(y, int) and x == y:
            out.append(x)
        else:
            raise ValueError(f"shapes {a} and {b} do not broadcast")
    return tuple(out)


@_converter("Gather")
def _gather(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x, indices = inputs
    require(dtype_of(indices) in ("int32", "int64"), f"indices of dtype {dtype_of(indices)}")
    return [im.op("take", x, indices, axis=int(attrs.get("axis", 0)))]


@_converter("GatherElements")
def _gather_elements(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x, indices = inputs
    return [im.op("gather_elements", x, indices, axis=int(attrs.get("axis", 0)))]


@_converter("GatherND")
def _gather_nd(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x, indices = inputs
    return [im.op("gather_nd", x, indices, batch_dims=int(attrs.get("batch_dims", 0)))]


def _no_reduction(attrs: _Attrs) -> None:
    reduction = attrs.get("reduction", "none")
    require(reduction == "none", f"reduction={reduction!r} (only 'none')")


@_converter("Col2Im")
def _col2im(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    """Col2Im (PyTorch's nn.Fold): column l of input block c * prod(block) + k adds to the
    image at its block position plus tap k, in an image padded by `pads`; the destinations
    are worked out here and the values scattered there (`scatter_at`), then the padding cut."""
    x, image, block = inputs
    image, block = im.ints(image, "image_shape"), im.ints(block, "block_shape")
    dims = len(image)
    dilations = [int(d) for d in attrs.get("dilations", [1] * dims)]
    strides = [int(d) for d in attrs.get("strides", [1] * dims)]
    pads = [int(p) for p in attrs.get("pads", [0] * 2 * dims)]
    padded = [n + pads[d] + pads[d + dims] for d, n in enumerate(image)]
    counts = [pooled_size(n, pads[d], pads[d + dims], dilations[d] * (block[d] - 1) + 1,
                          strides[d], False) for d, n in enumerate(image)]
    batch, rows, columns = shape_of(x)
    taps = math.prod(block)
    require(rows % taps == 0 and columns == math.prod(counts) and min(counts) >= 1,
            f"a Col2Im input of shape {shape_of(x)} for image {image} and block {block}")
    channels = rows // taps
    # the padded-image position of every (tap, column), one axis at a time, made flat
    tap_pos = np.indices(block).reshape(dims, taps)
    col_pos = np.indices(counts).reshape(dims, -1)
    flat = np.zeros((taps, columns), np.int64)
    for d in range(dims):
        position = tap_pos[d][:, None] * dilations[d] + col_pos[d][None, :] * strides[d]
        flat = flat * padded[d] + position
    plane = math.prod(padded)
    dest = (np.arange(batch * channels, dtype=np.int64)[:, None, None] * plane + flat)
    zeros = np.zeros((batch, channels, *padded), dtype_of(x))
    y = im.scatter_at(zeros, dest, x, accumulate=True)
    if any(pads):
        y = im.op("strided_slice", y, begin=tuple(pads[:dims]),
                  end=tuple(p - e for p, e in zip(padded, pads[dims:])), strides=(1,) * dims,
                  axes=tuple(range(2, 2 + dims)))
    return [y]


@_converter("ScatterND")
def _scatter_nd(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    _no_reduction(attrs)
    return [im.op("scatter_nd", *inputs)]


@_converter("ScatterElements")
def _scatter_elements(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    _no_reduction(attrs)
    return [im.op("scatter_elements", *inputs, axis=int(attrs.get("axis", 0)))]


# -- values made from shapes (folded at import) ------------------------------------------------


@_converter("Size")
def _size(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    return [shape_value(math.prod(shape_of(inputs[0])))]


@_converter("ConstantOfShape")
def _constant_of_shape(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    value = attrs.get("value")
    fill = np.zeros(1, "float32") if value is None else numpy_helper.to_array(value)
    if value is not None:
        onnx_dtype(value.data_type, "ConstantOfShape value")
    require(fill.size == 1, f"a value of {fill.size} elements (a single one is required)")
    if isinstance(inputs[0], np.ndarray) and inputs[0].dtype == object:
        return [im.graph.apply("full", im.as_node(fill.reshape(())), name=im.name,
                               shape=tuple(im.ints(inputs[0], "input")))]
    return [np.full(im.ints(inputs[0], "input"), fill.reshape(()), fill.dtype)]


@_converter("Range")
def _range(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    start, limit, delta = (im.static(v, what).reshape(()) for v, what in
                           zip(inputs, ("start", "limit", "delta")))
    if object in (start.dtype, limit.dtype, delta.dtype):  # a symbolic length: position ids
        count = quotient(canon(limit.item()) - canon(start.item()) + int(delta) - 1, int(delta))
        require(count is not None and start.dtype != object, "Range of symbolic sizes "
                f"{start}, {limit}, {delta}")
        dtype = next(v.dtype for v in (start, limit, delta) if v.dtype != object)
        return [im.graph.apply("arange", im.as_node(start.astype(dtype)), name=im.name,
                               count=count, delta=int(delta))]
    count = max(math.ceil((limit - start) / delta), 0)
    return [(start + np.arange(count) * delta).astype(start.dtype)]


@_converter("NonZero")
def _non_zero(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    # The output's shape depends on the values: only known at import.
    return [np.array(np.nonzero(im.static(inputs[0], "X")), "int64").reshape(
        len(shape_of(inputs[0])), -1)]


@_converter("Expand")
def _expand(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x = inputs[0]
    target = tuple(im.ints(inputs[1], "shape"))
    if any(is_symbolic(d) for d in (*target, *shape_of(x))):
        shape = broadcast_dims(shape_of(x), target)
        return [x if shape == shape_of(x) else im.op("broadcast_dims", im.as_node(x),
                                                     shape=shape)]
    shape = np.broadcast_shapes(shape_of(x), target)
    return [x if shape == shape_of(x) else im.op("broadcast_to", x, shape=shape)]


@_converter("Tile")
def _tile(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    reps = tuple(im.ints(inputs[1], "repeats"))
    return [inputs[0] if all(r == 1 for r in reps) else im.op("tile", inputs[0], reps=reps)]


# -- masks, scans, padding, resizing -----------------------------------------------------------


@_converter("Trilu")
def _trilu(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    k_value = _optional(inputs, 1)
    k = 0 if k_value is None else int(im.static(k_value, "k").reshape(()))
    return [im.op("trilu", inputs[0], k=k, upper=bool(attrs.get("upper", 1)))]


@_converter("CumSum")
def _cumsum(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    axis = int(im.static(inputs[1], "axis").reshape(()))
    return [im.op("cumsum", inputs[0], axis=axis, exclusive=bool(attrs.get("exclusive", 0)),
                  reverse=bool(attrs.get("reverse", 0)))]


@_converter("TopK")
def _topk(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    """The k largest (or smallest) values along an axis and their int64 positions, in order."""
    x = inputs[0]
    k = int(im.static(inputs[1], "K").reshape(()))
    axis = int(attrs.get("axis", -1)) % len(shape_of(x))
    order = im.op("argsort", x, axis=axis, descending=bool(attrs.get("largest", 1)), k=k)
    return [im.op("gather_elements", x, order, axis=axis), order]


@_converter("Pad")
def _pad(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x = inputs[0]
    rank = len(shape_of(x))
    pads = im.ints(inputs[1], "pads")
    axes_value = _optional(inputs, 3)
    axes = list(range(rank)) if axes_value is None else \
        [a % rank for a in im.ints(axes_value, "axes")]
    require(len(pads) == 2 * len(axes), f"pads={pads} for {len(axes)} axes")
    before, after = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        before[a], after[a] = pads[k], pads[len(axes) + k]
    mode = attrs.get("mode", "constant")
    require(mode in ("constant", "reflect", "edge", "wrap"), f"unsupported mode={mode!r}")
    value_input = _optional(inputs, 2)
    value = 0 if value_input is None else im.static(value_input, "constant_value").reshape(())
    # Negative pads crop: pad by the positive parts, then slice the rest off.
    grow_before, grow_after = [max(p, 0) for p in before], [max(p, 0) for p in after]
    if any(grow_before) or any(grow_after):
        if mode == "wrap":
            x = _wrap_pad(im, x, grow_before, grow_after)
        else:
            extra = {} if mode == "constant" else {"mode": mode}
            x = im.op("pad", x, pad_before=tuple(grow_before), pad_after=tuple(grow_after),
                      pad_value=float(value) if mode == "constant" else 0.0, **extra)
    if min(before) < 0 or min(after) < 0:
        shape = shape_of(x)
        x = im.op("strided_slice", x, begin=tuple(-min(p, 0) for p in before),
                  end=tuple(n + min(p, 0) for n, p in zip(shape, after)), strides=(1,) * rank,
                  axes=tuple(range(rank)))
    return [x]


def _wrap_pad(im: _Importer, x: Value, before: list[int], after: list[int]) -> Value:
    """Circular padding: each axis gains its last elements in front and its first behind."""
    for axis, (b, a) in enumerate(zip(before, after)):
        n = shape_of(x)[axis]
        require(b <= n and a <= n, "wrap padding wider than the axis")
        pieces = [im.op("strided_slice", x, begin=(n - b,), end=(n,), strides=(1,), axes=(axis,))
                  ] if b else []
        pieces.append(x)
        if a:
            pieces.append(im.op("strided_slice", x, begin=(0,), end=(a,), strides=(1,),
                                axes=(axis,)))
        x = im.op("concatenate", *pieces, axis=axis) if len(pieces) > 1 else x
    return x


@_converter("Resize")
def _resize(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x = inputs[0]
    _four_d(x, "input")
    require(not attrs.get("antialias", 0), "antialias=1")
    require(attrs.get("keep_aspect_ratio_policy", "stretch") == "stretch",
            f"keep_aspect_ratio_policy={attrs.get('keep_aspect_ratio_policy')!r}")
    axes = attrs.get("axes")
    axes = list(range(4)) if axes is None else [a % 4 for a in axes]
    scales_value, sizes_value = _optional(inputs, 2), _optional(inputs, 3)
    shape = list(shape_of(x))
    if sizes_value is not None and im.static(sizes_value, "sizes").size:
        for a, n in zip(axes, im.ints(sizes_value, "sizes")):
            shape[a] = n
    else:
        scales = [float(v) for v in im.static(scales_value, "scales").reshape(-1)]
        for a, scale in zip(axes, scales):
            shape[a] = int(math.floor(shape_of(x)[a] * scale))
            # The coordinate transforms use the scale itself; topi's resize uses out / in.
            require(math.isclose(shape[a], shape_of(x)[a] * scale),
                    f"scale {scale} that does not give a whole number of pixels")
    require(shape[:2] == list(shape_of(x))[:2], "resizing the batch or channel axes")
    mode = attrs.get("mode", "nearest")
    transform = attrs.get("coordinate_transformation_mode", "half_pixel")
    require(transform != "tf_crop_and_resize", "coordinate_transformation_mode="
            "'tf_crop_and_resize'")
    return [_resize2d(im, x, shape[2:], mode, transform, attrs)]


def _resize2d(im: _Importer, x: Value, size: Sequence[int], mode: str, transform: str,
              attrs: _Attrs) -> Value:
    require(mode in ("nearest", "linear", "cubic"), f"unsupported mode={mode!r}")
    # Read before the identity check, which skips the op: a resize to the input's own size
    # (DINOv2's and BEiT's position tables at the pretraining size) carries them all the same.
    options = dict(nearest_mode=attrs.get("nearest_mode", "round_prefer_floor"),
                   cubic_coeff_a=float(attrs.get("cubic_coeff_a", -0.75)),
                   exclude_outside=bool(attrs.get("exclude_outside", 0)),
                   extrapolation_value=float(attrs.get("extrapolation_value", 0.0)))
    if tuple(size) == shape_of(x)[2:]:
        return x
    return im.op("resize2d", x, size=tuple(size), method=mode,
                 coordinate_transformation_mode=transform, **options)


@_converter("Upsample")
def _upsample(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    """The Resize of opsets 7 to 9: asymmetric coordinates, nearest rounds down."""
    x = inputs[0]
    _four_d(x, "input")
    scales = [float(v) for v in im.static(inputs[1], "scales").reshape(-1)]
    size = [int(math.floor(n * s)) for n, s in zip(shape_of(x), scales)]
    require(size[:2] == list(shape_of(x))[:2], "resizing the batch or channel axes")
    mode = attrs.get("mode", "nearest")
    require(mode in ("nearest", "linear"), f"unsupported mode={mode!r}")
    return [im.op("resize2d", x, size=tuple(size[2:]), method=mode,
                  coordinate_transformation_mode="asymmetric", nearest_mode="floor")]


# -- normalisation and rearrangement -------------------------------------------------------------


@_converter("InstanceNormalization")
def _instance_norm(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x, scale, bias = inputs
    return [im.op("instance_norm", x, scale, bias, epsilon=float(attrs.get("epsilon", 1e-5)))]


@_converter("GroupNormalization")
def _group_norm(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x, scale, bias = inputs
    attrs.get("stash_type")  # the precision of the statistics: topi keeps the input's
    groups = int(attrs.get("num_groups"))
    channels = shape_of(x)[1]
    if im.opset < 21 and shape_of(scale) == (groups,) and groups != channels:
        # Opsets 18 to 20 scale per group: each group's value repeats over its channels.
        index = np.arange(channels) // (channels // groups)
        scale, bias = (im.op("take", v, index, axis=0) for v in (scale, bias))
    return [im.op("group_norm", x, scale, bias, num_groups=groups,
                  epsilon=float(attrs.get("epsilon", 1e-5)))]


@_converter("DepthToSpace")
def _depth_to_space(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x = inputs[0]
    _four_d(x, "input")
    b, c, h, w = shape_of(x)
    bs, mode = int(attrs.get("blocksize")), attrs.get("mode", "DCR")
    require(mode in ("DCR", "CRD"), f"unsupported mode={mode!r}")
    if mode == "DCR":
        y = im.reshape(x, (b, bs, bs, c // bs ** 2, h, w))
        y = im.op("transpose", y, axes=(0, 3, 4, 1, 5, 2))
    else:
        y = im.reshape(x, (b, c // bs ** 2, bs, bs, h, w))
        y = im.op("transpose", y, axes=(0, 1, 4, 2, 5, 3))
    return [im.reshape(y, (b, c // bs ** 2, h * bs, w * bs))]


@_converter("SpaceToDepth")
def _space_to_depth(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    x = inputs[0]
    _four_d(x, "input")
    b, c, h, w = shape_of(x)
    bs = int(attrs.get("blocksize"))
    y = im.reshape(x, (b, c, h // bs, bs, w // bs, bs))
    y = im.op("transpose", y, axes=(0, 3, 5, 1, 2, 4))
    return [im.reshape(y, (b, c * bs * bs, h // bs, w // bs))]


@_converter("Einsum")
def _einsum(im: _Importer, inputs: list, attrs: _Attrs) -> list:
    return [einsum(im, attrs.get("equation"), inputs)]
