"""torch.compile(backend="tensorlang") of transformers' decoder families in `generate()`: with
the default dynamic cache (whose key and value lengths Dynamo traces as two symbols) and with a
static cache, the forward runs compiled after the first calls, never eagerly, builds nothing
per new length, and gives eager's 64 greedy tokens; attention over key and value lengths of two
symbols, and numbers among a graph's outputs."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from topi.graph.torch_compile import TensorlangCompileWarning, backend

from compile_fixtures import builds, fresh_dynamo  # noqa: F401  (fixtures)
from wild_models import torchvision

pytestmark = pytest.mark.filterwarnings("ignore:.*fallback config", "ignore::FutureWarning")

_SIZES = dict(vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=1,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
"""A tiny decoder: grouped-query attention (two query heads per key/value head)."""


class CachedAttention(torch.nn.Module):
    """Attention of new queries over key and value caches grown by the new keys and values,
    as transformers' DynamicCache grows them (each cache's length its own symbol to Dynamo)."""

    def forward(self, q, k_cache, v_cache, k, v):
        keys, values = torch.cat([k_cache, k], 2), torch.cat([v_cache, v], 2)
        return torch.nn.functional.scaled_dot_product_attention(q, keys, values), keys, values


def test_key_and_value_lengths_of_two_symbols_are_one_size(builds):
    model = CachedAttention()
    fast = torch.compile(model, backend="tensorlang")
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 4, 1, 8), torch.randn(1, 4, 1, 8), torch.randn(1, 4, 1, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TensorlangCompileWarning)
        for length in (2, 3, 6, 17):
            caches = torch.randn(1, 4, length, 8), torch.randn(1, 4, length, 8)
            for cache in caches:
                torch._dynamo.mark_dynamic(cache, 2)
            for got, want in zip(fast(q, *caches, k, v), model(q, *caches, k, v)):
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6,
                                           msg=f"cache length {length}")
    assert len(builds) == 1
    module, = builds
    inputs = dict(zip((n.name for n in module.inputs),
                      (q, torch.randn(1, 4, 5, 8), torch.randn(1, 4, 6, 8), k, v)))
    with pytest.raises(ValueError):  # one shape variable: the Module refuses unequal lengths
        module(**{name: t.numpy() for name, t in inputs.items()})


def _config(family: str):
    """A tiny random configuration of `family` (one layer, 32 wide)."""
    transformers = pytest.importorskip("transformers")
    make = {
        "llama": lambda: transformers.LlamaConfig(**_SIZES),
        "qwen2": lambda: transformers.Qwen2Config(**_SIZES),
        # a window of 16 keys: the cache stops growing while the count of tokens seen does
        "mistral": lambda: transformers.MistralConfig(**_SIZES, sliding_window=16),
        # a sliding-window layer and a global one, logits soft-capped
        "gemma2": lambda: transformers.Gemma2Config(**{**_SIZES, "num_hidden_layers": 2},
                                                    head_dim=8, sliding_window=16),
        "qwen3": lambda: transformers.Qwen3Config(**_SIZES, head_dim=8),
        "phi3": lambda: transformers.Phi3Config(**_SIZES, pad_token_id=0),
        "gpt2": lambda: transformers.GPT2Config(vocab_size=99, n_embd=32, n_layer=1, n_head=4,
                                                n_positions=128),
        "gpt_neox": lambda: transformers.GPTNeoXConfig(
            vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=1,
            num_attention_heads=4, max_position_embeddings=128),
        "falcon": lambda: transformers.FalconConfig(  # one key/value head for all queries
            vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
            new_decoder_architecture=False, multi_query=True)}
    return make[family]()


@pytest.mark.parametrize("family, cache", [
    ("llama", "dynamic"), ("qwen2", "dynamic"), ("phi3", "dynamic"), ("gpt2", "dynamic"),
    ("mistral", "dynamic"), ("gemma2", "dynamic"),
    ("gpt_neox", "dynamic"), ("falcon", "dynamic"),
    ("llama", "static"), ("qwen3", "static"), ("gpt2", "static"), ("falcon", "static"),
    ("mistral", "static"), ("gemma2", "static")])
def test_generate_runs_compiled(family, cache, builds):
    torchvision()  # transformers imports it when present
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(_config(family)).eval()
    prompt = torch.randint(0, 99, (1, 7), generator=torch.Generator().manual_seed(1))
    options = dict(max_new_tokens=64, do_sample=False)
    if cache == "static":
        options["cache_implementation"] = "static"
    with torch.no_grad():
        want = model.generate(prompt, **options)
        model.forward = torch.compile(model.forward, backend="tensorlang")
        with warnings.catch_warnings():
            warnings.simplefilter("error", TensorlangCompileWarning)
            got = model.generate(prompt, **options)
            # the prompt, then one Module for every new token: a static cache's length is
            # fixed; a dynamic cache's first length is traced as fixed, the later ones as a
            # symbol (Dynamo's automatic dynamic). A sliding window's count of tokens seen is
            # traced as fixed, then as a symbol; a dynamic cache adds the steps where the
            # window fills up and where it is full (each count of tokens on a step that the
            # export finds to allow only that count gets a Module of its own).
            first = len(builds)
            window = family in ("mistral", "gemma2")
            assert first == {("static", False): 2, ("static", True): 3,
                             ("dynamic", False): 3, ("dynamic", True): 6}[cache, window]
            again = model.generate(prompt, **options)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(again, want, rtol=0, atol=0)
    assert len(builds) == first  # a second generate() builds nothing


class WithNumber(torch.nn.Module):
    """A graph that returns a number with its tensor (Gemma-2's and Mistral's sliding window)."""

    def forward(self, x):
        return x * 2, 24


def test_a_number_among_the_outputs_is_returned_as_it_is(builds):
    x = torch.randn(3, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TensorlangCompileWarning)
        twice, number = backend(torch.fx.symbolic_trace(WithNumber()), [x])(x)
    torch.testing.assert_close(twice, x * 2)
    assert number == 24 and type(number) is int
    assert len(builds) == 1
