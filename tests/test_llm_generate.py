"""Generation with a KV cache (`CausalLM`, `tg.generate`) against PyTorch's LlamaForCausalLM
(tiny configuration, the same random weights): the logits of every prompt token, then 60 greedy
tokens identical to transformers' greedy search, the prompt run as one call of the prefill module
and each new token as one call of the decode module; sampling reproducible for a seed, and bad
arguments refused."""

from __future__ import annotations

import numpy as np
import pytest
from wild_models import torchvision

import topi.graph as tg
from topi.graph.llm.generate import CACHE_STEP, CausalLM, shared_weights
from topi.graph.llm.llama import LlamaConfig, build_llama_graph, rope_tables, weights_from_hf
from topi.graph.llm.quantize_weights import quantize_weight
from topi.nn.quantized_panels import panel_rows

PROMPT = np.array([5, 3, 9, 1, 77, 12, 40], np.int64)


@pytest.fixture(scope="module")
def hf_model():
    torchvision()  # transformers imports it when present
    transformers = pytest.importorskip("transformers")
    import torch

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        rope_theta=500.0, rms_norm_eps=1e-6)
    model = transformers.LlamaForCausalLM(config).eval()
    ours = LlamaConfig(97, 64, 96, 2, 4, 2, rope_theta=500.0, rms_norm_eps=1e-6,
                       max_position_embeddings=128)
    weights = weights_from_hf({k: v.detach().numpy() for k, v in model.state_dict().items()})
    return model, ours, weights


@pytest.fixture(scope="module")
def lm(hf_model):
    _, config, weights = hf_model
    return CausalLM.build(config, weights)


def test_prompt_logits_match_pytorch(hf_model):
    import torch

    model, config, weights = hf_model
    m = tg.build(build_llama_graph(config, weights, all_logits=True))
    outs = m(input_ids=PROMPT, positions=np.arange(PROMPT.size), key_positions=np.array([10**9]),
             **{f"past_{kv}{i}": np.zeros((2, 1, 16), np.float32) for i in range(2)
                for kv in "kv"})
    with torch.no_grad():
        expected = model(torch.tensor(PROMPT)[None]).logits[0].numpy()
    np.testing.assert_allclose(outs[0], expected, rtol=1e-4, atol=1e-5)


def test_greedy_tokens_match_pytorch(hf_model, lm):
    import torch

    model = hf_model[0]
    got = tg.generate(lm, PROMPT, 60)  # the cache passes a multiple of CACHE_STEP rows
    with torch.no_grad():
        expected = model.generate(torch.tensor(PROMPT)[None], max_new_tokens=60,
                                  min_new_tokens=60, do_sample=False)[0].numpy()
    np.testing.assert_array_equal(got, expected)
    assert lm.timing.prompt_tokens == 7 and lm.timing.decoded_tokens == 59
    assert lm.length == PROMPT.size + 59 > CACHE_STEP  # the last token is returned, never run


def test_cache_continues_where_the_prompt_stopped(lm):
    """The prompt in two calls (7 tokens, then 3 more through the cache) gives the logits of
    the 10 tokens in one call."""
    tokens = np.array([*PROMPT, 60, 2, 33])
    lm.reset()
    whole = lm(tokens)
    lm.reset()
    lm(PROMPT)
    np.testing.assert_allclose(lm(tokens[7:]), whole, rtol=1e-5, atol=1e-6)


def test_sampling_is_reproducible_with_a_seed(lm):
    args = dict(temperature=0.9, top_k=30, top_p=0.95)
    first = tg.generate(lm, PROMPT, 24, seed=7, **args)
    assert np.array_equal(first, tg.generate(lm, PROMPT, 24, seed=7, **args))
    assert not np.array_equal(first, tg.generate(lm, PROMPT, 24, seed=8, **args))
    assert not np.array_equal(first, tg.generate(lm, PROMPT, 24))
    top1 = tg.generate(lm, PROMPT, 12, temperature=1.5, top_k=1, seed=3)
    np.testing.assert_array_equal(top1, tg.generate(lm, PROMPT, 12))  # top-1 is greedy


def test_eos_stops_generation(lm):
    greedy = tg.generate(lm, PROMPT, 10)
    stopped = tg.generate(lm, PROMPT, 10, eos_token_id=int(greedy[9]))
    np.testing.assert_array_equal(stopped, greedy[:10])


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(input_ids=[]), ValueError, "non-empty"),
    (dict(input_ids=[3, 97]), ValueError, "0..96"),
    (dict(max_new_tokens=200), ValueError, "max_length"),
    (dict(temperature=-1), ValueError, "temperature"),
    (dict(top_k=0), ValueError, "top_k"),
    (dict(top_p=1.5), ValueError, "top_p"),
])
def test_bad_arguments(lm, kwargs, error, match):
    args = dict(input_ids=PROMPT, max_new_tokens=5) | kwargs
    with pytest.raises(error, match=match):
        tg.generate(lm, **args)


