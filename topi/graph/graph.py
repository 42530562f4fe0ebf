"""`Graph`: a model as a list of topi ops with typed shapes (the first stage of `topi.graph`).

The contract every part of `topi.graph` (frontends, passes, tuning, build) relies on:

- A `Graph` is a list of `Node`s in topological order (every node comes after its inputs),
  plus the list of its output nodes.
- A `Node` has a unique `name`, an `op` name, its `inputs` (nodes of the same graph), `attrs`
  (a dict of plain values: ints, floats, strings, bools, None and tuples of them), and its output
  `shape` (a tuple of ints) and `dtype` (a string). Its `kind` is one of
  - `NodeKind.INPUT` (op "input"): a graph input, fed by name when the model runs;
  - `NodeKind.CONSTANT` (op "constant"): holds a numpy array in `value`;
  - `NodeKind.OP`: an op of the registry in `topi/graph/ops.py`, or "fused", a node made by the
    fusion pass whose `body` is a Graph of the ops it fuses (its inputs are the body's inputs, in
    order; the body has one output).
- Nodes are immutable and compared by identity. Passes build new graphs; they never mutate one.
- Every builder method goes through `Graph.apply(op_name, *inputs, **attrs)`, which infers the
  output shape and dtype by calling the op's topi compute on placeholders, so a bad shape or attr
  fails when the node is built, with topi's message. Every registered op has a method named after
  it: hand-written where the Graph's arguments differ from the compute's (`conv2d` picks the
  grouped or depthwise op), generated from the registry (`_OP_METHODS`) where they are the same,
  and, for an op registered later (by another module), resolved by name on first use.
"""

from __future__ import annotations

import enum
import inspect
import itertools
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from tensorlang.expr import Expr

from ..symbolic import canon, dim_str, dim_var, evaluate_shape, is_symbolic
from . import import_ops  # noqa: F401  (registers the ops that `_OP_METHODS` names)
from .aligned import aligned_copy, aligned_read_only
from .ops import OpPattern, freeze_attr, get_op, infer_output, registered_ops

INPUT, CONSTANT, FUSED = "input", "constant", "fused"

_DTYPES = frozenset(
    ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64")
)


class NodeKind(enum.Enum):
    INPUT = "input"
    CONSTANT = "constant"
    OP = "op"


