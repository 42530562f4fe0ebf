"""Models from the wild: batch-1 latency of torchvision and transformers architectures (random
weights), ours untuned against onnxruntime and PyTorch, and which frontends import each one.

Every model is exported to ONNX (TorchScript exporter; the dynamo exporter where TorchScript
cannot export it) and imported with `from_onnx`; `from_torch` is tried on the same module. Ours
is built from the ONNX import with fallback configs, and with --trials N also tuned
(`topi.graph.tune`, one budget of N trials over the model's kernels) and built from the
records. Each pair is timed in alternating
steady-state blocks in one process (onnxruntime with spinning off); ratios are the reference's
time over ours (> 1: ours is faster). Transformers run small configurations (hidden 256, 4
layers) at --seq tokens.

    python benchmarks/bench_wild.py                          # every family
    python benchmarks/bench_wild.py --models resnet50,bert --rounds 5
    python benchmarks/bench_wild.py --family-sweep --torch-check  # the families' other members
    python benchmarks/bench_wild.py --models resnet50,efficientnet_b0 --trials 1000 --log-dir logs
"""

from __future__ import annotations

import argparse
import io
import sys
import time
import types
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import torch
from bench_models import _cpu_name, _onnxruntime, _table

import tensorlang as tl
import topi.graph as tg
from tensorlang.benchmark import compare

VISION = {
    "resnet50": 224, "resnext50_32x4d": 224, "mobilenet_v2": 224, "mobilenet_v3_large": 224,
    "efficientnet_b0": 224, "efficientnet_v2_s": 224,
    "densenet121": 224, "googlenet": 224, "inception_v3": 299, "squeezenet1_1": 224,
    "shufflenet_v2_x1_0": 224, "regnet_y_400mf": 224, "regnet_x_400mf": 224, "mnasnet1_0": 224,
    "convnext_tiny": 224, "vgg11": 224, "vit_b_16": 224, "swin_t": 224, "maxvit_t": 224,
    "lraspp_mobilenet_v3_large": 224,
}
TEXT = ("bert", "roberta", "distilbert", "gpt2", "llama")
#: --family-sweep: more members of the same families (the models a user meets beside the list).
FAMILY_VISION = {
    **dict.fromkeys(("resnet18", "resnet34", "resnet101", "wide_resnet50_2", "resnext101_32x8d",
                     "mobilenet_v3_small", "efficientnet_b1", "densenet169", "densenet201",
                     "regnet_y_800mf", "regnet_y_1_6gf", "regnet_x_800mf", "regnet_x_1_6gf",
                     "shufflenet_v2_x0_5", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0",
                     "mnasnet0_5", "mnasnet0_75", "mnasnet1_3", "squeezenet1_0",
                     "convnext_small", "vgg13", "vgg11_bn", "vgg16", "alexnet",
                     "deeplabv3_mobilenet_v3_large"), 224),
    "efficientnet_b2": 260, "efficientnet_b3": 300, "fcn_resnet50": 160,
}
FAMILY_TEXT = ("albert", "electra", "bart_encoder", "t5_encoder", "opt", "mistral", "qwen2",
               "phi", "gpt_neox", "mobilebert", "deberta_v2")


def _torchvision() -> types.ModuleType:
    """torchvision's model code without its compiled ops (pip's wheel may be built for another
    torch; the models need none of them)."""
    for name in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        if "torchvision" not in sys.modules:
            sys.modules.setdefault(name, types.ModuleType(name))
    import torchvision
    import torchvision.models.segmentation  # noqa: F401

    return torchvision


def _vision(name: str) -> tuple[torch.nn.Module, tuple]:
    models = _torchvision().models
    build = getattr(models, name, None) or getattr(models.segmentation, name)
    segmentation = name.startswith(("lraspp", "deeplabv3", "fcn"))
    kwargs = {"weights_backbone": None} if segmentation else {}
    if name in ("googlenet", "inception_v3"):
        kwargs = {"aux_logits": False, "init_weights": False}
    size = {**VISION, **FAMILY_VISION}[name]
    return build(weights=None, **kwargs), (torch.randn(1, 3, size, size),)


