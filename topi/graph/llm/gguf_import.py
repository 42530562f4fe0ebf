"""The GGUF importer: `from_gguf(path)` reads a llama-family GGUF file (llama, mistral, qwen2)
into a `CausalLM` ready to generate.

The metadata gives the shape (`{arch}.block_count`, `embedding_length`, `attention.head_count`,
`attention.head_count_kv`, `rope.freq_base`, `attention.layer_norm_rms_epsilon`,
`context_length`, `feed_forward_length`), the tensors the weights under the names that
`llama.build_llama_graph` reads. Q8_0 and Q4_0 tensors stay quantized: their blocks are
exactly the packed int8 / int4 forms of `dense_quantized` with groups of 32 (their f16 scales
kept); F32 and F16 tensors become float32, and tensors of other block types are
dequantized to float32 by the gguf package. The token embedding, a gather, is always float32.

llama.cpp's converter permutes the rows of a llama model's Q and K weights (its rotation pairs
adjacent elements, Hugging Face's the two halves of a head); the importer puts them back, so one
graph serves both. Qwen2 files are not permuted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .generate import CausalLM
from .llama import LlamaConfig, Weight
from .packing import PackedWeight, from_q4_0, from_q8_0

#: Architectures read as llama's graph, and whether their Q / K rows come permuted.
ARCHITECTURES = {"llama": True, "mistral": True, "qwen2": False}


@dataclass(frozen=True)
class GGUFModel:
    """What a GGUF file holds: its architecture, shape and weights (GGUF names)."""

    architecture: str
    config: LlamaConfig
    weights: dict[str, Weight]


def require_gguf() -> Any:
    """The gguf package, or an ImportError saying how to install it."""
    try:
        import gguf
    except ImportError as err:
        raise ImportError("from_gguf needs the gguf package: pip install 'tensorlang[gguf]'"
                          ) from err
    return gguf


def _field(reader: Any, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    if field is None:
        if default is None:
            raise ValueError(f"GGUF file lacks the metadata {key!r}")
        return default
    value = field.contents() if hasattr(field, "contents") else field.parts[field.data[0]]
    return value.item() if hasattr(value, "item") else value


def _tensor(gguf: Any, tensor: Any) -> Weight:
    """A tensor's weight: float32, or packed for Q8_0 / Q4_0 2-D tensors."""
    kind = gguf.GGMLQuantizationType(int(tensor.tensor_type))
    shape = tuple(int(d) for d in reversed(tensor.shape))  # GGUF lists the fastest dim first
    if kind == gguf.GGMLQuantizationType.Q8_0 and len(shape) == 2:
        return from_q8_0(tensor.data, *shape)
    if kind == gguf.GGMLQuantizationType.Q4_0 and len(shape) == 2:
        return from_q4_0(tensor.data, *shape)
    if kind in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
        return np.asarray(tensor.data, np.float32).reshape(shape)
    return np.asarray(gguf.quants.dequantize(tensor.data, kind), np.float32).reshape(shape)


def _unpermute(weight: Weight, heads: int) -> Weight:
    """Q or K rows from llama.cpp's order (per head: pairs) back to Hugging Face's (halves)."""
    rows = weight.weight.shape[0] if isinstance(weight, PackedWeight) else weight.shape[0]
    permuted = np.arange(rows).reshape(heads, 2, rows // heads // 2).swapaxes(1, 2).reshape(-1)
    order = np.argsort(permuted)
    if isinstance(weight, PackedWeight):
        zero = None if weight.zero is None else weight.zero[order]
        return replace(weight, weight=weight.weight[order], scale=weight.scale[order], zero=zero)
    return weight[order]


def _dense_embedding(weight: Weight) -> np.ndarray:
    return weight.dequantize().astype(np.float32) if isinstance(weight, PackedWeight) else weight


def load_gguf(path: str | Path) -> GGUFModel:
    """The architecture, shape and weights of the llama-family GGUF file at `path`.

    Raises:
        ImportError: the gguf package is missing.
        ValueError: another architecture, or metadata or tensors the graph needs are missing.
    """
    gguf = require_gguf()
    reader = gguf.GGUFReader(str(path))
    arch = str(_field(reader, "general.architecture"))
    if arch not in ARCHITECTURES:
        raise ValueError(f"from_gguf: architecture {arch!r} is not llama-family (known: "
                         f"{sorted(ARCHITECTURES)})")
    weights: dict[str, Weight] = {}
    for tensor in reader.tensors:
        name = tensor.name.removesuffix(".weight")
        weights[name] = _tensor(gguf, tensor)
    if "token_embd" not in weights:
        raise ValueError(f"from_gguf: {path} has no token_embd tensor")
    weights.setdefault("output", weights["token_embd"])  # a tied head
    embedding = weights["token_embd"] = _dense_embedding(weights["token_embd"])
    hidden = int(_field(reader, f"{arch}.embedding_length"))
    heads = int(_field(reader, f"{arch}.attention.head_count"))
    config = LlamaConfig(
        vocab_size=embedding.shape[0], hidden_size=hidden,
        intermediate_size=int(_field(reader, f"{arch}.feed_forward_length")),
        num_hidden_layers=int(_field(reader, f"{arch}.block_count")),
        num_attention_heads=heads,
        num_key_value_heads=int(_field(reader, f"{arch}.attention.head_count_kv", heads)),
        rope_theta=float(_field(reader, f"{arch}.rope.freq_base", 10000.0)),
        rms_norm_eps=float(_field(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)),
        max_position_embeddings=int(_field(reader, f"{arch}.context_length", 2048)))
    if ARCHITECTURES[arch]:
        for i in range(config.num_hidden_layers):
            for key, count in (("attn_q", heads), ("attn_k", config.num_key_value_heads)):
                name = f"blk.{i}.{key}"
                if name in weights:
                    weights[name] = _unpermute(weights[name], count)
    needed = ["output_norm"] + [f"blk.{i}.{k}" for i in range(config.num_hidden_layers) for k in
                                ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                                 "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")]
    missing = [name for name in needed if name not in weights]
    if missing:
        raise ValueError(f"from_gguf: {path} lacks the tensors {missing[:4]}")
    return GGUFModel(arch, config, weights)


def from_gguf(path: str | Path, max_length: int | None = None,
              target: str = "llvm") -> CausalLM:
    """The llama-family model of the GGUF file at `path`, built for generation with a cache
    of `max_length` positions (default: the file's context length, at most 2048); see
    `load_gguf` for what it reads and the module docstring for how."""
    model = load_gguf(path)
    length = max_length or min(model.config.max_position_embeddings, 2048)
    return CausalLM.build(model.config, model.weights, length, target)
