"""Text generation: `CausalLM` (a built decoder with its KV cache) and `generate`.

`CausalLM` builds the decoder graph of `llama.py` twice, with symbolic cache lengths
(`tg.build(g, bounds=...)`): for prompts (prefill) with a symbolic token count, whose products
are GEMMs, and for one token (decode), whose products are matrix-vector products reading each
weight once; nothing is compiled per length. Both modules read one copy of the weights
(`shared_weights`). The cache holds the keys and values of every layer, (kv heads, positions,
head dim) as the attention reads them, grown `CACHE_STEP` positions at a time up to
`max_length`; a call passes the filled part (rounded up to a multiple of `CACHE_STEP` rows with
the rows past the filled ones masked, so that the modules see a new size only every
`CACHE_STEP` tokens), which the attention reads where it lies (no copy into the module's arena,
no transposed or joined copy), and the new tokens' keys and values are written after it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

import tensorlang as tl

from ..aligned import aligned_read_only
from ..build import build
from .llama import LlamaConfig, Weight, build_llama_graph, join_projections
from .packing import PackedWeight, WeightPanels
from .quantize_weights import quantize_weight

#: The position of cached rows that hold nothing (masked for every token).
_NEVER = np.iinfo(np.int64).max // 2
#: The cache is passed in lengths that are multiples of this (the rows past the filled ones
#: masked): a module prepares its buffers and calls once per size, which at a new size each
#: token cost more than the kernels of a small model's decode step.
CACHE_STEP = 64


def _cache_rows(length: int) -> int:
    """The rows of cache passed for `length` filled ones (at least one: sizes are >= 1)."""
    return max(-(-length // CACHE_STEP) * CACHE_STEP, 1)


@dataclass
class Timing:
    """Seconds and tokens of the last `generate`: prefill (the prompt, which gives the first
    new token) and decode (one call per further token)."""

    prompt_tokens: int = 0
    prefill_s: float = 0.0
    decoded_tokens: int = 0
    decode_s: float = 0.0

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.decoded_tokens / self.decode_s if self.decode_s else 0.0


@dataclass
class CausalLM:
    """A llama-family model built for generation, holding its KV cache.

    Attributes:
        config: the model's shape.
        prefill: the built decoder for several tokens (symbolic "seq" and "past").
        decode: the built decoder for one token (symbolic "past").
        max_length: positions the cache holds (prompt plus new tokens).
        length: positions filled so far.
        timing: the last `generate`'s figures.
    """

    config: LlamaConfig
    prefill: object
    decode: object
    max_length: int
    length: int = 0
    timing: Timing = field(default_factory=Timing)

    def __post_init__(self) -> None:
        self.keys: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self._grow(1)

    def _grow(self, rows: int) -> None:
        """Per layer, caches of keys and values of at least `rows` rows (kv heads, rows, head
        dim), each C-contiguous so that the modules read them where they lie: grown by
        `CACHE_STEP` rows at a time, the filled rows copied over (once every CACHE_STEP
        tokens)."""
        held = self.keys[0].shape[1] if self.keys else 0
        if rows <= held:
            return
        c = self.config
        shape = (c.num_key_value_heads, _cache_rows(rows), c.head_dim)

        def grown(old: np.ndarray | None) -> np.ndarray:
            new = np.zeros(shape, np.float32)
            if old is not None:
                new[:, :held] = old
            return new

        for cache in (self.keys, self.values):
            cache[:] = [grown(cache[i] if cache else None) for i in range(c.num_hidden_layers)]

    @classmethod
    def build(cls, config: LlamaConfig, weights: Mapping[str, Weight],
              max_length: int | None = None, target: str = "llvm", bits: int | None = None,
              group_size: int | None = None) -> CausalLM:
        """Build the decoder for sequences of up to `max_length` positions (default: the
        model's context length); with `bits`, its float projections quantized first, as
        `quantize_weights(graph, bits, group_size)` would (`shared_weights`)."""
        max_length = max_length or config.max_position_embeddings
        if not 2 <= max_length <= config.max_position_embeddings:
            raise ValueError(f"CausalLM: max_length must be in 2..{config.max_position_embeddings}"
                             f", got {max_length}")
        with tl.Target(target):  # the target's panels
            shared = shared_weights(weights, bits, group_size)
        modules = []
        for tokens in ("seq", 1):
            bounds = {"past": (1, _cache_rows(max_length))} | (
                {"seq": (1, max_length)} if tokens == "seq" else {})
            # The prompt's GEMMs pack their float weight panels per call rather than holding a
            # packed copy beside the one the decode's matrix-vector products read.
            modules.append(build(build_llama_graph(config, shared, tokens=tokens), target=target,
                                 bounds=bounds, prepack=tokens == 1))
        return cls(config, *modules, max_length)

    def reset(self) -> None:
        """Forget the cached positions (the next call starts a new sequence)."""
        self.length = 0

    def __call__(self, token_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Run `token_ids` after the cached positions; returns the last one's logits (vocab,)
        and appends their keys and values to the cache."""
        ids = np.asarray(token_ids, np.int64).reshape(-1)
        start, count = self.length, ids.size
        if count == 0 or start + count > self.max_length:
            raise ValueError(f"CausalLM: {count} tokens after {start} cached positions do not fit "
                             f"in max_length {self.max_length}")
        rows = _cache_rows(start)
        self._grow(rows)
        cached = np.arange(rows, dtype=np.int64)
        cached[start:] = _NEVER
        feeds: dict[str, np.ndarray] = {
            "input_ids": ids, "positions": np.arange(start, start + count, dtype=np.int64),
            "key_positions": cached}
        for i in range(self.config.num_hidden_layers):
            feeds[f"past_k{i}"] = self.keys[i][:, :rows]  # all of it: read in place
            feeds[f"past_v{i}"] = self.values[i][:, :rows]
        logits, *kv = (self.decode if count == 1 else self.prefill)(**feeds)
        self._grow(start + count)
        for i in range(self.config.num_hidden_layers):
            self.keys[i][:, start:start + count] = kv[2 * i].transpose(1, 0, 2)
            self.values[i][:, start:start + count] = kv[2 * i + 1].transpose(1, 0, 2)
        self.length = start + count
        return np.asarray(logits).reshape(-1)


def shared_weights(weights: Mapping[str, Weight], bits: int | None = None,
                   group_size: int | None = None) -> dict[str, Weight]:
    """`weights` as the arrays every graph built from them reads in place (64-byte aligned,
    float32; copied only where they are not so), with `bits`, the projections (2-D weights but
    the embedding, a gather) quantized (`quantize_weight`), quantized weights in the panels of
    the current target (`WeightPanels`): the prefill and decode modules of a `CausalLM` then
    hold one copy of the weights between them. Quantized projections of one input are joined
    (`join_projections`) before they are arranged: one product reads them."""
    out: dict[str, Weight] = {}
    for key, weight in join_projections(weights, quantized=bits is not None).items():
        if isinstance(weight, (PackedWeight, WeightPanels)):
            panels = weight.panels() if isinstance(weight, PackedWeight) else weight
            out[key] = dataclasses.replace(
                panels, weight=aligned_read_only(panels.weight),
                scale=aligned_read_only(panels.scale),
                zero=None if panels.zero is None else aligned_read_only(panels.zero))
            continue
        weight = aligned_read_only(np.asarray(weight, np.float32))
        projection = bits is not None and weight.ndim == 2 and key != "token_embd"
        out[key] = shared_weights({key: quantize_weight(weight, bits, group_size)})[key] \
            if projection else weight
    return out


def _sample(logits: np.ndarray, temperature: float, top_k: int | None, top_p: float | None,
            rng: np.random.Generator) -> int:
    """A token drawn from softmax(logits / temperature) restricted to the `top_k` likeliest and
    to the smallest set of likeliest tokens whose probability reaches `top_p`."""
    scaled = logits.astype(np.float64) / temperature
    order = np.argsort(-scaled, kind="stable")
    if top_k is not None:
        order = order[:top_k]
    probs = np.exp(scaled[order] - scaled[order[0]])
    probs /= probs.sum()
    if top_p is not None:
        keep = int(np.searchsorted(np.cumsum(probs), top_p)) + 1
        order, probs = order[:keep], probs[:keep] / probs[:keep].sum()
    return int(order[rng.choice(len(order), p=probs)])


def _check(model: object, ids: np.ndarray, max_new_tokens: int, temperature: float,
           top_k: int | None, top_p: float | None) -> None:
    if not isinstance(model, CausalLM):
        raise TypeError(f"generate takes a CausalLM (tg.from_gguf(...) or CausalLM.build), got "
                        f"{type(model).__name__}")
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"generate: input_ids must be a non-empty 1-D sequence, got shape "
                         f"{ids.shape}")
    if ids.min() < 0 or ids.max() >= model.config.vocab_size:
        raise ValueError(f"generate: input_ids must lie in 0..{model.config.vocab_size - 1}")
    if max_new_tokens < 1 or ids.size + max_new_tokens > model.max_length:
        raise ValueError(f"generate: {ids.size} prompt tokens + max_new_tokens={max_new_tokens} "
                         f"must fit in max_length {model.max_length}")
    if temperature < 0:
        raise ValueError(f"generate: temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"generate: top_k must be >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"generate: top_p must be in (0, 1], got {top_p}")


