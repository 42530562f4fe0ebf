"""The sorting ops (argsort, top-k), histc and the grouped matrix product: topi computes against
numpy on awkward rows (ties, NaN, infinities, a row of one, k of the whole row), their errors,
and the PyTorch and ONNX ops that import to them (sort, argsort, topk, histc, scatter,
index_add_, grouped_mm; ONNX TopK)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tensorlang as tl
from topi import nn, x86
from topi import testing as T


#: the host and the AVX2 path (ymm vectors, no AVX-512 masks)
TARGETS = ["llvm", "llvm -mcpu=haswell"]


def _run(fn, *arrays: np.ndarray, target: str = "llvm") -> np.ndarray:
    holders = [tl.placeholder(a.shape, str(a.dtype), name=f"in{k}") for k, a in enumerate(arrays)]
    out = fn(*holders)
    with tl.Target(target):
        module = tl.build(x86.schedule_reduce([out]), [*holders, out])
    result = np.zeros(tuple(int(d) for d in out.shape), out.dtype)
    module(*arrays, result)
    return result


def _awkward(shape: tuple, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.startswith("float"):
        x = rng.standard_normal(shape).astype(dtype)
        flat = x.reshape(-1)
        if flat.size > 6:  # a NaN, infinities and a tie
            flat[1], flat[2], flat[5] = np.nan, np.inf, -np.inf
            flat[4] = flat[3]
        return x
    return rng.integers(-3, 4, shape).astype(dtype)  # many ties


@pytest.mark.parametrize("shape,axis,descending,k,dtype", [
    ((7,), -1, False, None, "float32"),
    ((3, 13), 1, True, 5, "float32"),
    ((13, 3), 0, True, 13, "float64"),
    ((5, 4), 0, False, 2, "int64"),
    ((2, 3, 17), 2, True, None, "float32"),
    ((2, 11, 3), 1, False, 1, "int32"),
    ((1,), 0, True, 1, "float32"),
])
@pytest.mark.parametrize("target", TARGETS)
def test_argsort_is_numpys_stable_order(shape, axis, descending, k, dtype, target):
    x = _awkward(shape, dtype, seed=len(shape) + shape[0])
    got = _run(lambda t: nn.argsort(t, axis, descending, k), x, target=target)
    np.testing.assert_array_equal(got, T.argsort_python(x, axis, descending, k))


def test_argsort_refuses_bad_requests():
    x = tl.placeholder((4, 5), "float32", name="x")
    with pytest.raises(ValueError, match="k must be in 1..5"):
        nn.argsort(x, 1, k=6)
    with pytest.raises(ValueError, match="k must be in"):
        nn.argsort(x, 1, k=0)
    with pytest.raises(TypeError, match="k must be an int"):
        nn.argsort(x, 1, k=2.0)
    with pytest.raises(TypeError, match="bool"):
        nn.argsort(tl.placeholder((3,), "bool", name="b"))
    with pytest.raises(ValueError):
        nn.argsort(x, axis=2)


@pytest.mark.parametrize("shape,bins,low,high", [((6, 7), 5, 0.0, 4.0), ((13,), 1, -1.0, 1.0),
                                                 ((3, 1, 11), 7, -2.5, 0.5)])
@pytest.mark.parametrize("target", TARGETS)
def test_histc_counts_as_torch(shape, bins, low, high, target):
    x = np.random.default_rng(bins).uniform(low - 1, high + 1, shape).astype("float32")
    x.reshape(-1)[0] = high  # the top edge counts in the last bin
    x.reshape(-1)[-1] = np.nan  # NaN counts nowhere
    got = _run(lambda t: nn.histc(t, bins, low, high), x, target=target)
    np.testing.assert_array_equal(got, T.histc_python(x, bins, low, high))


def test_histc_refuses_bad_requests():
    x = tl.placeholder((4,), "float32", name="x")
    with pytest.raises(ValueError, match="empty"):
        nn.histc(x, 4, 0.0, 0.0)
    with pytest.raises(ValueError, match="bins"):
        nn.histc(x, 0, 0.0, 1.0)
    with pytest.raises(TypeError, match="floating point"):
        nn.histc(tl.placeholder((4,), "int32", name="i"), 4, 0.0, 1.0)


@pytest.mark.parametrize("offsets", [[2, 2, 7, 9], [0, 0, 0, 11], [11, 11, 11, 11],
                                     [3, 5, 17, 30]])
@pytest.mark.parametrize("target", TARGETS)
def test_grouped_matmul_multiplies_each_groups_rows(offsets, target):
    """Empty groups, one group of every row, rows past the last offset (zero) and offsets
    beyond the rows (clamped, never read out of range)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((11, 6)).astype("float32")
    w = rng.standard_normal((4, 6, 5)).astype("float32")
    offs = np.array(offsets, "int32")
    got = _run(nn.grouped_matmul, x, w, offs, target=target)
    np.testing.assert_allclose(got, T.grouped_matmul_python(x, w, offs), rtol=1e-5, atol=1e-5)


