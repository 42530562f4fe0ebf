"""torch.compile(backend="tensorlang") of small configurations of more transformers model
families, whole (a graph that runs eagerly fails the test) and right (against eager PyTorch):
RecurrentGemma (a bfloat16 buffer)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from compile_fixtures import assert_whole_and_right, fresh_dynamo  # noqa: F401  (a fixture)
from wild_models import torchvision

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


def transformers() -> Any:
    """transformers (which imports torchvision where it is installed), or a skip."""
    torchvision()
    return pytest.importorskip("transformers")


def _ids(length: int = 13) -> torch.Tensor:
    return torch.randint(3, 97, (1, length), generator=torch.Generator().manual_seed(2))


def test_recurrent_gemma() -> None:
    """RecurrentGemma: a recurrent block (a gated linear recurrence over a causal convolution)
    then local attention; its embeddings are scaled by a bfloat16 buffer."""
    lib = transformers()
    torch.manual_seed(0)
    config = lib.RecurrentGemmaConfig(
        vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, intermediate_size=64, lru_width=32, attention_window_size=8,
        block_types=["recurrent", "attention"], head_dim=8, use_cache=False)
    assert_whole_and_right(lib.RecurrentGemmaForCausalLM(config), _ids())

