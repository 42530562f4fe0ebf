"""The simplifier and the interval analyses that lowering relies on."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorlang as tl
from tensorlang.arith import INF, Simplifier, const_bounds, prove, simplify, symbolic_bounds
from tensorlang.expr import Const
from tensorlang.visitor import contains, free_vars, structural_equal, substitute

io, ii, n = tl.var("io"), tl.var("ii"), tl.var("n")
RANGES = {io: (0, 10), ii: (0, 3)}


@pytest.mark.parametrize(
    "expr,expected",
    [
        ((io * 4 + ii) // 4, "io"),
        ((io * 4 + ii) % 4, "ii"),
        ((io * 4 + ii + 1) - io * 4, "ii + 1"),
        ((io * 8 + ii * 2 + 1) // 2, "io * 4 + ii"),
        ((io * 4 + ii) * 3 - io * 12, "ii * 3"),
        (tl.minimum(io * 4 + ii, io * 4 + 5), "io * 4 + ii"),
        ((io // 4) // 2, "io // 8"),
        ((n + 7) // 8 * 8 - (n + 7) // 8 * 8, "0"),
        (tl.minimum(n // 8, (n + 7) // 8), "n // 8"),
        (8 - n + n, "8"),
        ((n * 4) // 16 * 16 + (n * 4) % 16, "n * 4"),
        ((n + 1) // 8 * 24 + (n + 1) % 8 * 3 + io, "n * 3 + io + 3"),
        (n // 16 * 8 + n % 16, "n // 16 * 8 + n % 16"),
        ((ii + 48) // 8, "6"),  # one quotient in the whole range
        ((ii + 50) % 8, "ii + 2"),
        ((io + 48) // 8, "io // 8 + 6"),  # two quotients: 6 and 7
    ],
)
def test_simplify_rules(expr, expected):
    assert str(simplify(expr, RANGES)) == expected


@pytest.mark.parametrize(
    "cond,expected",
    [
        (io + 66 < 73, (-INF, 6)),  # the guard of a partial tile
        (io * 3 <= 10, (-INF, 3)),
        (9 - io * 2 > 0, (-INF, 4)),  # a negative coefficient: io < 4.5
        (io * 2 >= 5, (3, INF)),
        ((io >= 2) & (io < 7) & (ii < 3), (2, 6)),  # the other variable's conjunct is no bound
        (io * 2 == 8, (4, 4)),
        (io * 2 == 7, (4, 3)),  # no integer: an empty range
        (io + ii < 5, (-INF, INF)),  # a bound on a sum, not on io alone
        (io != 3, (-INF, INF)),
        ((io < 4) | (io > 8), (-INF, INF)),  # a disjunction bounds nothing
    ],
)
def test_implied_range_of_a_variable(cond, expected):
    assert Simplifier().implied_range(cond, io) == expected


@pytest.mark.parametrize(
    "cond,expected",
    [
        (io * 4 + ii + 96 < 97, (-INF, 0)),  # a one-column tail's write-back: ii = 0 passes
        (io * 4 + ii * 2 > 12, (2, INF)),  # ii = 3 passes from io = 2 on
        (io * 4 - ii < 9, (-INF, 2)),  # a negative coefficient: the smallest rest is -3
        (io + n < 5, (-INF, INF)),  # n is no inner loop: no bound
        (io + ii == 5, (-INF, INF)),  # equality over a range of ii bounds nothing
    ],
)
def test_implied_range_for_some_inner_values(cond, expected):
    """Where some values of the inner loops' variables (`ii` in [0, 3]) let the guard hold."""
    assert Simplifier().implied_range(cond, io, {ii: (0, 3)}) == expected


def test_conditions_decided_by_ranges():
    assert prove(io * 4 + ii < 44, RANGES) is True
    assert prove(io * 4 + ii >= 44, RANGES) is False
    assert prove(io * 4 + ii < 20, RANGES) is None


def test_const_bounds():
    assert const_bounds(io * 4 + ii - 2, RANGES) == (-2, 41)
    assert const_bounds((io * 4 + ii) % 8, RANGES) == (0, 7)
    assert const_bounds(n, RANGES) == (-math.inf, math.inf)


def test_symbolic_bounds_relax_only_inner_vars():
    lo, hi = symbolic_bounds(io * 4 + ii + 2, {ii: (tl.const(0), tl.const(3))})
    assert str(simplify(lo)) == "io * 4 + 2" and str(simplify(hi)) == "io * 4 + 5"
    assert symbolic_bounds(io * ii, {ii: (tl.const(0), tl.const(3))}) is None


def test_float_folding_uses_the_dtype():
    x = tl.const(0.1, "float32") + tl.const(0.2, "float32")
    folded = simplify(x)
    assert isinstance(folded, Const) and folded.value == float(np.float32(0.1) + np.float32(0.2))


def test_substitute_and_structural_equal():
    e = (io + 1) * ii
    replaced = substitute(e, {io: n})
    assert structural_equal(replaced, (n + 1) * ii)
    assert not structural_equal(replaced, (n + 2) * ii)
    assert free_vars(replaced) == {n, ii}


small = st.integers(-20, 20)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(a=small, b=small, c=st.integers(1, 9), d=st.integers(1, 9), x=st.integers(0, 10), y=st.integers(0, 3))
def test_simplify_preserves_value(a, b, c, d, x, y):
    """Random affine index expressions evaluate the same before and after simplification."""
    exprs = [
        (io * a + ii * b + c) // d,
        (io * a + ii * b + c) % d,
        tl.maximum(io * a, ii * b + c) - tl.minimum(io, ii * d),
        (io * c + ii) // c * d + (io * c + ii) % c,
        (io * a + ii + b) // d * (d * c) + (io * a + ii + b) % d * c,
    ]
    env = {io: tl.const(x), ii: tl.const(y)}
    for e in exprs:
        direct = simplify(substitute(e, env))
        after = simplify(substitute(simplify(e, RANGES), env))
        assert isinstance(direct, Const) and isinstance(after, Const)
        assert direct.value == after.value, str(e)


def test_contains_finds_a_node_kind_anywhere_below():
    from tensorlang.expr import Binary, TensorRead

    A = tl.placeholder((4,), name="A")
    e = (io + 1) * 2
    assert contains(e, Binary) and not contains(e, TensorRead)
    assert contains(A[io] + 1.0, TensorRead) and contains(A[io], TensorRead)