@dataclass(frozen=True, eq=False)
class Node:
    """One value of a graph: an input, a constant or the result of an op (see the module doc).

    Attributes:
        name: unique within its graph.
        op: "input", "constant", a registered op name, or "fused".
        inputs: the nodes it reads.
        attrs: the op's attributes (plain values).
        shape: the output shape.
        dtype: the output dtype.
        value: the array of a constant (None otherwise).
        body: the fused ops of a "fused" node (None otherwise).
    """

    name: str
    op: str
    inputs: tuple[Node, ...]
    attrs: Mapping[str, Any]
    shape: tuple[int, ...]
    dtype: str
    value: np.ndarray | None = field(default=None, repr=False)
    body: Graph | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.attrs, MappingProxyType):  # read-only, as the node is
            object.__setattr__(self, "attrs", MappingProxyType(dict(self.attrs)))

    @property
    def kind(self) -> NodeKind:
        if self.op == INPUT:
            return NodeKind.INPUT
        if self.op == CONSTANT:
            return NodeKind.CONSTANT
        return NodeKind.OP

    @property
    def nbytes(self) -> int:
        """The size of the node's output in bytes (a symbolic shape: see `nbytes_at`)."""
        if self.symbolic:
            raise ValueError(f"{self!r} has the symbolic shape {self.shape}; use nbytes_at")
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    @property
    def symbolic(self) -> bool:
        """Whether the shape holds symbolic dims (`tl.var` expressions)."""
        return any(is_symbolic(d) for d in self.shape)

    def nbytes_at(self, values: Mapping[str, int]) -> int:
        """The size in bytes with the shape variables bound to `values` (by name)."""
        shape = evaluate_shape(self.shape, values)
        return int(np.prod(shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    @property
    def pattern(self) -> OpPattern | None:
        """The fusion pattern of an op node (a fused node: its anchor's), None for others."""
        if self.kind is not NodeKind.OP:
            return None
        if self.op == FUSED:
            return OpPattern(self.attrs["pattern"])
        return get_op(self.op).pattern

    def __repr__(self) -> str:
        return f"%{self.name}"


def _check_dtype(dtype: Any, where: str) -> str:
    name = str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype
    if name not in _DTYPES:
        raise TypeError(f"{where}: unsupported dtype {dtype!r} (use one of {sorted(_DTYPES)})")
    return name


def _check_shape(shape: Any, where: str) -> tuple[int, ...]:
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"{where}: shape must be a tuple of ints, got {shape!r}")
    dims = []
    for d in shape:
        if isinstance(d, str):  # a named symbolic dim
            d = dim_var(d)
        if isinstance(d, Expr):
            dims.append(canon(d))
            continue
        if isinstance(d, (bool, float)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{where}: shape must hold ints, got {shape!r}")
        if d < 1:
            raise ValueError(f"{where}: dimensions must be >= 1, got {tuple(shape)}")
        dims.append(int(d))
    return tuple(dims)


def _format_attr(value: Any) -> str:
    if isinstance(value, Expr):
        return dim_str(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        items = ", ".join(_format_attr(v) for v in value)
        return f"({items},)" if len(value) == 1 else f"({items})"
    return repr(value)


class Graph:
    """A model as topi ops: build it by hand or import it (`from_onnx`, `from_torch`).

    Example:
        g = Graph()
        x = g.input("data", (1, 3, 32, 32))
        w = g.constant(np.random.rand(8, 3, 3, 3).astype("float32"), name="w")
        g.output(g.relu(g.conv2d(x, w, padding=1)))
        print(g)
    """

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        """reserved: names `unique_name` never returns (nodes may still be added under them):
        a pass rebuilding a graph reserves the old graph's names, so that a node it makes
        cannot take the name of an old node it copies later."""
        self.nodes: list[Node] = []
        self.outputs: list[Node] = []
        self._ids: set[int] = set()
        self._names: set[str] = set()
        self._reserved = frozenset(reserved)
        self._counter = itertools.count()
        #: shape variable -> (low, high) an importer found (a torch Dim's min and max): the
        #: default bounds of `build`.
        self.bounds: dict[str, tuple[int, int]] = {}

    # -- structure -----------------------------------------------------------------------------

    @property
    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.kind is NodeKind.INPUT]

    @property
    def constants(self) -> list[Node]:
        return [n for n in self.nodes if n.kind is NodeKind.CONSTANT]

    @property
    def ops(self) -> list[Node]:
        return [n for n in self.nodes if n.kind is NodeKind.OP]

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, node: object) -> bool:
        return id(node) in self._ids

    def node(self, name: str) -> Node:
        """The node called `name`."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"graph has no node named {name!r}")

    def consumers(self) -> dict[Node, list[Node]]:
        """Each node's readers, in graph order (a graph output counts as no reader)."""
        users: dict[Node, list[Node]] = {n: [] for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs:
                users[i].append(n)
        return users

    def unique_name(self, base: str) -> str:
        """`base` if no node has that name yet and it is not reserved, else `base_<k>` for the
        next free k."""
        if base not in self._names and base not in self._reserved:
            return base
        while True:
            candidate = f"{base}_{next(self._counter)}"
            if candidate not in self._names and candidate not in self._reserved:
                return candidate

    def has_name(self, name: str) -> bool:
        """Whether a node of the graph is called `name`."""
        return name in self._names

    def _name_for(self, asked: str | None, default: str) -> str:
        """A new node's name: `asked` where it is free (a pass may give a node the name of a
        reserved old node it replaces), else one `unique_name` makes up."""
        if asked is not None and asked not in self._names:
            return asked
        return self.unique_name(asked or default)

    def add_node(self, node: Node) -> Node:
        """Append a fully built node (passes use this; builders go through `apply`).

        Raises:
            ValueError: the name is taken or an input is not a node of this graph.
        """
        if node.name in self._names:
            raise ValueError(f"graph already has a node named {node.name!r}")
        for i in node.inputs:
            if id(i) not in self._ids:
                raise ValueError(f"node {node.name}: input {i!r} is not a node of this graph")
        self.nodes.append(node)
        self._ids.add(id(node))
        self._names.add(node.name)
        return node

    # -- builders ------------------------------------------------------------------------------

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> Node:
        """A graph input, fed by `name` when the built model runs."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"Graph.input: name must be a non-empty string, got {name!r}")
        where = f"Graph.input {name!r}"
        node = Node(name, INPUT, (), {}, _check_shape(shape, where), _check_dtype(dtype, where))
        return self.add_node(node)

    def constant(self, array: Any, name: str | None = None, share: bool = False) -> Node:
        """A constant holding (a read-only copy of) `array`; with `share`, `array` itself (a
        read-only view) where it is C-contiguous and 64-byte aligned, for arrays that nobody
        writes while the graph lives (a model's weights, values computed at import): the graph
        then costs no memory of its own for them."""
        # kernels read constants in place, whole lines
        value = aligned_read_only(array) if share else aligned_copy(array)
        where = f"Graph.constant {name or ''}".rstrip()
        dtype = _check_dtype(value.dtype, where)
        value.setflags(write=False)
        node_name = self._name_for(name, "const")
        return self.add_node(Node(node_name, CONSTANT, (), {}, value.shape, dtype, value=value))

    def output(self, *nodes: Node) -> None:
        """Mark `nodes` as the graph's outputs (in addition to those marked before)."""
        for n in nodes:
            if id(n) not in self._ids:
                raise ValueError(f"Graph.output: {n!r} is not a node of this graph")
            self.outputs.append(n)

    def _operand(self, value: Any, dtype: str, op_name: str) -> Node:
        if isinstance(value, Node):
            if id(value) not in self._ids:
                raise ValueError(f"{op_name}: input {value!r} is not a node of this graph")
            return value
        if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
            return self.constant(np.array(value, dtype=dtype))  # numpy's scalars too
        if isinstance(value, np.ndarray):
            return self.constant(value)
        raise TypeError(f"{op_name}: inputs must be graph nodes, numbers or numpy arrays, got "
                        f"{type(value).__name__}")

    def apply(self, op_name: str, *inputs: Any, name: str | None = None, **attrs: Any) -> Node:
        """Add a node applying the registered op `op_name` to `inputs` with `attrs`.

        Numbers and numpy arrays among `inputs` become constants (numbers take the dtype of the
        first node input). The output shape and dtype come from the op's topi compute. `name`
        names the node (default: the op name, made unique); it is not an attr.

        Raises:
            ValueError: an unknown op, or the compute rejects the shapes or attrs.
            TypeError: an input or an attr of the wrong type.
        """
        op = get_op(op_name)
        first = next((i for i in inputs if isinstance(i, Node)), None)
        dtype = first.dtype if first is not None else "float32"
        nodes = tuple(self._operand(v, dtype, op_name) for v in inputs)
        frozen = {k: freeze_attr(v, f"{op_name} attr {k!r}") for k, v in attrs.items()}
        shape, out_dtype = infer_output(op.name, [(n.shape, n.dtype) for n in nodes], frozen)
        node_name = self._name_for(name, op_name)
        return self.add_node(Node(node_name, op_name, nodes, frozen, shape, out_dtype))

    # One method per op. Each only names the arguments and goes through `apply`.

    def conv2d(self, data: Node, weight: Node, stride: Any = 1, padding: Any = 0,
               dilation: Any = 1, groups: int = 1, name: str | None = None) -> Node:
        """NCHW convolution with an OIHW weight (K, C / groups, R, S), as ONNX and PyTorch lay
        it out; `groups` == C with one input channel per group is a depthwise convolution.
        padding: an int, (h, w), (top, left, bottom, right), "SAME" or "VALID"."""
        if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
            raise ValueError(f"conv2d: groups must be a positive int, got {groups!r}")
        args = {"stride": stride, "padding": padding, "dilation": dilation, "name": name}
        if groups == 1:
            return self.apply("conv2d", data, weight, **args)
        channels = data.shape[1]
        if len(weight.shape) != 4:
            raise ValueError(f"conv2d: weight must be 4-D (K, C/groups, R, S), got {weight.shape}")
        out_channels, per_group, r, s = weight.shape
        if groups == channels and per_group == 1 and out_channels % channels == 0:
            # topi's depthwise kernel is (C, multiplier, R, S): the same memory order.
            kernel = self.reshape(weight, (channels, out_channels // channels, r, s))
            return self.apply("depthwise_conv2d", data, kernel, **args)
        return self.apply("group_conv2d", data, weight, groups=groups, **args)

    def dense(self, data: Node, weight: Node, name: str | None = None) -> Node:
        """data (M, K) times weight (N, K) transposed -> (M, N)."""
        return self.apply("dense", data, weight, name=name)

    def matmul(self, a: Node, b: Node, transpose_a: bool = False, transpose_b: bool = False,
               name: str | None = None) -> Node:
        """a @ b (batch axes broadcast), with the last two axes of an operand swapped when its
        transpose flag is set."""
        return self.apply("matmul", a, b, transpose_a=transpose_a, transpose_b=transpose_b,
                          name=name)

    def batch_matmul(self, x: Node, y: Node, name: str | None = None) -> Node:
        """x (B, M, K) times y (B, N, K) transposed, per batch -> (B, M, N)."""
        return self.apply("batch_matmul", x, y, name=name)

    def add(self, a: Any, b: Any, name: str | None = None) -> Node:
        return self.apply("add", a, b, name=name)

    def subtract(self, a: Any, b: Any, name: str | None = None) -> Node:
        return self.apply("subtract", a, b, name=name)

    def multiply(self, a: Any, b: Any, name: str | None = None) -> Node:
        return self.apply("multiply", a, b, name=name)

    def divide(self, a: Any, b: Any, name: str | None = None) -> Node:
        return self.apply("divide", a, b, name=name)

    def relu(self, x: Node, name: str | None = None) -> Node:
        return self.apply("relu", x, name=name)

    def leaky_relu(self, x: Node, alpha: float = 0.01, name: str | None = None) -> Node:
        return self.apply("leaky_relu", x, alpha=alpha, name=name)

    def gelu(self, x: Node, name: str | None = None) -> Node:
        return self.apply("gelu", x, name=name)

    def bias_add(self, data: Node, bias: Node, axis: int = 1, name: str | None = None) -> Node:
        return self.apply("bias_add", data, bias, axis=axis, name=name)

    def batch_norm(self, data: Node, gamma: Node, beta: Node, mean: Node, var: Node,
                   epsilon: float = 1e-5, axis: int = 1, name: str | None = None) -> Node:
        """Inference batch norm: (data - mean) / sqrt(var + epsilon) * gamma + beta."""
        return self.apply("batch_norm", data, gamma, beta, mean, var, epsilon=epsilon,
                          axis=axis, name=name)

    def softmax(self, x: Node, axis: int = -1, name: str | None = None) -> Node:
        return self.apply("softmax", x, axis=axis, name=name)

    def log_softmax(self, x: Node, axis: int = -1, name: str | None = None) -> Node:
        return self.apply("log_softmax", x, axis=axis, name=name)

    def layer_norm(self, x: Node, gamma: Node, beta: Node, axis: Any = -1,
                   epsilon: float = 1e-5, name: str | None = None) -> Node:
        return self.apply("layer_norm", x, gamma, beta, axis=axis, epsilon=epsilon, name=name)

    def max_pool2d(self, data: Node, kernel: Any, stride: Any = 1, padding: Any = 0,
                   dilation: Any = 1, ceil_mode: bool = False, name: str | None = None) -> Node:
        """NCHW max pooling; padding is an int, (h, w) or (top, left, bottom, right)."""
        return self.apply("max_pool2d", data, kernel=kernel, stride=stride, padding=padding,
                          dilation=dilation, ceil_mode=ceil_mode, name=name)

    def avg_pool2d(self, data: Node, kernel: Any, stride: Any = 1, padding: Any = 0,
                   dilation: Any = 1, ceil_mode: bool = False, count_include_pad: bool = True,
                   name: str | None = None) -> Node:
        return self.apply("avg_pool2d", data, kernel=kernel, stride=stride, padding=padding,
                          dilation=dilation, ceil_mode=ceil_mode,
                          count_include_pad=count_include_pad, name=name)

    def global_avg_pool2d(self, data: Node, name: str | None = None) -> Node:
        """NCHW -> (N, C, 1, 1)."""
        return self.apply("global_avg_pool2d", data, name=name)

    def reshape(self, data: Node, newshape: Sequence[int], name: str | None = None) -> Node:
        """numpy's reshape (one -1 allowed)."""
        return self.apply("reshape", data, newshape=newshape, name=name)

    def transpose(self, x: Node, axes: Sequence[int] | None = None,
                  name: str | None = None) -> Node:
        return self.apply("transpose", x, axes=axes, name=name)

    def concatenate(self, xs: Sequence[Node], axis: int = 0, name: str | None = None) -> Node:
        return self.apply("concatenate", *xs, axis=axis, name=name)

    def pad(self, data: Node, pad_before: Sequence[int], pad_after: Sequence[int] | None = None,
            pad_value: float = 0.0, name: str | None = None) -> Node:
        return self.apply("pad", data, pad_before=pad_before, pad_after=pad_after,
                          pad_value=pad_value, name=name)

    def __getattr__(self, name: str) -> Callable[..., Node]:
        """An op registered after this module (say, by a plugin) as a method: its positional
        arguments are its inputs, its keyword arguments its attrs (`Graph.apply`'s rule)."""
        if name.startswith("_") or name not in registered_ops():
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return types.MethodType(op_method(name, None, f"Apply the registered graph op {name!r}: "
                                          "positional arguments are its inputs, keyword "
                                          "arguments its attrs."), self)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *registered_ops()})

    # -- printing ------------------------------------------------------------------------------

    def __str__(self) -> str:
        ins = ", ".join(f"%{n.name}: {_type_str(n)}" for n in self.inputs)
        outs = ", ".join(repr(n) for n in self.outputs)
        lines = [f"graph({ins}) -> ({outs}) {{"]
        lines += [f"  {node_line(n)}" for n in self.nodes if n.kind is not NodeKind.INPUT]
        lines.append("}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<topi.graph.Graph {len(self.inputs)} inputs, {len(self.constants)} constants, "
                f"{len(self.ops)} ops, {len(self.outputs)} outputs>")


_P = inspect.Parameter


def op_method(op_name: str, inputs: int | None, doc: str) -> Callable[..., Node]:
    """A Graph method applying the registered op `op_name`, with the signature of its compute.

    Args:
        op_name: the registered op.
        inputs: how many leading parameters of the compute are the op's inputs (nodes, numbers or
            arrays); the others are attrs, with the compute's defaults. None: the method takes
            `Graph.apply`'s arguments (positional inputs, keyword attrs).
        doc: the method's docstring.
    """
    if inputs is None:
        def method(self: Graph, *nodes: Any, name: str | None = None, **attrs: Any) -> Node:
            return self.apply(op_name, *nodes, name=name, **attrs)
        signature = inspect.signature(method)
    else:
        params = list(inspect.signature(get_op(op_name).compute).parameters.values())
        tensors = [p.replace(kind=_P.POSITIONAL_OR_KEYWORD, annotation="Node")
                   for p in params[:inputs]]
        attrs = [p.replace(kind=_P.POSITIONAL_OR_KEYWORD) for p in params[inputs:]]
        signature = inspect.Signature(
            [_P("self", _P.POSITIONAL_OR_KEYWORD), *tensors, *attrs,
             _P("name", _P.KEYWORD_ONLY, default=None, annotation="str | None")],
            return_annotation="Node")

        def method(self: Graph, *args: Any, **kwargs: Any) -> Node:
            try:
                bound = signature.bind(self, *args, **kwargs)
            except TypeError as err:
                raise TypeError(f"Graph.{op_name}{str(signature).replace('self, ', '')}: {err}"
                                ) from None
            bound.apply_defaults()
            values = bound.arguments
            return self.apply(op_name, *(values[p.name] for p in tensors), name=values["name"],
                              **{p.name: values[p.name] for p in attrs})
    method.__name__ = op_name
    method.__qualname__ = f"Graph.{op_name}"
    method.__doc__ = doc
    method.__signature__ = signature  # type: ignore[attr-defined]
    return method


#: The Graph methods made from the registry: op name -> (number of inputs, docstring). Their
#: signatures are their computes' (see `op_method`).
_OP_METHODS: dict[str, tuple[int, str]] = {
    "depthwise_conv2d": (2, "Depthwise NCHW convolution, kernel (C, multiplier, R, S)."),
    "group_conv2d": (2, "Grouped NCHW convolution, kernel (K, C / groups, R, S)."),
    "conv2d_nhwc": (2, "NHWC convolution with an HWIO kernel (R, S, C, K)."),
    "conv2d_transpose": (2, "Transposed NCHW convolution, kernel (C, K / groups, R, S)."),
    "sum": (1, "Sum along `axis` (an int, a tuple, or None for all axes)."),
    "max": (1, "Maximum along `axis` (an int, a tuple, or None for all axes)."),
    "min": (1, "Minimum along `axis` (an int, a tuple, or None for all axes)."),
    "mean": (1, "Mean along `axis` (an int, a tuple, or None for all axes)."),
    "sqrt": (1, "Elementwise square root."),
    "exp": (1, "Elementwise e ** x."),
    "log": (1, "Elementwise natural logarithm."),
    "tanh": (1, "Elementwise hyperbolic tangent."),
    "sigmoid": (1, "Elementwise 1 / (1 + exp(-x))."),
    "erf": (1, "Elementwise error function."),
    "abs": (1, "Elementwise absolute value."),
    "negative": (1, "Elementwise -x."),
    "reciprocal": (1, "Elementwise 1 / x."),
    "hard_swish": (1, "x * hard_sigmoid(x) with alpha 1/6 and beta 1/2 (ONNX HardSwish)."),
    "gelu_tanh": (1, "GELU's tanh approximation."),
    "hard_sigmoid": (1, "max(0, min(1, alpha * x + beta)) (ONNX HardSigmoid)."),
    "clip": (1, "Clamp to [a_min, a_max]; either bound may be None."),
    "cast": (1, "Convert to `dtype` (numpy's casting)."),
    "power": (2, "a ** b with numpy broadcasting."),
    "maximum": (2, "Elementwise maximum with numpy broadcasting."),
    "minimum": (2, "Elementwise minimum with numpy broadcasting."),
    "strided_slice": (1, "x[begin:end:strides] along `axes` (default: the leading axes)."),
    "take": (2, "x gathered along `axis` at the integer `indices` (numpy's take, ONNX Gather)."),
    "adaptive_pool2d": (1, "NCHW pooling ('avg' or 'max') to `output_size`, an int or (h, w)."),
}

for _name, (_inputs, _doc) in _OP_METHODS.items():
    setattr(Graph, _name, op_method(_name, _inputs, _doc))


def _type_str(n: Node) -> str:
    return f"{n.dtype}[{', '.join(dim_str(d) for d in n.shape)}]"


def node_line(n: Node) -> str:
    """One node as `%name = op[attrs](inputs) : dtype[shape]`."""
    if n.kind is NodeKind.CONSTANT:
        return f"%{n.name} = constant : {_type_str(n)}"
    if n.kind is NodeKind.INPUT:
        return f"%{n.name} = input : {_type_str(n)}"
    args = ", ".join(repr(i) for i in n.inputs)
    if n.op == FUSED:
        assert n.body is not None
        head = "fused[" + " > ".join(_body_op(b) for b in n.body.ops) + "]"
    else:
        head = n.op + _attr_str(n.attrs)
    return f"%{n.name} = {head}({args}) : {_type_str(n)}"


def _attr_str(attrs: Mapping[str, Any]) -> str:
    if not attrs:
        return ""
    return "{" + ", ".join(f"{k}={_format_attr(v)}" for k, v in attrs.items()) + "}"


def op_label(n: Node) -> str:
    """The ops a node computes, joined by "+": "conv2d+bias_add+clip" for a fused node, the op
    name for others (what a profile shows next to the node's name)."""
    if n.op == FUSED:
        assert n.body is not None
        return "+".join(b.op for b in n.body.ops)
    return n.op


def _body_op(n: Node) -> str:
    return n.op + _attr_str(n.attrs)
