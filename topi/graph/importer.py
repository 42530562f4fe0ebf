"""What the frontends share: a `GraphWriter` that adds graph ops for a model being imported.

Values known at import time stay numpy arrays: an op whose inputs are all such arrays is
evaluated at once with the graph op's own numpy reference (so shape arithmetic folds away and
attribute-like inputs are plain values), and an array becomes one graph constant the first time
an op reads it as a tensor.
"""

from __future__ import annotations

import math
import re
import weakref
from typing import Any

import numpy as np

import tensorlang as tl

from . import import_ops  # noqa: F401  (registers the ops the frontends emit)
from .aligned import memory_key
from .attention_blocks import QueryBlock, attended, query_blocks
from ..symbolic import canon, canon_shape, free_vars, is_symbolic
from .graph import Graph, Node
from .ops import OpPattern, get_op, infer_output

Value = Node | np.ndarray


class UnsupportedError(NotImplementedError):
    """An op, attribute or attribute value that a frontend does not translate."""


def shape_of(value: Value) -> tuple[int, ...]:
    return tuple(value.shape)


def shape_value(values: Any) -> np.ndarray:
    """Sizes known at import time as an array: int64, or an object array where some are
    symbolic dims (canonical: equal dims are the same object)."""
    array = np.asarray(values, dtype=object)
    flat = [canon(v) for v in array.reshape(-1)]
    if all(isinstance(v, int) for v in flat):
        return np.array(flat, "int64").reshape(array.shape)
    out = np.empty(len(flat), object)
    out[:] = flat
    return out.reshape(array.shape)


def shape_value_op(op_name: str, inputs: Any, attrs: Any) -> np.ndarray:
    """Graph op `op_name` on shape values (some symbolic), computed now: the shape arithmetic
    of a model with symbolic dims (Shape -> Gather -> Unsqueeze -> Concat -> Reshape)."""
    if op_name == "cast":
        return inputs[0]
    if op_name in ("divide", "floor_divide"):
        return shape_value(np.floor_divide(*inputs))
    if op_name in ("equal", "not_equal"):
        a, b = np.broadcast_arrays(*(np.asarray(v, object) for v in inputs))
        same = np.array([x is y or (isinstance(x, int) and isinstance(y, int) and x == y)
                         for x, y in zip(a.reshape(-1), b.reshape(-1))]).reshape(a.shape)
        return same if op_name == "equal" else ~same
    reference = get_op(op_name).reference
    if reference is None:
        raise UnsupportedError(f"graph op {op_name!r} on symbolic sizes")
    try:
        return shape_value(reference(*inputs, **attrs))
    except (TypeError, ValueError) as err:
        raise UnsupportedError(f"graph op {op_name!r} on symbolic sizes: {err}") from err


def dtype_of(value: Value) -> str:
    if isinstance(value, Node):
        return value.dtype
    # A shape value with symbolic sizes (an object array, `shape_value`) holds int64 sizes.
    return "int64" if value.dtype == object else str(value.dtype)


def require(ok: bool, message: str) -> None:
    """Raise UnsupportedError(message) unless `ok`."""
    if not ok:
        raise UnsupportedError(message)


def compact_padding(pads: tuple[int, int, int, int]) -> tuple[int, ...]:
    """(top, left, bottom, right) as (h, w) when symmetric: one form per padding, so that a conv
    has one tuning workload whichever frontend imported it."""
    top, left, bottom, right = pads
    return (top, left) if (top, left) == (bottom, right) else tuple(pads)


def _rows_source(value: Value) -> Node | None:
    """The 2-D rows that `value` is a reshape of, keeping the last axis (a linear layer's
    output reshaped back by `GraphWriter.dense_rows`), or None."""
    if not (isinstance(value, Node) and value.op == "reshape"):
        return None
    source = value.inputs[0]
    if len(source.shape) != 2 or len(value.shape) < 2 or source.shape[-1] != value.shape[-1]:
        return None
    return source


def _along_last_axis(shape: tuple, full: tuple) -> bool:
    """Whether a constant of `shape` broadcasts into `full` along the last axis only (a bias, a
    scalar), without changing the shape."""
    leading = shape[:-1]
    return len(shape) <= len(full) and all(d == 1 for d in leading) and (
        not shape or shape[-1] in (1, full[-1]))


