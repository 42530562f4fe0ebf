"""`cached_attention` (a decode step's attention over its KV cache in one kernel) against numpy's
softmax over the joined keys: head dims that fill no whole vector, one cached row and a prime
count of them, a symbolic cache length, several new tokens with grouped query rows, masked keys,
on the host and on AVX2; bad inputs refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
import topi.graph as tg
from topi.graph.llm import ops  # noqa: F401  (registers cached_attention)
from topi.nn.cached_attention import cached_attention

MASKED = -1e30


def _expected(q, keys, values, new_keys, new_values, mask, new_mask, scale):
    """softmax(q [K; K_new]^T * scale + [mask, new_mask]) [V; V_new], row r being token
    r % tokens, in float64."""
    tokens = new_keys.shape[1]
    token = np.arange(q.shape[1]) % tokens
    joined_k = np.concatenate([keys, new_keys], axis=1).astype(np.float64)
    joined_v = np.concatenate([values, new_values], axis=1).astype(np.float64)
    scores = q.astype(np.float64) @ joined_k.transpose(0, 2, 1) * scale
    scores += np.concatenate([mask, new_mask], axis=1)[token]
    weights = np.exp(scores - scores.max(axis=2, keepdims=True))
    return weights / weights.sum(axis=2, keepdims=True) @ joined_v


def _inputs(rng, heads, rows, dim, cached, tokens):
    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    mask = np.where(rng.random((tokens, cached)) < 0.3, MASKED, 0).astype(np.float32)
    new_mask = np.triu(np.full((tokens, tokens), MASKED, np.float32), 1)  # causal
    return [normal(heads, rows, dim), normal(heads, cached, dim), normal(heads, cached, dim),
            normal(heads, tokens, dim), normal(heads, tokens, dim), mask, new_mask]


def _graph(heads, rows, dim, tokens, cached, scale):
    g = tg.Graph()
    names = ["q", "keys", "values", "new_keys", "new_values", "mask", "new_mask"]
    shapes = [(heads, rows, dim), (heads, cached, dim), (heads, cached, dim),
              (heads, tokens, dim), (heads, tokens, dim), (tokens, cached), (tokens, tokens)]
    inputs = [g.input(n, s) for n, s in zip(names, shapes)]
    g.output(g.apply("cached_attention", *inputs, scale=scale))
    return g, names


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])  # the host, and AVX2
@pytest.mark.parametrize("heads,group,dim,tokens", [(3, 3, 64, 1), (2, 7, 72, 1), (1, 1, 5, 1),
                                                    (4, 2, 40, 3), (2, 1, 128, 2)])
def test_matches_softmax_over_the_joined_keys(heads, group, dim, tokens, target, rng):
    rows = group * tokens
    scale = 1 / np.sqrt(dim)
    g, names = _graph(heads, rows, dim, tokens, "past", scale)
    module = tg.build(g, target=target, bounds={"past": (1, 300)})
    for cached in (1, 13, 131, 300):
        arrays = _inputs(rng, heads, rows, dim, cached, tokens)
        got = module(**dict(zip(names, arrays)))[0]
        np.testing.assert_allclose(got, _expected(*arrays, scale), rtol=2e-5, atol=2e-6)


def test_static_cache_and_a_fully_masked_cache(rng):
    """A static cache length; every cached key hidden leaves the new keys' softmax."""
    g, names = _graph(2, 4, 32, 1, 17, 0.25)
    module = tg.build(g)
    arrays = _inputs(rng, 2, 4, 32, 17, 1)
    arrays[5][:] = MASKED
    got = module(**dict(zip(names, arrays)))[0]
    np.testing.assert_allclose(got, np.broadcast_to(arrays[4], got.shape), rtol=1e-6)
    np.testing.assert_allclose(got, _expected(*arrays, 0.25), rtol=1e-6)


def test_bad_inputs_are_named():
    def t(*shape, dtype="float32", name="x"):
        return tl.placeholder(shape, dtype=dtype, name=name)

    q, kv, new, mask, new_mask = t(2, 3, 8), t(2, 5, 8), t(2, 1, 8), t(1, 5), t(1, 1)
    with pytest.raises(TypeError, match="keys must be float32"):
        cached_attention(q, t(2, 5, 8, dtype="float16"), kv, new, new, mask, new_mask, 1.0)
    with pytest.raises(ValueError, match="values head dim"):
        cached_attention(q, kv, t(2, 5, 9), new, new, mask, new_mask, 1.0)
    with pytest.raises(ValueError, match="mask columns"):
        cached_attention(q, kv, kv, new, new, t(1, 6), new_mask, 1.0)
    with pytest.raises(ValueError, match="not whole groups"):
        cached_attention(q, kv, kv, t(2, 2, 8), t(2, 2, 8), t(2, 5), t(2, 2), 1.0)
    with pytest.raises(ValueError, match="must be static"):
        cached_attention(q, kv, kv, t(2, tl.var("n"), 8), new, mask, new_mask, 1.0)
    with pytest.raises(ValueError, match="q"):
        cached_attention(t(2, 8), kv, kv, new, new, mask, new_mask, 1.0)
