"""Dynamo's symbolic sizes as the dynamic shapes of one build: which dims of a captured graph's
tensors are symbols, their bounds, and how its integer inputs follow from the tensors' sizes.

With `torch.compile(..., dynamic=True)`, `torch._dynamo.mark_dynamic` or automatic dynamic (a
second call at other sizes), Dynamo traces with symbolic sizes: the fake tensors of the graph's
placeholders have SymInt dims, and the sizes that the graph computes with arrive as SymInt
inputs. Each dim that a symbol stands for is exported as an automatic dim (`Dim.AUTO`: the
export may find the guards that Dynamo's own trace needed, e.g. a size minus one that is not 1,
without failing, and a dim that those guards leave one value becomes static: `pin` then notes
its symbol, whose every value gets a build of its own), bounded by the symbol's range in
Dynamo's ShapeEnv; a range without a finite upper end is capped at `DYNAMIC_SIZE_CAP`. The
integer inputs are expressions of those symbols: the exported module computes them from its
tensors' sizes, so one Module serves every size
within the bounds.

Dynamo gives each tensor input's size its own symbol unless its trace compared them: the key and
value caches of transformers' DynamicCache arrive with lengths `s67` and `s87`, since the fake
`scaled_dot_product_attention` never checks that keys and values are as long. Such symbols,
which attention needs equal, are one size of the build: the export is told so (`torch._check`),
the Module binds one shape variable for both (a call where they differ is a ValueError there),
and a call where they differ runs eagerly.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import Dim

from tensorlang.expr import Var

from .graph import Graph
from .importer import UnsupportedError
from .torch import sympy_size

DYNAMIC_SIZE_CAP = 1 << 16
"""The upper bound of a symbolic size whose range Dynamo leaves unbounded; a call beyond it
runs eagerly."""


_CARRIER = torch.zeros(1, dtype=torch.int8)
"""The one element that every size-carrying tensor repeats."""


@dataclass
class DynamicSizes:
    """The symbolic sizes of a captured graph.

    Attributes:
        symbols: per tensor input (in the order of the graph's non-constant tensors), axis ->
            the name of the symbol of its size.
        dims: the same as `torch.export` dynamic shapes (axis -> bounded `Dim.AUTO`).
        carriers: symbol name -> (tensor input, axis) where its size is read.
        ints: integer input slot -> its sympy expression over the symbols.
        bounds: symbol name -> (low, high), inclusive.
        equal: pairs of symbols that attention needs equal (the lengths of its keys and values).
        values: integer input slots that are symbols no tensor's size carries: a tensor of that
            length (`with_carriers`) follows the graph's tensors for each, to carry it.
        pinned: symbols that an export found to be one value (`pin`).
    """

    symbols: list[dict[int, str]]
    dims: list[dict[int, Any]]
    carriers: dict[str, tuple[int, int]]
    ints: dict[int, Any]
    bounds: dict[str, tuple[int, int]]
    equal: list[tuple[str, str]]
    values: list[int]
    pinned: set[str] = field(default_factory=set)

    def with_carriers(self, args: Sequence[Any], tensors: list[Any]) -> list[Any]:
        """`tensors` (the graph's tensor inputs) followed by one tensor per integer input in
        `values`, as long as that input's value (memory for one element, whatever its
        length)."""
        return tensors + [_CARRIER.expand(int(args[slot])) for slot in self.values]

    def sizes(self, tensors: Sequence[Any]) -> dict[str, int]:
        """The symbols' values at a call (ints or, while exporting, SymInts)."""
        return {name: tensors[k].shape[axis] for name, (k, axis) in self.carriers.items()}

    def int_values(self, tensors: Sequence[Any]) -> dict[int, Any]:
        """The integer inputs' values computed from the tensors' sizes."""
        sizes = self.sizes(tensors)
        return {slot: sympy_size(expr, sizes.__getitem__) for slot, expr in self.ints.items()}

    def check_equal(self, tensors: Sequence[Any]) -> None:
        """Tells the export that the sizes in `equal` are one (`torch._check`, while tracing)."""
        sizes = self.sizes(tensors)
        for a, b in self.equal:
            torch._check(sizes[a] == sizes[b])

    def graph_bounds(self, graph: Graph) -> dict[str, tuple[int, int]]:
        """The bounds of the shape variables of `graph`, the program exported with `dims`
        (its inputs those tensors): each variable has the bounds of the symbol of its dims."""
        out = {}
        for node, axes in zip(graph.inputs, self.symbols):
            for axis, name in axes.items():
                dim = node.shape[axis]
                if isinstance(dim, Var):  # (a size that the export found constant has none)
                    lo, hi = self.bounds[name]
                    seen = out.get(dim.name, (lo, hi))  # (symbols in `equal` share a variable)
                    out[dim.name] = (max(lo, seen[0]), min(hi, seen[1]))
        return out

    def pin(self, graph: Graph) -> None:
        """Note each symbol whose dim the export of `graph` found to be one value (the count of
        tokens on the step where a window fills up): each value of it needs a build of its
        own (`pinned_sizes`)."""
        for node, axes in zip(graph.inputs, self.symbols):
            for axis, name in axes.items():
                if isinstance(node.shape[axis], int):
                    self.pinned.add(name)

    def pinned_sizes(self, tensors: Sequence[Any]) -> tuple[int, ...]:
        """The values of the pinned symbols at a call, in name order."""
        sizes = self.sizes(tensors)
        return tuple(int(sizes[name]) for name in sorted(self.pinned))

    def within(self, tensors: Sequence[torch.Tensor]) -> bool:
        """Whether the tensors' sizes lie within the bounds."""
        sizes = self.sizes(tensors)
        return all(lo <= sizes[name] <= hi for name, (lo, hi) in self.bounds.items()) and \
            all(sizes[a] == sizes[b] for a, b in self.equal)


def _fake(node: torch.fx.Node) -> Any:
    """The traced value of a placeholder (Dynamo's example value, or export's val)."""
    return node.meta.get("example_value", node.meta.get("val"))


def dynamic_sizes(gm: torch.fx.GraphModule, tensor_slots: Sequence[int],
                  int_slots: Sequence[int]) -> DynamicSizes | None:
    """The symbolic sizes of `gm`'s tensor inputs at `tensor_slots` and the integer inputs at
    `int_slots`, or None when every traced size is an int (a static graph).

    Raises:
        UnsupportedError: a tensor dim that is an expression rather than one symbol, or an
            integer input over a symbol that no tensor's dim carries (an int that is no size).
    """
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    symbols: list[dict[int, str]] = []  # per tensor input: axis -> symbol name
    carriers: dict[str, tuple[int, int]] = {}
    bounds: dict[str, tuple[int, int]] = {}
    for k, slot in enumerate(tensor_slots):
        axes: dict[int, str] = {}
        for axis, size in enumerate(getattr(_fake(placeholders[slot]), "shape", ())):
            if not isinstance(size, torch.SymInt) or size.node.expr.is_Integer:
                continue
            expr = size.node.expr
            if not expr.is_Symbol:
                raise UnsupportedError(f"an input dim of size {expr} (an expression)")
            name = axes[axis] = str(expr)
            if name not in carriers:
                carriers[name] = (k, axis)
                bounds[name] = _bounds(size.node.shape_env.var_to_range[expr])
        symbols.append(axes)
    # an integer input that is a symbol no tensor's size carries (a count of the tokens seen,
    # which a sliding-window cache keeps beside its fixed-length keys) is carried by a tensor
    # of that length appended to the inputs, which the graph never reads
    values: list[int] = []
    for slot in int_slots:
        value = _fake(placeholders[slot])
        expr = value.node.expr if isinstance(value, torch.SymInt) else None
        if expr is not None and expr.is_Symbol and str(expr) not in carriers:
            carriers[str(expr)] = (len(tensor_slots) + len(values), 0)
            bounds[str(expr)] = _bounds(value.node.shape_env.var_to_range[expr])
            symbols.append({0: str(expr)})
            values.append(slot)
    if not carriers:
        return None
    ints: dict[int, Any] = {}
    for slot in int_slots:
        value = _fake(placeholders[slot])
        if not isinstance(value, torch.SymInt):
            continue
        missing = sorted(str(s) for s in value.node.expr.free_symbols if str(s) not in carriers)
        if missing:
            raise UnsupportedError(f"integer inputs over {missing}, which are no tensor's size")
        ints[slot] = value.node.expr
    for name, value in _attention_fixed(gm).items():
        if name in bounds:  # one size only: a static dim of the export, checked at each call
            bounds[name] = (value, value)
    dims = [{axis: Dim.AUTO(min=bounds[name][0], max=bounds[name][1])
             for axis, name in axes.items() if bounds[name][0] < bounds[name][1]}
            for axes in symbols]
    return DynamicSizes(symbols, dims, carriers, ints, bounds, _attention_equal(gm, carriers),
                        values)


_ATTENTION = (torch._C._nn.scaled_dot_product_attention,
              torch.nn.functional.scaled_dot_product_attention)


def _attention_lengths(gm: torch.fx.GraphModule) -> Iterator[tuple[Any, Any]]:
    """The lengths of the keys and the values of each attention in the graph: ints, or the
    sympy expressions of symbolic ones."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in _ATTENTION or len(node.args) < 3:
            continue
        k, v = (getattr(_fake(a), "shape", None) if isinstance(a, torch.fx.Node) else None
                for a in node.args[1:3])
        if k and v:
            yield tuple(n[-2].node.expr if isinstance(n[-2], torch.SymInt) else int(n[-2])
                        for n in (k, v))


def _one_symbol(length: Any) -> Any:
    """The symbol of a length that is an expression of one symbol, else None."""
    symbols = getattr(length, "free_symbols", ())
    return next(iter(symbols)) if len(symbols) == 1 else None


def _attention_equal(gm: torch.fx.GraphModule,
                     carriers: dict[str, tuple[int, int]]) -> list[tuple[str, str]]:
    """The pairs of input symbols that the graph's attention needs equal: where the lengths of
    its keys and values are one expression of one symbol for another (`s67 + 1` and `s87 + 1`,
    or a sliding window's `Min(16, s67 + 1)` and `Min(16, s87 + 1)`)."""
    pairs = []
    for k_len, v_len in _attention_lengths(gm):
        a, b = _one_symbol(k_len), _one_symbol(v_len)
        if a is None or b is None or a == b:
            continue
        pair = tuple(sorted((str(a), str(b))))
        if k_len.subs(a, b) == v_len and all(n in carriers for n in pair) and pair not in pairs:
            pairs.append(pair)
    return pairs


def _attention_fixed(gm: torch.fx.GraphModule) -> dict[str, int]:
    """Input symbols that the graph's attention fixes: where keys of a static length meet values
    whose length is an expression of one symbol (a full sliding window's 16 keys and the
    `s94 + 1` values that Dynamo saw grow while the window filled), the symbol that makes them
    equal."""
    fixed: dict[str, int] = {}
    for lengths in _attention_lengths(gm):
        static = [int(n) for n in lengths if isinstance(n, int) or n.is_Integer]
        varying = [n for n in lengths if _one_symbol(n) is not None]
        if len(static) == 1 and len(varying) == 1:
            symbol = _one_symbol(varying[0])
            root = _linear_root(varying[0], symbol, static[0])
            if root is not None and root > 0:
                fixed[str(symbol)] = root
    return fixed


def _linear_root(expr: Any, symbol: Any, value: int) -> int | None:
    """The integer that `symbol` must be for the expression `a * symbol + b` to equal
    `value`, or None (another kind of expression, or no integer root)."""
    if expr.diff(symbol).free_symbols:
        return None
    slope, offset = expr.coeff(symbol), expr.subs(symbol, 0)
    if not (slope.is_Integer and offset.is_Integer) or slope == 0 or \
            (value - int(offset)) % int(slope):
        return None
    return (value - int(offset)) // int(slope)


def _bounds(vr: Any) -> tuple[int, int]:
    """A ShapeEnv value range as (low, high): the range's own ends where finite and at least
    1, its upper end else `DYNAMIC_SIZE_CAP` (or the lower end, where that is higher)."""
    lo = max(int(vr.lower), 1) if _finite(vr.lower) else 1
    hi = int(vr.upper) if _finite(vr.upper) else max(DYNAMIC_SIZE_CAP, lo)
    return lo, hi


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, OverflowError):
        return False


def scalar_slots(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list[int]:
    """The inputs of `gm` that are Python numbers Dynamo passes as 0-d tensors (with
    `dynamic=True` it leaves float attributes such as a layer norm's eps unspecialized): the
    graph reads them with `.item()`, which `torch.export` cannot trace into a size. Dynamo
    marks numpy arrays that the model reads (BigBird's random attention plan) the same way:
    those have dimensions, and stay tensor inputs."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return [i for i, n in enumerate(placeholders)
            if getattr(n.meta.get("grapharg"), "pass_arg_as_tensor", False)
            and isinstance(example_inputs[i], torch.Tensor) and example_inputs[i].dim() == 0]


def bake_scalars(gm: torch.fx.GraphModule, values: dict[int, Any]) -> torch.fx.GraphModule:
    """A copy of `gm` whose `.item()` reads of the scalar inputs at the given slots are their
    values (Python numbers) instead; the inputs stay, unread."""
    graph = copy.deepcopy(gm.graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for slot, value in values.items():
        for read in list(placeholders[slot].users):
            if read.op == "call_method" and read.target == "item":
                for user in list(read.users):
                    user.args = torch.fx.node.map_arg(user.args, lambda a: value if a is read
                                                      else a)
                    user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda a: value
                                                        if a is read else a)
                graph.erase_node(read)
    return torch.fx.GraphModule(gm, graph)
