"""torch.compile(backend="tensorlang") with Dynamo's symbolic sizes (`dynamic=True`, automatic
dynamic, `mark_dynamic`): one Module with symbolic dims serves every size, built once, whole
and matching eager at each; sizes beyond its bounds run eagerly."""

from __future__ import annotations

import math
import warnings

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
from torch import nn

from topi.graph import torch_dynamic
from topi.graph.symbolic_module import SymbolicModule
from topi.graph.torch_compile import TensorlangCompileWarning

from compile_fixtures import builds, fresh_dynamo  # noqa: F401  (fixtures)
from wild_models import torchvision

pytestmark = pytest.mark.filterwarnings("ignore:.*fallback config", "ignore::FutureWarning")

#: (batch, seq): primes and others, none 1 (Dynamo specializes sizes 0 and 1)
SIZES = [(2, 3), (3, 5), (2, 7), (4, 11), (5, 13), (2, 16), (3, 17), (6, 19), (2, 23), (7, 4),
         (3, 29)]


class Block(nn.Module):
    """Self-attention over a sequence whose sizes the model reads (heads reshaped by
    x.shape, a scale by the sequence length)."""

    def __init__(self, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), -1) @ v
        y = self.out(a.transpose(1, 2).reshape(b, n, d))
        return self.norm(x + y) * (1.0 / n)


