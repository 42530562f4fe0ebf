"""torch.compile(backend="tensorlang") of small configurations of more transformers model
families, whole (a graph that runs eagerly fails the test) and right (against eager PyTorch):
RecurrentGemma (a bfloat16 buffer), DeepSeek-V2 and Llama 4 (rotary embeddings as complex
numbers), Qwen3-Next (triangular solves)."""

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


#: two decoder layers of four heads of 8 over a hidden size of 32
_TWO_LAYERS = dict(vocab_size=97, pad_token_id=0, hidden_size=32, num_hidden_layers=2,
                   num_attention_heads=4, head_dim=8, max_position_embeddings=64,
                   use_cache=False)


def test_deepseek_v2_complex_rotary() -> None:
    """DeepSeek-V2: latent (low-rank) keys and values, a rotary embedding applied as complex
    numbers (torch.polar, view_as_complex) to part of each head, mixture-of-experts layers."""
    lib = transformers()
    torch.manual_seed(0)
    config = lib.DeepseekV2Config(
        intermediate_size=64, moe_intermediate_size=16, num_key_value_heads=4,
        first_k_dense_replace=1, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
        n_group=1, topk_group=1, kv_lora_rank=16, q_lora_rank=None, qk_nope_head_dim=8,
        qk_rope_head_dim=8, v_head_dim=8, **_TWO_LAYERS)
    assert_whole_and_right(lib.DeepseekV2ForCausalLM(config), _ids())


def test_llama4_text_complex_rotary() -> None:
    """Llama 4's text model: chunked attention, a rotary embedding as complex numbers, a
    mixture-of-experts layer every other layer."""
    lib = transformers()
    torch.manual_seed(0)
    config = lib.Llama4TextConfig(
        intermediate_size=32, intermediate_size_mlp=64, num_key_value_heads=2,
        num_local_experts=2, num_experts_per_tok=1, interleave_moe_layer_step=2,
        attention_chunk_size=8, **_TWO_LAYERS)
    assert_whole_and_right(lib.Llama4ForCausalLM(config), _ids())


def test_qwen3_next_gated_delta_rule() -> None:
    """Qwen3-Next: gated delta-rule linear attention, whose chunks solve unit triangular
    systems (`torch.linalg.solve_triangular`), interleaved with full attention layers and
    mixture-of-experts blocks."""
    lib = transformers()
    torch.manual_seed(0)
    config = lib.Qwen3NextConfig(
        intermediate_size=64, num_key_value_heads=2, linear_conv_kernel_dim=4,
        linear_key_head_dim=8, linear_value_head_dim=8, linear_num_key_heads=2,
        linear_num_value_heads=4, moe_intermediate_size=16, shared_expert_intermediate_size=16,
        num_experts=4, num_experts_per_tok=2, layer_types=["linear_attention", "full_attention"],
        **_TWO_LAYERS)
    assert_whole_and_right(lib.Qwen3NextForCausalLM(config), _ids())


class _Sparsity(torch.nn.Module):
    """Gemma-3n's activation sparsity: a cut at a normal quantile of a configuration value,
    `erfinv` of a constant."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        quantile = torch.tensor([0.95, 0.6], dtype=torch.float32)
        cut = x.mean(-1, keepdim=True) + x.std(-1, keepdim=True) * torch.sqrt(
            torch.tensor(2.0)) * torch.special.erfinv(2 * quantile - 1)[:1]
        return torch.relu(x - cut)


def test_erfinv_of_a_constant() -> None:
    assert_whole_and_right(_Sparsity(), torch.randn(3, 17, generator=torch.Generator()
                                                    .manual_seed(4)))
