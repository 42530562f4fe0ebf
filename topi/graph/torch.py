"""The PyTorch frontend: an `nn.Module` captured with `torch.export` as a `Graph` of topi ops.

`torch.export` traces the module on example inputs into ATen ops (with symbolic dims where
`dynamic_shapes` names `Dim`s: they stay shape variables of the graph, see `from_torch`), and
`run_decompositions` makes them one functional op set, core ATen (no in-place or view ops), with
`scaled_dot_product_attention` kept whole. Each ATen op becomes graph ops through a table of small
converters (the frontend only translates: numerics live in topi). Parameters, buffers, lifted
constants and whatever is computed from them alone (masks and position ids built with arange,
comparisons and where, weight-only arithmetic such as a transposed weight for addmm) are numpy
arrays, folded at import with the graph ops' numpy references. The export IR's high-level ops
(conv2d, linear, batch_norm, layer_norm, ...) are understood too, for programs that keep them.
Before converting anything, every op without a converter is reported at once; an argument the
frontend does not translate raises naming the node and the op.

Example:
    g = topi.graph.from_torch(model.eval(), (torch.randn(1, 3, 224, 224),))
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import operator
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

import tensorlang as tl

from ..symbolic import canon, dim_var, free_vars, is_symbolic, product, quotient
from .fourier import Complex, complex_product, complex_sum, dft, polar, stacked
from .graph import Graph, Node
from .passes import remove_dead_nodes
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
from .triangular import solve_triangular
from .volumes import conv3d, pool3d

try:
    import torch
    from torch.export import ExportedProgram
    from torch.export.graph_signature import InputKind, OutputKind
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("topi.graph.from_torch needs PyTorch: pip install -e .[torch]") from err


def from_torch(module: Any, example_inputs: Sequence[Any],
               dynamic_shapes: Any = None) -> Graph:
    """Import a PyTorch program: a module (put in eval mode) traced on `example_inputs`, or a
    program already exported.

    The program is functionalized and decomposed to core ATen (`run_decompositions`), so in-place
    and view ops arrive as functional ones; `scaled_dot_product_attention` is kept whole and
    becomes one attention composite (`GraphWriter.attention`). Every ATen op is checked first:
    an import that cannot finish reports all unsupported ops at once. A Hugging Face
    transformers model (a module with a `config.use_cache`) is exported with its key/value
    cache off, as `torch.export` cannot return a cache object; the flag is restored afterwards.

    Args:
        module: an `nn.Module`, a `torch.fx.GraphModule` (as `torch.compile` hands over) or an
            already exported `torch.export.ExportedProgram`.
        example_inputs: a tuple of tensors (the positional arguments of `forward`); they fix the
            input shapes and dtypes.
        dynamic_shapes: `torch.export`'s dynamic shapes (`torch.export.Dim`s, per input by
            position or by name): those dims stay symbolic, named after the Dims, and the
            program's sym-int arithmetic (sizes, views, arange, expand, slices) becomes shape
            expressions. The Dims' `max` (and `min`) become the graph's `bounds`, the default
            of `build`. A program already exported with dynamic shapes keeps its dims too (named
            as PyTorch's symbols unless `dynamic_shapes` gives the Dims).

    Returns:
        The Graph, with one input per tensor argument (named as `forward`'s parameters) and the
        module's tensor outputs in order (an output that the export found to be a constant
        number is none of them). Its constants are the module's parameters and buffers
        themselves (read-only views of their memory, not copies, where they are contiguous CPU
        tensors; a weight that several layers share is one constant), and a built Module reads
        them in place where its kernels take them as they lie: import and build again after
        changing the weights.

    Raises:
        UnsupportedError: ATen ops or arguments the frontend does not translate (every op at once,
            with its count and first node).
        TypeError: a tensor of an unsupported dtype, or arguments of the wrong type.
    """
    if isinstance(module, ExportedProgram):
        program = module
    elif isinstance(module, torch.nn.Module):
        if not isinstance(example_inputs, (tuple, list)) or not all(
                isinstance(t, torch.Tensor) for t in example_inputs):
            raise TypeError("from_torch: example_inputs must be a tuple of tensors")
        with torch.no_grad(), _cache_off(module):
            program = torch.export.export(module.eval(), tuple(example_inputs),
                                          dynamic_shapes=dynamic_shapes)
    else:
        raise TypeError(f"from_torch: expected an nn.Module, a GraphModule or an ExportedProgram, "
                        f"got {type(module).__name__}")
    program = _functional(program)
    _check_supported(program)
    return _Importer(program, _dim_names(program, dynamic_shapes)).run()


@contextlib.contextmanager
def _cache_off(module: torch.nn.Module) -> Iterator[None]:
    """A transformers model with its key/value cache off (a cache object is no exportable
    output), restored afterwards."""
    config = getattr(module, "config", None)
    if not getattr(config, "use_cache", False):
        yield
        return
    config.use_cache = False
    try:
        yield
    finally:
        config.use_cache = True


def _functional(program: ExportedProgram) -> ExportedProgram:
    """The program in core ATen with no in-place or view ops, attention kept whole (a program
    this function returned is returned as it is: decomposing takes seconds for a large
    model)."""
    if program in _DECOMPOSED:
        return program
    table = torch.export.default_decompositions()
    table.pop(torch.ops.aten.scaled_dot_product_attention.default, None)
    decomposed = program.run_decompositions(table)
    _DECOMPOSED.add(decomposed)
    return decomposed


_DECOMPOSED: weakref.WeakSet = weakref.WeakSet()
"""The programs `_functional` made."""


def _dim_names(program: ExportedProgram, dynamic_shapes: Any) -> dict[str, str]:
    """PyTorch's size symbols of the user inputs' dims -> the names of the `Dim`s given for them
    in `dynamic_shapes` (by input position or name; a dim without a named Dim keeps the
    symbol's name)."""
    users = {spec.arg.name for spec in program.graph_signature.input_specs
             if spec.kind is InputKind.USER_INPUT}
    inputs = [fx for fx in program.graph.nodes if fx.op == "placeholder" and fx.name in users]
    if isinstance(dynamic_shapes, dict):
        specs = [dynamic_shapes.get(fx.name) for fx in inputs]
    else:
        specs = list(dynamic_shapes or ()) + [None] * len(inputs)
    names: dict[str, str] = {}
    for fx, spec in zip(inputs, specs):
        axes = spec.items() if isinstance(spec, dict) else enumerate(spec or ())
        for axis, dim in axes:
            size = fx.meta["val"].shape[axis]
            name = getattr(dim, "__name__", None)
            if isinstance(size, torch.SymInt) and name and size.node.expr.is_Symbol:
                names.setdefault(str(size.node.expr), name)
    return names


def _sym_value(fx: Any) -> Any:
    """The traced value of an FX node when it is a sym-int (a size), else None."""
    val = fx.meta.get("val")
    return val if isinstance(val, torch.SymInt) else None


#: Python float arithmetic on sizes (`1.0 / x.shape[1]`): the graph op of each FX target
_SYM_FLOAT_OPS = {operator.truediv: "divide", operator.mul: "multiply", operator.add: "add",
                  operator.sub: "subtract", operator.neg: "negative"}


def _sym_float(fx: Any) -> bool:
    """Whether an FX node is float arithmetic on sizes that the importer translates."""
    return isinstance(fx.meta.get("val"), torch.SymFloat) and (
        fx.target in _SYM_FLOAT_OPS or fx.target is torch.sym_float)


def sympy_size(expr: Any, symbol: Callable[[str], Any]) -> Any:
    """PyTorch's sympy expression of a size evaluated with `symbol(name)` for its symbols: a tl
    expression over `dim_var`s, or (given sizes) the size itself.

    Raises:
        UnsupportedError: an expression other than sums, products, floor divisions and powers.
    """
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        return symbol(str(expr))
    args = [sympy_size(a, symbol) for a in expr.args]
    kind = type(expr).__name__
    if kind == "Add":
        return functools.reduce(operator.add, args)
    if kind == "Mul":
        return functools.reduce(operator.mul, args)
    if kind == "FloorDiv":
        return args[0] // args[1]
    if kind == "Pow" and isinstance(args[1], int) and args[1] > 0:
        return functools.reduce(operator.mul, [args[0]] * args[1])
    if kind in ("Max", "Min"):  # a sliding window's start: Max(0, s - 15)
        if all(isinstance(a, int) for a in args):
            return (max if kind == "Max" else min)(args)
        return functools.reduce(tl.maximum if kind == "Max" else tl.minimum, args)
    raise UnsupportedError(f"the size expression {expr}")


def _sympy_dim(expr: Any, names: dict[str, str]) -> Any:
    """PyTorch's sympy expression of a size as a tl expression over `dim_var`s."""
    return sympy_size(expr, lambda name: dim_var(names.get(name, name)))


def _check_supported(program: ExportedProgram) -> None:
    """Raise one UnsupportedError naming every op without a converter (count, first node)."""
    missing: dict[str, list[str]] = {}
    for fx in program.graph.nodes:
        if fx.op == "call_function" and fx.target is not operator.getitem and \
                _sym_value(fx) is None and not _sym_float(fx) and \
                _lookup(str(fx.target)) is None:
            missing.setdefault(str(fx.target), []).append(fx.name)
    if missing:
        lines = [f"  {op}: {len(nodes)} (first node {nodes[0]!r})"
                 for op, nodes in sorted(missing.items())]
        raise UnsupportedError(f"from_torch: the program uses {len(missing)} unsupported ATen "
                               f"op(s) (op: count, first node):\n" + "\n".join(lines))


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


def register_converter(name: str, converter: Converter) -> None:
    """Translate the op `name` (a packet name, "namespace.op") with `converter(importer, *args,
    **kwargs)`: the hook through which ops registered outside the frontend (`custom_op`) join
    the table."""
    _CONVERTERS[name] = converter


def _lookup(name: str) -> Converter | None:
    """The converter of an ATen overload ("aten.add.Tensor"), or of its packet ("aten.add")."""
    return _CONVERTERS.get(name) or _CONVERTERS.get(name.rsplit(".", 1)[0])


class _Missing:
    """An output of a multi-output ATen op that the frontend does not produce (the indices of a
    max pool, the statistics of a batch norm): an error only where something reads it."""

    def __init__(self, what: str) -> None:
        self.what = what


def _numpy(t: Any) -> np.ndarray:
    """A parameter's, buffer's or lifted constant's values, read-only: the tensor's own memory
    where it is a contiguous CPU tensor (the graph then holds the model's weights, not copies of
    them), else a copy. numpy has no bfloat16: a bfloat16 tensor (RecurrentGemma's normalizer
    buffer, cast to the activations' dtype where it is read) is an array of ml_dtypes' bfloat16
    over the same bits."""
    t = t.detach().cpu().resolve_conj().resolve_neg().contiguous()
    if t.dtype == torch.bfloat16:
        array = t.view(torch.int16).numpy().view(_bfloat16())
    else:
        array = t.numpy()
    array.setflags(write=False)
    return array


def _bfloat16() -> np.dtype:
    """numpy's bfloat16 (ml_dtypes').

    Raises:
        TypeError: ml_dtypes is not installed.
    """
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError("a bfloat16 tensor needs ml_dtypes (pip install ml_dtypes, or the bf16 "
                        "extra)") from None
    return np.dtype(ml_dtypes.bfloat16)


class _Importer(GraphWriter):
    """The state of one import: the graph and the value of every FX node by name."""

    def __init__(self, program: ExportedProgram, dim_names: dict[str, str] | None = None) -> None:
        super().__init__()
        self.program = program
        self.dim_names = dim_names or {}
        self.env: dict[str, Any] = {}
        self.where = "from_torch"
        self.current = ""  # the ATen overload being converted (converters of several read it)
        self.fx: Any = None  # its FX node (whose metadata holds the traced output)

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
                    # a functional program returns the new values of buffers and inputs that
                    # the module updates in place before its own outputs: only those are kept;
                    # a number the export found constant, or a size it computes (a count of
                    # tokens seen), is no tensor of the graph (the caller reads it from the
                    # program)
                    for out, spec in zip(outputs, sig.output_specs, strict=True):
                        if spec.kind is OutputKind.USER_OUTPUT and \
                                not isinstance(out, (int, float)) and _sym_value(out) is None:
                            self.graph.output(self.as_node(self._arg(out)))
                    # keys and values that attention reads unrepeated leave their copies dead
                    self.graph = remove_dead_nodes(self.graph)
                else:
                    raise UnsupportedError(f"unsupported FX node kind {fx.op!r}")
            except (UnsupportedError, TypeError, ValueError) as err:
                if str(err).startswith(self.where):
                    raise
                raise type(err)(f"{self.where}: {err}") from err
        self.graph.bounds = self._bounds()
        return self.graph

    def dim(self, size: Any) -> Any:
        """A traced size (an int or a sym-int) as a graph dim: an int or an expression of the
        shape variables named after the Dims."""
        if not isinstance(size, torch.SymInt):
            return int(size)
        return canon(_sympy_dim(size.node.expr, self.dim_names))

    def dims(self, sizes: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(self.dim(d) for d in sizes)

    def _bounds(self) -> dict[str, tuple[int, int]]:
        """The input dims' ranges from the export (a Dim's min and max), where bounded."""
        bounds = {}
        for symbol, vr in self.program.range_constraints.items():
            name = self.dim_names.get(str(symbol), str(symbol))
            if vr.upper.is_Integer and name in free_vars(
                    [d for n in self.graph.inputs for d in n.shape]):
                bounds[name] = (max(int(vr.lower), 1), int(vr.upper))
        return bounds

    def _input(self, fx: Any) -> Value:
        val = fx.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise UnsupportedError("a non-tensor input")
        return self.graph.input(fx.name, self.dims(val.shape), _dtype_name(val.dtype))

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
        sym = _sym_value(fx)
        if sym is not None:  # a size (sym_size, sym-int arithmetic): its traced expression
            return self.dim(sym)
        if _sym_float(fx):  # float arithmetic on sizes: float64 values computed at run time
            args = [self.cast(self._arg(a), "float64") for a in fx.args]
            return args[0] if target is torch.sym_float else self.op(_SYM_FLOAT_OPS[target],
                                                                      *args)
        name = self.current = str(target)
        self.fx = fx
        converter = _lookup(name)
        if converter is None:
            raise UnsupportedError(f"unsupported op {name}")
        args = [self._arg(a) for a in fx.args]
        kwargs = {k: self._arg(v) for k, v in fx.kwargs.items()}
        if converter not in _COMPLEX and any(isinstance(a, Complex) for a in (
                *args, *kwargs.values())):
            raise UnsupportedError(f"{name} of a complex tensor")
        return converter(self, *args, **kwargs)

    def out_dtype(self) -> str:
        """The dtype of the traced output of the node being converted (its first output)."""
        val = self.fx.meta.get("val")
        val = val[0] if isinstance(val, (tuple, list)) else val
        return _dtype_name(val.dtype)

    def out_shape(self) -> tuple[Any, ...]:
        val = self.fx.meta.get("val")
        val = val[0] if isinstance(val, (tuple, list)) else val
        return self.dims(val.shape)

    def promote(self, a: Any, b: Any) -> tuple[Value, Value]:
        """The two operands of the node being converted in their common dtype, by PyTorch's
        type promotion (a Python number becomes an array of that dtype)."""
        traced = [v.meta["val"] if isinstance(v, torch.fx.Node) else v for v in self.fx.args[:2]]
        dtype = _dtype_name(torch.result_type(*traced))
        return self.cast(a, dtype), self.cast(b, dtype)

    def cast(self, value: Any, dtype: str) -> Value:
        """`value` (a tensor, a Python number or a symbolic size) as `dtype`."""
        if is_symbolic(value):  # a size read at run time (x * x.shape[0])
            value = self.as_node(shape_value(value))
        elif not isinstance(value, (Node, np.ndarray)):
            return np.array(value, dtype)
        return value if dtype_of(value) == dtype else self.op("cast", value, dtype=dtype)

    def scalar(self, value: Any, like: Value) -> Value:
        """A Python number as a 0-d array of `like`'s dtype (PyTorch's type promotion for a
        tensor-scalar op keeps the tensor's dtype)."""
        if isinstance(value, (bool, int, float)):
            require(not isinstance(value, float) or dtype_of(like).startswith("float"),
                    f"an integer tensor with the float scalar {value} (PyTorch promotes it)")
            return np.array(value, dtype_of(like))
        return self.cast(value, dtype_of(like)) if is_symbolic(value) else value


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


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
    if isinstance(lo, (Node, np.ndarray)) or isinstance(hi, (Node, np.ndarray)):  # clamp.Tensor
        y = x if lo is None else im.op("maximum", x, im.cast(lo, dtype_of(x)))
        return y if hi is None else im.op("minimum", y, im.cast(hi, dtype_of(x)))
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
        # The traced output's dtype is PyTorch's promotion of the operands (true division of
        # integers included), and topi computes in the dtype of its operands.
        dtype = im.out_dtype()
        a, b = im.cast(a, dtype), im.cast(b, dtype)
        if alpha != 1:
            require(op in ("add", "subtract"), "alpha")
            b = im.op("multiply", b, np.array(alpha, dtype))
        name = op
        if rounding_mode is not None:
            require(op == "divide" and rounding_mode in ("floor", "trunc"),
                    f"rounding_mode={rounding_mode!r}")
            name = f"{rounding_mode}_divide"
        return im.op(name, a, b)

    return convert


for _aten, _op in {"aten.add": "add", "aten.sub": "subtract", "aten.mul": "multiply",
                   "aten.div": "divide", "aten.pow": "power", "aten.maximum": "maximum",
                   "aten.minimum": "minimum", "aten.fmod": "fmod", "aten.remainder": "mod",
                   "aten.floor_divide": "floor_divide"}.items():
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


@_converter("aten._assert_async")
def _assert_values(im: _Importer, condition: Value, message: str = "") -> None:
    """A check of values (one_hot's decomposition asserts that its classes lie in range): a
    condition known now is checked now; one computed at run time is not checked (one_hot of a
    class out of range is then a row of zeros, not an error)."""
    if isinstance(condition, np.ndarray) and not condition.all():
        raise ValueError(message or "an assertion of values known at import fails")


@_converter("aten._to_copy", "aten.to")
def _to(im: _Importer, x: Value | Complex, *args: Any, dtype: Any = None,
        **kwargs: Any) -> Value | Complex:
    dtype = dtype if dtype is not None else next(
        (a for a in args if isinstance(a, torch.dtype)), None)
    if dtype is None:
        return x
    if dtype.is_complex:  # a real tensor made complex (FNet's Fourier mixing): no imaginary part
        part = _dtype_name(dtype.to_real())
        return x if isinstance(x, Complex) and dtype_of(x.real) == part else \
            Complex(im.cast(_real_part(x), part))
    name = str(dtype).removeprefix("torch.")
    x = _real_part(x)
    return x if name == dtype_of(x) else im.op("cast", x, dtype=name)


# -- complex values and Fourier transforms (topi/graph/fourier.py) -------------------------------

#: the converters that take complex values (any other meeting one raises UnsupportedError)
_COMPLEX: set[Converter] = {_to, _assertion}


def _complex_converter(*names: str) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        _COMPLEX.add(fn)
        return _converter(*names)(fn)

    return register


def _real_part(x: Value | Complex) -> Value:
    """`x` itself, or for a complex `x` with no imaginary part its real part."""
    if isinstance(x, Complex):
        require(x.imag is None, "a complex tensor cast to a real dtype")
        return x.real
    return x


@_complex_converter("aten._fft_c2c")
def _fft_c2c(im: _Importer, z: Complex, dim: Sequence[int], normalization: int,
             forward: bool) -> Complex:
    require(isinstance(z, Complex), "_fft_c2c of a real tensor")
    return dft(im, z, dim, not forward, int(normalization))


@_complex_converter("aten._fft_r2c")
def _fft_r2c(im: _Importer, x: Value, dim: Sequence[int], normalization: int,
             onesided: bool) -> Complex:
    return dft(im, Complex(x), dim, False, int(normalization), bool(onesided))


@_complex_converter("aten.view_as_real")
def _view_as_real(im: _Importer, z: Complex) -> Value:
    require(isinstance(z, Complex), "view_as_real of a real tensor")
    return stacked(im, z)


@_complex_converter("aten.view_as_complex")
def _view_as_complex(im: _Importer, x: Value) -> Complex:
    """A last axis of two, (real, imaginary), as complex numbers (a rotary embedding's pairs)."""
    require(not isinstance(x, Complex) and tuple(shape_of(x)[-1:]) == (2,),
            "view_as_complex of a tensor whose last axis is not 2")
    return Complex(_select(im, x, -1, 0), _select(im, x, -1, 1))


@_complex_converter("aten.polar")
def _polar(im: _Importer, magnitude: Value, angle: Value) -> Complex:
    return polar(im, magnitude, angle)


#: the real dtype of a complex dtype's parts
_PART_DTYPES = {"complex64": "float32", "complex128": "float64"}


def _complex_operand(im: _Importer, value: Any, part: str) -> Complex:
    """An operand of complex arithmetic (a complex or real tensor, a Python number) as a complex
    value with parts of dtype `part`."""
    if isinstance(value, Complex):
        imag = None if value.imag is None else im.cast(value.imag, part)
        return Complex(im.cast(value.real, part), imag)
    if isinstance(value, complex):
        return Complex(np.array(value.real, part), np.array(value.imag, part))
    return Complex(im.cast(value, part))


def _complex_arithmetic(convert: Converter) -> Converter:
    """`convert` (add, sub or mul) of real tensors, or the complex sum, difference or product
    where an operand is complex, on the parts."""

    def either(im: _Importer, a: Any, b: Any, *args: Any, **kwargs: Any) -> Value | Complex:
        if not isinstance(a, Complex) and not isinstance(b, Complex):
            return convert(im, a, b, *args, **kwargs)
        alpha = kwargs.pop("alpha", args[0] if args else 1)
        require(not kwargs and len(args) <= 1, f"{im.current} of a complex tensor with "
                                               f"arguments {sorted(kwargs)}")
        part = _PART_DTYPES[im.out_dtype()]
        a, b = _complex_operand(im, a, part), _complex_operand(im, b, part)
        if "mul" in im.current:
            return complex_product(im, a, b)
        if alpha != 1:
            b = complex_product(im, b, _complex_operand(im, alpha, part))
        return complex_sum(im, "add" if "add" in im.current else "subtract", a, b)

    return either


def _partwise(convert: Converter) -> Converter:
    """`convert`, which moves elements without computing on them, applied to a complex tensor's
    real and imaginary parts alike."""

    def each_part(im: _Importer, x: Any, *args: Any, **kwargs: Any) -> Value | Complex:
        if not isinstance(x, Complex):
            return convert(im, x, *args, **kwargs)
        imag = None if x.imag is None else convert(im, x.imag, *args, **kwargs)
        return Complex(convert(im, x.real, *args, **kwargs), imag)

    return each_part


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


def _one_row_window(v: Any, across: int) -> tuple[int, int]:
    """A 1-D window's kernel, stride, padding or dilation (an int or a list of one) as that of
    the 2-D window one row high (`GraphWriter.one_row`), `across` along the row axis."""
    v = list(v) if isinstance(v, (tuple, list)) else [v]
    require(len(v) == 1, f"{v} for a 1-D window")
    return (across, int(v[0]))


@_converter("aten.conv1d")
def _conv1d(im: _Importer, x: Value, w: Value, bias: Value | None = None, stride: Any = 1,
            padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Value:
    return _convolution(im, x, w, bias, stride, padding, dilation, False, 0, groups)


@_converter("aten.conv_transpose1d")
def _conv_transpose1d(im: _Importer, x: Value, w: Value, bias: Value | None = None,
                      stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                      groups: int = 1, dilation: Any = 1) -> Value:
    return _convolution(im, x, w, bias, stride, padding, dilation, True, output_padding, groups)


def _triple(v: Any) -> tuple[int, int, int]:
    v = [int(a) for a in (v if isinstance(v, (tuple, list)) else [v])]
    require(len(v) in (1, 3), f"{v} for a 3-D window")
    return (v[0], v[-2 if len(v) == 3 else 0], v[-1])


@_converter("aten.conv3d")
def _conv3d(im: _Importer, x: Value, w: Value, bias: Value | None = None, stride: Any = 1,
            padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Value:
    require(not isinstance(padding, str), f"padding={padding!r} of a 3-D convolution")
    pads = _triple(padding)
    y = conv3d(im, x, w, _triple(stride), pads + pads, _triple(dilation), int(groups))
    return y if bias is None else im.op("bias_add", y, bias, axis=1)


@_converter("aten.convolution")
def _convolution(im: _Importer, x: Value, w: Value, bias: Value | None, stride: Any,
                 padding: Any, dilation: Any, transposed: bool, output_padding: Any,
                 groups: int) -> Value:
    if len(shape_of(x)) == 5 and not transposed:
        require(not any(output_padding), "output_padding of a convolution")
        return _conv3d(im, x, w, bias, stride, padding, dilation, groups)
    if len(shape_of(x)) == 3:  # a 1-D convolution, computed one row high
        pads = padding if isinstance(padding, str) else _one_row_window(padding, 0)
        return im.drop_row(_convolution(
            im, im.one_row(x), im.one_row(w), bias, _one_row_window(stride, 1), pads,
            _one_row_window(dilation, 1), transposed, _one_row_window(output_padding, 0),
            groups))
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


@_converter("aten.native_group_norm")
def _native_group_norm(im: _Importer, x: Value, weight: Value | None, bias: Value | None,
                       n: int, channels: int, hxw: int, groups: int, eps: float) -> tuple:
    weight = np.ones(channels, dtype_of(x)) if weight is None else weight
    bias = np.zeros(channels, dtype_of(x)) if bias is None else bias
    y = im.op("group_norm", x, weight, bias, num_groups=int(groups), epsilon=float(eps))
    return (y, None, None)


@_converter("aten._native_batch_norm_legit.no_stats", "aten._native_batch_norm_legit")
def _batch_norm_of_batch(im: _Importer, x: Value, weight: Value | None, bias: Value | None,
                         *args: Any) -> tuple:
    """A batch norm with the statistics of the batch itself (over every axis but the channels;
    instance norm is this on the batch folded into the channels)."""
    require(len(args) == 3, "a batch norm with running statistics in training mode")
    axes = (0, *range(2, len(shape_of(x))))
    mean = im.op("mean", x, axis=axes)
    centred = im.op("subtract", x, im.reshape(mean, (-1,) + (1,) * (len(axes) - 1)))
    var = im.op("mean", im.op("multiply", centred, centred), axis=axes)
    return (_bn(im, x, weight, bias, mean, var, args[-1]), None, None)


@_converter("aten.softmax", "aten._softmax", "aten.log_softmax", "aten._log_softmax")
def _softmax(im: _Importer, x: Value, dim: int, half_to_float: Any = False) -> Value:
    require(half_to_float in (False, None), "half_to_float / dtype")
    op = "log_softmax" if "log" in im.current else "softmax"
    return im.op(op, x, axis=int(dim))


def _stride_or_kernel(stride: Any, kernel: Any) -> Any:
    """A pooling's stride, which defaults to its kernel."""
    return stride if stride not in (None, [], ()) else kernel


def _pool_args(kernel: Any, stride: Any, padding: Any) -> dict:
    stride = _stride_or_kernel(stride, kernel)
    return {"kernel": _pair(kernel), "stride": _pair(stride), "padding": _pair(padding)}


@_converter("aten.max_pool2d", "aten.max_pool2d_with_indices")
def _max_pool2d(im: _Importer, x: Value, kernel: Any, stride: Any = None, padding: Any = 0,
                dilation: Any = 1, ceil_mode: bool = False) -> Any:
    _four_d(x)
    y = im.op("max_pool2d", x, dilation=_pair(dilation), ceil_mode=bool(ceil_mode),
              **_pool_args(kernel, stride, padding))
    return (y, None) if "indices" in im.current else y


@_converter("aten.max_pool3d", "aten.max_pool3d_with_indices")
def _max_pool3d(im: _Importer, x: Value, kernel: Any, stride: Any = None, padding: Any = 0,
                dilation: Any = 1, ceil_mode: bool = False) -> Any:
    require(_triple(dilation) == (1, 1, 1), f"dilation={dilation} of a 3-D max pooling")
    pads = _triple(padding)
    y = pool3d(im, x, "max", _triple(kernel), _triple(_stride_or_kernel(stride, kernel)),
               pads + pads, bool(ceil_mode))
    return (y, None) if "indices" in im.current else y


@_converter("aten.avg_pool3d")
def _avg_pool3d(im: _Importer, x: Value, kernel: Any, stride: Any = None, padding: Any = 0,
                ceil_mode: bool = False, count_include_pad: bool = True,
                divisor_override: Any = None) -> Value:
    require(divisor_override is None, "divisor_override")
    pads = _triple(padding)
    return pool3d(im, x, "avg", _triple(kernel), _triple(_stride_or_kernel(stride, kernel)),
                  pads + pads, bool(ceil_mode), bool(count_include_pad))


@_converter("aten.avg_pool2d")
def _avg_pool2d(im: _Importer, x: Value, kernel: Any, stride: Any = None, padding: Any = 0,
                ceil_mode: bool = False, count_include_pad: bool = True,
                divisor_override: Any = None) -> Value:
    _four_d(x)
    require(divisor_override is None, "divisor_override")
    return im.op("avg_pool2d", x, ceil_mode=bool(ceil_mode),
                 count_include_pad=bool(count_include_pad), **_pool_args(kernel, stride, padding))


def _one_row_pool_args(kernel: Any, stride: Any, padding: Any) -> tuple:
    """A 1-D pooling's kernel, stride (none: the kernel's) and padding, one row high."""
    kernel = _one_row_window(kernel, 1)
    stride = kernel if stride in (None, [], ()) else _one_row_window(stride, 1)
    return kernel, stride, _one_row_window(padding, 0)


@_converter("aten.max_pool1d", "aten.max_pool1d_with_indices")
def _max_pool1d(im: _Importer, x: Value, kernel: Any, stride: Any = None, padding: Any = 0,
                dilation: Any = 1, ceil_mode: bool = False) -> Any:
    y = _max_pool2d(im, im.one_row(x), *_one_row_pool_args(kernel, stride, padding),
                    _one_row_window(dilation, 1), ceil_mode)
    return (im.drop_row(y[0]), None) if isinstance(y, tuple) else im.drop_row(y)


@_converter("aten.avg_pool1d")
def _avg_pool1d(im: _Importer, x: Value, kernel: Any, stride: Any = None, padding: Any = 0,
                ceil_mode: bool = False, count_include_pad: bool = True) -> Value:
    return im.drop_row(_avg_pool2d(im, im.one_row(x), *_one_row_pool_args(kernel, stride, padding),
                                   ceil_mode, count_include_pad))


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


def _axes(dim: Any) -> tuple[int, ...] | None:
    """A reduction's `dim` argument as axes (None: all of them)."""
    if dim in (None, [], ()):
        return None
    return tuple(int(d) for d in dim) if isinstance(dim, (list, tuple)) else (int(dim),)


def _reduction(op: str) -> Converter:
    def convert(im: _Importer, x: Value, dim: Any = None, keepdim: bool = False,
                dtype: Any = None) -> Value:
        _check_dtype_kwarg(dtype)
        return im.op(op, x, axis=_axes(dim), keepdims=bool(keepdim))

    return convert


for _aten, _op in {"aten.mean": "mean", "aten.sum": "sum", "aten.amax": "max",
                   "aten.amin": "min"}.items():
    _converter(_aten)(_reduction(_op))


# -- shapes and data movement --------------------------------------------------------------------


def _infer_shape(x: Value, shape: Sequence[Any]) -> tuple[Any, ...]:
    """A view's sizes (ints or symbolic dims) with its -1 inferred."""
    shape = [canon(d) for d in shape]
    infer = [k for k, d in enumerate(shape) if isinstance(d, int) and d == -1]
    if infer:
        size = quotient(product(shape_of(x)), product([d for k, d in enumerate(shape)
                                                       if k != infer[0]]))
        require(size is not None, f"a view of {shape_of(x)} as {shape}")
        shape[infer[0]] = size
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


@_converter("aten.cat", "aten.concat")
def _cat(im: _Importer, tensors: Sequence[Value], dim: int = 0) -> Value:
    # PyTorch skips 1-D empty tensors whatever the others' rank (an empty key/value cache);
    # pieces empty along `dim` add nothing.
    kept = [t for t in tensors if shape_of(t) != (0,) and shape_of(t)[dim] != 0]
    require(len(kept) > 0, "cat of empty tensors only")
    return kept[0] if len(kept) == 1 else im.op("concatenate", *kept, axis=int(dim))


@_converter("aten.slice")
def _slice(im: _Importer, x: Value, dim: int = 0, start: Any = None, end: Any = None,
           step: int = 1) -> Value:
    n = shape_of(x)[dim]
    if any(is_symbolic(d) for d in (n, start, end)):
        return im.slice_dims(x, [0 if start is None else start], [n if end is None else end],
                             [dim % len(shape_of(x))], [step])
    start = 0 if start is None else int(start)
    end = n if end is None else min(int(end), n)
    if isinstance(x, np.ndarray):  # folded with numpy, empty pieces of empty arrays included
        return x[(slice(None),) * (dim % x.ndim) + (slice(start, end, int(step)),)]
    if not range(*slice(start, end, int(step)).indices(n)):
        # An empty piece (a rotary embedding over the whole head leaves nothing to pass
        # through): an array of no elements, which concatenation drops.
        shape = list(shape_of(x))
        shape[dim] = 0
        return np.zeros(shape, dtype_of(x))
    return im.op("strided_slice", x, begin=(start,), end=(end,), strides=(int(step),),
                 axes=(dim % len(shape_of(x)),))


@_converter("aten.select")
def _select(im: _Importer, x: Value, dim: int, index: int) -> Value:
    dim = dim % len(shape_of(x))
    n = shape_of(x)[dim]
    if is_symbolic(n):  # from the end of a symbolic axis: its start read at run time
        begin = int(index) if index >= 0 else canon(n + int(index))
        piece = im.op("slice_dims", im.as_node(x), axes=(dim,), begin=(begin,), size=(1,))
    else:
        index = int(index) % n
        x, index = _concatenated_piece(x, dim, index)
        piece = im.op("strided_slice", x, begin=(index,), end=(index + 1,), strides=(1,),
                      axes=(dim,))
    return im.reshape(piece, [d for k, d in enumerate(shape_of(x)) if k != dim])


def _concatenated_piece(x: Value, dim: int, index: int) -> tuple[Value, int]:
    """(the piece, the index in it) where `x` is a concatenation along `dim`, so that a select
    reads that piece alone (the real part of `view_as_real` leaves the imaginary part dead)."""
    if not isinstance(x, Node) or x.op != "concatenate" or \
            x.attrs["axis"] % len(x.shape) != dim:
        return x, index
    for piece in x.inputs:
        if index < piece.shape[dim]:
            return piece, index
        index -= piece.shape[dim]
    raise AssertionError("an index past the concatenation")  # select wrapped it into range


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



@_converter("aten.unbind")
def _unbind(im: _Importer, x: Value, dim: int = 0) -> list:
    dim = dim % len(shape_of(x))
    return [_select(im, x, dim, k) for k in range(shape_of(x)[dim])]


@_converter("aten.expand")
def _expand(im: _Importer, x: Value, sizes: Sequence[int], implicit: bool = False) -> Value:
    shape = im.out_shape()
    if shape == shape_of(x):
        return x
    if any(is_symbolic(d) for d in shape):
        return im.op("broadcast_dims", im.as_node(x), shape=shape)
    if isinstance(x, np.ndarray):
        return np.broadcast_to(x, shape).copy()
    return im.op("broadcast_to", x, shape=shape)


@_converter("aten.flip")
def _flip(im: _Importer, x: Value, dims: Sequence[int]) -> Value:
    for dim in dims:
        n = shape_of(x)[dim]
        x = im.op("take", x, np.arange(n - 1, -1, -1, dtype=np.int64), axis=dim % len(shape_of(x)))
    return x


@_converter("aten.unfold", "aten.unfold_copy")
def _unfold(im: _Importer, x: Value, dim: int, size: int, step: int) -> Value:
    """`Tensor.unfold`: the windows of `size` elements every `step` along `dim`, each a new last
    axis (HaloNet cuts its key blocks so). One take of the windows' positions, known now, puts
    (window, element) at `dim`; a transpose moves the element axis to the end."""
    shape = shape_of(x)
    require(len(shape) > 0, "unfold of a 0-d tensor")
    dim, size, step = int(dim) % len(shape), int(size), int(step)
    require(not is_symbolic(shape[dim]), "unfold along a symbolic axis")
    require(step > 0 and 0 <= size <= shape[dim],
            f"unfold of {size} every {step} along an axis of {shape[dim]}")
    count = (shape[dim] - size) // step + 1
    if size == 0:  # windows of nothing: an array of no elements
        return np.zeros((*shape[:dim], count, *shape[dim + 1:], 0), dtype_of(x))
    positions = np.arange(count, dtype=np.int64)[:, None] * step + np.arange(size, dtype=np.int64)
    windows = im.op("take", x, positions, axis=dim)
    if dim == len(shape) - 1:
        return windows
    axes = (*range(dim + 1), *range(dim + 2, len(shape) + 1), dim + 1)
    return im.op("transpose", windows, axes=axes)


@_converter("aten.repeat")
def _repeat(im: _Importer, x: Value, repeats: Sequence[int]) -> Value:
    reps = tuple(int(r) for r in repeats)
    x = im.reshape(x, (1,) * (len(reps) - len(shape_of(x))) + shape_of(x))
    return x if all(r == 1 for r in reps) else im.op("tile", x, reps=reps)


@_converter("aten.copy")
def _copy(im: _Importer, x: Value, src: Value, non_blocking: bool = False) -> Value:
    """The functional copy_: `src` broadcast to `x`'s shape in `x`'s dtype."""
    src = im.cast(src, dtype_of(x))
    if shape_of(src) == shape_of(x):
        return src
    if isinstance(src, np.ndarray):
        return np.broadcast_to(src, shape_of(x)).copy()
    return im.op("broadcast_to", src, shape=shape_of(x))


def _storage_positions(size: Sequence[int], stride: Sequence[int], offset: int) -> np.ndarray:
    """Where in memory each element of a strided tensor lies (an array of `size`)."""
    positions = np.full(tuple(size), offset, np.int64)
    for axis, (d, s) in enumerate(zip(size, stride)):
        positions += (np.arange(d, dtype=np.int64) * s).reshape(
            (1,) * axis + (d,) + (1,) * (len(size) - axis - 1))
    return positions


def _traced_layout(im: _Importer, x: Value) -> tuple[tuple[int, ...], int]:
    """The strides and storage offset of the node's first argument as PyTorch laid it out
    (row-major from 0 for an argument with no traced tensor)."""
    arg = im.fx.args[0]
    traced = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(traced, torch.Tensor):
        shape = shape_of(x)
        return tuple(math.prod(shape[k + 1:]) for k in range(len(shape))), 0
    try:
        return tuple(int(s) for s in traced.stride()), int(traced.storage_offset())
    except (TypeError, RuntimeError) as err:  # symbolic strides
        raise UnsupportedError(f"as_strided of a tensor with symbolic strides: {err}") from None


@_converter("aten.as_strided")
def _as_strided(im: _Importer, x: Value, size: Sequence[int], stride: Sequence[int],
                storage_offset: Any = None) -> Value:
    """A strided view of the memory that `x` views, laid out as PyTorch traced it: a transposed
    or sliced `x` is not row-major (Longformer's overlapping chunks of a head-major view of its
    queries and keys), and the offset defaults to `x`'s own. The positions are known now: the
    identity (a reshape) where the view reads `x`'s elements in order, else a gather of the
    element at each position. A view reaching memory outside `x` is refused."""
    size, stride = tuple(int(d) for d in size), tuple(int(d) for d in stride)
    x_stride, x_offset = _traced_layout(im, x)
    offset = x_offset if storage_offset is None else int(storage_offset)
    held = _storage_positions(shape_of(x), x_stride, x_offset)
    wanted = _storage_positions(size, stride, offset)
    if wanted.size == 0:
        return np.zeros(size, dtype_of(x))
    require(held.size > 0, "as_strided of an empty tensor")
    low, high = int(held.min()), int(held.max())
    element = np.full(high - low + 1, -1, np.int64)
    element[held.ravel() - low] = np.arange(held.size)
    inside = (wanted >= low) & (wanted <= high)
    index = np.where(inside, element[np.clip(wanted - low, 0, high - low)], -1)
    require(bool((index >= 0).all()),
            f"as_strided {size} / {stride} + {offset} reads memory outside its input "
            f"({shape_of(x)} / {x_stride} + {x_offset})")
    if index.size == held.size and (index.ravel() == np.arange(index.size)).all():
        return im.reshape(x, size)
    return im.op("take", im.reshape(x, (-1,)), index, axis=0)


def _pads(ndim: int, pad: Sequence[int]) -> tuple[list[int], list[int]]:
    """PyTorch's pad list, (before, after) per axis from the last axis backwards, as the pads
    before and after every axis."""
    before, after = [0] * ndim, [0] * ndim
    for k in range(len(pad) // 2):
        before[ndim - 1 - k], after[ndim - 1 - k] = int(pad[2 * k]), int(pad[2 * k + 1])
    return before, after


@_converter("aten.constant_pad_nd")
def _constant_pad_nd(im: _Importer, x: Value, pad: Sequence[int], value: Any = 0) -> Value:
    """Padding with a value; negative pads crop."""
    ndim = len(shape_of(x))
    before, after = _pads(ndim, pad)
    if any(p < 0 for p in before + after):
        shape = shape_of(x)
        x = im.op("strided_slice", x, begin=tuple(max(-p, 0) for p in before),
                  end=tuple(d - max(-p, 0) for d, p in zip(shape, after)),
                  strides=(1,) * ndim, axes=tuple(range(ndim)))
        before, after = [max(p, 0) for p in before], [max(p, 0) for p in after]
    if not any(before + after):
        return x
    return im.op("pad", x, pad_before=tuple(before), pad_after=tuple(after),
                 pad_value=float(value))


def _padding_mode(mode: str) -> Converter:
    def convert(im: _Importer, x: Value, padding: Sequence[int]) -> Value:
        before, after = _pads(len(shape_of(x)), padding)
        return im.op("pad", x, pad_before=tuple(before), pad_after=tuple(after), mode=mode)

    return convert


for _aten, _mode in {"aten.reflection_pad1d": "reflect", "aten.reflection_pad2d": "reflect",
                     "aten.reflection_pad3d": "reflect", "aten.replication_pad1d": "edge",
                     "aten.replication_pad2d": "edge", "aten.replication_pad3d": "edge"}.items():
    _converter(_aten)(_padding_mode(_mode))


# -- values made at import time ------------------------------------------------------------------


@_converter("aten.arange")
def _arange(im: _Importer, *args: Any, **kwargs: Any) -> Value:
    """arange(end), arange(start, end) or arange(start, end, step): start + step * i, in the
    traced dtype and length (a symbolic length: an arange op, e.g. position ids)."""
    bounds = [a for a in args if isinstance(a, (int, float)) or is_symbolic(a)]
    start, step = (0, 1) if len(bounds) == 1 else (bounds[0], bounds[2] if len(bounds) > 2 else 1)
    require(not is_symbolic(start) and not is_symbolic(step), "arange of a symbolic start or step")
    (count,) = im.out_shape()
    if is_symbolic(count):
        return im.graph.apply("arange", im.as_node(np.array(start, im.out_dtype())),
                              name=im.name, count=count, delta=step)
    return (start + step * np.arange(count)).astype(im.out_dtype())


@_converter("aten.full", "aten.full_like", "aten.zeros", "aten.zeros_like", "aten.ones",
            "aten.ones_like", "aten.empty", "aten.empty_like", "aten.new_full", "aten.new_zeros",
            "aten.new_ones", "aten.new_empty", "aten.scalar_tensor", "aten.empty_strided",
            "aten.empty_permuted", "aten.fill")
def _full(im: _Importer, *args: Any, **kwargs: Any) -> np.ndarray:
    """A constant tensor of the traced shape and dtype (empty tensors hold zeros)."""
    name = im.current.split(".")[1]
    fills = {"zeros": 0, "ones": 1, "empty": 0}
    kind = name.removeprefix("new_").removesuffix("_like").removesuffix("_strided") \
        .removesuffix("_permuted")
    if kind in fills:
        value = fills[kind]
    elif name == "scalar_tensor":
        value = args[0]
    else:  # full(size, value), full_like(x, value), new_full(x, size, value), fill(x, value)
        value = kwargs.get("fill_value", args[2] if name == "new_full" else args[1])
    require(not isinstance(value, (Node, np.ndarray)) or isinstance(value, np.ndarray) and
            value.size == 1, "a fill value that is a tensor computed at run time")
    fill = np.array(np.asarray(value).item(), im.out_dtype())
    shape = im.out_shape()
    if any(is_symbolic(d) for d in shape):  # filled at run time, at the actual sizes
        return im.graph.apply("full", im.as_node(fill), name=im.name, shape=shape)
    return np.full(shape, fill)


# -- comparisons, logic and selection ------------------------------------------------------------

for _aten, _op in {"aten.eq": "equal", "aten.ne": "not_equal", "aten.lt": "less",
                   "aten.le": "less_equal", "aten.gt": "greater",
                   "aten.ge": "greater_equal"}.items():
    _converter(_aten)(lambda im, a, b, _op=_op: im.op(_op, *im.promote(a, b)))


def _as_bool(im: _Importer, x: Value) -> Value:
    return x if dtype_of(x) == "bool" else im.op("not_equal", x, np.array(0, dtype_of(x)))


def _logical(op: str) -> Converter:
    def convert(im: _Importer, a: Value, b: Value) -> Value:
        if "bitwise" in im.current:
            require(dtype_of(a) == dtype_of(b) == "bool", "bitwise ops on integers")
        return im.op(op, _as_bool(im, a), _as_bool(im, b))

    return convert


for _name in ("and", "or", "xor"):
    _converter(f"aten.logical_{_name}", f"aten.bitwise_{_name}")(_logical(f"logical_{_name}"))


@_converter("aten.logical_not", "aten.bitwise_not")
def _logical_not(im: _Importer, x: Value) -> Value:
    require("logical" in im.current or dtype_of(x) == "bool", "bitwise_not of integers")
    return im.op("logical_not", _as_bool(im, x))


@_converter("aten.where")
def _where(im: _Importer, cond: Value, a: Any, b: Any) -> Value:
    dtype = im.out_dtype()
    return im.op("where", _as_bool(im, cond), im.cast(a, dtype), im.cast(b, dtype))


@_converter("aten.masked_fill")
def _masked_fill(im: _Importer, x: Value, mask: Value, value: Any) -> Value:
    return im.op("where", _as_bool(im, mask), im.cast(value, dtype_of(x)), x)


def _bool_reduction(op: str) -> Converter:
    def convert(im: _Importer, x: Value, dim: Any = None, keepdim: bool = False) -> Value:
        return im.op(op, _as_bool(im, x), axis=_axes(dim), keepdims=bool(keepdim))

    return convert


_converter("aten.any")(_bool_reduction("any"))
_converter("aten.all")(_bool_reduction("all"))


# -- more elementwise math -----------------------------------------------------------------------

for _aten, _op in {"aten.sin": "sin", "aten.cos": "cos", "aten.floor": "floor",
                   "aten.ceil": "ceil", "aten.round": "round", "aten.trunc": "trunc",
                   "aten.sign": "sign", "aten.log1p": "log1p", "aten.expm1": "expm1",
                   "aten.isnan": "isnan", "aten.isinf": "isinf", "aten.silu": "silu",
                   "aten.mish": "mish", "aten.softsign": "softsign"}.items():
    _converter(_aten)(_unary(_op))


@_converter("aten.elu")
def _elu(im: _Importer, x: Value, alpha: float = 1.0, scale: float = 1.0,
         input_scale: float = 1.0) -> Value:
    if (alpha, scale, input_scale) == (1.6732632423543772, 1.0507009873554805, 1.0):
        return im.op("selu", x)
    require(scale == 1 and input_scale == 1, "elu with scale or input_scale")
    return im.op("elu", x, alpha=float(alpha))


@_converter("aten.celu")
def _celu(im: _Importer, x: Value, alpha: float = 1.0) -> Value:
    return im.op("celu", x, alpha=float(alpha))


@_converter("aten.selu")
def _selu(im: _Importer, x: Value) -> Value:
    return im.op("selu", x)


@_converter("aten.softplus")
def _softplus(im: _Importer, x: Value, beta: float = 1.0, threshold: float = 20.0) -> Value:
    return im.op("softplus", x, beta=float(beta), threshold=float(threshold))


@_converter("aten.prelu", "aten._prelu_kernel")
def _prelu(im: _Importer, x: Value, weight: Value) -> Value:
    ndim = len(shape_of(x))
    if len(shape_of(weight)) == 1 and ndim >= 2:  # one slope per channel (axis 1)
        weight = im.reshape(weight, (shape_of(weight)[0],) + (1,) * (ndim - 2))
    return im.op("prelu", x, weight)


# -- more reductions -----------------------------------------------------------------------------


@_converter("aten.prod")
def _prod(im: _Importer, x: Value, dim: Any = None, keepdim: bool = False,
          dtype: Any = None) -> Value:
    x = im.cast(x, im.out_dtype())
    return im.op("prod", x, axis=None if dim is None else (int(dim),), keepdims=bool(keepdim))


def _arg_reduction(op: str) -> Converter:
    def convert(im: _Importer, x: Value, dim: Any = None, keepdim: bool = False) -> Value:
        return im.op(op, x, axis=None if dim is None else int(dim), keepdims=bool(keepdim))

    return convert


_converter("aten.argmax")(_arg_reduction("argmax"))
_converter("aten.argmin")(_arg_reduction("argmin"))


@_converter("aten.max.dim", "aten.min.dim")
def _max_dim(im: _Importer, x: Value, dim: int, keepdim: bool = False) -> tuple:
    op = "max" if "max" in im.current else "min"
    return (im.op(op, x, axis=(int(dim),), keepdims=bool(keepdim)),
            im.op(f"arg{op}", x, axis=int(dim), keepdims=bool(keepdim)))


@_converter("aten.max.default", "aten.min.default")
def _max_all(im: _Importer, x: Value) -> Value:
    return im.op("max" if "max" in im.current else "min", x)


@_converter("aten.var", "aten.std")
def _var(im: _Importer, x: Value, dim: Any = None, *args: Any, correction: Any = None,
         keepdim: bool = False, unbiased: Any = None) -> Value:
    """The variance (or standard deviation) from the mean of squared deviations, with Bessel's
    correction (PyTorch's default of 1)."""
    if args:  # var.dim(x, dim, unbiased, keepdim)
        unbiased = args[0]
        keepdim = args[1] if len(args) > 1 else keepdim
    if correction is None:
        correction = 0 if unbiased is False else 1
    axes = tuple(range(len(shape_of(x)))) if dim in (None, [], ()) else \
        tuple(d % len(shape_of(x)) for d in (dim if isinstance(dim, (list, tuple)) else [dim]))
    count = math.prod(shape_of(x)[a] for a in axes)
    centred = im.op("subtract", x, im.op("mean", x, axis=axes, keepdims=True))
    total = im.op("sum", im.op("multiply", centred, centred), axis=axes, keepdims=bool(keepdim))
    var = im.op("divide", total, np.array(max(count - float(correction), 0), dtype_of(x)))
    return im.op("sqrt", var) if "std" in im.current else var


@_converter("aten.linalg_vector_norm")
def _vector_norm(im: _Importer, x: Value, ord: Any = 2, dim: Any = None, keepdim: bool = False,
                 dtype: Any = None) -> Value:
    _check_dtype_kwarg(dtype)
    axes, keep = _axes(dim), bool(keepdim)
    magnitude = im.op("abs", x)
    if ord == math.inf:
        return im.op("max", magnitude, axis=axes, keepdims=keep)
    if ord == -math.inf:
        return im.op("min", magnitude, axis=axes, keepdims=keep)
    if ord == 1:
        return im.op("sum", magnitude, axis=axes, keepdims=keep)
    if ord == 2:
        return im.op("sqrt", im.op("sum", im.op("multiply", x, x), axis=axes, keepdims=keep))
    require(isinstance(ord, (int, float)) and ord > 0, f"ord={ord}")
    powered = im.op("power", magnitude, np.array(ord, dtype_of(x)))
    return im.op("power", im.op("sum", powered, axis=axes, keepdims=keep),
                 np.array(1.0 / ord, dtype_of(x)))


@_converter("aten.lcm", "aten.gcd")
def _lcm_gcd(im: _Importer, a: Value, b: Value) -> np.ndarray:
    """The least common multiple or greatest common divisor of integers known now (Reformer's
    chunk length, numpy's lcm of two configuration values)."""
    require(isinstance(a, np.ndarray) and isinstance(b, np.ndarray),
            f"{im.current} of tensors computed at run time")
    return np.asarray((np.lcm if "lcm" in im.current else np.gcd)(a, b), im.out_dtype())


@_converter("aten.erfinv")
def _erfinv(im: _Importer, x: Value) -> np.ndarray:
    """The inverse error function of values known now (Gemma-3n's activation sparsity: a normal
    quantile of a configuration value), by PyTorch's own."""
    require(isinstance(x, np.ndarray), "erfinv of a tensor computed at run time")
    return torch.special.erfinv(torch.from_numpy(np.array(x, im.out_dtype()))).numpy()


@_converter("aten.cumsum")
def _cumsum(im: _Importer, x: Value, dim: int, dtype: Any = None) -> Value:
    x = im.cast(x, im.out_dtype())  # bool and small integers sum as int64
    return im.op("cumsum", x, axis=int(dim) % max(len(shape_of(x)), 1))


@_converter("aten.sort", "aten.argsort")
def _sort(im: _Importer, x: Value, dim: int = -1, descending: bool = False,
          stable: Any = None) -> Any:
    """Values and positions in stable order (sort and argsort, their `stable` flag keyword-only;
    an unstable sort may order ties in any way)."""
    axis = int(dim) % max(len(shape_of(x)), 1)
    order = im.op("argsort", x, axis=axis, descending=bool(descending))
    if "argsort" in im.current:
        return order
    return im.op("gather_elements", x, order, axis=axis), order


@_converter("aten.topk")
def _topk(im: _Importer, x: Value, k: int, dim: int = -1, largest: bool = True,
          sorted: bool = True) -> tuple:
    """The k largest (or smallest) values and their positions, in order (any order is allowed
    when `sorted` is False)."""
    axis = int(dim) % max(len(shape_of(x)), 1)
    order = im.op("argsort", x, axis=axis, descending=bool(largest), k=int(k))
    return im.op("gather_elements", x, order, axis=axis), order


@_converter("aten.histc")
def _histc(im: _Importer, x: Value, bins: int = 100, min: float = 0, max: float = 0) -> Value:
    require(float(max) > float(min), "histc over the data's own range (min == max)")
    return im.op("histc", x, bins=int(bins), low=float(min), high=float(max))


@_converter("aten._grouped_mm", "transformers.grouped_mm_fallback")
def _grouped_mm(im: _Importer, x: Value, weight: Value, offs: Value = None, bias: Value = None,
                out_dtype: Any = None) -> Value:
    """A mixture of experts' per-expert products over rows sorted by expert (the 2-d x 3-d form
    with offsets, which transformers' experts use)."""
    require(offs is not None and len(shape_of(x)) == 2 and len(shape_of(weight)) == 3,
            "grouped_mm other than rows (S, K) by groups (G, K, N) with offsets")
    require(bias is None, "grouped_mm with a bias")
    out = im.op("grouped_matmul", x, weight, offs)
    return im.cast(out, im.out_dtype())


@_converter("aten.linalg_solve_triangular")
def _solve_triangular(im: _Importer, a: Value, b: Value, *, upper: bool, left: bool = True,
                      unitriangular: bool = False) -> Value:
    return solve_triangular(im, a, b, bool(upper), bool(left), bool(unitriangular))


@_converter("aten.tril", "aten.triu")
def _trilu(im: _Importer, x: Value, diagonal: int = 0) -> Value:
    return im.op("trilu", x, k=int(diagonal), upper="triu" in im.current)


# -- indexing ------------------------------------------------------------------------------------


@_converter("aten.gather")
def _gather(im: _Importer, x: Value, dim: int, index: Value, sparse_grad: bool = False) -> Value:
    return im.op("gather_elements", x, index, axis=int(dim) % len(shape_of(x)))


def _integer_indices(indices: Sequence[Value | None]) -> list[Value | None]:
    """An advanced index's tensors with each bool mask (known now) replaced by the integer
    positions where it is true, one tensor per axis it spans."""
    expanded: list[Value | None] = []
    for idx in indices:
        if idx is not None and dtype_of(idx) == "bool":
            require(isinstance(idx, np.ndarray), "a bool index computed at run time")
            expanded.extend(np.nonzero(idx))
        else:
            expanded.append(idx)
    return expanded


@_converter("aten.index.Tensor")
def _index(im: _Importer, x: Value, indices: Sequence[Value | None]) -> Value:
    """Advanced indexing `x[i0, i1, ...]` with integer (or, known now, bool) index tensors at
    some axes: the indexed axes are moved together, merged into one, and read with one take at
    the flat positions, whose broadcast shape replaces them (first when the indexed axes were
    not adjacent, as numpy does)."""
    ndim = len(shape_of(x))
    expanded = _integer_indices(indices)
    indices = expanded + [None] * (ndim - len(expanded))
    if isinstance(x, np.ndarray) and all(i is None or isinstance(i, np.ndarray) for i in indices):
        return np.asarray(x[tuple(slice(None) if i is None else i for i in indices)])
    axes = [a for a, i in enumerate(indices) if i is not None]
    tensors = [indices[a] for a in axes]
    shape = shape_of(x)
    adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
    if not adjacent:  # numpy puts the index dims first: move the indexed axes to the front
        rest = [a for a in range(ndim) if a not in axes]
        x = im.op("transpose", x, axes=tuple(axes + rest))
        shape = tuple(shape[a] for a in axes + rest)
        axes = list(range(len(axes)))
    first, count = axes[0], len(axes)
    sizes = shape[first:first + count]
    flat = _flat_index(im, tensors, sizes)
    merged = im.reshape(x, (*shape[:first], math.prod(sizes), *shape[first + count:]))
    return im.op("take", merged, flat, axis=first)


def _flat_index(im: _Importer, tensors: Sequence[Value], sizes: Sequence[int]) -> Value:
    """Row-major positions in the merged axes of `sizes` of the broadcast index tensors
    (negative indices wrap)."""
    flat: Value | None = None
    for idx, size in zip(tensors, sizes):
        idx = im.cast(idx, "int64")
        idx = im.op("where", im.op("less", idx, np.array(0, "int64")),
                    im.op("add", idx, shape_value(size)), idx) \
            if len(tensors) > 1 else idx  # take wraps a single index itself
        flat = idx if flat is None else im.op(
            "add", im.op("multiply", flat, shape_value(size)), idx)
    return flat


@_converter("aten.index_put", "aten._unsafe_index_put")
def _index_put(im: _Importer, x: Value, indices: Sequence[Value | None], values: Value,
               accumulate: bool = False) -> Value:
    """`x[indices] = values` (`+=` with `accumulate`) for index tensors known now, as a fold
    (`nn.Fold`, col2im), an unfold's inverse or a masked fill makes them: the destination of
    every value is worked out here (numpy's advanced indexing places the index dims as
    PyTorch's does) and the values are scattered there (`scatter_at`). A bool mask computed at
    run time selects with `where` instead (`_masked_put`)."""
    masks = [k for k, i in enumerate(indices) if i is not None]
    if len(masks) == 1 and isinstance(indices[masks[0]], Node) and \
            dtype_of(indices[masks[0]]) == "bool":
        return _masked_put(im, x, masks[0], indices[masks[0]], values, accumulate)
    if len(masks) == 1 and isinstance(indices[masks[0]], Node):
        return _positions_put(im, x, masks[0], indices[masks[0]], values, accumulate)
    expanded = _integer_indices(indices)
    require(all(i is None or isinstance(i, np.ndarray) for i in expanded),
            "index_put with indices computed at run time")
    shape = shape_of(x)
    where = tuple(slice(None) if i is None else i.astype(np.int64) for i in expanded)
    try:
        dest = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)[where]
    except IndexError as err:
        raise ValueError(f"index_put into a tensor of shape {shape}: {err}") from None
    values = im.cast(values, dtype_of(x))
    if shape_of(values) != dest.shape:
        values = np.broadcast_to(values, dest.shape) if isinstance(values, np.ndarray) else \
            im.op("broadcast_to", values, shape=dest.shape)
    return im.scatter_at(x, dest, values, bool(accumulate))


def _positions_put(im: _Importer, x: Value, axis: int, index: Node, values: Value,
                   accumulate: Any) -> Value:
    """`x[:, ..., index] = values` for a 1-D integer index computed at run time at one axis (a
    key/value cache written at the positions of the new tokens, `index_copy_`): each position
    along the axis takes the values of the index entry naming it (the last of several, as
    PyTorch's CPU writes them in order; negative entries count from the end), the others keep
    x's. With `accumulate` (`index_add_`), each position adds the values of every entry naming
    it."""
    require(len(shape_of(index)) == 1 and dtype_of(index) != "bool",
            f"index_put at a run-time index of shape {shape_of(index)}")
    shape, count = shape_of(x), shape_of(index)[0]
    n = shape[axis]
    index = im.cast(index, "int64")
    index = im.op("where", im.op("less", index, np.array(0, "int64")),
                  im.op("add", index, shape_value(n)), index)
    hits = im.op("equal", im.reshape(index, (count, 1)), im.reshape(_count_up(im, n), (1, n)))
    values = im.cast(values, dtype_of(x))
    given = shape_of(values)
    if len(given) != len(shape) or any(given[d] != shape[d] for d in range(len(shape))
                                       if d != axis):  # (its length may be another symbol)
        values = im.op("broadcast_to", values, shape=(*shape[:axis], count, *shape[axis + 1:]))
    if accumulate:
        return im.op("add", x, _sum_at_positions(im, hits, values, axis))
    entries = im.reshape(_count_up(im, count), (count, 1))
    which = im.op("max", im.op("where", hits, entries, np.array(-1, "int64")), axis=0)
    found = im.op("greater_equal", which, np.array(0, "int64"))
    taken = im.op("take", values, which, axis=axis)
    found = im.reshape(found, (*(1,) * axis, n, *(1,) * (len(shape) - axis - 1)))
    return im.op("where", found, taken, x)


def _sum_at_positions(im: _Importer, hits: Node, values: Value, axis: int) -> Value:
    """out[..., p, ...] = the sum over entries c with hits[c, p] of values[..., c, ...]: a
    product with the (count, n) hit matrix along `axis`."""
    rank = len(shape_of(values))
    order = (axis, *(d for d in range(rank) if d != axis))
    rows = im.op("transpose", values, axes=order) if axis else values
    moved = shape_of(rows)
    flat = im.reshape(rows, (moved[0], -1))
    weights = im.cast(im.op("transpose", hits, axes=(1, 0)), dtype_of(values))
    summed = im.reshape(im.op("matmul", weights, flat), (shape_of(hits)[1], *moved[1:]))
    back = tuple(int(np.argsort(order)[d]) for d in range(rank))
    return im.op("transpose", summed, axes=back) if axis else summed


def _count_up(im: _Importer, n: Any) -> Value:
    """0, 1, ..., n - 1 as int64: an array, or an arange op for a symbolic `n`."""
    if not is_symbolic(n):
        return np.arange(n, dtype=np.int64)
    return im.graph.apply("arange", im.as_node(np.array(0, "int64")), name=im.name, count=n,
                          delta=1)


def _masked_put(im: _Importer, x: Value, axis: int, mask: Node, values: Value,
                accumulate: Any) -> Value:
    """`x[:, ..., mask] = values` (`+=` with `accumulate`) for a bool `mask` over the axes from
    `axis` on that is computed at run time (Longformer's `mask[attention_mask == 2] = max`): a
    `where`, for values that are the same at every selected position (their broadcast does not
    span the count of selected positions, which only the run knows)."""
    shape, span = shape_of(x), len(shape_of(mask))
    require(tuple(shape_of(mask)) == tuple(shape[axis:axis + span]),
            f"a bool index of shape {shape_of(mask)} at axis {axis} of a tensor of shape {shape}")
    selected = (*shape[:axis], 1, *shape[axis + span:])  # the count of positions taken as 1
    given = tuple(shape_of(values))
    require(len(given) <= len(selected) and all(
        g in (1, s) for g, s in zip(given[::-1], selected[::-1])) and (
        len(given) < len(selected) - axis or given[axis - len(selected)] == 1),
        f"index_put of values of shape {given} at a bool index computed at run time")
    values = im.reshape(im.cast(values, dtype_of(x)), (1,) * (len(selected) - len(given)) + given)
    values = im.reshape(values, (*shape_of(values)[:axis], *(1,) * span,
                                 *shape_of(values)[axis + 1:]))
    mask = im.reshape(mask, (1,) * axis + tuple(shape_of(mask)) + (1,) * (len(shape) - axis - span))
    if accumulate:
        return im.op("add", x, im.op("where", mask, values, np.array(0, dtype_of(x))))
    return im.op("where", mask, values, x)


@_converter("aten.scatter")
def _scatter(im: _Importer, x: Value, dim: int, index: Value, src: Any, reduce: Any = None
             ) -> Value:
    """`x.scatter(dim, index, src)` (src a tensor, or one value: scatter.value), torch's
    inverse of gather: ONNX's ScatterElements."""
    require(reduce is None, f"scatter with reduce={reduce!r}")
    axis = int(dim) % max(len(shape_of(x)), 1)
    if not isinstance(src, (Node, np.ndarray)):
        src = np.full(tuple(shape_of(index)), src, dtype_of(x))
    elif tuple(shape_of(src)) != tuple(shape_of(index)):  # src may be larger than index
        src = im.op("strided_slice", src, begin=(0,) * len(shape_of(index)),
                    end=tuple(shape_of(index)))
    return im.op("scatter_elements", x, index, im.cast(src, dtype_of(x)), axis=axis)


@_converter("aten.slice_scatter")
def _slice_scatter(im: _Importer, x: Value, src: Value, dim: int = 0, start: Any = None,
                   end: Any = None, step: int = 1) -> Value:
    """x with x[start:end:step] along `dim` replaced by `src`: pieces concatenated for a step of
    one, otherwise one take over x and src side by side at positions known now."""
    dim = dim % len(shape_of(x))
    n = shape_of(x)[dim]
    start, stop, step = slice(start, end, int(step)).indices(n)
    positions = list(range(start, stop, step))
    src = im.cast(src, dtype_of(x))
    if isinstance(x, np.ndarray) and isinstance(src, np.ndarray):
        out = x.copy()
        out[(slice(None),) * dim + (slice(start, stop, step),)] = src
        return out
    if step == 1:
        pieces = [im.op("strided_slice", x, begin=(0,), end=(start,), strides=(1,), axes=(dim,))
                  if start > 0 else None, src,
                  im.op("strided_slice", x, begin=(stop,), end=(n,), strides=(1,), axes=(dim,))
                  if stop < n else None]
        pieces = [p for p in pieces if p is not None]
        return pieces[0] if len(pieces) == 1 else im.op("concatenate", *pieces, axis=dim)
    where = {p: n + k for k, p in enumerate(positions)}
    order = np.array([where.get(p, p) for p in range(n)], np.int64)
    return im.op("take", im.op("concatenate", x, src, axis=dim), order, axis=dim)


@_converter("aten.select_scatter")
def _select_scatter(im: _Importer, x: Value, src: Value, dim: int, index: int) -> Value:
    dim = dim % len(shape_of(x))
    index = int(index) % shape_of(x)[dim]
    src = im.reshape(src, (*shape_of(src)[:dim], 1, *shape_of(src)[dim:]))
    return _slice_scatter(im, x, src, dim, index, index + 1, 1)


# -- resizing ------------------------------------------------------------------------------------


def _scale_factors(scales: Sequence[Any]) -> list:
    """The scale factors of an upsample overload (one list argument, or one per axis; empty
    when none is given)."""
    factors = [s for s in scales if s is not None]
    if len(factors) == 1 and isinstance(factors[0], (list, tuple)):
        return list(factors[0])
    return factors


def _resize_size(im: _Importer, x: Value, scales: Sequence[Any]) -> tuple[int, int]:
    """The output size; a scale factor given with it must be out / in (PyTorch maps coordinates
    by a given scale factor, resize2d by the sizes)."""
    _four_d(x)
    size = im.out_shape()[2:]
    factors = _scale_factors(scales)
    for factor, n_in, n_out in zip(factors, shape_of(x)[2:], size):
        require(factor is None or math.isclose(float(factor), n_out / n_in),
                f"scale factor {factor} other than output / input size ({n_out} / {n_in})")
    return size[0], size[1]


@_converter("aten.upsample_nearest2d")
def _upsample_nearest2d(im: _Importer, x: Value, output_size: Any, *scales: Any) -> Value:
    """PyTorch's nearest reads source pixel floor(dst * s) with s = in / out in float32 (1 / the
    scale factor when one is given). ONNX's asymmetric mode divides by out / in instead, which
    picks another pixel where the quotient rounds below an integer (14 -> 4 reads 6, not 7), so
    static sizes gather the rows and columns PyTorch reads."""
    _four_d(x)
    size = im.out_shape()[2:]
    if not all(isinstance(d, int) for d in (*shape_of(x)[2:], *size)):
        return im.op("resize2d", x, size=_resize_size(im, x, scales), method="nearest",
                     coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    factors = _scale_factors(scales)
    y = x
    for k, (n_in, n_out) in enumerate(zip(shape_of(x)[2:], size)):
        step = np.float32(1.0 / float(factors[k])) if factors and factors[k] else \
            np.float32(n_in) / np.float32(n_out)
        index = np.floor(np.arange(n_out, dtype=np.float32) * step).astype("int64")
        if n_in != n_out or np.any(index != np.arange(n_out)):
            y = im.op("take", y, np.minimum(index, n_in - 1), axis=2 + k)
    return y


@_converter("aten.upsample_bilinear2d", "aten.upsample_bicubic2d")
def _upsample_linear2d(im: _Importer, x: Value, output_size: Any, align_corners: bool,
                       *scales: Any) -> Value:
    mode = "align_corners" if align_corners else "half_pixel"
    method = "cubic" if "bicubic" in im.current else "linear"
    extra = {"cubic_coeff_a": -0.75} if method == "cubic" else {}
    return im.op("resize2d", x, size=_resize_size(im, x, scales), method=method,
                 coordinate_transformation_mode=mode, **extra)


# -- attention -----------------------------------------------------------------------------------


@_converter("aten.scaled_dot_product_attention")
def _sdpa(im: _Importer, q: Value, k: Value, v: Value, attn_mask: Value | None = None,
          dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
          enable_gqa: bool = False) -> Value:
    require(dropout_p == 0, f"dropout_p={dropout_p} (only inference)")
    # Without enable_gqa the head axes broadcast as batch axes do: equal, or one key/value
    # head for every query head (multi-query attention, Falcon's).
    require(enable_gqa or len(shape_of(q)) < 3 or shape_of(k)[-3] in (1, shape_of(q)[-3]),
            "query and key/value head counts differ without enable_gqa")
    k, v = _unrepeated_kv(k), _unrepeated_kv(v)
    return im.attention(q, k, v, attn_mask, is_causal=bool(is_causal), scale=scale)


def _unrepeated_kv(x: Value) -> Value:
    """Keys or values before transformers' `repeat_kv` (expand of a new group axis, then a
    reshape merging it into the heads): attention reads each key/value head once per group
    itself, so the repeated copy is dropped (and removed as dead code)."""
    if not (isinstance(x, Node) and x.op == "reshape"):
        return x
    expanded = x.inputs[0]
    if not (expanded.op == "broadcast_to" and expanded.inputs[0].op == "reshape"):
        return x
    source = expanded.inputs[0]
    b, hkv, one, s, d = source.shape if len(source.shape) == 5 else (None,) * 5
    if one != 1 or tuple(expanded.shape[:2]) != (b, hkv) or tuple(x.shape) != (
            b, hkv * expanded.shape[2], s, d):
        return x
    return source.inputs[0] if tuple(source.inputs[0].shape) == (b, hkv, s, d) else x


# -- complex values through layout ops and arithmetic --------------------------------------------

for _aten in ("aten.view", "aten.reshape", "aten._unsafe_view", "aten.unsqueeze", "aten.squeeze",
              "aten.permute", "aten.transpose", "aten.slice", "aten.select", "aten.expand",
              "aten.flatten", "aten.clone", "aten.alias"):
    _complex_converter(_aten)(_partwise(_CONVERTERS[_aten]))
for _aten in ("aten.add", "aten.sub", "aten.mul"):
    _complex_converter(_aten)(_complex_arithmetic(_CONVERTERS[_aten]))
