"""Language-model benchmark: prefill and decode tokens per second at batch 1.

LLaMA-shaped models with random weights (SmolLM2-135M, Qwen2-0.5B, TinyLlama-1.1B shapes), on
`--threads` threads (2 by default), for each of

- ours: `CausalLM` (a prefill and a decode module, static KV cache) in float32, int8 (per
  output channel) and int4 (groups of 32), the weights quantized by `quantize_weights`;
- eager PyTorch (transformers' LlamaForCausalLM / Qwen2ForCausalLM with its dynamic cache);
- torch.compile (inductor) of the same model with a static cache (`cache_implementation=
  "static"`), unless --no-compile;
- llama.cpp through llama-cpp-python when it is importable: the same weights written as GGUF
  F32, Q8_0 and Q4_0 (`gguf_export.write_gguf`); the F32 row notes how many of its greedy
  tokens ours (float32) produce alike, a check of the GGUF writer.

Prefill is the prompt of each `--prompts` length in one call; decode the `--new-tokens` greedy
tokens after a prompt of 16, one call each. Decode at batch 1 reads every weight once per token,
so it is also given as a fraction of the machine's stream-read bandwidth (measured first, a
multi-threaded sum over 1 GiB) divided by the bytes a token reads (the projections' packed
weights and scales, and the KV cache at the middle of the run): 1.0 is the memory roofline.

    python benchmarks/bench_llm.py                                 # all models (long)
    python benchmarks/bench_llm.py --models smollm2-135m --prompts 32 --new-tokens 8 \\
        --no-compile                                               # a quick smoke run
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tensorlang as tl
from topi.graph.llm import CausalLM, LlamaConfig, generate
from topi.graph.llm.llama import weights_from_hf

#: name -> (Hugging Face class, LlamaConfig of the model's shape, q/k/v biases and tied head).
MODELS = {
    "smollm2-135m": ("LlamaForCausalLM", LlamaConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, rope_theta=100000.0, rms_norm_eps=1e-5,
        max_position_embeddings=8192), True),
    "qwen2-0.5b": ("Qwen2ForCausalLM", LlamaConfig(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, rope_theta=1000000.0, rms_norm_eps=1e-6,
        max_position_embeddings=32768), True),
    "tinyllama-1.1b": ("LlamaForCausalLM", LlamaConfig(
        vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
        num_attention_heads=32, num_key_value_heads=4, rope_theta=10000.0, rms_norm_eps=1e-5,
        max_position_embeddings=2048), False),
}
#: Our rows: name -> (bits, group size) of quantize_weights (None: float32).
OURS = {"f32": (None, None), "int8": (8, None), "int4": (4, 32)}
#: llama.cpp's rows: the GGUF block type of the projections.
LLAMA_CPP = {"f32": "F32", "int8": "Q8_0", "int4": "Q4_0"}
DECODE_PROMPT = 16


@dataclass
class Row:
    """One runtime's figures: prefill tokens/s per prompt length, decode tokens/s."""

    name: str
    prefill: dict[int, float]
    decode: float | None
    bytes_per_token: float | None = None
    note: str = ""
    #: the greedy tokens of the decode run (the prompt of DECODE_PROMPT, then the new ones)
    tokens: np.ndarray | None = None


def _torch():
    for name in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        sys.modules.setdefault(name, types.ModuleType(name))  # see tests/wild_models.py
    import torch
    import transformers

    return torch, transformers


