"""A built Module reads its inputs where the caller holds them and writes its outputs into
new arrays (topi/graph/bindings.py), and stays exact where it cannot: non-contiguous inputs,
an input that is also an output, one value returned twice, a concatenation written in place,
a constant output. Each call's outputs are its own, the caller's inputs are never written, and
after a call the kernels point at the arena again (profiling still runs on it)."""

from __future__ import annotations

import numpy as np
import pytest

import topi.graph as tg
from topi.graph.bindings import address


def _graph() -> tg.Graph:
    g = tg.Graph()
    x = g.input("x", (5, 7), "float32")
    y = g.input("y", (5, 7), "float32")
    s = g.add(x, y)
    r = g.relu(s)
    c = g.concatenate([g.exp(r), g.negative(s)], axis=1)
    g.output(r, c, r, x, g.constant(np.arange(3, dtype="float32")))
    return g


def _expected(x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    s = x + y
    r = np.maximum(s, 0)
    return [r, np.concatenate([np.exp(r), -s], 1), r, x, np.arange(3, dtype="float32")]


def _arena_addresses(module: tg.Module) -> list[list[int]]:
    return [[argv[k] for k in range(len(step.arrays))]
            for (_, argv, checked), step in zip(module._calls, module.steps) if checked is None]


@pytest.fixture(scope="module")
def module() -> tg.Module:
    return tg.build(_graph())


def test_inputs_in_place_outputs_fresh(module):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((5, 7), "float32"), rng.standard_normal((5, 7), "float32")
    kept = x.copy(), y.copy()
    before = _arena_addresses(module)
    first = module(x=x, y=y)
    for got, want in zip(first, _expected(x, y)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(x, kept[0])
    np.testing.assert_array_equal(y, kept[1])
    assert first[0] is not first[2]  # one value returned twice: two arrays
    assert _arena_addresses(module) == before  # the kernels point at the arena again
    second = module(x=-x, y=y)
    for got, want in zip(first, _expected(x, y)):  # a later call leaves earlier outputs alone
        np.testing.assert_allclose(got, want, rtol=1e-6)
    for got, want in zip(second, _expected(-x, y)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert "total" in module.profile(number=2)


def test_what_is_rebound(module):
    """x is also an output (copied), y is read in place; r is returned twice (copied), the
    fused concatenation computes into its own buffer (rebound), the constant is copied."""
    names = [i.name for i in module.inputs]
    assert module.bindings.inputs[names.index("x")] is None
    assert module.bindings.inputs[names.index("y")] is not None
    assert [sites is not None for sites in module.bindings.outputs] == \
        [False, True, False, False, False]


def test_concatenations_in_place_stay_in_the_arena():
    """Values written by their producers into slices of a concatenation are no rebound
    outputs: the concatenation's buffer is copied out."""
    g = tg.Graph()
    x = g.input("x", (1, 4, 5, 5))
    a, b, c = (g.relu(g.add(x, float(k)), name=n) for k, n in enumerate("abc"))
    inner = g.concatenate([a, b], axis=1, name="inner")
    g.output(g.concatenate([b, a], axis=1, name="first"),
             g.concatenate([inner, g.exp(c, name="e")], axis=1, name="outer"))
    module = tg.build(g)
    outputs = [n.name for n in module.graph.outputs]
    assert "outer" in module.plan.in_place
    assert [sites is not None for sites in module.bindings.outputs] == \
        [name not in module.plan.in_place for name in outputs]
    value = np.random.default_rng(3).uniform(-2, 2, (1, 4, 5, 5)).astype("float32")
    a, b, c = (np.maximum(value + k, 0) for k in range(3))
    for _ in range(2):
        got = module(x=value)
        np.testing.assert_allclose(got[0], np.concatenate([b, a], 1), rtol=1e-6)
        np.testing.assert_allclose(got[1], np.concatenate([a, b, np.exp(c)], 1), rtol=1e-6)


def test_non_contiguous_inputs_are_copied(module):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 5), "float32").T  # a transposed view
    y = rng.standard_normal((5, 14), "float32")[:, ::2]  # a strided view
    for got, want in zip(module(x=x, y=y), _expected(x, y)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_fresh_outputs_of_a_plain_chain():
    g = tg.Graph()
    x = g.input("x", (3, 11), "float32")
    g.output(g.sigmoid(g.multiply(x, g.constant(np.float32(2.0)))))
    module = tg.build(g)
    assert module.bindings.outputs[0] is not None and module.bindings.inputs[0] is not None
    x = np.random.default_rng(2).standard_normal((3, 11), "float32")
    out, = module(x=x)
    assert address(out) not in {address(b) for b in module.output_buffers}
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-2 * x)), rtol=1e-6)


def test_torch_compile_reads_tensors_in_place():
    torch = pytest.importorskip("torch", reason="the torch extra is not installed")
    from topi.graph import torch_compile

    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.GELU()).eval()
    graph = torch_compile.CompiledGraph(torch.fx.symbolic_trace(model), [torch.randn(3, 6)],
                                        {"target": torch_compile.as_target("llvm")})
    with torch.no_grad():
        x = torch.randn(3, 6)
        first = graph(x)
        torch.testing.assert_close(first, model(x))
        built, = graph.built.values()
        assert built.in_place
        second = graph(torch.randn(6, 3).t())  # not contiguous: copied
        torch.testing.assert_close(first, model(x))  # the first output is its own
        torch.testing.assert_close(graph(x * 2), model(x * 2))
        assert not torch.equal(first, second)
