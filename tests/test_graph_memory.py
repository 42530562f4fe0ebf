"""Memory of importing and building a model: the graph holds the model's own weights (no
copies; a weight that several layers share is one constant), the built module adds one packed
copy of each weight that a kernel reads packed and nothing else of weight size, and the peak
of import and build (traced numpy and Python allocations, deterministic) stays within those
bounds, through `from_torch` and `torch.compile` alike."""

from __future__ import annotations

import tracemalloc
import warnings
from collections.abc import Iterable

import numpy as np
import pytest

import topi.graph as tg
from topi.graph.graph import Graph

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
from torch import nn

from topi.graph.torch_compile import backend

pytestmark = pytest.mark.filterwarnings("ignore:.*fallback config", "ignore::FutureWarning")

LAYERS = 6


class SharedLayers(nn.Module):
    """ALBERT's structure in small: one set of layer weights run `LAYERS` times, and an output
    head tied to the embedding table."""

    def __init__(self, vocab: int = 2000, hidden: int = 512) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.mix = nn.Linear(hidden, hidden)
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for _ in range(LAYERS):
            x = x + self.down(torch.relu(self.up(torch.tanh(self.mix(x)))))
        return self.head(x)


@pytest.fixture(scope="module")
def model() -> SharedLayers:
    torch.manual_seed(0)
    return SharedLayers().eval()


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return torch.randint(0, 2000, (1, 37), generator=torch.Generator().manual_seed(1))


def _parameters(model: nn.Module) -> list[np.ndarray]:
    return [p.detach().numpy() for p in model.parameters()]  # a tied weight once


def _weight_bytes(model: nn.Module) -> int:
    return sum(a.nbytes for a in _parameters(model))


def _distinct(arrays: Iterable[np.ndarray]) -> list[np.ndarray]:
    found = {}
    for a in arrays:
        found.setdefault((a.__array_interface__["data"][0], a.shape, a.dtype.str), a)
    return list(found.values())


def _own_bytes(module: tg.Module, model: nn.Module) -> int:
    """The bytes of the module's arrays outside its arena that are not the model's weights
    (the packed weights)."""
    params = _parameters(model)
    arrays = [a for s in module.steps for a in s.arrays if module.arena_offset(a) is None]
    return sum(a.nbytes for a in _distinct(arrays)
               if not any(np.shares_memory(a, p) for p in params))


def _build(g: Graph) -> tg.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fallback configs
        return tg.build(g)


@pytest.fixture(scope="module")
def built(model: SharedLayers, ids: torch.Tensor) -> tg.Module:
    return _build(tg.from_torch(model, (ids,)))


def test_import_holds_the_models_weights_once(model: SharedLayers, ids: torch.Tensor) -> None:
    g = tg.from_torch(model, (ids,))
    params = _parameters(model)
    weights = [c for c in g.constants if c.value.nbytes >= 4096]
    # each weight is one constant however many layers read it, and it is the parameter itself
    assert sorted(c.shape for c in weights) == sorted(p.shape for p in params if p.nbytes >= 4096)
    for c in weights:
        assert any(np.shares_memory(c.value, p) for p in params), c.name
        assert not c.value.flags.writeable
    copied = sum(c.value.nbytes for c in g.constants
                 if not any(np.shares_memory(c.value, p) for p in params))
    assert copied < 64, [c for c in g.constants if c.value.nbytes >= 64]


def test_build_packs_each_weight_once(model: SharedLayers, ids: torch.Tensor,
                                      built: tg.Module) -> None:
    with torch.no_grad():
        expected = model(ids).numpy()
    np.testing.assert_allclose(built(ids=ids.numpy())[0], expected, rtol=1e-4, atol=1e-4)
    # the dense weights are read packed (one copy each, however many layers read them); the
    # embedding table is read in place by the gather
    own = _own_bytes(built, model)
    assert 0.5 * _weight_bytes(model) < own <= 1.02 * _weight_bytes(model)
    table = model.embed.weight.detach().numpy()
    assert any(np.shares_memory(a, table) for s in built.steps for a in s.arrays)


def test_peak_of_import_and_build_is_bounded(model: SharedLayers, ids: torch.Tensor,
                                             built: tg.Module) -> None:
    """Traced allocations (numpy's and Python's; the kernels are compiled already, by the
    `built` fixture): the import allocates no weight-sized copies (Python objects of the export
    only), the build its packed weights and its arena."""
    weights = _weight_bytes(model)
    tracemalloc.start()
    try:
        g = tg.from_torch(model, (ids,))
        _, import_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        module = _build(g)
        _, build_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert import_peak < 0.75 * weights, import_peak / weights
    expected = _own_bytes(module, model) + module.arena.nbytes
    assert build_peak - start < expected + 0.25 * weights, (build_peak - start) / weights


def test_compile_reads_the_parameters_in_place(model: SharedLayers, ids: torch.Tensor) -> None:
    torch._dynamo.reset()
    graphs = []

    def spy(gm, example_inputs, **kw):
        graphs.append(backend(gm, example_inputs, **kw))
        return graphs[-1]

    fast = torch.compile(model, backend=spy)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(fast(ids).numpy(), model(ids).numpy(), rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()
    modules = [b.module for g in graphs for b in g.built.values()]
    assert len(modules) == 1
    own = _own_bytes(modules[0], model)
    assert 0.5 * _weight_bytes(model) < own <= 1.02 * _weight_bytes(model)


def test_shared_constants_are_read_only_views_where_aligned() -> None:
    g = Graph()
    raw = np.empty(1024 + 128, np.uint8)  # room for any start below 64, and 4 past it
    start = -raw.__array_interface__["data"][0] % 64
    aligned = raw[start:start + 1024].view(np.float32)
    shared = g.constant(aligned, "aligned", share=True).value
    assert np.shares_memory(shared, aligned) and not shared.flags.writeable
    assert aligned.flags.writeable  # the caller's own array is left as it was
    for unaligned in (raw[start + 4:start + 1028].view(np.float32),
                      aligned.reshape(16, 16).T):
        copy = g.constant(unaligned, "copied", share=True).value
        assert not np.shares_memory(copy, unaligned)
        assert copy.__array_interface__["data"][0] % 64 == 0 and copy.flags.c_contiguous
        np.testing.assert_array_equal(copy, unaligned)
    assert not np.shares_memory(g.constant(aligned, "default").value, aligned)
