"""PyTorch's CPU inference benchmark suites (pytorch benchmarks/dynamo): their model lists and
the models built as its harness builds them (random weights, eval mode, float32).

timm models come from `timm.create_model` with the suite's arguments at the test input size of
`resolve_data_config`; Hugging Face models from their default configs (the suite's extra models
from local configs of the same architecture) with token ids of the suite's sequence length.
Parameters that a model initialises to all zeros (zero-init heads, layer-scale gates) get small
random values: with them at zero the output would not depend on the layers they gate, and a
comparison of outputs would check nothing there.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

#: pytorch benchmarks/dynamo/timm_models_list_cpu.txt
TIMM_MODELS = tuple("""
adv_inception_v3 beit_base_patch16_224 botnet26t_256 cait_m36_384 coat_lite_mini convit_base
convmixer_768_32 convnext_base crossvit_9_240 cspdarknet53 deit_base_distilled_patch16_224
dm_nfnet_f0 dpn107 eca_botnext26ts_256 eca_halonext26ts fbnetc_100 fbnetv3_b gernet_l
ghostnet_100 gluon_inception_v3 gmixer_24_224 gmlp_s16_224 hrnet_w18 inception_v3 jx_nest_base
lcnet_050 mixer_b16_224 mixnet_l mnasnet_100 mobilenetv2_100 mobilenetv3_large_100 mobilevit_s
nfnet_l0 pnasnet5large poolformer_m36 repvgg_a2 res2net101_26w_4s res2net50_14w_8s res2next50
resnest101e rexnet_100 sebotnet33ts_256 selecsls42b spnasnet_100 swin_base_patch4_window7_224
swsl_resnext101_32x16d tf_efficientnet_b0 tf_mixnet_l tnt_s_patch16_224 twins_pcpvt_base
visformer_small vit_base_patch16_224 volo_d1_224 xcit_large_24_p8_224
""".split())

#: pytorch benchmarks/dynamo/huggingface_models_list_cpu.txt
HF_MODELS = tuple("""
AlbertForMaskedLM AllenaiLongformerBase BartForCausalLM BertForMaskedLM BlenderbotForCausalLM
DebertaV2ForMaskedLM DistilBertForMaskedLM DistillGPT2 ElectraForCausalLM GoogleFnet
GPT2ForSequenceClassification LayoutLMForMaskedLM M2M100ForConditionalGeneration
MBartForCausalLM MegatronBertForCausalLM MobileBertForMaskedLM MT5ForConditionalGeneration
OPTForCausalLM PegasusForCausalLM PLBartForCausalLM RobertaForCausalLM
T5ForConditionalGeneration T5Small TrOCRForCausalLM XGLMForCausalLM XLNetLMHeadModel
YituTechConvBert
""".split())

SUITES = {"timm": TIMM_MODELS, "hf": HF_MODELS}

#: The suite's extra HF models (hub configs there): class, config class and config fields.
HF_EXTRA: dict[str, tuple[str, str, dict[str, Any]]] = {
    "AllenaiLongformerBase": ("LongformerForMaskedLM", "LongformerConfig", dict(
        vocab_size=50265, max_position_embeddings=4098, type_vocab_size=1, attention_window=512,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, sep_token_id=2, layer_norm_eps=1e-5)),
    "T5Small": ("T5ForConditionalGeneration", "T5Config",
                dict(d_model=512, d_ff=2048, num_layers=6, num_heads=8)),
    "DistillGPT2": ("GPT2LMHeadModel", "GPT2Config", dict(n_layer=6)),
    "GoogleFnet": ("FNetForMaskedLM", "FNetConfig", {}),
    "YituTechConvBert": ("ConvBertForMaskedLM", "ConvBertConfig", {}),
}

#: The suite's sequence lengths (huggingface.py get_sequence_length): first match wins, by
#: exact name or name prefix; 128 otherwise.
_SEQ_LENGTHS: tuple[tuple[tuple[str, ...], int], ...] = (
    (("Blenderbot",), 128),
    (("GPT2", "Bart", "T5", "PLBart", "MBart", "AllenaiLongformerBase", "BigBird"), 1024),
    (("OPT",), 2048),
    (("Albert", "Deberta", "Layout", "Electra", "XLNet", "MegatronBert", "Bert", "Roberta",
      "DistillGPT2", "GoogleFnet", "YituTechConvBert", "CamemBert"), 512),
    (("TrOCRForCausalLM",), 256),
)


class MissingModel(LookupError):
    """The installed timm or transformers has no model of this name."""


@dataclass
class SuiteModel:
    """A model ready to run: `model(*args, **kwargs)`, and what was built."""

    model: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)

    def weight_bytes(self) -> int:
        """Bytes of the parameters and buffers (what any backend must hold)."""
        tensors = [*self.model.parameters(), *self.model.buffers()]
        return sum(t.numel() * t.element_size() for t in tensors)


def import_torchvision() -> None:
    """Import torchvision's Python code (timm's dependency) without its C operators: the PyPI
    wheel is linked against another torch build, and registering its `nms` fails beside this
    one. timm and transformers use none of the operators, so they are declared, not loaded."""
    import torch

    try:
        import torchvision  # noqa: F401
    except RuntimeError:
        library = torch.library.Library("torchvision", "DEF")
        library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _KEPT.append(library)  # a Library unregisters its ops when collected
        for name in [k for k in sys.modules if k.startswith("torchvision")]:
            del sys.modules[name]
        import torchvision  # noqa: F401


_KEPT: list[Any] = []


def seq_length(name: str) -> int:
    """The suite's sequence length for the HF model `name`."""
    for names, length in _SEQ_LENGTHS:
        if name.startswith(names):
            return length
    return 128