def _run_sizes(fast, model, sizes=SIZES, d: int = 16) -> None:
    """`fast` against eager at every size, with the backend's eager fallback an error."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", TensorlangCompileWarning)
        for b, n in sizes:
            x = torch.randn(b, n, d)
            torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-5,
                                       msg=f"batch {b}, seq {n}")


def test_dynamic_true_builds_one_module_for_every_size(builds):
    torch.manual_seed(0)
    model = Block().eval()
    _run_sizes(torch.compile(model, backend="tensorlang", dynamic=True), model)
    (module,) = builds
    assert isinstance(module, SymbolicModule)
    assert sorted(module.bounds.values()) == [(2, torch_dynamic.DYNAMIC_SIZE_CAP)] * 2


def test_automatic_dynamic_builds_once_after_the_second_shape(builds):
    torch.manual_seed(0)
    model = Block().eval()
    _run_sizes(torch.compile(model, backend="tensorlang"), model)
    static, dynamic = builds  # the first shape, then one Module for every other
    assert not isinstance(static, SymbolicModule) and isinstance(dynamic, SymbolicModule)


def test_a_growing_sequence_marked_dynamic_is_not_rebuilt(builds):
    torch.manual_seed(0)
    model = Block().eval()
    fast = torch.compile(model, backend="tensorlang")
    x = torch.randn(3, 5, 16)
    torch._dynamo.mark_dynamic(x, 1, min=2, max=40)
    with torch.no_grad():
        torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-5)
    _run_sizes(fast, model, [(3, n) for n in range(6, 41, 3)])
    (module,) = builds
    assert list(module.bounds.values()) == [(2, 40)]  # the batch stays static
    assert module.inputs[0].shape[0] == 3


def test_sizes_beyond_the_cap_run_eagerly_with_one_warning(builds, monkeypatch):
    monkeypatch.setattr(torch_dynamic, "DYNAMIC_SIZE_CAP", 16)
    torch.manual_seed(0)
    model = Block().eval()
    fast = torch.compile(model, backend="tensorlang", dynamic=True)
    _run_sizes(fast, model, [(2, 3), (3, 16)])
    with pytest.warns(TensorlangCompileWarning, match="beyond the bounds") as record, \
            torch.no_grad():
        for n in (17, 30):
            x = torch.randn(2, n, 16)
            torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-5)
    assert len([w for w in record if issubclass(w.category, TensorlangCompileWarning)]) == 1
    _run_sizes(fast, model, [(4, 9)])  # back within the bounds: compiled again
    assert len(builds) == 1


def test_bert_with_varying_sequence_is_built_once(builds):
    torchvision()  # transformers imports it when present
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=4, intermediate_size=37,
                                     max_position_embeddings=64)
    model = transformers.BertModel(config).eval()
    fast = torch.compile(model, backend="tensorlang", dynamic=True)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", TensorlangCompileWarning)
        for b, n in [(2, 3), (3, 7), (2, 13), (4, 16), (2, 31), (3, 64)]:
            ids = torch.randint(0, 99, (b, n), generator=torch.Generator().manual_seed(n))
            mask = torch.ones(b, n, dtype=torch.long)
            mask[0, n // 2 + 1:] = 0
            got, want = fast(ids, attention_mask=mask), model(ids, attention_mask=mask)
            torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state,
                                       rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(got.pooler_output, want.pooler_output, rtol=1e-4,
                                       atol=1e-5)
    assert len(builds) == 1 and isinstance(builds[0], SymbolicModule)


def test_a_numpy_array_input_stays_a_tensor_input(builds):
    """Dynamo passes a numpy array the model reads (BigBird's random attention plan) as a
    tensor marked like an unspecialized number; it is an input with dimensions, not a
    number to bake in (reading it with .item() crashed the backend)."""
    import numpy as np

    class Pick(nn.Module):
        def forward(self, x: torch.Tensor, plan: np.ndarray) -> torch.Tensor:
            return x[:, torch.from_numpy(plan)] * 2

    model = Pick()
    fast = torch.compile(model, backend="tensorlang")
    x = torch.randn(3, 7)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TensorlangCompileWarning)
        for plan in (np.array([6, 0, 3, 3, 1]), np.array([1, 2, 3, 4, 5])):
            torch.testing.assert_close(fast(x, plan), model(x, plan))
    assert builds


def test_shapes_past_the_specializations_warn_once(builds, monkeypatch):
    """A static graph built per input shape warns when further shapes run eagerly."""
    from topi.graph import torch_compile

    monkeypatch.setattr(torch_compile, "MAX_SPECIALIZATIONS", 1)
    model = nn.Linear(5, 3).eval()
    graph = torch_compile.CompiledGraph(torch.fx.symbolic_trace(model), [torch.randn(2, 5)],
                                        {"target": torch_compile.as_target("llvm")})
    with torch.no_grad():
        x = torch.randn(2, 5)
        torch.testing.assert_close(graph(x), model(x))
        with pytest.warns(TensorlangCompileWarning, match="more than 1 input shapes") as record:
            for batch in (3, 4):
                x = torch.randn(batch, 5)
                torch.testing.assert_close(graph(x), model(x))
    assert len(record) == 1 and len(builds) == 1


class Window(nn.Module):
    """The last (up to) four positions of a sequence of symbolic length, shifted by a count
    that is an integer input and no tensor's size (a sliding-window cache's count of tokens
    seen), returned with that count plus one."""

    def forward(self, x: torch.Tensor, seen: int):
        last = x[:, -4:]
        start = torch.sym_max(seen - 4, 0)
        positions = torch.arange(last.shape[1]) + start
        return last * 2 + positions, seen + 1


def test_negative_slices_sym_max_and_counts_that_are_no_size(builds):
    torch._dynamo.utils.counters.clear()
    model = Window()
    fast = torch.compile(model, backend="tensorlang", dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TensorlangCompileWarning)
        for length, seen in ((2, 3), (3, 9), (7, 5), (11, 30), (5, 2)):
            x = torch.randn(2, length)
            got, count = fast(x, seen)
            want, expected = model(x, seen)
            torch.testing.assert_close(got, want, msg=f"length {length}, seen {seen}")
            assert count == expected and type(count) is int
    # one Module per graph Dynamo captured (it splits lengths below and above the window),
    # none per length
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert len(builds) == graphs < 5


def test_sizes_that_do_not_build_as_symbols_build_per_shape(builds):
    """A convolution over an image of symbolic height and width (convolutions take static
    shapes) is built per shape, not run eagerly."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()).eval()
    fast = torch.compile(model, backend="tensorlang", dynamic=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", TensorlangCompileWarning)
        for size in (5, 7, 5):
            x = torch.randn(1, 3, size, size)
            torch.testing.assert_close(fast(x), model(x), rtol=1e-4, atol=1e-5)
    assert len(builds) == 2  # one per shape, the first again from its Module
