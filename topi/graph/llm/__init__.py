"""Language models: weight-only quantization, the GGUF importer and generation with a KV cache."""

from .quantize_weights import quantize_weights

__all__ = ["quantize_weights"]
