"""CNN blocks: what the graph passes for mobile and modern CNNs buy, and depthwise cost per tap.

`models`: each model built twice in one process, with the pass pipeline minus the named passes
(A) and with all of it (B), and timed against onnxruntime (spinning off). On a shared machine a
block of calls rarely runs without being preempted, so each side reports minima: the sum over
kernel calls of each call's fastest run, and the fastest whole call, alternating the sides.

`layers`: each convolution of a model, ours (fallback configs) against onnxruntime's node of
the same weight shape and output plane, fastest call of each, worst losses first: where a
model's time goes against the reference, per layer, with each side's GFLOP/s.

`depthwise`: the NCHW[x]c depthwise convolution's fallback schedule per output point and tap,
3x3 against 5x5 and 7x7, one thread, fastest call.

    python benchmarks/bench_cnn_blocks.py models --models efficientnet_b0,convnext_tiny \\
        --without fold_activations
    python benchmarks/bench_cnn_blocks.py layers --models resnet50,inception_v3
    python benchmarks/bench_cnn_blocks.py depthwise --target "llvm -mcpu=haswell"
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile
import time
import warnings
from collections.abc import Callable

import numpy as np
import onnxruntime as ort
from bench_models import _onnxruntime, _table
from bench_wild import VISION, _export, _vision

import tensorlang as tl
import topi.graph as tg
from topi.graph.model_io import check_inputs, random_inputs
from topi.graph.passes import PIPELINE
from topi.nn.conv2d_nchwc import depthwise_conv2d_NCHWc
from topi.x86.conv2d_nchwc import schedule_depthwise_conv2d_NCHWc


def fastest(fn: Callable[[], object], calls: int) -> float:
    """The fastest of `calls` single calls, in seconds."""
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def fastest_calls(modules: list[tg.Module], rounds: int) -> list[list[float]]:
    """For each module, each of its kernel calls' fastest run (the modules take turns, call
    list by call list, so a slow spell of the machine hits them alike)."""
    best = []
    for module in modules:
        module._execute(check_inputs(module.inputs, random_inputs(module.inputs)))
        best.append([float("inf")] * len(module._calls))
    for _ in range(rounds):
        for module, fastest_run in zip(modules, best):
            for k, (fn, argv, checked) in enumerate(module._calls):
                start = time.perf_counter()
                fn(*argv) if checked is not None else fn(argv)
                fastest_run[k] = min(fastest_run[k], time.perf_counter() - start)
    return best


def kernel_sums(modules: list[tg.Module], rounds: int) -> list[float]:
    """For each module, the sum over its kernel calls of each call's fastest run."""
    return [sum(calls) for calls in fastest_calls(modules, rounds)]


def _imported(name: str) -> tuple:
    """(ONNX model, imported graph, input feeds) of the torchvision model `name`."""
    VISION.setdefault(name, 224)
    module, inputs = _vision(name)
    proto, _ = _export(module.eval(), inputs)
    g = tg.from_onnx(proto)
    return proto, g, {node.name: t.numpy() for node, t in zip(g.inputs, inputs)}


