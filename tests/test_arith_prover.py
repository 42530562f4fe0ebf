"""Simplifier.prove: one simplifier deciding several conditions on shared expressions (the
guards of a stage, an index against both ends of its dimension) answers as a fresh `prove` of
each would, also for conditions asked again and for expressions built from the same nodes."""

from __future__ import annotations

import itertools

import pytest

import tensorlang as tl
from tensorlang.arith import Simplifier, prove

i, j, n = tl.var("i"), tl.var("j"), tl.var("n")
RANGES = {i: (0.0, 10.0), j: (0.0, 3.0)}
INDICES = [i * 4 + j, (i * 4 + j) // 4, (i * 4 + j) % 4, i - j, i * 4 + j - 1, n + i, i // 3 * 3]
DIMS = [1, 4, 11, 44, 45]


def _conditions():
    for index, dim in itertools.product(INDICES, DIMS):
        yield index >= 0
        yield index < dim
        yield index <= dim - 1


def test_one_prover_answers_as_fresh_proves():
    prover = Simplifier(RANGES)
    conditions = list(_conditions())
    for cond in conditions + conditions:  # each asked twice, the second time from the memo
        assert prover.prove(cond) == prove(cond, RANGES), cond


@pytest.mark.parametrize("cond, expected", [
    (i * 4 + j < 44, True),
    (i * 4 + j >= 44, False),
    (i * 4 + j < 20, None),
    (n >= 0, None),
    ((i * 4 + j) % 4 < 4, True),
])
def test_prove_decides_or_declines(cond, expected):
    assert Simplifier(RANGES).prove(cond) is expected
