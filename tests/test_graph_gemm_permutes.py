"""`fold_gemm_permutes`: the reshape / transpose kernels that split and merge attention heads
(and Swin's windows) join the dense / batch_matmul kernel that reads them.

Multi-head attention written out in graph ops (QKV dense, head split, scaled QK^T, softmax,
AV, head merge, out-projection) at heads 1 and 3, prime sequence lengths and head sizes, batch
1 and 2, against numpy and against the same graph built without the pass, with no kernel left
that only moves an operand of a product; torchvision's Swin block (shifted 7x7 windows, heads 1
and 3) against PyTorch, and ViT's encoder block through ONNX against onnxruntime; and what the
pass must leave alone (arithmetic in the chain, a chain with two readers or that is an output).
"""

from __future__ import annotations

import io

import numpy as np
import pytest

import topi.graph as tg
from topi.graph.graph import Graph, op_label
from topi.graph.passes import PIPELINE, fold_gemm_permutes
from topi.graph.reference import run_reference
from wild_models import torchvision

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning",
                                        "ignore::DeprecationWarning")

GEMMS = {"dense", "batch_matmul", "matmul"}
UNFOLDED = [p for p in PIPELINE if p[0] != "fold_gemm_permutes"]


def _attention(batch: int, seq: int, heads: int, dim: int) -> Graph:
    """One multi-head self-attention as ONNX exports it, over (batch, seq, heads * dim)."""
    rng = np.random.default_rng(seq * heads + dim)
    width = heads * dim
    g = Graph()
    x = g.input("x", (batch, seq, width))
    rows = g.reshape(x, (batch * seq, width))
    weight = g.constant(rng.standard_normal((3 * width, width)).astype("float32") / width)
    qkv = g.add(g.dense(rows, weight), g.constant(rng.standard_normal(3 * width)
                                                    .astype("float32")))
    split = g.transpose(g.reshape(qkv, (batch, seq, 3, heads, dim)), (2, 0, 3, 1, 4))

    def part(k: int) -> object:
        taken = g.take(split, g.constant(np.array(k, dtype="int64")), axis=0)
        return g.reshape(taken, (batch * heads, seq, dim))

    q = g.multiply(part(0), g.constant(np.float32(dim ** -0.5)))
    scores = g.softmax(g.batch_matmul(q, part(1)), axis=-1)
    context = g.batch_matmul(scores, g.transpose(part(2), (0, 2, 1)))
    merged = g.reshape(g.transpose(g.reshape(context, (batch, heads, seq, dim)), (0, 2, 1, 3)),
                       (batch * seq, width))
    out = g.dense(merged, g.constant(rng.standard_normal((width, width)).astype("float32")))
    g.output(g.reshape(out, (batch, seq, width), name="y"))
    return g


def _move_kernels_into_products(m: tg.Module) -> list[str]:
    """Labels of the kernels of `m` that only move data and are read by a product."""
    readers = m.graph.consumers()
    moves = {"reshape", "transpose", "take", "multiply"}
    return [op_label(n) for n in m.graph.ops
            if set(op_label(n).split("+")) <= moves and "transpose" in op_label(n)
            and any(GEMMS & set(op_label(r).split("+")) for r in readers[n])]


@pytest.mark.parametrize("batch,seq,heads,dim,target", [
    (1, 7, 1, 16, "llvm"), (2, 13, 3, 8, "llvm"), (1, 5, 3, 5, "llvm"),
    (2, 11, 1, 3, "llvm -mcpu=haswell"), (1, 17, 3, 16, "llvm -mcpu=haswell")])
def test_attention_matches_numpy_and_the_unfolded_graph(batch: int, seq: int, heads: int,
                                                        dim: int, target: str) -> None:
    g = _attention(batch, seq, heads, dim)
    feed = {"x": np.random.default_rng(batch).standard_normal(
        (batch, seq, heads * dim)).astype("float32")}
    m = tg.build(g, target=target)
    got = m(**feed)[0]
    np.testing.assert_allclose(got, run_reference(g, feed)[0], rtol=1e-4, atol=1e-4)
    unfolded = tg.build(g, target=target, pipeline=UNFOLDED)
    np.testing.assert_allclose(got, unfolded(**feed)[0], rtol=1e-5, atol=1e-5)
    assert _move_kernels_into_products(m) == []
    assert _move_kernels_into_products(unfolded), "the unfolded graph should copy the heads"
    assert len(m.graph.ops) < len(unfolded.graph.ops)