def generate(model: CausalLM, input_ids: Sequence[int] | np.ndarray, max_new_tokens: int,
             temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None,
             seed: int | None = None, eos_token_id: int | None = None) -> np.ndarray:
    """The prompt followed by up to `max_new_tokens` generated tokens (int64, 1-D).

    The prompt runs as one prefill call, each new token as one decode call reading the cache.
    temperature 0 is greedy (the likeliest token); above 0 tokens are sampled from the
    tempered distribution cut to `top_k` / `top_p`, reproducibly for a given `seed`.
    Generation stops early after `eos_token_id`. `model.timing` holds the figures.

    Raises:
        TypeError: `model` is not a CausalLM.
        ValueError: empty or out-of-vocabulary ids, a length past `max_length`, bad sampling
            parameters.
    """
    ids = np.asarray(input_ids, np.int64).reshape(-1) if np.ndim(input_ids) else np.zeros(0)
    _check(model, ids, max_new_tokens, temperature, top_k, top_p)
    rng = np.random.default_rng(seed)
    model.reset()
    tokens = list(ids)
    timing = Timing(prompt_tokens=ids.size)
    started = time.perf_counter()
    logits = model(ids)
    timing.prefill_s = time.perf_counter() - started
    started = time.perf_counter()
    for step in range(max_new_tokens):
        token = int(np.argmax(logits)) if temperature == 0 else _sample(
            logits, temperature, top_k, top_p, rng)
        tokens.append(token)
        if token == eos_token_id or step == max_new_tokens - 1:
            break
        logits = model([token])
        timing.decoded_tokens += 1
    timing.decode_s = time.perf_counter() - started
    model.timing = timing
    return np.array(tokens, np.int64)
