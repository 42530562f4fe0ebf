"""Einsum for the frontends: an equation becomes sums, transposes, reshapes and one
batch_matmul (or dense, for a constant weight) per pair of operands, the GEMM forms topi is fast
at. Diagonals (a repeated index in one operand) and broadcast batch indices are refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .importer import GraphWriter, Value, require, shape_of


def einsum(im: GraphWriter, equation: str, operands: Sequence[Value]) -> Value:
    """numpy's einsum(equation, *operands) as graph ops: operands contracted left to right,
    letters no later operand or the output needs summed away first."""
    terms, out = _einsum_terms(equation, [len(shape_of(v)) for v in operands])
    y, term = _einsum_sum_out(im, operands[0], terms[0], out + "".join(terms[1:]))
    for k in range(1, len(operands)):
        y, term = _einsum_pair(im, y, term, operands[k], terms[k],
                               out + "".join(terms[k + 1:]))
    y, term = _einsum_sum_out(im, y, term, out)
    require(set(out) <= set(term), f"equation {equation!r} has an output index no operand has")
    return _einsum_permute(im, y, term, out)


def _einsum_terms(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """The letters of each operand and of the output, with every `...` spelled out as capital
    letters the equation does not use (aligned from the right, as numpy broadcasts them)."""
    equation = equation.replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    require(len(terms) == len(ranks), f"equation {equation!r} for {len(ranks)} operands")
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in equation]
    widths = [rank - (len(term) - 3) if "..." in term else 0 for term, rank in zip(terms, ranks)]
    widest = max(widths, default=0)
    terms = [term.replace("...", "".join(free[widest - width:widest]))
             for term, width in zip(terms, widths)]
    ellipsis = "".join(free[:widest])
    if arrow:
        out = out.replace("...", ellipsis)
    else:  # implicit output: the broadcast axes, then the letters used once, sorted
        letters = "".join(terms)
        out = ellipsis + "".join(sorted(c for c in set(letters) if letters.count(c) == 1
                                        and c not in ellipsis))
    for term, rank in zip(terms, ranks):
        require(len(term) == rank, f"term {term!r} for an operand of rank {rank}")
        require(len(set(term)) == len(term), f"equation {equation!r} takes a diagonal "
                "(a repeated index in one operand)")
    require(len(set(out)) == len(out), f"equation {equation!r} repeats an output index")
    return terms, out


def _einsum_sum_out(im: GraphWriter, x: Value, term: str, keep: str) -> tuple[Value, str]:
    """`x` summed over the letters of `term` not in `keep`."""
    gone = tuple(k for k, c in enumerate(term) if c not in keep)
    if not gone:
        return x, term
    return im.op("sum", x, axis=gone, keepdims=False), "".join(c for c in term if c in keep)


def _einsum_permute(im: GraphWriter, x: Value, term: str, order: str) -> Value:
    perm = tuple(term.index(c) for c in order)
    return x if perm == tuple(range(len(perm))) else im.op("transpose", x, axes=perm)


def _einsum_pair(im: GraphWriter, a: Value, ta: str, b: Value, tb: str,
                 keep: str) -> tuple[Value, str]:
    """a and b contracted over their shared letters not in `keep`, as one batch_matmul (or one
    dense when nothing batches and b is a weight): the result's letters are batch, a's, b's."""
    a, ta = _einsum_sum_out(im, a, ta, keep + tb)
    b, tb = _einsum_sum_out(im, b, tb, keep + ta)
    dims = {**dict(zip(tb, shape_of(b))), **dict(zip(ta, shape_of(a)))}
    for c in set(ta) & set(tb):
        require(shape_of(a)[ta.index(c)] == shape_of(b)[tb.index(c)], f"index {c!r} of sizes "
                f"{shape_of(a)[ta.index(c)]} and {shape_of(b)[tb.index(c)]} (broadcasting)")
    batch = "".join(c for c in ta if c in tb and c in keep)
    inner = "".join(c for c in ta if c in tb and c not in keep)
    rows, cols = "".join(c for c in ta if c not in tb), "".join(c for c in tb if c not in ta)
    size = lambda letters: math.prod(dims[c] for c in letters)  # noqa: E731
    a3 = im.reshape(_einsum_permute(im, a, ta, batch + rows + inner),
                    (size(batch), size(rows), size(inner)))
    b3 = im.reshape(_einsum_permute(im, b, tb, batch + cols + inner),
                    (size(batch), size(cols), size(inner)))
    if not batch and isinstance(b, np.ndarray):
        y = im.op("dense", im.reshape(a3, shape_of(a3)[1:]), im.reshape(b3, shape_of(b3)[1:]))
    else:
        y = im.op("batch_matmul", a3, b3)
    term = batch + rows + cols
    return im.reshape(y, [dims[c] for c in term]), term
