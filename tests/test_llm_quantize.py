"""Weight-only quantized products (`dense_quantized`, `tg.quantize_weights`): the kernel against
the numpy product with the same dequantized weight, on awkward sizes (prime N, per-channel int8
with prime K, one row and several, a fused tail), int8 and int4 with groups of 32 and 128,
symmetric and with zero points; the quantization error within half a step; bad groups refused."""

from __future__ import annotations

import numpy as np
import pytest

import topi.graph as tg
from topi.graph.llm import quantize_weights
from topi.graph.llm.packing import PackedWeight, quantize_int4, quantize_int8
from topi.graph.llm.quantize_weights import READ_ONCE_ROWS

CASES = [  # (rows, K, N, bits, group_size, zero_points)
    (1, 37, 13, 8, None, False),
    (5, 37, 13, 8, None, False),
    (1, 96, 17, 8, 32, False),
    (1, 256, 31, 4, 32, False),
    (3, 256, 31, 4, 128, True),
    (7, 128, 2, 4, 32, True),
    (2, 384, 97, 4, 128, False),
    (16, 96, 17, 8, None, False),  # past READ_ONCE_ROWS: a GEMM dequantizing its panels
    (23, 256, 31, 4, 128, True),
    (9, 128, 5, 4, 32, False),
]


def _graph(rng, rows: int, k: int, n: int) -> tuple[tg.Graph, np.ndarray]:
    g = tg.Graph()
    x = g.input("x", (rows, k))
    weight = rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    g.output(g.relu(g.add(g.dense(x, g.constant(weight, "w")), g.constant(bias, "b"))))
    return g, weight


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])  # the host, and AVX2
@pytest.mark.parametrize("rows,k,n,bits,group_size,zero_points", CASES)
def test_dense_quantized_matches_dequantized_numpy(rows, k, n, bits, group_size, zero_points,
                                                   target, rng):
    g, weight = _graph(rng, rows, k, n)
    q = quantize_weights(g, bits, group_size, zero_points)
    product = "dense_quantized" if rows <= READ_ONCE_ROWS else "dense_dequantized"
    assert [node.op for node in q.ops] == [product, "add", "relu"]
    packed = quantize_int8(weight, group_size) if bits == 8 else quantize_int4(
        weight, group_size, zero_points)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    bias = g.node("b").value
    expected = np.maximum(x.astype(np.float64) @ packed.dequantize().T + bias, 0)
    got = tg.build(q, target=target)(x=x)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize("bits,group_size,zero_points", [(8, None, False), (8, 32, False),
                                                         (4, 32, False), (4, 128, True)])
def test_quantization_error_within_half_a_step(bits, group_size, zero_points, rng):
    weight = rng.standard_normal((11, 256)).astype(np.float32)
    packed = quantize_int8(weight, group_size) if bits == 8 else quantize_int4(
        weight, group_size, zero_points)
    step = np.repeat(packed.scale, packed.group_size, axis=1)
    assert np.all(np.abs(packed.dequantize() - weight) <= step / 2 + 1e-6)


@pytest.mark.parametrize("bits,group_size,zero_points,stored", [
    (8, None, False, np.float32), (8, 32, False, np.float16), (4, 32, False, np.float16),
    (4, 128, True, np.float16)])
def test_group_scales_are_float16_where_they_fit(bits, group_size, zero_points, stored, rng):
    """Scales of groups within a row are float16 (GGUF's bytes per group), rounded up so that no
    value clips; a scale that is no normal float16 keeps the weight's scales float32."""
    weight = rng.standard_normal((11, 256)).astype(np.float32)
    packed = _quantize(weight, bits, group_size, zero_points)
    assert packed.scale.dtype == stored
    assert packed.zero is None or packed.zero.dtype == stored
    if stored == np.float16:
        tiny = weight.copy()
        tiny[3, :group_size] *= 1e-6  # a scale under float16's normal range
        assert _quantize(tiny, bits, group_size, zero_points).scale.dtype == np.float32


def test_panels_widen_float16_scales_for_riscv(rng):
    """RVV code converts float16 through library calls that exported libraries lack: panels
    built for it hold float32 scales and zero points (the same values)."""
    import tensorlang as tl

    packed = quantize_int4(rng.standard_normal((5, 64)).astype(np.float32), 32, True)
    with tl.Target("llvm -mtriple=riscv64-linux-gnu -mattr=+v,+f,+d"):
        panels = packed.panels()
    assert panels.scale.dtype == panels.zero.dtype == np.float32
    np.testing.assert_array_equal(panels.dequantize(), packed.dequantize())
    assert packed.panels().scale.dtype == np.float16  # the host


def test_symbolic_rows_take_the_gemm(rng):
    """Rows of symbolic count (a prompt) run the GEMM that dequantizes its panels, at any count
    within the bounds."""
    g = tg.Graph()
    x = g.input("x", ("seq", 64))
    weight = rng.standard_normal((29, 64)).astype(np.float32)
    g.output(g.dense(x, g.constant(weight, "w")))
    q = quantize_weights(g, 4, 32, zero_points=True)
    assert [node.op for node in q.ops] == ["dense_dequantized"]
    module = tg.build(q, bounds={"seq": (1, 40)})
    dequantized = quantize_int4(weight, 32, zero_points=True).dequantize()
    for rows in (1, 13, 40):
        data = rng.standard_normal((rows, 64)).astype(np.float32)
        np.testing.assert_allclose(module(x=data)[0], data @ dequantized.T, rtol=1e-5,
                                   atol=1e-4)


