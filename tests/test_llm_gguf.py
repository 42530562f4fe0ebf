"""The GGUF importer (`tg.from_gguf`) on files written with the gguf package's GGUFWriter from a
tiny transformers model's random weights: Q8_0 and Q4_0 projections (quantized by
gguf.quants.quantize), an F16 embedding, F32 norms, llama's permuted Q/K rows and Qwen2's
biases; the logits of a prompt and of a decode step match PyTorch's with the same dequantized
weights, and greedy generation from the file matches transformers' token for token."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from wild_models import torchvision

import topi.graph as tg
from topi.graph.llm.gguf_import import load_gguf
from topi.graph.llm.llama import HF_LAYER_NAMES, HF_NAMES, weights_from_hf

gguf = pytest.importorskip("gguf", reason="the gguf extra is not installed")

PROMPT = np.array([5, 3, 9, 1, 77, 12, 40, 2, 96], np.int64)
SHAPE = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
             rope_theta=5000.0, rms_norm_eps=1e-6)


def _permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter's row order for Q and K (pairs instead of halves per head)."""
    return weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:]).swapaxes(
        1, 2).reshape(weight.shape)


def _write(path, arch: str, weights: dict[str, np.ndarray], qtype) -> dict[str, np.ndarray]:
    """Write `weights` (GGUF names, float32) as a GGUF file of `arch`, the 2-D projections as
    `qtype`; returns the weights as the file holds them, dequantized, in Hugging Face's order."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_context_length(SHAPE["max_position_embeddings"])
    writer.add_embedding_length(SHAPE["hidden_size"])
    writer.add_block_count(SHAPE["num_hidden_layers"])
    writer.add_feed_forward_length(SHAPE["intermediate_size"])
    writer.add_head_count(SHAPE["num_attention_heads"])
    writer.add_head_count_kv(SHAPE["num_key_value_heads"])
    writer.add_rope_freq_base(SHAPE["rope_theta"])
    writer.add_layer_norm_rms_eps(SHAPE["rms_norm_eps"])
    held = {}
    for name, value in weights.items():
        if name == "token_embd":
            writer.add_tensor(f"{name}.weight", value.astype(np.float16))
            held[name] = value.astype(np.float16).astype(np.float32)
            continue
        if value.ndim == 1:
            writer.add_tensor(name if name.endswith(".bias") else f"{name}.weight", value)
            held[name] = value
            continue
        heads = {"attn_q": SHAPE["num_attention_heads"], "attn_k": SHAPE["num_key_value_heads"]}
        kind = name.rsplit(".", 1)[-1]
        stored = _permute(value, heads[kind]) if arch == "llama" and kind in heads else value
        blocks = gguf.quants.quantize(stored, qtype)
        writer.add_tensor(f"{name}.weight", blocks, raw_dtype=qtype)
        held[name] = gguf.quants.dequantize(gguf.quants.quantize(value, qtype), qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return held


def _hf(arch: str):
    torchvision()  # transformers imports it when present
    transformers = pytest.importorskip("transformers")
    import torch

    torch.manual_seed(0)
    if arch == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(**SHAPE)).eval()
    model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**SHAPE,
                                                                   tie_word_embeddings=True))
    with torch.no_grad():  # Qwen2 initialises its biases to zero: make them count
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.1)
    return model.eval()


def _hf_key(name: str) -> str:
    """The Hugging Face parameter of a GGUF tensor name."""
    stem, bias = name.removesuffix(".bias"), name.endswith(".bias")
    kind = "bias" if bias else "weight"
    if stem.startswith("blk."):
        _, index, short = stem.split(".")
        layer = {v: k for k, v in HF_LAYER_NAMES.items()}[short]
        return f"model.layers.{index}.{layer}.{kind}"
    return f"{ {v: k for k, v in HF_NAMES.items()}[stem]}.{kind}"


def _load_held(model, held: dict[str, np.ndarray]) -> None:
    """Put the file's (dequantized) weights into the PyTorch model."""
    import torch

    state = model.state_dict()
    with torch.no_grad():
        for name, value in held.items():
            state[_hf_key(name)].copy_(torch.from_numpy(np.ascontiguousarray(value)))


@pytest.fixture(scope="module", params=[("llama", "Q8_0"), ("llama", "Q4_0"), ("qwen2", "Q8_0")],
                ids=lambda p: "-".join(p))
def written(request, tmp_path_factory):
    arch, qtype = request.param
    model = _hf(arch)
    weights = weights_from_hf({k: v.detach().numpy() for k, v in model.state_dict().items()})
    if arch == "qwen2":
        weights.pop("output")  # tied: the file has no output tensor
    path = tmp_path_factory.mktemp("gguf") / f"{arch}.gguf"
    held = _write(path, arch, weights, getattr(gguf.GGMLQuantizationType, qtype))
    _load_held(model, held)
    return path, model, qtype


def test_weights_stay_quantized(written):
    path, _, qtype = written
    model = load_gguf(path)
    q = model.weights["blk.0.attn_q"]
    assert q.bits == (8 if qtype == "Q8_0" else 4) and q.group_size == 32
    assert model.weights["token_embd"].dtype == np.float32
    assert model.config.rope_theta == 5000.0 and model.config.num_key_value_heads == 2


@pytest.fixture(scope="module")
def from_file(written):
    return tg.from_gguf(written[0], max_length=48)