def timm_name(name: str) -> str:
    """The name timm builds `name` under now (the suite lists some deprecated names)."""
    import timm
    from timm.models import get_deprecated_models

    if timm.is_model(name):
        return name
    renamed = get_deprecated_models().get(name)
    if renamed:
        return renamed
    raise MissingModel(f"timm {timm.__version__} has no {name}")


def build_timm(name: str, batch: int) -> SuiteModel:
    """A timm model of the suite with a random input batch at its test size."""
    import timm
    import torch
    from timm.data import resolve_data_config

    used = timm_name(name)
    torch.manual_seed(0)
    model = timm.create_model(used, pretrained=False, in_chans=3, num_classes=None,
                              drop_rate=0.0, drop_path_rate=None, drop_block_rate=None,
                              scriptable=False).eval()
    size = tuple(resolve_data_config({}, model=model, use_test_size=True)["input_size"])
    x = torch.randn((batch, *size), generator=torch.Generator().manual_seed(1))
    return SuiteModel(model, (x,), {}, {"timm_name": used, "input": list(x.shape)})


def _hf_classes(name: str) -> tuple[Any, Any, dict[str, Any]]:
    """The model class, its config class and the config fields of the HF model `name`."""
    import transformers

    class_name, config_name, fields = HF_EXTRA.get(name, (name, "", {}))
    try:
        cls = getattr(transformers, class_name)
        config_cls = getattr(transformers, config_name) if config_name else cls.config_class
    except AttributeError:
        raise MissingModel(f"transformers {transformers.__version__} has no {name}") from None
    return cls, config_cls, fields


def build_hf(name: str, batch: int, seq_cap: int | None = None) -> SuiteModel:
    """A Hugging Face model of the suite with random token ids (the suite's sequence length,
    at most `seq_cap`); the key/value cache off, as the inference suite runs them."""
    import torch

    cls, config_cls, fields = _hf_classes(name)
    config = config_cls(**fields)
    if name.startswith(("GPT2ForSequenceClassification", "Roberta")):
        config.pad_token_id = 0  # a padding id is needed to find the last token
    if hasattr(config, "use_cache"):
        config.use_cache = False
    torch.manual_seed(0)
    model = cls(config).eval()
    seq = min(seq_length(name), seq_cap or sys.maxsize)
    generator = torch.Generator().manual_seed(1)
    if name.startswith("Roberta"):  # random ids would run past its 512 positions
        ids = torch.zeros((batch, seq), dtype=torch.int64)
    else:
        ids = torch.randint(0, model.config.vocab_size, (batch, seq), generator=generator)
    if "Bart" in name:
        ids[:, -1] = model.config.eos_token_id
    kwargs = {"input_ids": ids}
    if name.startswith(("T5", "M2M100", "MT5")) or cls.__name__.endswith("Generation"):
        kwargs["decoder_input_ids"] = ids
    return SuiteModel(model, (), kwargs, {"hf_class": cls.__name__, "input": [batch, seq]})


def build(suite: str, name: str, batch: int, seq_cap: int | None = None) -> SuiteModel:
    """The model `name` of `suite` ("timm" or "hf"), its zero-initialised parameters woken."""
    import_torchvision()
    built = build_timm(name, batch) if suite == "timm" else build_hf(name, batch, seq_cap)
    built.info["woken_params"] = wake_zero_params(built.model)
    return built


def wake_zero_params(model: Any) -> int:
    """Give parameters that are all zeros small random values; how many there were."""
    import torch

    generator = torch.Generator().manual_seed(2)
    woken = 0
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and p.numel() and not bool(p.any()):
                p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
                woken += 1
    return woken


def logits(output: Any) -> Any:
    """The tensor a model's output is judged by: itself, its `.logits`, or its first item."""
    import torch

    if isinstance(output, torch.Tensor):
        return output
    found = getattr(output, "logits", None)
    return found if found is not None else output[0]