def test_grouped_matmul_refuses_mismatched_shapes():
    x = tl.placeholder((5, 6), "float32", name="x")
    with pytest.raises(ValueError, match="line up"):
        nn.grouped_matmul(x, tl.placeholder((3, 7, 2), "float32", name="w"),
                          tl.placeholder((3,), "int64", name="o"))
    with pytest.raises(TypeError, match="integers"):
        nn.grouped_matmul(x, tl.placeholder((3, 6, 2), "float32", name="w"),
                          tl.placeholder((3,), "float32", name="o"))


# -- the frontends -------------------------------------------------------------------------------

torch = pytest.importorskip("torch", reason="the torch extra is not installed")


class Routing(torch.nn.Module):
    """What a mixture of experts' router and dispatch do: top-k of a softmax, a sort of the
    chosen experts, their counts, a one-hot by scatter and an index_add_ back to the tokens."""

    def __init__(self, experts: int = 5, top: int = 2) -> None:
        super().__init__()
        self.experts, self.top = experts, top

    def forward(self, logits, rows):
        probs = logits.softmax(-1)
        weights, chosen = probs.topk(self.top, dim=-1)
        lowest = torch.topk(logits, 1, dim=0, largest=False).values
        ids, order = torch.sort(chosen.reshape(-1), stable=True)  # (unstable: any tie order)
        back = torch.argsort(order, stable=True)
        counts = torch.histc(ids.float(), bins=self.experts, min=0, max=self.experts - 1)
        onehot = torch.zeros_like(probs).scatter(1, chosen, 1.0)
        picked = torch.zeros_like(probs).scatter(1, chosen, weights)
        tokens = torch.div(order, self.top, rounding_mode="floor")
        summed = torch.zeros_like(rows).index_add_(0, tokens, rows[tokens] * 0.5)
        descending = torch.sort(logits, dim=0, descending=True).values
        return weights, chosen, lowest, ids, back, counts, onehot, picked, summed, descending


def test_routing_ops_compile_whole_and_right():
    from topi.graph.torch_compile import TensorlangCompileWarning

    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(0)
    logits, rows = torch.randn(13, 5, generator=gen), torch.randn(13, 7, generator=gen)
    model = Routing()
    fast = torch.compile(model, backend="tensorlang")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", TensorlangCompileWarning)
        warnings.filterwarnings("ignore", ".*fallback config")
        for got, want in zip(fast(logits, rows), model(logits, rows)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()


_MOE_SIZES = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
#: (the scatters of a value and the index_add_ of other routers are in `Routing`)
_EXPERTS = {
    # sort, histc and transformers' grouped products over the experts' rows
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2),
    # shared experts beside grouped top-k routing
    "deepseek_v3": dict(moe_intermediate_size=16, n_routed_experts=8, num_experts_per_tok=2,
                        n_group=2, topk_group=1, first_k_dense_replace=0, kv_lora_rank=16,
                        q_lora_rank=24, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
                        n_shared_experts=1),
}


@pytest.mark.parametrize("family", sorted(_EXPERTS))
def test_mixture_of_experts_compiles_whole_and_right(family):
    from compile_fixtures import assert_whole_and_right
    from wild_models import torchvision

    torchvision()  # (transformers imports it)
    transformers = pytest.importorskip("transformers")

    config = transformers.AutoConfig.for_model(family, **_MOE_SIZES, **_EXPERTS[family])
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    ids = torch.randint(0, 97, (1, 11), generator=torch.Generator().manual_seed(1))
    assert_whole_and_right(model, ids)
    torch._dynamo.reset()


def test_onnx_topk_matches_onnxruntime(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    from topi import graph as tg

    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=1, largest=0)
    graph = helper.make_graph(
        [node], "topk", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 9])],
        [helper.make_tensor_value_info("values", TensorProto.FLOAT, [4, 3]),
         helper.make_tensor_value_info("indices", TensorProto.INT64, [4, 3])],
        [helper.make_tensor("k", TensorProto.INT64, [1], [3])])
    path = tmp_path / "topk.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    x = np.random.default_rng(0).standard_normal((4, 9)).astype("float32")
    want = ort.InferenceSession(str(path)).run(None, {"x": x})
    got = tg.build(tg.from_onnx(str(path)))(x=x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_array_equal(got[1], want[1])