def test_generate_needs_a_causal_lm():
    with pytest.raises(TypeError, match="CausalLM"):
        tg.generate(object(), PROMPT, 5)


def test_quantized_build_stays_close(hf_model, lm):
    """CausalLM.build(bits=8) quantizes the projections (the logits differ from float32's) and
    stays close to them (cosine >= 0.999), in the prompt and in a decode step."""
    _, config, weights = hf_model
    lm8 = CausalLM.build(config, weights, max_length=16, bits=8)
    lm.reset()
    for tokens in (PROMPT, [11]):
        reference, got = lm(tokens), lm8(tokens)
        cosine = got @ reference / np.linalg.norm(got) / np.linalg.norm(reference)
        assert 0.999 <= cosine < 1 - 1e-7


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_projections_of_one_input_run_as_one_product(hf_model, bits):
    """Quantized q/k/v (one with no bias beside two with) and gate/up run as one product each
    over their joined weight, in a decode step and in a prompt, with the logits, keys and
    values of the projections apart."""
    _, config, weights = hf_model
    rng = np.random.default_rng(bits)
    weights = dict(weights)
    for key in ("blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.1.attn_v.bias"):
        width = weights[key[:-len(".bias")]].shape[0]
        weights[key] = rng.standard_normal(width).astype(np.float32)
    apart = {key: quantize_weight(w, bits).panels() if w.ndim == 2 and key != "token_embd"
             else w for key, w in weights.items()}
    joined = shared_weights(weights, bits=bits)
    assert "blk.1.attn_qkv" in joined and "blk.1.attn_q" not in joined
    for tokens in (1, 5):
        feeds = {"input_ids": PROMPT[:tokens], "positions": np.arange(3, 3 + tokens),
                 "key_positions": np.arange(3),
                 **{f"past_{kv}{i}": rng.standard_normal((2, 3, 16)).astype(np.float32)
                    for i in range(2) for kv in "kv"}}
        graphs = [build_llama_graph(config, w, tokens=tokens) for w in (joined, apart)]
        products = [sum(n.op.startswith("dense_") for n in g.ops) for g in graphs]
        assert products == [4 * 2 + 1, 7 * 2 + 1]
        ours, theirs = (tg.build(g)(**feeds) for g in graphs)
        for got, expected in zip(ours, theirs):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def _distinct_bytes(arrays) -> int:
    """The bytes of memory that `arrays` cover together (overlapping views counted once)."""
    spans = sorted((a.__array_interface__["data"][0],
                    a.__array_interface__["data"][0] + a.nbytes) for a in arrays)
    total = end = 0
    for start, stop in spans:
        total += max(stop - max(start, end), 0)
        end = max(end, stop)
    return total


def _held_arrays(lm: CausalLM) -> list[np.ndarray]:
    """The constants and pre-packed weights that the two modules of `lm` read."""
    out = []
    for module in (lm.prefill, lm.decode):
        out += [n.value for n in module.graph.constants]
        out += [o for operands in module._operands for o in operands
                if isinstance(o, np.ndarray)]
    return out


def test_modules_share_one_copy_of_the_weights(hf_model, lm):
    """The prefill and decode modules read the same weight arrays (those of the caller, read in
    place), not a copy each: what they hold is the weights' bytes (plus the rotary tables)."""
    _, config, weights = hf_model
    weight_bytes = _distinct_bytes(weights.values())
    rope_bytes = sum(t.nbytes for t in rope_tables(config))
    assert weight_bytes <= _distinct_bytes(_held_arrays(lm)) <= 1.01 * (weight_bytes + rope_bytes)
    quantized = CausalLM.build(config, weights, max_length=16, bits=4)
    floats = sum(w.nbytes for key, w in weights.items() if w.ndim == 1 or key == "token_embd")
    # int4: half a byte a weight and a float16 scale per 32 of them, the output channels in
    # whole panels (97 vocabulary rows take 128)
    packed = sum(-(-w.shape[0] // panel_rows(w.shape[0])) * panel_rows(w.shape[0]) * w.shape[1]
                 * (0.5 + 2 / 32) for key, w in weights.items()
                 if w.ndim == 2 and key != "token_embd")
    assert _distinct_bytes(_held_arrays(quantized)) <= 1.01 * (floats + packed + rope_bytes)


def test_decode_copies_no_cache_sized_tensor(lm):
    """The decode module's attention reads the cached keys and values where the input lies: no
    kernel writes a tensor of the cache's size (the old graph joined the new rows to a copy of
    the cache and transposed it), only the scores, a head dim smaller, grow with the cache."""
    head_dim = lm.config.head_dim
    grown = [n for n in lm.decode.graph.ops
             if any(not isinstance(d, int) for d in n.shape)]
    assert grown and all(head_dim not in n.shape for n in grown), \
        [(n.name, n.shape) for n in grown if head_dim in n.shape]
