"""Importing, tuning and running a whole model: ONNX in, one tuned native module out.

    python tutorials/07_models.py                  # a small CNN on 1x3x56x56, 200 trials
    python tutorials/07_models.py --trials 1000
    TL_TUTORIAL_SMALL=1 python tutorials/07_models.py   # 1x3x16x16, 12 trials (CI)

Lessons 04 and 05 tuned one operator. A model is a graph of them, and `topi.graph` takes it from
a file to a callable:
1. An ONNX model: here written by hand with `onnx.helper` (conv, batch norm, relu, max pool,
   conv, relu, global average pool, flatten, gemm), as any exporter would write it.
2. `tg.from_onnx` imports it as a `Graph` of topi ops; printing it shows one line per node with
   its shape.
3. The optimisation passes (`tg.optimize`) fold the batch norm into the convolution's weights,
   fold constants, put the convolutions in the channel-blocked NCHW[x]c layout (kept from one
   conv to the next) and fuse the elementwise tails into their producers: fewer, fatter
   kernels.
4. `tg.extract_tasks` lists the distinct tunable workloads (the convolutions and the dense
   layer); `tg.tune` spends one budget of trials over all of them, a round at a time, on the
   task whose tuning promises the most (resumable from its log).
5. `tg.build` compiles the graph with the log's best configs into a `Module` called with numpy
   inputs by name.
6. The module is checked against the graph's numpy reference and, when it is installed,
   onnxruntime; then it is timed alternately with onnxruntime (idle threads not spinning).

The command line does the same: `tensorlang model tune net.onnx --trials 200 --log net.jsonl`,
then `tensorlang model run|bench net.onnx --log net.jsonl`.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import warnings
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import topi.graph as tg
from tensorlang.benchmark import compare
from topi.graph.reference import run_reference

SMALL = os.environ.get("TL_TUTORIAL_SMALL") == "1"  # CI runs every tutorial at small sizes
SIZE, WIDTH, CLASSES = (16, 8, 10) if SMALL else (56, 32, 100)  # image side, channels, classes


def small_cnn(seed: int = 0) -> onnx.ModelProto:
    """1. conv3x3-bn-relu, maxpool, conv3x3-relu, global average pool, flatten, gemm."""
    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int, positive: bool = False) -> onnx.TensorProto:
        value = rng.uniform(0.5, 1.5, shape) if positive else rng.standard_normal(shape) * 0.3
        return numpy_helper.from_array(value.astype("float32"), name)

    w2 = 2 * WIDTH
    initializers = [
        weight("conv1_w", WIDTH, 3, 3, 3), weight("bn_scale", WIDTH, positive=True),
        weight("bn_bias", WIDTH), weight("bn_mean", WIDTH),
        weight("bn_var", WIDTH, positive=True), weight("conv2_w", w2, WIDTH, 3, 3),
        weight("conv2_b", w2), weight("fc_w", CLASSES, w2), weight("fc_b", CLASSES),
    ]
    nodes = [
        helper.make_node("Conv", ["data", "conv1_w"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization",
                         ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["b1"]),
        helper.make_node("Relu", ["b1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2_w", "conv2_b"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES])],
        initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def onnxruntime_session(
        model: onnx.ModelProto) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]] | None:
    """6. onnxruntime on the CPU with its idle threads not spinning, or None if not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return lambda inputs: session.run(None, inputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12 if SMALL else 200)
    parser.add_argument("--per-round", type=int, default=4 if SMALL else 32,
                        help="trials a task gets each time the tuner picks it")
    parser.add_argument("--log",
                        default=os.path.join(tempfile.gettempdir(), "tutorial_model.jsonl"))
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args()

    # 1-2. The ONNX model, imported as a Graph.
    path = os.path.join(tempfile.mkdtemp(), "small_cnn.onnx")
    onnx.save(small_cnn(opts.seed), path)
    g = tg.from_onnx(path)
    print(f"=== {path}, imported:\n{g}")

    # 3. The passes: batch norm folded into conv1, relus fused into the kernels before them.
    optimized = tg.optimize(g)
    print(f"\n=== after the optimisation passes ({len(g.ops)} op nodes -> "
          f"{len(optimized.ops)} kernels):\n{optimized}")

    # 4. The tasks, and one budget spread over them (a line per round, then a table).
    print("\n=== tasks:")
    for task, count in tg.extract_tasks(g):
        print(f"  {task.name} {list(task.args)} x{count}: {len(task.config_space)} configs")
    if os.path.exists(opts.log):
        os.remove(opts.log)  # a fresh run: the budget below is all new trials
    print()
    tg.tune(g, trials=opts.trials, log_file=opts.log, per_round=opts.per_round, seed=opts.seed)

    # 5. Build with the tuned configs (the tasks the budget did not reach use fallback configs).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = tg.build(g, log_file=opts.log)
    print(f"\n=== built: {module.kernels} kernels; inputs {[str(i) for i in module.inputs]}")

    # 6. Correctness: the numpy reference of the imported graph, and onnxruntime when installed.
    inputs = {"data": np.random.default_rng(1).standard_normal((1, 3, SIZE, SIZE))
              .astype("float32")}
    (ours,) = module(**inputs)
    (expected,) = run_reference(g, inputs)
    np.testing.assert_allclose(ours, expected, rtol=1e-3, atol=1e-3)
    print(f"logits {ours.shape}: max error {np.max(np.abs(ours - expected)):.2g} against numpy")
    reference = onnxruntime_session(small_cnn(opts.seed))
    if reference is None:
        print("(onnxruntime is not installed: timing ours alone)")
        print(f"tensorlang: {module.benchmark(repeat=3 if SMALL else 20, inputs=inputs)}")
        print("the tuned model matches numpy")
        return
    (theirs,) = reference(inputs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-3)
    print(f"max error {np.max(np.abs(ours - theirs)):.2g} against onnxruntime")
    side = compare(lambda: module(**inputs), lambda: reference(inputs), repeat=3 if SMALL else 9)
    print(f"\nmeasured alternately: tensorlang {side.ours * 1e3:.3f} ms, onnxruntime "
          f"{side.reference * 1e3:.3f} ms, onnxruntime time / ours {side.speedup:.2f}x")
    print("the tuned model matches numpy and onnxruntime")


if __name__ == "__main__":
    main()