def test_logits_match_pytorch(written, from_file):
    """The prompt's last logits (prefill module), then a next token's (decode module)."""
    import torch

    model, lm = written[1], from_file
    lm.reset()
    tokens = np.array([*PROMPT, 17])
    got = [lm(PROMPT), lm(tokens[-1:])]
    with torch.no_grad():
        expected = model(torch.tensor(tokens)[None]).logits[0, -2:].numpy()
    np.testing.assert_allclose(np.stack(got), expected, rtol=1e-4, atol=2e-5)


def test_greedy_generation_from_the_file(written, from_file):
    import torch

    model = written[1]
    with torch.no_grad():
        expected = model.generate(torch.tensor(PROMPT)[None], max_new_tokens=32,
                                  min_new_tokens=32, do_sample=False)[0].numpy()
    np.testing.assert_array_equal(tg.generate(from_file, PROMPT, 32), expected)


@pytest.mark.parametrize("written", [("llama", "Q4_0")], indirect=True, ids=["llama-Q4_0"])
def test_command_line_generates_the_same_tokens(written, capsys):
    """`tensorlang model generate FILE --prompt-ids ... --tokens 8`: the greedy tokens and the
    tokens per second."""
    from tensorlang.cli import main

    path, _, _ = written
    expected = tg.generate(tg.from_gguf(path, max_length=PROMPT.size + 8), PROMPT, 8)
    code = main(["model", "generate", str(path), "--prompt-ids", ",".join(map(str, PROMPT)),
                 "--tokens", "8"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0] == ",".join(str(t) for t in expected[PROMPT.size:])
    assert "prefill: 9 tokens" in out[1] and "decode: 7 tokens" in out[1] and "tokens/s" in out[1]


def test_command_line_errors(tmp_path, capsys):
    from tensorlang.cli import main

    assert main(["model", "generate", str(tmp_path / "none.gguf"), "--prompt-ids", "1"]) != 0
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "junk.gguf").write_bytes(b"not a gguf file at all")
    assert main(["model", "generate", str(tmp_path / "junk.gguf"), "--prompt-ids", "1"]) != 0
    assert "junk.gguf" in capsys.readouterr().err
    assert main(["model", "generate", str(tmp_path / "junk.gguf"), "--prompt-ids", "1,x"]) != 0
    assert "--prompt-ids" in capsys.readouterr().err


@pytest.mark.parametrize("qtype", ["F32", "F16", "Q8_0", "Q4_0"])
def test_write_gguf_round_trip(qtype, tmp_path):
    """write_gguf (what the benchmark gives llama.cpp) and load_gguf invert each other: F32
    exactly, F16 to half precision, Q8_0 / Q4_0 to the gguf package's own dequantization."""
    from topi.graph.llm.gguf_export import write_gguf
    from topi.graph.llm.llama import LlamaConfig

    config = LlamaConfig(**SHAPE)
    rng = np.random.default_rng(0)
    weights = {"token_embd": rng.standard_normal((97, 64)), "output_norm": rng.random(64),
               "output": rng.standard_normal((97, 64))}
    for i in range(2):
        weights |= {f"blk.{i}.attn_q": rng.standard_normal((64, 64)),
                    f"blk.{i}.attn_k": rng.standard_normal((32, 64)),
                    f"blk.{i}.attn_v": rng.standard_normal((32, 64)),
                    f"blk.{i}.attn_output": rng.standard_normal((64, 64)),
                    f"blk.{i}.ffn_gate": rng.standard_normal((96, 64)),
                    f"blk.{i}.ffn_up": rng.standard_normal((96, 64)),
                    f"blk.{i}.ffn_down": rng.standard_normal((64, 96)),
                    f"blk.{i}.attn_norm": rng.random(64), f"blk.{i}.ffn_norm": rng.random(64)}
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    write_gguf(tmp_path / "m.gguf", config, weights, qtype)
    loaded = load_gguf(tmp_path / "m.gguf")
    assert loaded.config.rms_norm_eps == pytest.approx(1e-6)  # stored as float32
    assert replace(loaded.config, rms_norm_eps=1e-6) == config
    kind = getattr(gguf.GGMLQuantizationType, qtype)
    for name, value in weights.items():
        got = loaded.weights[name]
        if value.ndim == 1 or qtype == "F32" or (name == "token_embd" and qtype != "F16"):
            np.testing.assert_array_equal(got, value)
        elif qtype == "F16":
            np.testing.assert_array_equal(got, value.astype(np.float16).astype(np.float32))
        else:
            expected = gguf.quants.dequantize(gguf.quants.quantize(value, kind), kind)
            np.testing.assert_allclose(got.dequantize(), expected, rtol=1e-6, atol=1e-6)


def test_llama_cpp_generates_our_greedy_tokens(tmp_path):
    """The F32 file write_gguf gives llama.cpp (the benchmark's) makes llama.cpp's greedy
    tokens those that our CausalLM built from the same file generates."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from topi.graph.llm.gguf_export import write_gguf
    from topi.graph.llm.llama import LlamaConfig

    model = _hf("llama")
    weights = weights_from_hf({k: v.detach().numpy() for k, v in model.state_dict().items()})
    path = tmp_path / "llama.gguf"
    write_gguf(path, LlamaConfig(**SHAPE), weights, "F32")
    llm = llama_cpp.Llama(str(path), n_ctx=32, n_threads=1, logits_all=True, verbose=False)
    llm.eval(PROMPT.tolist())
    theirs = [int(np.argmax(llm.scores[llm.n_tokens - 1]))]
    while len(theirs) < 12:
        llm.eval(theirs[-1:])
        theirs.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
    ours = tg.generate(tg.from_gguf(path, max_length=32), PROMPT, 12)
    np.testing.assert_array_equal(ours[PROMPT.size:], theirs)
