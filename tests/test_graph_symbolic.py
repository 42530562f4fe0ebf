"""Symbolic dims through the graph: a model built once runs every size within its bounds."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import topi.graph as tg
from topi.graph.cache import STATS
from topi.graph.reference import run_reference
from topi.symbolic import dim_var

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")


class _Layer(torch.nn.Module):
    def __init__(self, d: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads, self.d = heads, d
        self.qkv, self.o = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.f1, self.f2 = torch.nn.Linear(d, 2 * d), torch.nn.Linear(2 * d, d)

    def forward(self, x, mask):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).split(self.d, dim=-1))
        a = (q @ k.transpose(-1, -2) / math.sqrt(self.d // self.heads) + mask).softmax(-1) @ v
        x = self.ln1(x + self.o(a.transpose(1, 2).reshape(b, n, self.d)))
        return self.ln2(x + self.f2(torch.nn.functional.gelu(self.f1(x))))


class Encoder(torch.nn.Module):
    """BERT-style: token and position embeddings, a padding mask, two encoder layers."""

    def __init__(self, vocab: int = 50, d: int = 32, max_len: int = 64) -> None:
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(max_len, d)
        self.ln = torch.nn.LayerNorm(d)
        self.layers = torch.nn.ModuleList([_Layer(d), _Layer(d)])

    def forward(self, ids, attn):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.ln(self.tok(ids) + self.pos(pos))
        mask = (1.0 - attn[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, mask)
        return x


SIZES = [(1, 1), (1, 5), (2, 7), (3, 13), (4, 64)]  # 1, primes and the bounds
BOUNDS = {"batch": (1, 4), "seq": (1, 64)}


def _inputs(b: int, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    attn = np.ones((b, n), "int64")
    attn[0, n // 2 + 1:] = 0
    return {"ids": rng.integers(0, 50, (b, n)).astype("int64"), "attn": attn}


@pytest.fixture(scope="module")
def encoder_onnx(tmp_path_factory):
    torch.manual_seed(0)
    model = Encoder().eval()
    path = str(tmp_path_factory.mktemp("sym") / "encoder.onnx")
    example = tuple(torch.from_numpy(v) for v in _inputs(2, 8).values())
    axes = {0: "batch", 1: "seq"}
    torch.onnx.export(model, example, path, input_names=["ids", "attn"], output_names=["out"],
                      dynamic_axes={"ids": axes, "attn": axes, "out": axes}, dynamo=False,
                      opset_version=17)
    return path


@pytest.fixture(scope="module")
def encoder_module(encoder_onnx):
    g = tg.from_onnx(encoder_onnx)
    return tg.build(g, bounds=BOUNDS)


def test_onnx_keeps_symbolic_dims(encoder_onnx):
    g = tg.from_onnx(encoder_onnx)
    assert g.node("ids").shape == (dim_var("batch"), dim_var("seq"))
    assert g.node("attn").shape[1] is g.node("ids").shape[1]  # one variable per name
    fixed = tg.from_onnx(encoder_onnx, shapes={"ids": (2, 9), "attn": (2, 9)})
    assert fixed.outputs[0].shape == (2, 9, 32)


def test_built_once_matches_onnxruntime_at_every_size(encoder_onnx, encoder_module):
    session = ort.InferenceSession(encoder_onnx)
    compiled = STATS["compiled"]
    for b, n in SIZES:
        inputs = _inputs(b, n)
        start = time.perf_counter()
        (out,) = encoder_module(**inputs)
        assert time.perf_counter() - start < 1.0, f"first call at {b}x{n}"
        (expected,) = session.run(None, inputs)
        np.testing.assert_allclose(out, expected, atol=2e-3, rtol=2e-3)
    assert STATS["compiled"] == compiled  # nothing compiled at call time


def test_out_of_bounds_and_inconsistent_sizes_raise(encoder_module):
    with pytest.raises(ValueError, match=r"'ids' dim 1 \(seq\).*outside"):
        encoder_module(**_inputs(1, 65))
    bad = _inputs(2, 7)
    bad["attn"] = bad["attn"][:, :6]
    with pytest.raises(ValueError, match=r"'attn' dim 1 \(seq\)"):
        encoder_module(**bad)


def test_hand_built_graph_against_reference():
    g = tg.Graph()
    x = g.input("x", ("n", 16))
    rng = np.random.default_rng(1)
    w = g.constant(rng.standard_normal((24, 16)).astype("float32"), "w")
    y = g.gelu(g.dense(x, w))
    y = g.softmax(g.reshape(y, (-1, 4, 6)), axis=-1)
    g.output(y)
    assert y.shape == (dim_var("n"), 4, 6)
    m = tg.build(g, bounds={"n": 100})
    for n in (1, 3, 31, 100):
        xv = rng.standard_normal((n, 16)).astype("float32")
        np.testing.assert_allclose(m(x=xv)[0], run_reference(g, {"x": xv})[0], atol=1e-4)


def test_from_torch_with_dims_built_once():
    from torch.export import Dim

    torch.manual_seed(0)
    model = Encoder().eval()
    example = tuple(torch.from_numpy(v) for v in _inputs(2, 8).values())
    batch, seq = Dim("batch", max=4), Dim("seq", max=64)
    g = tg.from_torch(model, example, dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}))
    assert g.node("ids").shape == (dim_var("batch"), dim_var("seq"))
    assert g.bounds == BOUNDS  # from the Dims' max
    m = tg.build(g)
    compiled = STATS["compiled"]
    for b, n in [(1, 5), (2, 7), (3, 13), (4, 64)]:
        inputs = _inputs(b, n)
        start = time.perf_counter()
        (out,) = m(**inputs)
        assert time.perf_counter() - start < 1.0, f"first call at {b}x{n}"
        with torch.no_grad():
            expected = model(*(torch.from_numpy(v) for v in inputs.values())).numpy()
        np.testing.assert_allclose(out, expected, atol=2e-3, rtol=2e-3)
    assert STATS["compiled"] == compiled  # nothing compiled at call time
    with pytest.raises(ValueError, match=r"'ids' dim 1 \(seq\).*outside"):
        m(**_inputs(1, 65))


def test_what_is_not_there_yet_says_so(encoder_module, tmp_path):
    with pytest.raises(NotImplementedError, match="symbolic dims cannot be exported"):
        encoder_module.export_library(str(tmp_path / "encoder.so"))
    with pytest.raises(NotImplementedError, match="tuning by size bucket"):
        tg.tune(encoder_module.graph, 10, buckets={"seq": [16, 64]})


def test_profile_at_a_size(encoder_module):
    table = encoder_module.profile(2, _inputs(2, 7))
    assert "softmax" in table and table.splitlines()[-1].startswith("total")