def test_matmul_weight_with_leading_dims(rng):
    """A matmul on (1, seq, K) data with a (K, N) weight (what from_torch writes for Linear)."""
    g = tg.Graph()
    x = g.input("x", (1, 5, 64))
    weight = rng.standard_normal((64, 23)).astype(np.float32)
    g.output(g.matmul(x, g.constant(weight, "w")))
    q = quantize_weights(g, 4, 32)
    data = rng.standard_normal((1, 5, 64)).astype(np.float32)
    expected = data @ quantize_int4(weight.T, 32).dequantize().T
    np.testing.assert_allclose(tg.build(q)(x=data)[0], expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("bits,group_size", [(4, 48), (4, 64 + 32), (8, 48)])
def test_groups_that_do_not_divide_k_are_refused(bits, group_size, rng):
    g, _ = _graph(rng, 1, 80, 7)
    with pytest.raises(ValueError, match="'dense'.*group_size"):
        quantize_weights(g, bits, group_size)


def test_bad_arguments(rng):
    g, _ = _graph(rng, 1, 64, 7)
    with pytest.raises(ValueError, match="bits"):
        quantize_weights(g, 3)
    with pytest.raises(ValueError, match="zero_points"):
        quantize_weights(g, 8, zero_points=True)
    with pytest.raises(TypeError, match="Graph"):
        quantize_weights("model.onnx")


def _tiny_llama(rng) -> tuple:
    from topi.graph.llm.llama import LlamaConfig

    config = LlamaConfig(vocab_size=101, hidden_size=128, intermediate_size=160,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64)
    weights = {"token_embd": rng.standard_normal((101, 128)), "output_norm": 1 + 0.1 *
               rng.standard_normal(128), "output": 0.05 * rng.standard_normal((101, 128))}
    shapes = {"attn_q": (128, 128), "attn_k": (64, 128), "attn_v": (64, 128),
              "attn_output": (128, 128), "ffn_gate": (160, 128), "ffn_up": (160, 128),
              "ffn_down": (128, 160)}
    for i in range(2):
        weights |= {f"blk.{i}.{name}": 0.05 * rng.standard_normal(shape)
                    for name, shape in shapes.items()}
        weights |= {f"blk.{i}.{name}": 1 + 0.1 * rng.standard_normal(128)
                    for name in ("attn_norm", "ffn_norm")}
    return config, {k: v.astype(np.float32) for k, v in weights.items()}


@pytest.mark.parametrize("tokens", ["seq", 1])
@pytest.mark.parametrize("bits,group_size,least", [(8, None, 0.999), (4, 32, 0.99)])
def test_transformer_logits_close_to_float(bits, group_size, least, tokens, rng):
    """A two-layer llama graph, every projection quantized: a 9-token prompt (GEMMs on the
    dequantized panels) or one token after 8 cached ones (the read-once kernels) keeps a logits
    cosine of at least 0.999 (int8) / 0.99 (int4, groups of 32) with float32's."""
    from topi.graph.llm.llama import build_llama_graph

    config, weights = _tiny_llama(rng)
    g = build_llama_graph(config, weights, all_logits=True, tokens=tokens)
    q = quantize_weights(g, bits, group_size)
    product = "dense_dequantized" if tokens == "seq" else "dense_quantized"
    assert sum(n.op == product for n in q.ops) == 15
    count, past = (9, 1) if tokens == "seq" else (1, 8)
    feeds = {"input_ids": rng.integers(0, 101, count), "positions": np.arange(count) + past - 1,
             "key_positions": np.array([10**9]) if tokens == "seq" else np.arange(past),
             **{f"past_{kv}{i}": rng.standard_normal((2, past, 32)).astype(np.float32)
                for i in range(2) for kv in "kv"}}
    reference = tg.build(g)(**feeds)[0].ravel()
    got = tg.build(q)(**feeds)[0].ravel()
    cosine = got @ reference / np.linalg.norm(got) / np.linalg.norm(reference)
    assert least <= cosine < 1 - 1e-7  # quantized, and close


def test_kernel_defaults_to_one_group_per_row(rng):
    """topi's dense_quantized without a group size scales each output channel (K is the group)."""
    import tensorlang as tl
    from topi.nn.dense_quantized import dense_quantized
    from topi.x86.dense_quantized import schedule_dense_quantized

    x = tl.placeholder((1, 41), "float32", name="x")
    w = tl.placeholder((7, 41), "int8", name="w")
    s = tl.placeholder((7, 1), "float32", name="s")
    out = dense_quantized(x, w, s)
    f = tl.build(schedule_dense_quantized([out]), [x, w, s, out])
    packed = quantize_int8(rng.standard_normal((7, 41)).astype(np.float32))
    data = rng.standard_normal((1, 41)).astype(np.float32)
    got = np.zeros((1, 7), np.float32)
    f(data, packed.weight, packed.scale, got)
    np.testing.assert_allclose(got, data @ packed.dequantize().T, rtol=1e-5, atol=1e-5)


def _quantize(weight: np.ndarray, bits: int, group_size: int | None,
              zero_points: bool) -> PackedWeight:
    return quantize_int8(weight, group_size) if bits == 8 else quantize_int4(
        weight, group_size, zero_points)


KINDS = [(8, None, False), (8, 32, False), (4, 32, False), (4, 128, True)]


@pytest.mark.parametrize("bits,group_size,zero_points", KINDS)
@pytest.mark.parametrize("n,rows", [(1, 16), (15, 16), (16, 16), (17, 16), (97, 32)])
def test_panels_hold_the_weight_and_zeros_past_it(n, rows, bits, group_size, zero_points, rng):
    """Panels of `rows` channels give back the (N, ...) weight; the channels past N are 0."""
    packed = _quantize(rng.standard_normal((n, 256)).astype(np.float32), bits, group_size,
                       zero_points)
    panels = packed.panels(rows)
    blocks = -(-n // rows)
    assert panels.weight.shape == (blocks, *packed.weight.shape[1:], rows)
    assert panels.scale.shape == (blocks, packed.scale.shape[1], rows)
    back = panels.unpanel()
    for ours, theirs in ((back.weight, packed.weight), (back.scale, packed.scale),
                         (back.zero, packed.zero)):
        np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(np.moveaxis(panels.weight, -1, 1).reshape(
        blocks * rows, -1)[n:], 0)


#: Channels around a panel's width (32 on AVX-512 for so few channels, 16 on AVX2), and enough
#: channels for the wide panels (64, 32): 1025 is 17 panels of 64 and one channel.
EDGES = [(1, 31), (3, 32), (1, 33), (8, 47), (2, 1025)]


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
@pytest.mark.parametrize("rows,n", EDGES)
@pytest.mark.parametrize("bits,group_size,zero_points", KINDS)
def test_panel_products_at_the_edges_of_panels(rows, n, bits, group_size, zero_points, target,
                                               rng):
    """The read-once kernel on channel counts around the panel width, one row of data and a
    prefill's several, against numpy with the same dequantized weight."""
    k = 256
    g = tg.Graph()
    x = g.input("x", (rows, k))
    weight = rng.standard_normal((n, k)).astype(np.float32)
    g.output(g.dense(x, g.constant(weight, "w")))
    q = quantize_weights(g, bits, group_size, zero_points)
    assert [node.op for node in q.ops] == ["dense_quantized"]
    data = rng.standard_normal((rows, k)).astype(np.float32)
    expected = data.astype(np.float64) @ _quantize(weight, bits, group_size,
                                                   zero_points).dequantize().T
    got = tg.build(q, target=target)(x=data)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


@pytest.mark.parametrize("bits,group_size,zero_points", KINDS)
def test_kernel_packs_its_panels_when_the_weight_is_an_input(bits, group_size, zero_points,
                                                             rng):
    """topi's dense_quantized on the (N, ...) layout packs the panels inside the kernel (a
    weight that is no constant): 3 rows, 37 channels, K = 384."""
    import tensorlang as tl
    from topi.nn.dense_quantized import dense_quantized
    from topi.x86.dense_quantized import schedule_dense_quantized

    packed = _quantize(rng.standard_normal((37, 384)).astype(np.float32), bits, group_size,
                       zero_points)
    arrays = [a for a in (packed.weight, packed.scale, packed.zero) if a is not None]
    data = rng.standard_normal((3, 384)).astype(np.float32)
    tensors = [tl.placeholder(a.shape, str(a.dtype), name=f"in{i}") for i, a in
               enumerate([data, *arrays])]
    out = dense_quantized(*tensors[:3], tensors[3] if zero_points else None, bits, group_size)
    f = tl.build(schedule_dense_quantized([out]), [*tensors, out])
    got = np.zeros((3, 37), np.float32)
    f(data, *arrays, got)
    expected = data.astype(np.float64) @ packed.dequantize().T
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


def test_bad_panels_are_refused():
    import tensorlang as tl
    from topi.nn.dense_quantized import dense_quantized_panels

    x = tl.placeholder((1, 64), "float32", name="x")
    w = tl.placeholder((2, 64, 16), "int8", name="w")
    s = tl.placeholder((2, 1, 16), "float32", name="s")
    with pytest.raises(ValueError, match="scale panels must be float32 or float16 \\(2, 2"):
        dense_quantized_panels(x, w, s, group_size=32)
    with pytest.raises(ValueError, match="weight panels must be uint8"):
        dense_quantized_panels(x, w, s, bits=4, group_size=64)
    with pytest.raises(ValueError, match="channels must be a positive int"):
        dense_quantized_panels(x, w, s, channels=-3)
    with pytest.raises(ValueError, match="weight panels must be int8 \\(1, 64, 16\\)"):
        dense_quantized_panels(x, w, s, channels=9)
