"""Language models: weight-only quantization, the GGUF importer and generation with a KV cache."""

from .generate import CausalLM, generate
from .gguf_import import from_gguf, load_gguf
from .llama import LlamaConfig, build_llama_graph
from .quantize_weights import quantize_weights

__all__ = ["CausalLM", "LlamaConfig", "build_llama_graph", "from_gguf", "generate", "load_gguf",
           "quantize_weights"]
