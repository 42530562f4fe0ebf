"""Real architectures for the frontend tests: torchvision models and small transformers configs,
random weights, no downloads.

pip's torchvision wheel is built against the CUDA torch; next to the CPU torch its compiled ops
fail to register, but its model code needs none of them. `torchvision()` imports it with the two
modules that register those ops replaced by empty ones (a user's matching wheels need nothing).
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest


def torchvision() -> Any:
    """The torchvision package, or a skip when it is not installed."""
    pytest.importorskip("torch")
    for name in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        if "torchvision" not in sys.modules:
            sys.modules.setdefault(name, types.ModuleType(name))
    return pytest.importorskip("torchvision")


def _seeded(build: Any) -> Any:
    import torch

    torch.manual_seed(0)
    return build().eval()


def _image(size: int) -> tuple:
    import torch

    return (torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1)),)


def _video() -> tuple:
    """Clips of 16 frames of 64 x 64 pixels."""
    import torch

    return (torch.randn(1, 3, 16, 64, 64, generator=torch.Generator().manual_seed(1)),)


def _ids(length: int = 13, vocab: int = 97) -> tuple:
    import torch

    return (torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(1)),)


def _vision() -> dict[str, Any]:
    tv = torchvision()
    m = tv.models
    from torchvision.models import convnext, efficientnet, regnet, swin_transformer

    def regnet_params(se: float | None) -> Any:
        return regnet.BlockParams.from_init_params(depth=4, w_0=16, w_a=8.0, w_m=2.0,
                                                   group_width=8, se_ratio=se)

    def efficientnet_b0() -> Any:
        setting, last = efficientnet._efficientnet_conf("efficientnet_b0", width_mult=0.5,
                                                         depth_mult=0.3)
        return efficientnet.EfficientNet(setting, 0.2, last_channel=last)

    def swin(v2: bool) -> Any:
        extra = dict(block=swin_transformer.SwinTransformerBlockV2,
                     downsample_layer=swin_transformer.PatchMergingV2) if v2 else {}
        return swin_transformer.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2],
                                                num_heads=[2, 4], window_size=[4, 4], **extra)

    return {
        "resnet50": (lambda: m.resnet50(), 64),
        "resnext": (lambda: m.ResNet(m.resnet.Bottleneck, [1, 1, 1, 1], groups=8,
                                     width_per_group=4), 64),
        "mobilenet_v3": (lambda: m.mobilenet_v3_large(width_mult=0.5), 64),
        "efficientnet": (efficientnet_b0, 64),
        "densenet": (lambda: m.DenseNet(growth_rate=8, block_config=(2, 2, 2, 2),
                                        num_init_features=16, bn_size=2), 64),
        "googlenet": (lambda: m.googlenet(aux_logits=False, init_weights=False), 64),
        "inception_v3": (lambda: m.inception_v3(aux_logits=False, init_weights=False), 75),
        "squeezenet": (lambda: m.squeezenet1_1(), 64),
        "shufflenet": (lambda: m.ShuffleNetV2([2, 2, 2], [16, 32, 64, 128, 256]), 64),
        "regnet_x": (lambda: regnet.RegNet(regnet_params(None), stem_width=16), 64),
        "regnet_y": (lambda: regnet.RegNet(regnet_params(0.25), stem_width=16), 64),
        "mnasnet": (lambda: m.mnasnet0_5(), 64),
        "convnext": (lambda: convnext.ConvNeXt([convnext.CNBlockConfig(16, 32, 1),
                                                convnext.CNBlockConfig(32, None, 1)]), 64),
        "vit": (lambda: m.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                            num_heads=2, hidden_dim=32, mlp_dim=64), 32),
        "swin": (lambda: swin(False), 64),
        "swin_v2": (lambda: swin(True), 64),
        "maxvit": (lambda: m.MaxVit(input_size=(64, 64), stem_channels=16, partition_size=4,
                                    block_channels=[16, 32], block_layers=[1, 1], head_dim=8,
                                    stochastic_depth_prob=0.0), 64),
        # Video: 3-D convolutions, (2+1)-D factorised ones and 3-D pooling.
        "r2plus1d": (lambda: m.video.r2plus1d_18(), "video"),
        "lraspp": (lambda: m.segmentation.lraspp_mobilenet_v3_large(weights_backbone=None), 64),
    }


def _text() -> dict[str, Any]:
    torchvision()  # transformers imports it when present
    transformers = pytest.importorskip("transformers")
    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64)
    return {
        "bert": (lambda: transformers.BertModel(transformers.BertConfig(
            vocab_size=97, **small)), "ids"),
        "roberta": (lambda: transformers.RobertaModel(transformers.RobertaConfig(
            vocab_size=97, **small)), "ids"),
        "distilbert": (lambda: transformers.DistilBertModel(transformers.DistilBertConfig(
            vocab_size=97, dim=32, n_layers=2, n_heads=4, hidden_dim=64)), "ids"),
        "gpt2": (lambda: transformers.GPT2Model(transformers.GPT2Config(
            vocab_size=97, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False,
            bos_token_id=0, eos_token_id=0)),
                 "ids"),
        "llama": (lambda: transformers.LlamaModel(transformers.LlamaConfig(
            vocab_size=97, num_key_value_heads=2, max_position_embeddings=64, use_cache=False,
            **small)), "ids"),
        "t5_encoder": (lambda: transformers.T5EncoderModel(transformers.T5Config(
            vocab_size=97, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
            use_cache=False)), "ids"),
        "phi": (lambda: transformers.PhiModel(transformers.PhiConfig(
            vocab_size=97, num_key_value_heads=2, partial_rotary_factor=0.5,
            max_position_embeddings=64, use_cache=False, **small)), "ids"),
        "deberta_v2": (lambda: transformers.DebertaV2Model(transformers.DebertaV2Config(
            vocab_size=97, **small)), "ids"),
        # 1-D convolutions: ConvBERT's span-based dynamic convolution (a depthwise separable
        # Conv1d, and an unfold that gathers through a pad), SqueezeBERT's grouped Conv1d layers.
        "convbert": (lambda: transformers.ConvBertModel(transformers.ConvBertConfig(
            vocab_size=97, embedding_size=32, **small)), "ids"),
        "squeezebert": (lambda: transformers.SqueezeBertModel(transformers.SqueezeBertConfig(
            vocab_size=97, embedding_size=32, **small)), "ids"),
        # Rotary embedding over the whole head: the slice passed through is empty.
        "phi3": (lambda: transformers.Phi3Model(transformers.Phi3Config(
            vocab_size=97, num_key_value_heads=2, max_position_embeddings=64, use_cache=False,
            pad_token_id=0, **small)), "ids"),
        # Multi-query attention: one key/value head broadcast to every query head.
        "falcon": (lambda: transformers.FalconModel(transformers.FalconConfig(
            vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            use_cache=False)), "ids"),
        # Sliding-window attention: overlapping chunks cut by as_strided from a head-major
        # view (not row-major in memory), 13 tokens padded to the window (a mask put in place).
        "longformer": (lambda: transformers.LongformerModel(transformers.LongformerConfig(
            vocab_size=97, attention_window=4, max_position_embeddings=40, pad_token_id=1,
            type_vocab_size=1, output_attentions=True, **{**small, "num_hidden_layers": 1})),
            "ids"),
        "hf_vit": (lambda: transformers.ViTModel(transformers.ViTConfig(
            image_size=32, patch_size=8, **small)), 32),
        "hf_swin": (lambda: transformers.SwinModel(transformers.SwinConfig(
            image_size=32, patch_size=2, embed_dim=16, depths=[2, 2], num_heads=[2, 4],
            window_size=4)), 32),
        "hf_convnext": (lambda: transformers.ConvNextModel(transformers.ConvNextConfig(
            hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)), 32),
        # Patches folded back with nn.Fold (an index_put; ONNX Col2Im).
        "hf_mobilevit_v2": (lambda: _lively_norms(transformers.MobileViTV2Model(
            transformers.MobileViTV2Config(image_size=64, width_multiplier=0.5))), 64),
        # A head pooled by an AvgPool2d whose 2560-wide window (ceil_mode) covers the whole map.
        "hf_efficientnet": (lambda: _lively_norms(transformers.EfficientNetModel(
            transformers.EfficientNetConfig(image_size=64, depth_coefficient=0.5))), 64),
    }


def _lively_norms(model: Any) -> Any:
    """`model` with batch norms whose scales and statistics are drawn around 1 and 0: the
    transformers initialisation scales them by 0.02, and a few layers later every activation is
    zero (a comparison that cannot fail)."""
    import torch

    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for norm in model.modules():
            if isinstance(norm, torch.nn.BatchNorm2d):
                norm.weight.uniform_(0.5, 1.5, generator=gen)
                norm.bias.normal_(0.0, 0.1, generator=gen)
                norm.running_mean.normal_(0.0, 0.1, generator=gen)
                norm.running_var.uniform_(0.5, 1.5, generator=gen)
    return model


VISION = ("resnet50", "resnext", "mobilenet_v3", "efficientnet", "densenet", "googlenet",
          "inception_v3", "squeezenet", "shufflenet", "regnet_x", "regnet_y", "mnasnet",
          "convnext", "vit", "swin", "swin_v2", "maxvit", "lraspp", "r2plus1d")
TEXT = ("bert", "roberta", "distilbert", "gpt2", "llama", "hf_vit", "hf_swin", "hf_convnext",
        "t5_encoder", "phi", "deberta_v2", "convbert", "squeezebert", "falcon", "phi3",
        "hf_mobilevit_v2", "hf_efficientnet")


def get(name: str) -> tuple[Any, tuple]:
    """(module in eval mode with seeded random weights, example inputs) of architecture `name`."""
    table = _vision() if name in VISION else _text()
    build, inputs = table[name]
    module = _seeded(build)
    if inputs == "video":
        return module, _video()
    return module, _ids() if inputs == "ids" else _image(inputs)
