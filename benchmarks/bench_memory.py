"""Peak memory of building and running a model, against eager PyTorch's, in multiples of the
bytes of the model's weights.

Each measurement is one fresh process (its peak resident set, `ru_maxrss`, is the figure): it
imports torch, constructs the model (random weights, no downloads) and runs it eagerly once;
that is the baseline ("eager"). The other two then build the model and call it twice:
"from_torch" (`from_torch` + `topi.graph.build`) and "compile" (`torch.compile(model,
backend="tensorlang")`). The columns are each peak over the weights' bytes, and what the build
adds over eager's peak over the weights' bytes (a prepacked matrix product holds one packed copy
of its weight beside the model's own: about 1.0 for a transformer; a weight read as it lies, as
an embedding table, adds nothing). Each line ends with the largest difference between the built
model's outputs and eager's.

Models: ALBERT's default configuration (albert-xxlarge-like: 12 layers sharing one set of
weights), Blenderbot at full width with --layers decoder layers, BERT base, timm's ResNet-50;
all at batch 1 and --seq tokens.

    python benchmarks/bench_memory.py
    python benchmarks/bench_memory.py --models albert,bert --modes eager,compile
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import types
from typing import Any

MODELS = ("albert", "blenderbot", "bert", "resnet50")
MODES = ("eager", "from_torch", "compile")
GIB = 2**30


def _transformers() -> Any:
    """transformers, importable beside a torchvision wheel whose C ops do not load for the CPU
    torch (its model code needs none of them)."""
    for name in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        if "torchvision" not in sys.modules:
            sys.modules.setdefault(name, types.ModuleType(name))
    import transformers

    return transformers


def _model(name: str, seq: int, layers: int) -> tuple[Any, tuple]:
    """The module (eval mode, seeded random weights) and its example inputs."""
    import torch

    torch.manual_seed(0)
    ids = (torch.randint(0, 8000, (1, seq), generator=torch.Generator().manual_seed(1)),)
    if name == "resnet50":
        _transformers()  # the same torchvision stand-ins, for timm
        import timm

        return timm.create_model("resnet50").eval(), (torch.randn(1, 3, 224, 224),)
    tf = _transformers()
    if name == "albert":
        return tf.AlbertForMaskedLM(tf.AlbertConfig()).eval(), ids
    if name == "blenderbot":
        config = tf.BlenderbotConfig(decoder_layers=layers, encoder_layers=layers)
        return tf.BlenderbotForCausalLM(config).eval(), ids
    if name == "bert":
        return tf.BertModel(tf.BertConfig()).eval(), ids
    raise ValueError(f"unknown model {name!r}; choose from {MODELS}")


def _weight_bytes(model: Any) -> int:
    """The bytes of the model's distinct parameters and buffers (a shared one counts once)."""
    tensors = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
               for t in [*model.parameters(), *model.buffers()]}
    return sum(tensors.values())


def _first(out: Any) -> Any:
    """The first tensor of a model's output (a tensor, a tuple or a transformers output)."""
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    return out[0] if isinstance(out, (tuple, list)) else out


def measure(name: str, mode: str, seq: int, layers: int) -> dict[str, float]:
    """In this process: the model built and run in `mode`; its weight bytes, the peak RSS and
    the largest output difference from eager."""
    import resource
    import warnings

    import numpy as np
    import torch

    model, inputs = _model(name, seq, layers)
    with torch.no_grad():
        expected = _first(model(*inputs)).numpy()
    error = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned workloads: fallback configs are expected
        if mode == "from_torch":
            import topi.graph as tg

            module = tg.build(tg.from_torch(model, inputs))
            feed = {info.name: t.numpy() for info, t in zip(module.inputs, inputs)}
            module(**feed)
            error = float(np.abs(module(**feed)[0] - expected).max())
        elif mode == "compile":
            fast = torch.compile(model, backend="tensorlang")
            with torch.no_grad():
                fast(*inputs)
                error = float(np.abs(_first(fast(*inputs)).numpy() - expected).max())
        elif mode != "eager":
            raise ValueError(f"unknown mode {mode!r}; choose from {MODES}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {"weights": _weight_bytes(model), "peak": peak, "error": error}


def _run(name: str, mode: str, seq: int, layers: int) -> dict[str, float] | None:
    """`measure` in a fresh process (None, with its error printed, when it fails)."""
    proc = subprocess.run([sys.executable, __file__, "--child", name, mode, "--seq", str(seq),
                           "--layers", str(layers)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"{name} {mode}: failed\n{proc.stderr[-2000:]}", flush=True)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2, help="Blenderbot's decoder layers")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*args.child, args.seq, args.layers)))
        return
    print(f"{'model':<12} {'mode':<11} {'weights GiB':>11} {'peak GiB':>9} {'peak/weights':>12} "
          f"{'over eager/weights':>18} {'max |error|':>11}")
    for name in args.models.split(","):
        eager = None
        for mode in args.modes.split(","):
            found = _run(name, mode, args.seq, args.layers)
            if found is None:
                continue
            eager = found["peak"] if mode == "eager" else eager
            weights = found["weights"]
            over = f"{(found['peak'] - eager) / weights:18.2f}" if eager is not None else \
                f"{'-':>18}"
            print(f"{name:<12} {mode:<11} {weights / GIB:11.3f} {found['peak'] / GIB:9.2f} "
                  f"{found['peak'] / weights:12.2f} {over} {found['error']:11.2e}", flush=True)


if __name__ == "__main__":
    main()
