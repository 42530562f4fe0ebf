"""The llama-family decoder as a Graph: RMSNorm, rotary positions, grouped-query attention with
a causal mask, SwiGLU (LLaMA, Mistral, Qwen2 with its q/k/v biases, SmolLM, TinyLlama).

One sequence, no batch axis: activations are (tokens, hidden) rows, so every projection is a
`dense` (or a quantized product) on rows. The graph serves prefill and decode, its sizes
symbolic (or the token count fixed, 1 for decode): `input_ids` and `positions` ("seq" tokens)
attend to the cached keys and values
`past_k{i}` / `past_v{i}` (kv heads, "past", head dim: each head's rows are the batch that the
attention's products read as they lie) of positions `key_positions`, then to
their own; a key whose position is after the query's is masked (so a prompt passes one dummy
cached row with a position past every token's, the symbolic sizes being at least 1).

It returns the last token's logits (1, vocab) (or every token's with `all_logits`) and, per
layer, the new tokens' keys (after the rotation) and values (tokens, kv heads, head dim), which
the caller appends to its cache (`generate.CausalLM`). Weights are named as in GGUF (`blk.{i}.
attn_q`, ...) with Q and K rows in the rotate-half order of Hugging Face's checkpoints; a value
is a float array (N, K), a `PackedWeight` or its `WeightPanels`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..aligned import aligned_read_only
from ..graph import Graph, Node
from . import ops  # noqa: F401  (rms_norm)
from .packing import PackedWeight, WeightPanels
from .quantize_weights import pack_dense

Weight = np.ndarray | PackedWeight | WeightPanels
#: Added to the attention scores of keys after the query (a finite -inf: exp gives exactly 0).
MASKED = -1e30
#: Token counts up to which a call's attention runs as one kernel per layer (`cached_attention`,
#: row by row); a prompt's attention takes batched products (GEMMs) and a softmax.
FUSED_TOKENS = 8
#: Projections of one input run as one product over their joined output channels (a joined
#: weight's name, GGUF's where it has one -> its parts): a decode step's matrix-vector products
#: are small enough that each kernel's fixed cost counts, and the joined product reads the input
#: once.
JOINED = {"attn_qkv": ("attn_q", "attn_k", "attn_v"), "ffn_gate_up": ("ffn_gate", "ffn_up")}


@dataclass(frozen=True)
class LlamaConfig:
    """The shape of a llama-family model (the names of Hugging Face's LlamaConfig)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 2048

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads or \
                self.num_attention_heads % self.num_key_value_heads or self.head_dim % 2:
            raise ValueError(f"LlamaConfig: {self.num_attention_heads} heads of "
                             f"{self.hidden_size} with {self.num_key_value_heads} KV heads do "
                             "not split into even head dims and whole groups")


@functools.lru_cache(maxsize=8)
def rope_tables(config: LlamaConfig) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of every position and frequency, (max positions, head_dim / 2) float32 (one
    pair per config, which the graphs built for it share)."""
    half = config.head_dim // 2
    inv_freq = 1.0 / config.rope_theta ** (np.arange(half, dtype=np.float64) / half)
    angles = np.arange(config.max_position_embeddings, dtype=np.float64)[:, None] * inv_freq
    return aligned_read_only(np.cos(angles).astype(np.float32)), \
        aligned_read_only(np.sin(angles).astype(np.float32))


class _Builder:
    """Writes one decoder graph; holds the graph, the config and the weights."""

    def __init__(self, config: LlamaConfig, weights: Mapping[str, Weight]) -> None:
        self.g = Graph()
        self.config = config
        self.weights = weights

    def const(self, key: str) -> Node:
        """The weight `key` read in place (not copied: the graphs built from one set of weights,
        a prefill's and a decode's, hold one copy of them)."""
        return self.g.constant(np.asarray(self.weights[key], np.float32), key, share=True)

    def linear(self, x: Node, key: str) -> Node:
        weight = self.weights[key]
        if isinstance(weight, (PackedWeight, WeightPanels)):
            out = pack_dense(self.g, x, weight, self.g.unique_name(key))
        else:
            out = self.g.dense(x, self.const(key))
        bias = f"{key}.bias"
        return self.g.add(out, self.const(bias)) if bias in self.weights else out

    def widths(self, parts: tuple[str, ...]) -> list[int]:
        """The output channels of each projection of `parts`."""
        c = self.config
        kv = c.num_key_value_heads * c.head_dim
        width = {"attn_q": c.num_attention_heads * c.head_dim, "attn_k": kv, "attn_v": kv,
                 "ffn_gate": c.intermediate_size, "ffn_up": c.intermediate_size}
        return [width[p] for p in parts]

    def projections(self, x: Node, prefix: str, joined: str) -> list[Node]:
        """The projections `JOINED[joined]` of x: one product over their weight joined
        beforehand (`join_projections`) split after, else one product each."""
        g, parts = self.g, JOINED[joined]
        if prefix + joined not in self.weights:
            return [self.linear(x, prefix + p) for p in parts]
        out = self.linear(x, prefix + joined)
        begins = np.cumsum([0, *self.widths(parts)])
        return [g.strided_slice(out, begin=(int(b),), end=(int(e),), axes=(1,))
                for b, e in zip(begins[:-1], begins[1:])]

    def rms_norm(self, x: Node, key: str) -> Node:
        return self.g.apply("rms_norm", x, self.const(key), epsilon=self.config.rms_norm_eps)

    def rotate(self, x: Node, cos: Node, sin: Node) -> Node:
        """Rotary positions on (tokens, heads, head_dim) in the rotate-half order."""
        g, half = self.g, self.config.head_dim // 2
        x1 = g.strided_slice(x, begin=(0,), end=(half,), axes=(2,))
        x2 = g.strided_slice(x, begin=(half,), end=(2 * half,), axes=(2,))
        first = g.subtract(g.multiply(x1, cos), g.multiply(x2, sin))
        second = g.add(g.multiply(x2, cos), g.multiply(x1, sin))
        return g.concatenate([first, second], axis=2)

    def heads(self, x: Node, count: int) -> Node:
        return self.g.reshape(x, (x.shape[0], count, self.config.head_dim))

    def scores(self, q_rows: Node, keys: Node, mask: Node) -> Node:
        """q_rows (KVH, group * tokens, d) against keys (KVH, n, d), scaled and masked by
        `mask` (tokens, n): (KVH, group * tokens, n)."""
        g, c = self.g, self.config
        kv_heads, rows, n = c.num_key_value_heads, q_rows.shape[1], keys.shape[1]
        group = c.num_attention_heads // kv_heads
        scores = g.multiply(g.batch_matmul(q_rows, keys), float(1 / np.sqrt(c.head_dim)))
        scores = g.reshape(scores, (kv_heads, group, mask.shape[0], n))
        return g.reshape(g.add(scores, mask), (kv_heads, rows, n))

    def attention(self, q: Node, new: tuple[Node, Node], past: tuple[Node, Node],
                  masks: tuple[Node, Node]) -> Node:
        """q (tokens, H, d) attending to the cached keys and values `past` (KVH, past, d), read
        where they lie, and to the new ones `new` (tokens, KVH, d) -> (tokens, H * d); each
        group of H / KVH query heads reads one KV head as a batch of the group's rows. The
        softmax runs over the two key sets apart (one maximum, one sum), so that the cache is
        neither copied after nor joined to the new rows: up to `FUSED_TOKENS` tokens in one
        kernel (`cached_attention`), more as products and a softmax (`attention_products`)."""
        g, c = self.g, self.config
        tokens, kv_heads = q.shape[0], c.num_key_value_heads
        group = c.num_attention_heads // kv_heads
        q_rows = g.reshape(g.transpose(q, (1, 0, 2)), (kv_heads, group * tokens, c.head_dim))
        new_k, new_v = (g.transpose(t, (1, 0, 2)) for t in new)
        if isinstance(tokens, int) and tokens <= FUSED_TOKENS:
            out = g.apply("cached_attention", q_rows, *past, new_k, new_v, *masks,
                          scale=float(1 / np.sqrt(c.head_dim)))
        else:
            out = self.attention_products(q_rows, (new_k, new_v), past, masks)
        out = g.transpose(g.reshape(out, (c.num_attention_heads, tokens, c.head_dim)), (1, 0, 2))
        return g.reshape(out, (tokens, c.hidden_size))

    def attention_products(self, q_rows: Node, new: tuple[Node, Node], past: tuple[Node, Node],
                           masks: tuple[Node, Node]) -> Node:
        """The attention of `attention` as batched products and a softmax over both key sets
        (the GEMMs of a prompt): (KVH, group * tokens, d)."""
        g = self.g
        new_k, new_v = new
        cached = self.scores(q_rows, past[0], masks[0])
        fresh = self.scores(q_rows, new_k, masks[1])
        top = g.maximum(g.max(cached, axis=-1, keepdims=True), g.max(fresh, axis=-1,
                                                                      keepdims=True))
        cached, fresh = g.exp(g.subtract(cached, top)), g.exp(g.subtract(fresh, top))
        total = g.add(g.sum(cached, axis=-1, keepdims=True), g.sum(fresh, axis=-1, keepdims=True))
        return g.divide(g.add(g.matmul(cached, past[1]), g.matmul(fresh, new_v)), total)

    def layer(self, i: int, x: Node, cos: Node, sin: Node, masks: tuple[Node, Node],
              past: tuple[Node, Node]) -> tuple[Node, Node, Node]:
        g, c, p = self.g, self.config, f"blk.{i}."
        h = self.rms_norm(x, p + "attn_norm")
        q, k, v = self.projections(h, p, "attn_qkv")
        q = self.rotate(self.heads(q, c.num_attention_heads), cos, sin)
        k = self.rotate(self.heads(k, c.num_key_value_heads), cos, sin)
        v = self.heads(v, c.num_key_value_heads)
        x = g.add(x, self.linear(self.attention(q, (k, v), past, masks), p + "attn_output"))
        h = self.rms_norm(x, p + "ffn_norm")
        gate, up = self.projections(h, p, "ffn_gate_up")
        gated = g.multiply(g.silu(gate), up)
        return g.add(x, self.linear(gated, p + "ffn_down")), k, v


def _joined(parts: list[Weight]) -> Weight | None:
    """The weights `parts` joined along their output channels: float arrays, or packed ones of
    one format (panels unpanelled: the caller arranges the result); None for a mix."""
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts, axis=0)
    packed = [p.unpanel() if isinstance(p, WeightPanels) else p for p in parts]
    if not all(isinstance(p, PackedWeight) for p in packed):
        return None
    first = packed[0]
    if any((p.bits, p.group_size, p.scale.dtype, p.zero is None) !=
           (first.bits, first.group_size, first.scale.dtype, first.zero is None) for p in packed):
        return None
    zero = None if first.zero is None else np.concatenate([p.zero for p in packed])
    return PackedWeight(np.concatenate([p.weight for p in packed]),
                        np.concatenate([p.scale for p in packed]), zero, first.bits,
                        first.group_size)


def join_projections(weights: Mapping[str, Weight], quantized: bool) -> dict[str, Weight]:
    """`weights` with each layer's projections of one input (`JOINED`) replaced by their joined
    weight (and bias, zeros for a part without one) where they are packed, or float ones about
    to be quantized (`quantized`): every row of a joined weight quantizes as it did alone.
    Float weights that stay float are left apart, read in place (joined, they would be a copy
    beside the caller's)."""
    out = dict(weights)
    layers = {key.split(".")[1] for key in weights if key.startswith("blk.")}
    for layer in sorted(layers):
        for name, parts in JOINED.items():
            keys = [f"blk.{layer}.{p}" for p in parts]
            if not all(k in weights for k in keys):
                continue
            values = [weights[k] for k in keys]
            if not quantized and all(isinstance(v, np.ndarray) for v in values):
                continue
            joined = _joined([np.asarray(v, np.float32) if isinstance(v, np.ndarray) else v
                              for v in values])
            if joined is None:
                continue
            if any(f"{k}.bias" in weights for k in keys):
                out[f"blk.{layer}.{name}.bias"] = np.concatenate([
                    np.asarray(weights[f"{k}.bias"], np.float32) if f"{k}.bias" in weights
                    else np.zeros(_channels(v), np.float32) for k, v in zip(keys, values)])
            for k in keys:
                out.pop(k)
                out.pop(f"{k}.bias", None)
            out[f"blk.{layer}.{name}"] = joined
    return out


def _channels(weight: Weight) -> int:
    """The output channels of a weight."""
    if isinstance(weight, WeightPanels):
        return weight.channels
    return weight.weight.shape[0] if isinstance(weight, PackedWeight) else weight.shape[0]


def _causal_mask(g: Graph, keys: Node, positions: Node) -> Node:
    """0 where a key's position is at most the query's, MASKED after: (queries, keys)."""
    later = g.greater(g.reshape(keys, (1, keys.shape[0])),
                      g.reshape(positions, (positions.shape[0], 1)))
    return g.where(later, np.array(MASKED, np.float32), np.array(0, np.float32))


def build_llama_graph(config: LlamaConfig, weights: Mapping[str, Weight],
                      all_logits: bool = False, tokens: int | str = "seq") -> Graph:
    """The decoder graph of the module docstring, for `tokens` tokens a call (a count, or the
    name of a symbolic one)."""
    b = _Builder(config, weights)
    g, c = b.g, config
    ids = g.input("input_ids", (tokens,), "int64")
    positions = g.input("positions", (tokens,), "int64")
    cached = g.input("key_positions", ("past",), "int64")
    kv_shape = (c.num_key_value_heads, "past", c.head_dim)
    caches = [(g.input(f"past_k{i}", kv_shape), g.input(f"past_v{i}", kv_shape))
              for i in range(c.num_hidden_layers)]
    tokens = ids.shape[0]
    cos_table, sin_table = rope_tables(c)
    cos, sin = (g.reshape(g.take(g.constant(t, name, share=True), positions, axis=0),
                          (tokens, 1, c.head_dim // 2))
                for t, name in ((cos_table, "rope_cos"), (sin_table, "rope_sin")))
    masks = tuple(_causal_mask(g, keys, positions) for keys in (cached, positions))
    x = g.take(b.const("token_embd"), ids, axis=0)
    new_kv = []
    for i in range(c.num_hidden_layers):
        x, k, v = b.layer(i, x, cos, sin, masks, caches[i])
        new_kv += [k, v]
    if not all_logits:
        x = g.slice_dims(x, axes=(0,), begin=(tokens - 1,), size=(1,))
    g.output(b.linear(b.rms_norm(x, "output_norm"), "output"), *new_kv)
    return g


#: Hugging Face's parameter names (per layer after "model.layers.{i}.") -> the GGUF names.
HF_LAYER_NAMES = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
HF_NAMES = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}


def weights_from_hf(state_dict: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A Hugging Face llama-family state dict (arrays) under the GGUF names (biases as
    "{name}.bias"); a tied head reads the embedding."""
    out: dict[str, np.ndarray] = {}
    for key, value in state_dict.items():
        stem, _, kind = key.rpartition(".")
        if stem.startswith("model.layers."):
            index, _, rest = stem[len("model.layers."):].partition(".")
            name = f"blk.{index}.{HF_LAYER_NAMES[rest]}"
        elif stem in HF_NAMES:
            name = HF_NAMES[stem]
        else:
            continue  # buffers such as rotary inverse frequencies
        out[name if kind == "weight" else f"{name}.{kind}"] = np.asarray(value, np.float32)
    out.setdefault("output", out["token_embd"])
    return out
