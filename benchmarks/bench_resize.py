"""resize2d kernels of segmentation and FPN-like models against onnxruntime's Resize and PyTorch's
F.interpolate, side by side.

Shapes: lraspp's and FCN/DeepLab's final bilinear upsampling (21 classes to 224x224 and
520x520, half_pixel and align_corners), a bicubic upsampling, nearest 2x of an FPN level, and a
bilinear and a bicubic resize by non-integer factors (one of them downsampling). Each pair is
timed in alternating blocks in one process (onnxruntime with spinning off, PyTorch with its own
thread count set to ours); ratios are the reference's time over ours (> 1: ours is faster).
bench_ops.py's rows are tunable templates measured in GFLOP/s, so resize has its own table here.

    python benchmarks/bench_resize.py
    python benchmarks/bench_resize.py --target "llvm -mcpu=haswell" --rounds 9
"""

from __future__ import annotations

import argparse

import numpy as np

import tensorlang as tl
import topi
from tensorlang.benchmark import compare
from topi.x86.resize import schedule_resize2d

# (input NCHW, output (h, w), method, coordinate transformation, nearest mode)
CASES = [
    ((1, 21, 28, 28), (224, 224), "linear", "pytorch_half_pixel", "floor"),
    ((1, 21, 28, 28), (224, 224), "linear", "align_corners", "floor"),
    ((1, 21, 65, 65), (520, 520), "linear", "pytorch_half_pixel", "floor"),
    ((1, 21, 28, 28), (224, 224), "cubic", "half_pixel", "floor"),
    ((1, 256, 28, 28), (56, 56), "nearest", "asymmetric", "floor"),
    ((1, 32, 37, 53), (101, 71), "linear", "half_pixel", "floor"),
    ((1, 16, 112, 112), (37, 41), "cubic", "half_pixel", "floor"),
]


def _ours(shape, size, method, mode, nearest_mode):
    x = tl.placeholder(shape, "float32", name="x")
    out = topi.nn.resize2d(x, size, method=method, coordinate_transformation_mode=mode,
                           nearest_mode=nearest_mode)
    f = tl.build(schedule_resize2d([out]), [x, out])
    data = np.random.default_rng(0).standard_normal(shape).astype("float32")
    result = np.zeros((*shape[:2], *size), "float32")
    return (lambda: f(data, result)), data, result


def _onnxruntime(data, size, method, mode, nearest_mode, threads):
    import onnxruntime as ort
    from onnx import TensorProto, helper

    out_shape = [*data.shape[:2], *size]
    node = helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], mode=method,
                            coordinate_transformation_mode=mode, nearest_mode=nearest_mode)
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("X", TensorProto.FLOAT, data.shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, out_shape)],
        [helper.make_tensor("sizes", TensorProto.INT64, [4], out_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return lambda: session.run(None, {"X": data})[0]


def _torch(data, size, method, mode):
    """F.interpolate for the cases it has (None for the others)."""
    import torch

    kinds = {("linear", "pytorch_half_pixel"): ("bilinear", False),
             ("linear", "align_corners"): ("bilinear", True),
             ("cubic", "half_pixel"): ("bicubic", False),
             ("nearest", "asymmetric"): ("nearest", None)}
    if (method, mode) not in kinds:
        return None
    kind, corners = kinds[(method, mode)]
    x = torch.from_numpy(data)

    def run() -> object:
        with torch.inference_mode():
            return torch.nn.functional.interpolate(x, size=size, mode=kind,
                                                   align_corners=corners)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="llvm")
    parser.add_argument("--rounds", type=int, default=7, help="alternating timing rounds")
    parser.add_argument("--threads", type=int, default=tl.get_num_threads())
    args = parser.parse_args()
    tl.set_num_threads(args.threads)
    try:
        import torch

        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    print(f"{args.target}, {args.threads} threads; x/ref: the reference's time over ours")
    print(f"{'input':>18} {'output':>10} {'method':>8} {'mode':>19} {'ours ms':>8} "
          f"{'x/onnxruntime':>14} {'x/pytorch':>10}")
    with tl.Target(args.target):
        for shape, size, method, mode, nearest_mode in CASES:
            ours, data, result = _ours(shape, size, method, mode, nearest_mode)
            ort = _onnxruntime(data, size, method, mode, nearest_mode, args.threads)
            ours()
            np.testing.assert_allclose(result, ort(), rtol=1e-4, atol=1e-4)
            vs_ort = compare(ours, ort, repeat=args.rounds)
            ref = _torch(data, size, method, mode) if torch is not None else None
            vs_torch = f"{compare(ours, ref, repeat=args.rounds).speedup:10.2f}" if ref \
                else f"{'-':>10}"
            print(f"{str(shape):>18} {str(size):>10} {method:>8} {mode:>19} "
                  f"{vs_ort.ours * 1e3:8.3f} {vs_ort.speedup:14.2f} {vs_torch}", flush=True)


if __name__ == "__main__":
    main()