def _text(name: str, seq: int) -> tuple[torch.nn.Module, tuple]:
    _torchvision()  # transformers imports it when present
    import transformers as T

    size = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                intermediate_size=1024, vocab_size=1000)
    decoder = dict(size, num_key_value_heads=2, use_cache=False)  # grouped-query attention
    bart = dict(vocab_size=1000, d_model=256, encoder_layers=4, decoder_layers=1,
                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=1024,
                decoder_ffn_dim=1024)
    configs = {
        "bert": lambda: T.BertModel(T.BertConfig(**size)),
        "roberta": lambda: T.RobertaModel(T.RobertaConfig(**size)),
        "distilbert": lambda: T.DistilBertModel(T.DistilBertConfig(
            vocab_size=1000, dim=256, n_layers=4, n_heads=4, hidden_dim=1024)),
        "gpt2": lambda: T.GPT2Model(T.GPT2Config(vocab_size=1000, n_embd=256, n_layer=4,
                                                 n_head=4, use_cache=False, bos_token_id=0,
                                                 eos_token_id=0)),
        "llama": lambda: T.LlamaModel(T.LlamaConfig(num_key_value_heads=2, use_cache=False,
                                                    **size)),
        "albert": lambda: T.AlbertModel(T.AlbertConfig(embedding_size=128, **size)),
        "electra": lambda: T.ElectraModel(T.ElectraConfig(embedding_size=128, **size)),
        "bart_encoder": lambda: T.BartModel(T.BartConfig(**bart)).get_encoder(),
        "t5_encoder": lambda: T.T5EncoderModel(T.T5Config(
            vocab_size=1000, d_model=256, d_kv=64, d_ff=1024, num_layers=4, num_heads=4,
            use_cache=False)),
        "opt": lambda: T.OPTModel(T.OPTConfig(
            vocab_size=1000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
            ffn_dim=1024, word_embed_proj_dim=256, use_cache=False)),
        "mistral": lambda: T.MistralModel(T.MistralConfig(sliding_window=None, **decoder)),
        "qwen2": lambda: T.Qwen2Model(T.Qwen2Config(**decoder)),
        "phi": lambda: T.PhiModel(T.PhiConfig(partial_rotary_factor=0.5, **decoder)),
        "gpt_neox": lambda: T.GPTNeoXModel(T.GPTNeoXConfig(use_cache=False, **size)),
        "mobilebert": lambda: T.MobileBertModel(T.MobileBertConfig(
            vocab_size=1000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
            intermediate_size=512, embedding_size=128, true_hidden_size=128,
            intra_bottleneck_size=128, num_feedforward_networks=2)),
        "deberta_v2": lambda: T.DebertaV2Model(T.DebertaV2Config(**size)),
    }
    return configs[name](), (torch.randint(0, 1000, (1, seq)),)


def _export(module: torch.nn.Module, inputs: tuple) -> tuple[onnx.ModelProto, str]:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            buffer = io.BytesIO()
            torch.onnx.export(module, inputs, buffer, dynamo=False, opset_version=17)
            return onnx.load_from_string(buffer.getvalue()), "torchscript"
        except Exception:  # noqa: BLE001 - the exporter's own failures: try the other one
            return torch.onnx.export(module, inputs, dynamo=True).model_proto, "dynamo"


def _status(fn: Callable[[], object]) -> str:
    try:
        fn()
        return "ok"
    except Exception as err:  # noqa: BLE001 - reported in the table
        return type(err).__name__


def _build(g: tg.Graph, log: str | None = None) -> tuple[tg.Module, float]:
    """The module of `g` (tuned by the records of `log`, untuned without) and its build time in
    seconds."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the untuned build lists its fallback workloads
        module = tg.build(g, log_file=log)
    return module, time.perf_counter() - start


def _tuned(name: str, g: tg.Graph, args: argparse.Namespace, row: dict) -> tg.Module:
    """`g` tuned with one budget of --trials over all its kernels (the log in --log-dir is
    resumed, so a second run only builds), built from the records."""
    log = str(Path(args.log_dir) / f"wild_{name}.jsonl")
    start = time.perf_counter()
    result = tg.tune(g, trials=args.trials, log_file=log, progress=False)
    row["tuning s"] = time.perf_counter() - start
    row["trials"] = result.trials
    return _build(g, log)[0]


def _error(module: tg.Module, inputs: tuple, expected: np.ndarray) -> str:
    """Max abs error of the module's first output, relative to the largest expected value."""
    feeds = {node.name: t.numpy() for node, t in zip(module.inputs, inputs)}
    got = module(**feeds)[0]
    return f"{np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-30):.1e}"


