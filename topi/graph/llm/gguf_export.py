"""Write llama-family weights as a GGUF file (`write_gguf`), as llama.cpp's converter would: the
metadata of `LlamaConfig`, Q and K rows of a llama model in llama.cpp's pair order, the 2-D
projections in one block type (F32, F16, Q8_0 or Q4_0, quantized by the gguf package), norms
and biases float32. Other runtimes (llama.cpp) then read the same weights as `from_gguf`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .gguf_import import require_gguf
from .llama import LlamaConfig

#: The block types `write_gguf` writes projections in.
QTYPES = ("F32", "F16", "Q8_0", "Q4_0")


def permute_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """Q or K rows from Hugging Face's order (halves per head) to llama.cpp's (pairs)."""
    return weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:]).swapaxes(
        1, 2).reshape(weight.shape)


def _metadata(writer, config: LlamaConfig) -> None:
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(config.rope_theta)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)


def _placeholder_vocabulary(writer, vocab_size: int) -> None:
    """A SentencePiece vocabulary of `vocab_size` named ids (<unk>, <s>, </s>, then t3, t4,
    ...): llama.cpp refuses a file without one, though generating from ids reads no text."""
    special = ["<unk>", "<s>", "</s>"][:vocab_size]
    writer.add_tokenizer_model("llama")
    writer.add_token_list(special + [f"t{i}" for i in range(len(special), vocab_size)])
    writer.add_token_scores([0.0] * vocab_size)
    writer.add_token_types([2, 3, 3][:len(special)] + [1] * (vocab_size - len(special)))
    writer.add_unk_token_id(0)
    if vocab_size > 2:
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)


def write_gguf(path: str | Path, config: LlamaConfig, weights: Mapping[str, np.ndarray],
               qtype: str = "F32", architecture: str = "llama") -> None:
    """Write float `weights` (GGUF names, `llama.weights_from_hf`'s) to `path` (see the module
    docstring); the embedding is F32 (F16 for the F16 type).

    Raises:
        ValueError: an unknown block type or architecture.
    """
    gguf = require_gguf()
    if qtype not in QTYPES:
        raise ValueError(f"write_gguf: qtype must be one of {QTYPES}, got {qtype!r}")
    if architecture not in ("llama", "qwen2"):
        raise ValueError(f"write_gguf: architecture must be llama or qwen2, got {architecture!r}")
    kind = gguf.GGMLQuantizationType[qtype]
    heads = {"attn_q": config.num_attention_heads, "attn_k": config.num_key_value_heads}
    writer = gguf.GGUFWriter(str(path), architecture)
    _metadata(writer, config)
    _placeholder_vocabulary(writer, config.vocab_size)
    for name, value in weights.items():
        value = np.asarray(value, np.float32)
        tensor_name = name if name.endswith(".bias") else f"{name}.weight"
        short = name.rsplit(".", 1)[-1]
        if architecture == "llama" and short in heads and value.ndim == 2:
            value = permute_rows(value, heads[short])
        if value.ndim == 1 or qtype in ("F32", "F16") or name == "token_embd":
            dtype = np.float16 if qtype == "F16" and value.ndim == 2 else np.float32
            writer.add_tensor(tensor_name, value.astype(dtype))
        else:
            writer.add_tensor(tensor_name, gguf.quants.quantize(value, kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
