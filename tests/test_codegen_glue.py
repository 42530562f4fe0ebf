"""Glue functions (the packed wrapper, an entry that only allocates, fills copy descriptors and
starts parallel loops) are left unoptimised by LLVM (`optnone`); anything that does work per
element is optimised as usual, and every kernel still computes the right values."""

from __future__ import annotations

import re

import numpy as np

import tensorlang as tl
import topi
from tensorlang.codegen.glue import is_glue


def _entry_attributes(module: tl.Module, name: str) -> str:
    """The attributes of the function `name` (its symbol may carry a prefix) in the LLVM IR."""
    ll = module.get_source("ll")
    group = re.search(rf'define [^\n]*@"[^"]*{name}"\([^)]*\) (#\d+)', ll).group(1)
    return re.search(rf"^attributes {group} = (.*)$", ll, re.M).group(1)


def _padded_double(parallel: bool):
    a = tl.placeholder((5, 37), name="a")
    padded = topi.nn.pad(a, (1, 2), (3, 0), name="padded")
    out = tl.compute(padded.shape, lambda i, j: padded[i, j] * 2.0, name="out")
    s = tl.create_schedule(out.op)
    if parallel:
        s[out].parallel(out.op.axis[0])
    return s, a, out


def test_entry_that_only_copies_and_starts_parallel_loops_is_glue() -> None:
    s, a, out = _padded_double(parallel=True)
    assert is_glue(tl.lower(s, [a, out]).main.body)
    module = tl.build(s, [a, out], name="k")
    assert "optnone" in _entry_attributes(module, "k")
    assert "optnone" in _entry_attributes(module, "k_packed")
    assert "optnone" not in _entry_attributes(module, "k_par0")
    data = np.random.default_rng(0).standard_normal((5, 37)).astype("float32")
    got = np.zeros((9, 39), "float32")
    module(data, got)
    np.testing.assert_array_equal(got, 2 * np.pad(data, ((1, 3), (2, 0))))


def test_entries_that_work_on_elements_are_optimised() -> None:
    """A serial loop, or a vector read and store with no loop at all, keeps LLVM's optimiser."""
    s, a, out = _padded_double(parallel=False)
    assert not is_glue(tl.lower(s, [a, out]).main.body)
    assert "optnone" not in _entry_attributes(tl.build(s, [a, out], name="k"), "k")

    x = tl.placeholder((16,), name="x")
    y = tl.compute((16,), lambda i: x[i] + 1.0, name="y")
    s = tl.create_schedule(y.op)
    s[y].vectorize(y.op.axis[0])
    func = tl.lower(s, [x, y]).main
    assert "for " not in str(func)  # one vector statement, no loop
    assert not is_glue(func.body)
    module = tl.build(s, [x, y], name="v")
    assert "optnone" not in _entry_attributes(module, "v")
    got = np.zeros(16, "float32")
    module(np.arange(16, dtype="float32"), got)
    np.testing.assert_array_equal(got, np.arange(16, dtype="float32") + 1)