def bench(name: str, args: argparse.Namespace) -> dict:
    torch.manual_seed(0)
    text = name in TEXT or name in FAMILY_TEXT
    module, inputs = _text(name, args.seq) if text else _vision(name)
    module = module.eval()
    row: dict = {"model": name}
    proto, row["exporter"] = _export(module, inputs)
    with torch.no_grad():
        expected = torch.utils._pytree.tree_leaves(module(*inputs))[0].numpy()
    if args.torch_check:
        row["from_torch"] = _status(lambda: row.update(
            {"torch err": _error(_build(tg.from_torch(module, inputs))[0], inputs, expected)}))
    else:
        row["from_torch"] = _status(lambda: tg.from_torch(module, inputs))
    g = tg.from_onnx(proto)
    feeds = {node.name: t.numpy() for node, t in zip(g.inputs, inputs)}
    ours, row["build s"] = _build(g)
    row["max err"] = _error(ours, inputs, expected)
    refs = {"onnxruntime": _onnxruntime(proto, feeds, args.threads)}

    def pytorch() -> object:
        with torch.inference_mode():
            return module(*inputs)

    refs["pytorch"] = pytorch  # last: its OpenMP threads spin after each run
    modes = {"untuned": ours}
    if args.trials > 0:
        modes["tuned"] = _tuned(name, g, args, row)
        row["tuned err"] = _error(modes["tuned"], inputs, expected)
    for ref_name, ref in refs.items():
        for mode, built in modes.items():
            result = compare(lambda m=built: m(**feeds), ref, repeat=args.rounds)
            row.setdefault(f"{mode} ms", result.ours * 1e3)
            row[f"{ref_name} ms"] = result.reference * 1e3
            row[f"{mode}/{ref_name}"] = result.speedup
    return row


COLUMNS = ["model", "exporter", "from_torch", "torch err", "build s", "max err", "untuned ms",
           "onnxruntime ms", "pytorch ms", "untuned/onnxruntime", "untuned/pytorch", "trials",
           "tuning s", "tuned err", "tuned ms", "tuned/onnxruntime", "tuned/pytorch"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join([*VISION, *TEXT]))
    parser.add_argument("--family-sweep", action="store_true",
                        help="the other members of the families instead of --models")
    parser.add_argument("--torch-check", action="store_true",
                        help="also build the from_torch import and report its error")
    parser.add_argument("--rounds", type=int, default=5, help="alternating timing rounds")
    parser.add_argument("--seq", type=int, default=128, help="transformer sequence length")
    parser.add_argument("--threads", type=int, default=tl.get_num_threads())
    parser.add_argument("--trials", type=int, default=0,
                        help="also tune each model with this budget and time the tuned build")
    parser.add_argument("--log-dir", default=".", help="where the tuning logs go (resumed)")
    args = parser.parse_args()
    tl.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    rows = []
    names = [*FAMILY_VISION, *FAMILY_TEXT] if args.family_sweep else args.models.split(",")
    for name in names:
        try:
            rows.append(bench(name, args))
        except Exception as err:  # noqa: BLE001 - one model's failure is a row, not the end
            rows.append({"model": name, "exporter": f"failed: {type(err).__name__}: "
                                                    f"{str(err)[:120]}"})
        print(_table(rows[-1:], COLUMNS), flush=True)
    tuning = f"tuned with {args.trials} trials" if args.trials else "untuned"
    print(f"\n{_cpu_name()}, {args.threads} threads, batch 1, fp32, {tuning}; "
          f"x/ref columns: the reference's time over ours (> 1: ours is faster)")
    print(_table(rows, COLUMNS))
    for mode in ("untuned", "tuned"):
        ratios = [r[f"{mode}/onnxruntime"] for r in rows if f"{mode}/onnxruntime" in r]
        if ratios:
            print(f"geomean {mode}/onnxruntime over {len(ratios)} models: "
                  f"{float(np.exp(np.mean(np.log(ratios)))):.2f}")


if __name__ == "__main__":
    main()