def _swin_block(dim: int, heads: int, shift: int) -> torch.nn.Module:
    swin = torchvision().models.swin_transformer
    torch.manual_seed(dim + heads)
    return swin.SwinTransformerBlock(dim, heads, window_size=[7, 7], shift_size=[shift, shift],
                                     stochastic_depth_prob=0.0).eval()


@pytest.mark.parametrize("dim,heads,shift,batch", [(12, 3, 3, 1), (8, 1, 0, 2), (6, 3, 3, 2)])
def test_swin_block_matches_pytorch_and_the_unfolded_graph(dim: int, heads: int, shift: int,
                                                           batch: int) -> None:
    """A 14 x 14 map in 7 x 7 windows (a prime window), shifted by 3 or not."""
    module = _swin_block(dim, heads, shift)
    x = torch.randn((batch, 14, 14, dim), generator=torch.Generator().manual_seed(batch))
    with torch.no_grad():
        expected = module(x).numpy()
    g = tg.from_torch(module, (x,))
    m = tg.build(g)
    feed = {m.inputs[0].name: x.numpy()}
    got = m(**feed)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    unfolded = tg.build(g, pipeline=UNFOLDED)
    np.testing.assert_allclose(got, unfolded(**feed)[0], rtol=1e-5, atol=1e-5)
    assert len(_move_kernels_into_products(m)) < len(_move_kernels_into_products(unfolded))


def test_vit_block_matches_onnxruntime() -> None:
    """torchvision's ViT encoder block (3 heads of 5, 11 tokens) exported to ONNX."""
    ort = pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    onnx = pytest.importorskip("onnx")
    vit = torchvision().models.vision_transformer
    torch.manual_seed(3)
    module = vit.EncoderBlock(3, 15, 32, 0.0, 0.0).eval()
    x = torch.randn((2, 11, 15), generator=torch.Generator().manual_seed(3))
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, (x,), buffer, dynamo=False, opset_version=17,
                          input_names=["x"])
    proto = onnx.load_from_string(buffer.getvalue())
    expected = ort.InferenceSession(proto.SerializeToString()).run(None, {"x": x.numpy()})[0]
    m = tg.build(tg.from_onnx(proto))
    np.testing.assert_allclose(m(x=x.numpy())[0], expected, rtol=1e-4, atol=1e-4)
    assert _move_kernels_into_products(m) == []


def _chain(reader_count: int, arithmetic: bool, output: bool) -> Graph:
    g = Graph()
    x = g.input("x", (2, 5, 6))
    moved = g.transpose(g.relu(x) if arithmetic else x, (0, 2, 1), name="moved")
    y = g.batch_matmul(moved, g.constant(np.ones((2, 3, 5), dtype="float32")))
    g.output(y, *([g.add(moved, moved)] if reader_count > 1 else []),
             *([moved] if output else []))
    return g


@pytest.mark.parametrize("readers,arithmetic,output,folds", [
    (1, False, False, True), (1, True, False, False), (2, False, False, False),
    (1, False, True, False)])
def test_only_lone_moves_fold(readers: int, arithmetic: bool, output: bool,
                              folds: bool) -> None:
    g = _chain(readers, arithmetic, output)
    fused = tg.passes.optimize(g, pipeline=UNFOLDED)
    folded = fold_gemm_permutes(fused)
    assert ("moved" not in {n.name for n in folded.nodes}) is folds
    feed = {"x": np.random.default_rng(5).standard_normal((2, 5, 6)).astype("float32")}
    for got, expected in zip(tg.build(g)(**feed), run_reference(g, feed)):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("index,folds", [(np.array(1), True), (np.array(-1), True),
                                         (np.array([1]), False), (np.array([0, 1]), False)])
def test_takes_fold_at_one_constant_index(index: np.ndarray, folds: bool) -> None:
    """A take of one index is a slice in the product's index map (a negative one counts from
    the end); a take of an index array gathers and keeps its kernel."""
    g = Graph()
    x = g.input("x", (2, 3, 4, 5))
    taken = g.take(x, g.constant(index.astype("int64")), axis=0, name="taken")
    rows = g.reshape(taken, (-1, 4, 5))
    g.output(g.batch_matmul(rows, g.constant(np.ones((1, 6, 5), dtype="float32"))))
    kernels = [op_label(n) for n in tg.passes.optimize(g).ops]
    assert kernels == (["strided_slice+reshape+reshape+batch_matmul"] if folds
                       else ["take+reshape", "batch_matmul"])
    feed = {"x": np.random.default_rng(6).standard_normal((2, 3, 4, 5)).astype("float32")}
    np.testing.assert_allclose(tg.build(g)(**feed)[0], run_reference(g, feed)[0], rtol=1e-5,
                               atol=1e-5)