def bench_model(name: str, without: list[str], rounds: int) -> dict:
    proto, g, feeds = _imported(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned: fallback configs, as intended here
        a = tg.build(g, pipeline=tuple(p for p in PIPELINE if p[0] not in without))
        b = tg.build(g)
    ort = _onnxruntime(proto, feeds, tl.get_num_threads())
    expected = ort()[0]
    error = np.abs(b(**feeds)[0] - expected).max() / max(np.abs(expected).max(), 1e-30)
    sides = {"A": lambda: a(**feeds), "B": lambda: b(**feeds), "ort": ort}
    best = dict.fromkeys(sides, float("inf"))
    for _ in range(rounds):
        for side, fn in sides.items():
            best[side] = min(best[side], fastest(fn, 10))
    ka, kb = kernel_sums([a, b], 10 * rounds)
    return {"model": name, "kernels A ms": ka * 1e3, "kernels B ms": kb * 1e3, "A/B kernels": ka / kb,
            "call A ms": best["A"] * 1e3, "call B ms": best["B"] * 1e3,
            "onnxruntime ms": best["ort"] * 1e3, "ort/A": best["ort"] / best["A"],
            "ort/B": best["ort"] / best["B"], "max err": float(error)}


def _conv_key(weight_shape: tuple[int, ...], plane: tuple[int, int]) -> tuple:
    return tuple(int(d) for d in weight_shape), tuple(int(d) for d in plane)


def _our_conv_layers(module: tg.Module, rounds: int) -> dict[tuple, list[float]]:
    """(K, C/groups, R, S), (OH, OW) -> the fastest call of each of our kernels computing such a
    convolution (its weight is prepacked as (K/bo, C, R, S, bo) or (K/bo, C/bi, R, S, bi, bo))."""
    layers = collections.defaultdict(list)
    for t, step in zip(fastest_calls([module], rounds)[0], module.steps):
        if "conv2d" not in step.op:
            continue
        w, out = step.arrays[1].shape, step.arrays[-1].shape
        if len(w) == 6:
            w = (w[0] * w[5], w[1] * w[4], w[2], w[3])
        elif len(w) == 5:
            w = (w[0] * w[4], *w[1:4])
        layers[_conv_key(w, out[2:4])].append(t)
    return layers


def _ort_conv_layers(proto, feeds: dict, rounds: int) -> dict[tuple, list[float]]:
    """The same keys for onnxruntime's convolutions (its NCHWc ones included; weight shape
    and output plane from the profile): each node's fastest run, spinning off."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = tl.get_num_threads()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    session = ort.InferenceSession(proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    for _ in range(rounds):
        session.run(None, feeds)
    with open(session.end_profiling()) as f:
        events = json.load(f)
    fastest_node: dict[str, tuple[tuple, float]] = {}
    for e in events:
        args = e.get("args", {})
        if e.get("cat") != "Node" or args.get("op_name") not in ("Conv", "FusedConv"):
            continue
        weight = next(iter(args["input_type_shape"][1].values()))
        plane = next(iter(args["output_type_shape"][0].values()))[2:4]
        key = _conv_key(weight, plane)
        best = fastest_node.get(e["name"], (key, float("inf")))[1]
        fastest_node[e["name"]] = (key, min(best, e["dur"] * 1e-6))
    layers = collections.defaultdict(list)
    for key, t in fastest_node.values():
        layers[key].append(t)
    return layers


def bench_layers(name: str, rounds: int, top: int) -> list[dict]:
    """Rows of `layers` for one model: every conv shape, worst loss against onnxruntime first."""
    proto, g, feeds = _imported(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned: fallback configs, as intended here
        ours = _our_conv_layers(tg.build(g), 10 * rounds)
    theirs = _ort_conv_layers(proto, feeds, 10 * rounds)
    rows = []
    for key, times in ours.items():
        (k, c, r, s), (h, w) = key
        flop = 2 * k * c * r * s * h * w * len(times)
        ref = sum(theirs.get(key, [float("nan")]))
        rows.append({"model": name, "weight": f"{k}x{c}x{r}x{s}", "plane": f"{h}x{w}",
                     "layers": len(times), "ours ms": sum(times) * 1e3, "ort ms": ref * 1e3,
                     "ours GFLOP/s": flop / sum(times) * 1e-9, "ort GFLOP/s": flop / ref * 1e-9,
                     "ort/ours": ref / sum(times)})
    # Unmatched layers (no onnxruntime node of that shape: nan) last.
    rows.sort(key=lambda row: -np.nan_to_num(row["ours ms"] - row["ort ms"], nan=-np.inf))
    return rows[:top]


def depthwise_ps_per_tap(channels: int, size: int, kernel: int, stride: int) -> float:
    lanes = tl.Target.current().vector_lanes("float32")
    block = min(lanes, channels & -channels)
    data = tl.placeholder((1, channels // block, size, size, block), name="data")
    weight = tl.placeholder((channels // block, kernel, kernel, block), name="weight")
    out = depthwise_conv2d_NCHWc(data, weight, stride, kernel // 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = tl.build(schedule_depthwise_conv2d_NCHWc(out), [data, weight, out])
    arrays = [np.random.rand(*(int(d) for d in t.shape)).astype("float32")
              for t in (data, weight, out)]
    taps = arrays[2].size * kernel * kernel
    return fastest(lambda: f(*arrays), 200) / taps * 1e12


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["models", "layers", "depthwise"])
    parser.add_argument("--models", default="efficientnet_b0,convnext_tiny,shufflenet_v2_x1_0")
    parser.add_argument("--without", default="fold_activations,fold_channel_shuffles",
                        help="passes that side A leaves out")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--target", default="llvm")
    parser.add_argument("--top", type=int, default=12, help="layers: rows per model")
    args = parser.parse_args()
    if args.what == "layers":
        rows = [row for name in args.models.split(",")
                for row in bench_layers(name, args.rounds, args.top)]
        print(f"{tl.get_num_threads()} threads, fastest call per layer, worst loss first")
        print(_table(rows, list(rows[0])))
        return
    if args.what == "models":
        rows = [bench_model(name, args.without.split(","), args.rounds)
                for name in args.models.split(",")]
        print(f"A: without {args.without}; B: every pass. Minima (see the module docstring).")
        print(_table(rows, list(rows[0])))
        return
    tl.set_num_threads(1)
    rows = []
    with tl.Target(args.target):
        for channels, size, stride in [(144, 56, 1), (240, 28, 1), (672, 14, 1), (96, 56, 1),
                                       (768, 7, 1), (144, 56, 2)]:
            row = {"shape": f"{channels}x{size}x{size} s{stride}"}
            for kernel in (3, 5, 7):
                row[f"{kernel}x{kernel} ps/tap"] = depthwise_ps_per_tap(channels, size, kernel,
                                                                       stride)
            rows.append(row)
    print(f"{args.target}, one thread, fastest call, ps per output point and tap")
    print(_table(rows, list(rows[0])))


if __name__ == "__main__":
    main()
