"""torch.compile(backend="tensorlang") of small configurations of timm and transformers model
families, whole (a graph that runs eagerly fails the test) and right (against eager PyTorch):
MixNet and GhostNet (squeeze-excitation over mixed and ghost convolutions, which once named two
nodes alike), HaloNet's attention (`Tensor.unfold`), FNet (Fourier mixing)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from compile_fixtures import assert_whole_and_right, fresh_dynamo  # noqa: F401  (a fixture)
from wild_models import torchvision

pytestmark = pytest.mark.filterwarnings("ignore:.*fallback config", "ignore::FutureWarning",
                                        "ignore::UserWarning")


def timm() -> Any:
    """timm (which imports torchvision), or a skip."""
    torchvision()
    return pytest.importorskip("timm")


def _image(size: int, channels: int = 3) -> torch.Tensor:
    return torch.randn(1, channels, size, size, generator=torch.Generator().manual_seed(1))


def test_mixnet_blocks() -> None:
    """MixNet's blocks: mixed-kernel depthwise convolutions, squeeze-excitation, grouped
    pointwise convolutions (where two nodes once took the name 'mul_7_NCHW')."""
    timm()
    from timm.models._efficientnet_builder import decode_arch_def
    from timm.models.efficientnet import EfficientNet

    torch.manual_seed(0)
    arch = decode_arch_def([["ds_r1_k3_s1_e1_c16"],
                            ["ir_r1_k3.5.7_a1.1_p1.1_s2_e6_c40_se0.5_nsw",
                             "ir_r1_k3.5.7.9_a1.1_p1.1_s1_e3_c40_se0.5_nsw"]])
    assert_whole_and_right(EfficientNet(arch, num_classes=10, stem_size=16, num_features=32),
                           _image(32))


def test_ghostnet_blocks() -> None:
    """GhostNet's first stages, squeeze-excitation over ghost modules included."""
    timm()
    from timm.models.ghostnet import GhostNet

    torch.manual_seed(0)
    cfgs = [[[3, 16, 16, 0, 1]], [[3, 48, 24, 0, 2]], [[3, 72, 24, 0, 1]],
            [[5, 72, 40, 0.25, 2]], [[3, 120, 40, 0.25, 1]]]
    assert_whole_and_right(GhostNet(cfgs, num_classes=10), _image(32))


def test_convit_attention_sums() -> None:
    """ConViT's gated positional attention normalises by sums over rows large enough to run in
    parallel (4 heads of 100 x 100)."""
    lib = timm()
    torch.manual_seed(0)
    model = lib.create_model("convit_tiny", pretrained=False, img_size=160, embed_dim=32,
                             num_heads=4, depth=2, local_up_to_layer=1, num_classes=10)
    assert_whole_and_right(model, _image(160))


def test_halo_attention() -> None:
    """HaloNet's attention (eca_halonext26ts): keys and values cut into overlapping blocks
    with two `Tensor.unfold`s of the padded map."""
    timm()
    from timm.layers.halo_attn import HaloAttn

    torch.manual_seed(0)
    assert_whole_and_right(HaloAttn(16, 16, num_heads=2, block_size=4, halo_size=1),
                           _image(8, channels=16))


def test_fnet_fourier_mixing() -> None:
    """FNet (GoogleFnet): the real part of a 2-D Fourier transform over the sequence and the
    hidden axes, odd sizes."""
    torchvision()
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.FNetConfig(vocab_size=97, hidden_size=24, num_hidden_layers=2,
                                     intermediate_size=37, max_position_embeddings=64)
    model = transformers.FNetForMaskedLM(config)
    ids = torch.randint(0, 97, (1, 13), generator=torch.Generator().manual_seed(2))
    assert_whole_and_right(model, ids)