def _small_integer_power(base: Value, exponent: Value) -> bool:
    """Whether base ** exponent is x * x or x * x * x: a float tensor to a constant scalar
    power of 2 or 3 (RMSNorm's square, GPT-2's cubed GELU term). As a product it is exact and
    cheap, where the vector pow of libmvec computes each lane of a negative base by a scalar
    call (GPT-2's GELU took 31% of the model's time)."""
    return (isinstance(base, Node) and isinstance(exponent, np.ndarray) and exponent.size == 1
            and exponent.ndim <= len(base.shape) and exponent.dtype == np.dtype(base.dtype)
            and base.dtype.startswith("float") and float(exponent.reshape(())) in (2.0, 3.0))


def node_name(text: str) -> str:
    """A source model's value name as a readable graph node name (an identifier)."""
    return re.sub(r"\W+", "_", text).strip("_") or "value"


# An array this small is identified by its value when folding (see `GraphWriter._fold`).
SCALAR_BYTES = 16


def _fold_token(value: np.ndarray) -> Any:
    """What identifies an input of a folded op: a small array's value, a larger one's identity."""
    if value.nbytes <= SCALAR_BYTES:
        return value.dtype.str, value.shape, value.tobytes()
    return id(value)


class GraphWriter:
    """The graph being built, the name for the ops of the source node being converted, and one
    constant per array of data.

    A model's weights stay the source's own memory: arrays are shared into the graph, not copied
    (`Graph.constant(share=True)`), and an op folded at import is folded once per set of input
    arrays (a weight that twelve layers share, as ALBERT's, is transposed once, into one
    constant, not twelve). Folded values are read-only, as the weights are."""

    def __init__(self) -> None:
        self.graph = Graph()
        self.name = "value"
        self._constants: dict[tuple, tuple[np.ndarray, Node]] = {}
        self._array_names: dict[int, tuple[np.ndarray, str]] = {}
        self._folds: dict[tuple, tuple[list[weakref.ref], weakref.ref]] = {}
        self._rows_seen: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def named_array(self, array: np.ndarray, name: str) -> np.ndarray:
        """`array`, remembered under the source model's `name` (a weight's graph constant is
        named after it)."""
        self._array_names[id(array)] = (array, node_name(name))
        return array

    def as_node(self, value: Value) -> Node:
        """A graph node for `value` (an array becomes a constant, once)."""
        if isinstance(value, Node):
            return value
        if not isinstance(value, np.ndarray):
            raise TypeError(f"expected a tensor, got {type(value).__name__} {value!r}")
        if value.dtype == object:
            return self.sizes_node(value)
        key = memory_key(value)  # the array is kept alive by the cache: its address stays its own
        cached = self._constants.get(key)
        if cached is None:
            named = self._array_names.get(id(value))
            name = named[1] if named is not None else self.name + "_const"
            cached = (value, self.graph.constant(value, name=name, share=True))
            self._constants[key] = cached
        return cached[1]

    def sizes_node(self, sizes: np.ndarray) -> Node:
        """A shape value with symbolic sizes (`shape_value`) as an int64 tensor computed at run
        time, which the graph inputs carrying its variables feed (`dims_tensor`)."""
        names = free_vars(list(sizes.reshape(-1)))
        carriers = []
        for name in names:
            carrier = next((n for n in self.graph.inputs if name in free_vars(n.shape)), None)
            require(carrier is not None, f"the size {name} of no input")
            if carrier not in carriers:
                carriers.append(carrier)
        return self.graph.apply("dims_tensor", *carriers, name=self.name + "_sizes",
                                values=tuple(sizes.reshape(-1)), shape=sizes.shape)

    def op(self, op_name: str, *inputs: Value, **attrs: Any) -> Value:
        """Graph op `op_name` on `inputs`; evaluated now with the op's numpy reference when every
        input is an array."""
        if all(isinstance(v, np.ndarray) for v in inputs) and any(
                v.dtype == object for v in inputs):
            return shape_value_op(op_name, inputs, attrs)
        if all(isinstance(v, np.ndarray) for v in inputs):
            return self._fold(op_name, inputs, attrs)
        on_rows = self._on_rows(op_name, inputs, attrs)
        if on_rows is not None:
            return on_rows
        if op_name == "power" and _small_integer_power(*inputs):
            x = inputs[0]
            square = self.op("multiply", x, x)
            return square if int(inputs[1]) == 2 else self.op("multiply", square, x)
        nodes = [self.as_node(v) for v in inputs]
        return self.graph.apply(op_name, *nodes, name=self.name, **attrs)

    def _fold(self, op_name: str, inputs: tuple[np.ndarray, ...], attrs: dict) -> np.ndarray:
        """Graph op `op_name` on arrays, by its numpy reference: read-only, a view of its input
        where the reference makes one (a transpose), and the same array for the same op on the
        same arrays (only weak references are kept: a value nothing reads is freed). A scalar
        input counts by its value: the layers of a model that each mask with their own copy of
        the same fill value share one folded mask, not one per layer."""
        key = (op_name, tuple(map(_fold_token, inputs)), repr(sorted(attrs.items())))
        known = self._folds.get(key)
        if known is not None:
            sources, result = known
            value = result()
            if value is not None and all(s() is v for s, v in zip(sources, inputs)
                                         if v.nbytes > SCALAR_BYTES):
                return value
        _, dtype = infer_output(op_name, [(v.shape, str(v.dtype)) for v in inputs], attrs)
        reference = get_op(op_name).reference
        if reference is None:
            raise UnsupportedError(f"graph op {op_name!r} on constants (it has no reference)")
        value = np.asarray(reference(*inputs, **attrs)).astype(dtype, copy=False)
        if any(value is v for v in inputs):
            value = value.view()  # an identity: a view of its own, so it can be remembered
        value.setflags(write=False)
        self._folds[key] = ([weakref.ref(v) for v in inputs], weakref.ref(value))
        return value

    def reshape(self, x: Value, shape: Any) -> Value:
        """`x` reshaped (itself when the shape does not change); a reshape of a reshape reads
        the first one's source (itself when that has the shape asked for)."""
        shape = canon_shape(shape)
        if shape == shape_of(x):
            return x
        if isinstance(x, Node) and x.op == "reshape":
            source = x.inputs[0]
            resolved, _ = infer_output("reshape", [(source.shape, source.dtype)],
                                       {"newshape": shape})
            return source if tuple(resolved) == shape_of(source) else self.op(
                "reshape", source, newshape=shape)
        return self.op("reshape", x, newshape=shape)

    def one_row(self, x: Value) -> Value:
        """`x` (N, C, L) as (N, C, 1, L): a 1-D convolution or pooling is the 2-D one of images
        one row high (its weight, (O, C / groups, K), lifts the same way), so it runs on the 2-D
        kernels and their tuning; `drop_row` takes the row away from the result."""
        shape = shape_of(x)
        require(len(shape) == 3, f"a 1-D window over an input of rank {len(shape)}")
        return self.reshape(x, (*shape[:2], 1, shape[2]))

    def drop_row(self, y: Value) -> Value:
        """The (N, C, L) value of a 1-D window's result computed one row high (`one_row`)."""
        shape = shape_of(y)
        return self.reshape(y, (*shape[:2], shape[3]))

    def _on_rows(self, op_name: str, inputs: tuple, attrs: dict) -> Value | None:
        """An elementwise op on values reshaped from 2-D rows (`dense_rows` folds the leading
        axes of a linear layer's input into rows and reshapes its output back), computed on the
        rows before the reshape back, or None where it does not apply. The fusion pass fuses
        an elementwise tail into a product only without a reshape in between, so the bias, the
        activation and the residual add of a linear layer join its kernel this way.

        Applies when the op's other operands are constants that broadcast along the last axis
        only, or values reshaped from rows of the same shape (the residual), and the output
        keeps the reshaped shape."""
        if get_op(op_name).pattern not in (OpPattern.ELEMWISE, OpPattern.BROADCAST):
            return None
        rows = [_rows_source(v) for v in inputs]
        row_shapes = {r.shape for r in rows if r is not None}
        if len(row_shapes) != 1:
            return None
        full = next(shape_of(v) for v, r in zip(inputs, rows) if r is not None)
        operands: list[Value] = []
        for v, r in zip(inputs, rows):
            if r is not None:
                if shape_of(v) != full:
                    return None
                operands.append(r)
            elif isinstance(v, np.ndarray) and v.dtype != object and _along_last_axis(
                    v.shape, full):
                operands.append(v.reshape(v.shape[-1:]) if v.ndim > 1 else v)
            else:
                return None
        return self.reshape(self.op(op_name, *operands, **attrs), full)

    def slice_dims(self, x: Value, starts: list, ends: list, axes: list, steps: list) -> Value:
        """A slice with symbolic bounds (steps of 1): a position table cut to the sequence length,
        or a whole symbolic axis."""
        require(all(s == 1 for s in steps), "a slice of symbolic bounds with steps other than 1")
        shape = shape_of(x)
        begins, sizes = [], []
        for a, b, e in zip(axes, starts, ends):
            n = shape[a]
            require(not isinstance(b, int) or 0 <= b or is_symbolic(n),
                    f"a slice of axis {a} starting at {b}")
            if isinstance(e, int) and (e >= 2**31 - 1 or (not is_symbolic(n) and e >= n)):
                e = n  # to the end
            if isinstance(b, int) and b < 0:  # from the end: the last -b (or all n) of them
                b = canon(tl.maximum(n + b, 0))
            if isinstance(e, int) and e < 0:
                e = canon(tl.maximum(n + e, 0))
            size = canon(e - b) if not isinstance(b, int) or b else e
            require(not isinstance(size, int) or size >= 1, f"an empty slice {b}:{e}")
            begins.append(b)
            sizes.append(size)
        return self.op("slice_dims", self.as_node(x), axes=tuple(axes), begin=tuple(begins),
                       size=tuple(sizes))

    def scatter_at(self, x: Value, dest: np.ndarray, values: Value, accumulate: bool) -> Value:
        """`x` with `values` written at the flat positions `dest` (known now, one per value, in
        the values' order; the last of several at one position wins) or, with `accumulate`,
        added there: read with takes from x and the values side by side, one take per value
        that lands on a position after another (a fold's overlapping patches)."""
        shape, size = shape_of(x), math.prod(shape_of(x))
        dest = np.asarray(dest, np.int64).ravel()
        count = dest.size
        if count == 0:
            return x
        if isinstance(x, np.ndarray) and isinstance(values, np.ndarray):
            out = x.copy().ravel()
            (np.add.at if accumulate else np.put)(out, dest, np.ravel(values))
            return out.reshape(shape)
        flat_x, flat_values = self.reshape(x, (size,)), self.reshape(values, (count,))
        if not accumulate:
            source = np.arange(size, dtype=np.int64)
            source[dest] = size + np.arange(count, dtype=np.int64)
            joined = self.op("concatenate", flat_x, flat_values, axis=0)
            return self.reshape(self.op("take", joined, source, axis=0), shape)
        padded = self.op("concatenate", flat_values, np.zeros(1, dtype_of(x)), axis=0)
        out = None if isinstance(x, np.ndarray) and not x.any() else flat_x
        order = np.argsort(dest, kind="stable")
        first = np.searchsorted(dest[order], np.arange(size), side="left")
        landed = np.bincount(dest, minlength=size)
        for k in range(int(landed.max(initial=0))):  # the k-th value landing on each position
            source = np.where(landed > k, order[np.minimum(first + k, count - 1)], count)
            term = self.op("take", padded, source, axis=0)
            out = term if out is None else self.op("add", out, term)
        return self.reshape(flat_x if out is None else out, shape)

    def dense_rows(self, x: Value, weight: Value) -> Value:
        """x (..., K) times weight (N, K) transposed: the leading axes fold into the rows of one
        dense, the GEMM layout topi tunes (and batch 1 stays a matrix-vector product)."""
        sx = shape_of(x)
        rows = self.reshape(x, (-1, sx[-1])) if len(sx) != 2 else x
        y = self.op("dense", rows, weight)
        return self.reshape(y, (*sx[:-1], shape_of(weight)[0])) if len(sx) != 2 else y

    def matmul(self, a: Value, b: Value) -> Value:
        """numpy's a @ b for operands of 2 or more dimensions, in the forms topi is fast at: a
        2-D weight makes one dense over the folded leading axes; equal batch axes make one
        3-D batch_matmul (which reads its right operand as (batch, N, K), so a transpose of the
        last two axes in front of it cancels); anything else is a broadcasting matmul."""
        sa, sb = shape_of(a), shape_of(b)
        if len(sb) == 2 and isinstance(b, np.ndarray):
            return self.dense_rows(a, self.op("transpose", b, axes=(1, 0)))
        if len(sa) < 3 or sa[:-2] != sb[:-2]:
            return self.op("matmul", a, b)
        batch = math.prod(sa[:-2])
        (m, k), n = sa[-2:], sb[-1]
        swap = (*range(len(sb) - 2), len(sb) - 1, len(sb) - 2)
        if isinstance(b, Node) and b.op == "transpose" and tuple(b.attrs["axes"]) == swap:
            b_nk = b.inputs[0]
        else:
            b_nk = self.op("transpose", b, axes=swap)
        y = self.op("batch_matmul", self.reshape(a, (batch, m, k)),
                    self.reshape(b_nk, (batch, n, k)))
        return self.reshape(y, (*sa[:-1], n))

    def attention(self, q: Value, k: Value, v: Value, mask: Value | None = None,
                  is_causal: bool = False, scale: float | None = None) -> Value:
        """Scaled dot-product attention, softmax(q kᵀ * scale + mask) v, over the last two axes
        (PyTorch's `scaled_dot_product_attention`, ONNX's Attention).

        q is (..., Hq, L, D), k (..., Hkv, S, D) and v (..., Hkv, S, Dv) with equal leading axes;
        Hq a multiple of Hkv is grouped-query attention (query head h reads key/value head
        h // (Hq // Hkv)). It becomes two 3-D batch_matmuls around a softmax: the queries of a
        group are folded into the rows, (B * Hkv, G * L, D), so keys and values are read once per
        key/value head, never repeated per query head. `mask` broadcasts against (..., Hq, L, S):
        a bool mask says where to attend, a float mask is added to the scores; `is_causal` attends
        to the keys up to the query's own position (aligned top-left, as PyTorch's). A query that
        a mask known now lets attend to no key gets zeros, as in PyTorch.
        """
        sq, sk, sv = shape_of(q), shape_of(k), shape_of(v)
        if len(sq) < 3 or len(sk) != len(sq) or len(sv) != len(sq):
            raise UnsupportedError(f"attention of ranks {len(sq)}, {len(sk)}, {len(sv)} "
                                   "(queries, keys and values need a head axis)")
        *lead, heads, length, depth = sq
        kv_heads, keys = sk[-3], sk[-2]
        if sk[:-3] != tuple(lead) or sv[:-3] != tuple(lead) or heads % kv_heads or \
                sv[-3] != kv_heads or sv[-2] != keys or sk[-1] != depth:
            raise UnsupportedError(f"attention of shapes {sq}, {sk}, {sv}")
        scale = 1.0 / math.sqrt(depth) if scale is None else float(scale)
        if is_causal:
            if mask is not None:
                raise UnsupportedError("attention with both a mask and is_causal")
            mask = np.tril(np.ones((length, keys), bool))
        blocks = (query_blocks(mask, length, keys)
                  if isinstance(mask, np.ndarray) and not any(map(is_symbolic, sq + sk)) else None)
        keep = None
        if isinstance(mask, np.ndarray):  # rows that attend to nothing give zeros (PyTorch's)
            attends = mask if mask.dtype == bool else ~np.isneginf(mask)
            dead = ~attends.any(axis=-1, keepdims=True)
            if dead.any():
                mask = self._rows_seeing_all(mask, dead)
                keep = (~dead).astype(dtype_of(q))
        if blocks is None:
            out = self._attend(q, k, v, mask, scale)
        else:
            out = self.op("concatenate", *(self._attend_block(q, k, v, mask, scale, b)
                                           for b in blocks), axis=len(sq) - 2)
        return out if keep is None else self.op("multiply", out, keep)

    def _rows_seeing_all(self, mask: np.ndarray, dead: np.ndarray) -> np.ndarray:
        """`mask` with its `dead` rows (which see no key) seeing every key instead, so that
        their softmax stays finite; once per mask array (kept for the import, with the mask):
        the layers that share a mask share this one and what is folded from it."""
        known = self._rows_seen.get(id(mask))
        if known is None or known[0] is not mask:
            value = np.where(dead, np.zeros((), mask.dtype) if mask.dtype != bool else True,
                             mask)
            value.setflags(write=False)
            known = self._rows_seen[id(mask)] = (mask, value)
        return known[1]

    def _attend_block(self, q: Value, k: Value, v: Value, mask: np.ndarray, scale: float,
                      block: QueryBlock) -> Value:
        """The attention of one block of queries over the keys it sees (`query_blocks`); the
        mask is left out where the block sees all of its keys."""
        rows, span = (block.rows_begin, block.rows_end), (block.keys_begin, block.keys_end)
        axis = len(shape_of(q)) - 2
        part = self._cut(self._cut(mask, mask.ndim - 2, rows), mask.ndim - 1, span)
        return self._attend(self._cut(q, axis, rows), self._cut(k, axis, span),
                            self._cut(v, axis, span), part if not attended(part).all() else None,
                            scale)

    def _cut(self, x: Value, axis: int, bounds: tuple[int, int]) -> Value:
        """`x[begin:end]` along `axis`, or `x` itself where that axis is 1 (broadcast) or whole."""
        n = shape_of(x)[axis]
        if n == 1 or bounds == (0, n):
            return x
        return self.op("strided_slice", x, begin=(bounds[0],), end=(bounds[1],), strides=(1,),
                       axes=(axis,))

    def _attend(self, q: Value, k: Value, v: Value, mask: Value | None, scale: float) -> Value:
        """softmax(q kᵀ * scale + mask) v for shapes that `attention` checked, the queries of a
        group folded into the rows of two 3-D batch_matmuls."""
        sq, sk, sv = shape_of(q), shape_of(k), shape_of(v)
        *lead, heads, length, depth = sq
        kv_heads, keys = sk[-3], sk[-2]
        batch, group, out_depth = canon(math.prod(lead)), heads // kv_heads, sv[-1]
        dtype = dtype_of(q)
        scores = self.op("batch_matmul", self.reshape(q, (batch * kv_heads, group * length, depth)),
                         self.reshape(k, (batch * kv_heads, keys, depth)))
        scores = self.op("multiply", scores, np.array(scale, dtype))
        if mask is not None:
            mask = self._additive_mask(mask, dtype)
            sm = shape_of(mask)
            if len(sm) > len(sq):
                raise UnsupportedError(f"attention mask of shape {sm} for queries of shape {sq}")
            sm = (1,) * (len(sq) - len(sm)) + sm
            mask_batch = canon(math.prod(sm[:-3]))
            if mask_batch not in (1, batch) or sm[-3] not in (1, heads):
                raise UnsupportedError(f"attention mask of shape {sm} for queries of shape {sq}")
            mask_heads = (kv_heads, group) if sm[-3] == heads else (1, 1)
            grouped = (batch, kv_heads, group, length, keys)
            mask = self.reshape(mask, (mask_batch, *mask_heads, *sm[-2:]))
            scores = self.reshape(self.op("add", self.reshape(scores, grouped), mask),
                                  (batch * kv_heads, group * length, keys))
        probs = self.op("softmax", scores, axis=-1)
        out = self.matmul(probs, self.reshape(v, (batch * kv_heads, keys, out_depth)))
        return self.reshape(out, (*lead, heads, length, out_depth))

    def _additive_mask(self, mask: Value, dtype: str) -> Value:
        """An attention mask as values to add to the scores: a bool mask's False becomes the
        dtype's most negative finite value (so a row that masks everything stays finite)."""
        if dtype_of(mask) != "bool":
            return mask if dtype_of(mask) == dtype else self.op("cast", mask, dtype=dtype)
        return self.op("where", mask, np.array(0, dtype), np.array(np.finfo(dtype).min, dtype))
