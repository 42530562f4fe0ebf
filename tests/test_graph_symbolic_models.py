"""Stock transformers models (tiny configs, random weights) with a dynamic batch and sequence:
imported with symbolic dims through `from_torch` with `Dim`s and through both ONNX exporters,
built once with bounds, and matched against PyTorch and onnxruntime at several sizes."""

from __future__ import annotations

import numpy as np
import pytest

import topi.graph as tg
from topi.graph.cache import STATS
from topi.symbolic import dim_var

from wild_models import torchvision

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore:.*fallback config", "ignore::FutureWarning",
                                        "ignore::DeprecationWarning")

VOCAB = 99
BOUNDS = {"batch": (1, 4), "seq": (1, 32)}
SIZES = [(1, 1), (2, 7), (3, 13), (4, 32)]  # 1, primes and the bounds


def _config(name: str):
    torchvision()  # transformers imports it when present
    t = pytest.importorskip("transformers")
    small = dict(vocab_size=VOCAB)
    configs = {
        "bert": lambda: t.BertModel(t.BertConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64, **small)),
        "gpt2": lambda: t.GPT2Model(t.GPT2Config(n_embd=32, n_layer=1, n_head=4, n_positions=64,
                                                 use_cache=False, **small)),
        "distilbert": lambda: t.DistilBertModel(t.DistilBertConfig(
            dim=32, n_layers=1, n_heads=4, hidden_dim=37, max_position_embeddings=64, **small)),
        "roberta": lambda: t.RobertaModel(t.RobertaConfig(
            hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=66, **small)),
        "t5": lambda: t.T5EncoderModel(t.T5Config(d_model=32, d_kv=8, d_ff=37, num_layers=1,
                                                  num_heads=4, **small)),
        "llama": lambda: t.LlamaModel(t.LlamaConfig(
            hidden_size=32, intermediate_size=37, num_hidden_layers=1, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, use_cache=False, **small)),
    }
    return configs[name]


class _Hidden(torch.nn.Module):
    """A model's last hidden state from ids and a padding mask (by keyword, as GPT-2's second
    positional argument is its cache)."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask)[0]


def _model(name: str) -> _Hidden:
    torch.manual_seed(0)
    return _Hidden(_config(name)().eval()).eval()


def _inputs(b: int, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(b * 100 + n)
    mask = np.ones((b, n), "int64")
    mask[0, n // 2 + 1:] = 0  # padding at the end of the first row
    return {"input_ids": rng.integers(0, VOCAB, (b, n)).astype("int64"), "attention_mask": mask}


def _eager(model, inputs) -> np.ndarray:
    with torch.no_grad():
        return model(*(torch.from_numpy(v) for v in inputs.values())).numpy()


def _check_sizes(module, model, session=None) -> None:
    """The module, built once, against PyTorch (and onnxruntime) at every size; nothing is
    compiled at call time."""
    compiled = STATS["compiled"]
    for b, n in SIZES:
        inputs = _inputs(b, n)
        (out,) = module(**inputs)
        np.testing.assert_allclose(out, _eager(model, inputs), atol=2e-5, rtol=1e-4,
                                   err_msg=f"batch {b}, seq {n}")
        if session is not None:
            np.testing.assert_allclose(out, session.run(None, inputs)[0], atol=2e-5, rtol=1e-4,
                                       err_msg=f"onnxruntime, batch {b}, seq {n}")
    assert STATS["compiled"] == compiled


@pytest.mark.parametrize("name", ["bert", "gpt2", "distilbert", "roberta", "t5", "llama"])
def test_from_torch_with_dynamic_batch_and_sequence(name):
    from torch.export import Dim

    model = _model(name)
    example = tuple(torch.from_numpy(v) for v in _inputs(2, 8).values())
    batch, seq = Dim("batch", max=BOUNDS["batch"][1]), Dim("seq", max=BOUNDS["seq"][1])
    g = tg.from_torch(model, example, dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}))
    assert g.node("input_ids").shape == (dim_var("batch"), dim_var("seq"))
    assert g.bounds == BOUNDS
    _check_sizes(tg.build(g), model)


@pytest.mark.parametrize("name,dynamo", [("bert", False), ("llama", False), ("bert", True)])
def test_onnx_with_dynamic_batch_and_sequence(name, dynamo, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    model = _model(name)
    example = tuple(torch.from_numpy(v) for v in _inputs(2, 8).values())
    path = str(tmp_path / f"{name}.onnx")
    names = ["input_ids", "attention_mask"]
    with torch.no_grad():
        if dynamo:
            pytest.importorskip("onnxscript")
            from torch.export import Dim

            batch, seq = Dim("batch", min=1, max=4), Dim("seq", min=1, max=32)
            torch.onnx.export(model, example, path, input_names=names, dynamo=True,
                              dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}))
        else:
            axes = {0: "batch", 1: "seq"}
            torch.onnx.export(model, example, path, input_names=names, output_names=["out"],
                              dynamic_axes={"input_ids": axes, "attention_mask": axes,
                                            "out": axes}, dynamo=False, opset_version=17)
    g = tg.from_onnx(path)
    batch, seq = g.node("input_ids").shape  # (named by the exporter)
    assert g.node("attention_mask").shape == (batch, seq) and batch is not seq
    bounds = {batch.name: BOUNDS["batch"], seq.name: BOUNDS["seq"]}
    _check_sizes(tg.build(g, bounds=bounds), model, ort.InferenceSession(path))