def stream_bandwidth(threads: int, gib: float = 1.0) -> float:
    """Bytes per second of a multi-threaded read of `gib` GiB (torch's parallel sum), the best
    of 10 reads: a virtual machine's bandwidth varies with its neighbours' load (20.6 and
    32.6 GB/s here within minutes), so `main` takes the best of reads before and after each
    model as the limit."""
    torch, _ = _torch()
    torch.set_num_threads(threads)
    data = torch.ones(int(gib * 2**30) // 4, dtype=torch.float32)
    data.sum()
    best = min(_seconds(lambda: data.sum()) for _ in range(10))
    return data.numel() * 4 / best


def _seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _hf_model(name: str):
    torch, transformers = _torch()
    cls, c, tied = MODELS[name]
    config_cls = transformers.Qwen2Config if cls.startswith("Qwen2") else \
        transformers.LlamaConfig
    config = config_cls(vocab_size=c.vocab_size, hidden_size=c.hidden_size,
                        intermediate_size=c.intermediate_size,
                        num_hidden_layers=c.num_hidden_layers,
                        num_attention_heads=c.num_attention_heads,
                        num_key_value_heads=c.num_key_value_heads, rope_theta=c.rope_theta,
                        rms_norm_eps=c.rms_norm_eps,
                        max_position_embeddings=c.max_position_embeddings,
                        tie_word_embeddings=tied)
    torch.manual_seed(0)
    return getattr(transformers, cls)(config).eval()


def _prompt(length: int, vocab: int) -> np.ndarray:
    return np.random.default_rng(length).integers(0, vocab, length).astype(np.int64)


def _bytes_per_token(lm: CausalLM, config: LlamaConfig, context: int) -> float:
    """Bytes a decode step reads: the module's constants (packed weights, scales, norms; the
    embedding only for its row) and the KV cache of `context` positions."""
    graph = lm.decode.graph
    weights = sum(n.nbytes for n in graph.constants if n.name != "token_embd")
    cache = 2 * config.num_hidden_layers * context * config.num_key_value_heads * \
        config.head_dim * 4
    return weights + cache


def bench_ours(config: LlamaConfig, weights: dict, prompts: list[int], new_tokens: int,
               rounds: int) -> list[Row]:
    rows = []
    length = max([*prompts, DECODE_PROMPT + new_tokens]) + 1
    for label, (bits, group) in OURS.items():
        started = time.perf_counter()
        lm = CausalLM.build(config, weights, max_length=length, bits=bits, group_size=group)
        built = time.perf_counter() - started
        prefill = {}
        for p in prompts:
            ids = _prompt(p, config.vocab_size)
            lm.reset()
            lm(ids)  # the size's first call prepares its buffers
            times = []
            for _ in range(rounds):
                lm.reset()
                times.append(_seconds(lambda: lm(ids)))
            prefill[p] = p / min(times)
        tokens = generate(lm, _prompt(DECODE_PROMPT, config.vocab_size), new_tokens)
        best = max(_decode_rate(lm, config, new_tokens) for _ in range(rounds))
        rows.append(Row(f"ours {label}", prefill, best,
                        _bytes_per_token(lm, config, DECODE_PROMPT + new_tokens // 2),
                        f"built in {built:.0f} s", tokens))
        del lm
    return rows


def _decode_rate(lm: CausalLM, config: LlamaConfig, new_tokens: int) -> float:
    generate(lm, _prompt(DECODE_PROMPT, config.vocab_size), new_tokens)
    return lm.timing.decode_tokens_per_s


def _torch_decode(model, ids, new_tokens: int, **kwargs) -> float:
    """Decode tokens per second of transformers' greedy generate: the time of `new_tokens`
    tokens less that of one (the prefill), over the `new_tokens - 1` decode steps (after a
    first run, which compiles a compiled model's decode step)."""
    torch, _ = _torch()
    args = dict(do_sample=False, pad_token_id=0, **kwargs)
    with torch.inference_mode():
        model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **args)
        one = min(_seconds(lambda: model.generate(ids, max_new_tokens=1, min_new_tokens=1,
                                                  **args)) for _ in range(2))
        full = _seconds(lambda: model.generate(ids, max_new_tokens=new_tokens,
                                               min_new_tokens=new_tokens, **args))
    return (new_tokens - 1) / max(full - one, 1e-9)


def bench_torch(model, config: LlamaConfig, prompts: list[int], new_tokens: int, rounds: int,
                compiled: bool) -> Row:
    torch, _ = _torch()
    kwargs = {"cache_implementation": "static"} if compiled else {}
    if compiled:
        model.forward = torch.compile(model.forward, backend="inductor")
    prefill = {}
    with torch.inference_mode():
        for p in prompts:
            ids = torch.from_numpy(_prompt(p, config.vocab_size))[None]
            model.generate(ids, max_new_tokens=1, min_new_tokens=1, do_sample=False,
                           pad_token_id=0, **kwargs)
            best = min(_seconds(lambda: model.generate(
                ids, max_new_tokens=1, min_new_tokens=1, do_sample=False, pad_token_id=0,
                **kwargs)) for _ in range(rounds))
            prefill[p] = p / best
    ids = torch.from_numpy(_prompt(DECODE_PROMPT, config.vocab_size))[None]
    decode = _torch_decode(model, ids, new_tokens, **kwargs)
    name = "torch.compile inductor static cache" if compiled else "PyTorch eager"
    return Row(name, prefill, decode)


def _agreement(ours: np.ndarray | None, theirs: list[int]) -> str:
    """How many of llama.cpp's greedy tokens our float32 run produced alike (the same GGUF F32
    weights: a check of `write_gguf` and of both runtimes)."""
    if ours is None:
        return ""
    new = ours[DECODE_PROMPT:DECODE_PROMPT + len(theirs)]
    same = int(np.cumprod(new == np.array(theirs[:len(new)])).sum())
    return f"greedy tokens: the first {same} of {len(new)} are ours"


def _llama_cpp_greedy(llama_cpp, path: Path, config: LlamaConfig, count: int,
                      threads: int) -> list[int]:
    """llama.cpp's `count` greedy tokens after the decode prompt (its logits kept for every
    position, which the timed runs leave off: without them it keeps none readable)."""
    llm = llama_cpp.Llama(str(path), n_ctx=count + DECODE_PROMPT, n_threads=threads,
                          logits_all=True, verbose=False)
    llm.eval(_prompt(DECODE_PROMPT, config.vocab_size).tolist())
    tokens = [int(np.argmax(llm.scores[llm.n_tokens - 1]))]
    while len(tokens) < count:
        llm.eval(tokens[-1:])
        tokens.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
    return tokens


def bench_llama_cpp(config: LlamaConfig, weights: dict, arch: str, prompts: list[int],
                    new_tokens: int, threads: int,
                    ours: dict[str, np.ndarray | None] | None = None) -> list[Row]:
    """llama.cpp's rows; with `ours` (label -> our greedy tokens), the F32 row notes how far
    its greedy tokens agree with ours."""
    try:
        import llama_cpp
    except ImportError:
        return [Row("llama.cpp", {}, None, note="llama-cpp-python is not installed")]
    from topi.graph.llm.gguf_export import write_gguf

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, qtype in LLAMA_CPP.items():
            path = Path(tmp) / f"model-{qtype}.gguf"
            write_gguf(path, config, weights, qtype, arch)
            llm = llama_cpp.Llama(str(path), n_ctx=max(prompts) + new_tokens + DECODE_PROMPT,
                                  n_threads=threads, n_batch=max(prompts), verbose=False)
            prefill = {}
            for p in prompts:
                ids = _prompt(p, config.vocab_size).tolist()
                llm.reset()
                prefill[p] = p / _seconds(lambda: llm.eval(ids))
            llm.reset()
            llm.eval(_prompt(DECODE_PROMPT, config.vocab_size).tolist())
            # Timing only: which token is read does not change the work (the greedy ones are
            # `_llama_cpp_greedy`'s; without every position's logits none is readable here).
            started = time.perf_counter()
            for _ in range(new_tokens - 1):
                llm.eval([1])
            note = _agreement((ours or {}).get(label), _llama_cpp_greedy(
                llama_cpp, path, config, new_tokens, threads)) if qtype == "F32" else ""
            rows.append(Row(f"llama.cpp {qtype}", prefill,
                            (new_tokens - 1) / (time.perf_counter() - started), note=note))
            del llm
    return rows


def _print(name: str, rows: list[Row], prompts: list[int], bandwidth: float) -> None:
    headers = [f"prefill {p} tok/s" for p in prompts] + ["decode tok/s", "of roofline", ""]
    print(f"\n{name}")
    print(f"{'runtime':38s}" + "".join(f"{h:>20s}" for h in headers))
    for row in rows:
        cells = [f"{row.prefill[p]:.1f}" if p in row.prefill else "-" for p in prompts]
        cells.append(f"{row.decode:.2f}" if row.decode else "-")
        roof = row.decode * row.bytes_per_token / bandwidth if row.decode and \
            row.bytes_per_token else None
        cells.append(f"{roof:.2f}" if roof else "-")
        print(f"{row.name:38s}" + "".join(f"{c:>20s}" for c in cells) + f"  {row.note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--prompts", default="128,512", help="prefill prompt lengths")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = parser.parse_args()
    prompts = [int(p) for p in args.prompts.split(",")]
    tl.set_num_threads(args.threads)
    bandwidth = stream_bandwidth(args.threads)
    print(f"stream read: {bandwidth / 1e9:.1f} GB/s on {args.threads} threads")
    torch, _ = _torch()
    for name in args.models.split(","):
        cls, config, _ = MODELS[name]
        model = _hf_model(name)
        weights = weights_from_hf({k: v.detach().numpy() for k, v in model.state_dict().items()})
        rows = bench_ours(config, weights, prompts, args.new_tokens, args.rounds)
        rows.append(bench_torch(model, config, prompts, args.new_tokens, args.rounds, False))
        if not args.no_compile:
            try:
                rows.append(bench_torch(model, config, prompts, args.new_tokens, args.rounds,
                                        True))
            except Exception as err:  # noqa: BLE001  (report what failed, keep the others)
                rows.append(Row("torch.compile inductor static cache", {}, None,
                                note=f"failed: {type(err).__name__}: {err}"[:80]))
        arch = "qwen2" if cls.startswith("Qwen2") else "llama"
        ours = {row.name.removeprefix("ours "): row.tokens for row in rows}
        rows += bench_llama_cpp(config, weights, arch, prompts, args.new_tokens, args.threads,
                                ours)
        bandwidth = max(bandwidth, stream_bandwidth(args.threads))
        print(f"\nstream read, the best so far: {bandwidth / 1e9:.1f} GB/s")
        _print(name, rows, prompts, bandwidth)


if __name__ == "__main__":
    main()
