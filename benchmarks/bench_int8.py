"""int8 and bf16 GEMM: ours against our float32 GEMM and against onnxruntime's quantized ops.

Each row is one (M, N, K) and target. Every pair is timed side by side in one process in
alternating steady-state blocks (`tensorlang.benchmark.compare`, pauses between blocks so that
the other side's idle threads settle; onnxruntime's spinning is off), and only the ratios are
reported (> 1: the first named is faster):

- int8/fp32: our uint8 x int8 -> int32 dense (`topi.nn.dense` + `topi.x86.schedule_dense`, the
  fallback config, the weight blocked inside the kernel) against our float32 dense of the same
  shape;
- bf16/fp32: our bfloat16 dense (float32 sums) against our float32 dense;
- int8/ort MatMulInteger: the same int8 dense against onnxruntime's MatMulInteger (uint8 x int8
  -> int32, the weight a constant that onnxruntime prepacks);
- int8/ort QLinearMatMul: our int8 dense with a requantizing epilogue to uint8
  (`topi.nn.qnn.requantize`) against onnxruntime's QLinearMatMul;
- conv rows: our int8 conv2d (`topi.nn.conv2d_nchw_int8`, requantized to uint8, the kernel
  blocked inside the call) against our float32 conv2d, and against onnxruntime's QLinearConv
  (int8/ort QLinear);
- depthwise rows (`--depthwise`): our int8 depthwise conv2d as a model runs it (uint8
  NCHW[x]c in, requantized to uint8 NCHW[x]c) against our float32 depthwise_conv2d_NCHWc and
  onnxruntime's QLinearConv with one group per channel;
- model rows (`--models resnet50,mobilenet_v2`): a torchvision model (random weights) quantized by
  onnxruntime's `quantize_static` (after `quant_pre_process`; QDQ, per-channel int8 weights,
  uint8 activations, calibrated on 8 random images) built by `topi.graph` against onnxruntime's session of the same model
  (int8/ort) and against our float32 build of the float model (int8/fp32), with the cosine of
  the two int8 outputs.

    python benchmarks/bench_int8.py
    python benchmarks/bench_int8.py --shapes 1024x1024x1024 --targets llvm,"llvm -mcpu=haswell"
    python benchmarks/bench_int8.py --shapes '' --convs '' --models resnet50 --rounds 10
    python benchmarks/bench_int8.py --shapes '' --convs '' --models mobilenet_v2
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import tensorlang as tl
import topi
from tensorlang.benchmark import compare
from topi.x86.tensor_intrin import has_bf16_dot, int8_dot_kind, int8_lanes

SHAPES = ("1024x1024x1024", "128x768x3072", "512x512x2048")
#: Convolutions as CxHxW-K-R (batch 1, stride 1, padding R // 2): ResNet's 3x3 layers.
CONVS = ("64x56x56-64-3", "128x28x28-128-3", "256x14x14-256-3")
#: Depthwise convolutions as CxHxW-R-stride (batch 1, padding R // 2): MobileNet-V2's.
DEPTHWISE = ("144x56x56-3-1", "144x56x56-3-2", "384x14x14-3-1", "960x7x7-3-1")


def _build_dense(m: int, n: int, k: int, data_dtype: str, weight_dtype: str, target: str,
                 requant: bool = False) -> tl.Module:
    with tl.Target(target), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tuned config: the fallback
        data = tl.placeholder((m, k), data_dtype, name="data")
        weight = tl.placeholder((n, k), weight_dtype, name="weight")
        out = topi.nn.dense(data, weight)
        if requant:
            out = topi.nn.qnn.requantize(out, 0.02 * 0.01, 0, 0.5, 128, out_dtype="uint8")
        s = topi.x86.schedule_dense(out)
        return tl.build(s, [data, weight, out], target=target)


def _ort_session(op: str, m: int, n: int, k: int, weight: np.ndarray, threads: int):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(weight.T.copy(), "B")]
    if op == "MatMulInteger":
        node = helper.make_node("MatMulInteger", ["A", "B"], ["Y"])
        out_type = TensorProto.INT32
    else:
        for name, value in (("a_scale", np.float32(0.02)), ("a_zp", np.uint8(0)),
                            ("b_scale", np.float32(0.01)), ("b_zp", np.int8(0)),
                            ("y_scale", np.float32(0.5)), ("y_zp", np.uint8(128))):
            inits.append(numpy_helper.from_array(np.array(value), name))
        node = helper.make_node("QLinearMatMul", ["A", "a_scale", "a_zp", "B", "b_scale", "b_zp",
                                                  "y_scale", "y_zp"], ["Y"])
        out_type = TensorProto.UINT8
    graph = helper.make_graph(
        [node], "gemm", [helper.make_tensor_value_info("A", TensorProto.UINT8, [m, k])],
        [helper.make_tensor_value_info("Y", out_type, [m, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def bench(shape: str, target: str, args: argparse.Namespace) -> dict:
    m, n, k = (int(v) for v in shape.split("x"))
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (m, k)).astype("uint8")
    w = rng.integers(-128, 128, (n, k)).astype("int8")
    acc = np.zeros((m, n), "int32")
    af, wf, of = a.astype("float32"), w.astype("float32"), np.zeros((m, n), "float32")
    int8 = _build_dense(m, n, k, "uint8", "int8", target)
    fp32 = _build_dense(m, n, k, "float32", "float32", target)
    int8(a, w, acc)
    exact = bool(np.array_equal(acc, a.astype(np.int64) @ w.astype(np.int64).T))
    row = {"shape": shape, "target": target, "int8 kind": int8_dot_kind(tl.Target(target)),
           "exact": exact}
    r = compare(lambda: int8(a, w, acc), lambda: fp32(af, wf, of), repeat=args.rounds)
    row["int8/fp32"] = r.speedup
    row["int8 GOP/s"] = 2 * m * n * k / r.ours / 1e9
    if has_bf16_dot(tl.Target(target)):
        import ml_dtypes

        bf = _build_dense(m, n, k, "bfloat16", "bfloat16", target)
        ab, wb = af.astype(ml_dtypes.bfloat16), wf.astype(ml_dtypes.bfloat16)
        row["bf16/fp32"] = compare(lambda: bf(ab, wb, of), lambda: fp32(af, wf, of),
                                   repeat=args.rounds).speedup
    if args.ort and target == "llvm":
        session = _ort_session("MatMulInteger", m, n, k, w, args.threads)
        row["int8/ort MatMulInteger"] = compare(
            lambda: int8(a, w, acc), lambda: session.run(None, {"A": a}),
            repeat=args.rounds).speedup
        requant = _build_dense(m, n, k, "uint8", "int8", target, requant=True)
        q = np.zeros((m, n), "uint8")
        session = _ort_session("QLinearMatMul", m, n, k, w, args.threads)
        requant(a, w, q)
        theirs = session.run(None, {"A": a})[0]
        row["QLinear max diff"] = int(np.abs(q.astype(int) - theirs.astype(int)).max())
        row["int8/ort QLinearMatMul"] = compare(
            lambda: requant(a, w, q), lambda: session.run(None, {"A": a}),
            repeat=args.rounds).speedup
    return row


def _conv_session(c: int, h: int, w: int, k: int, r: int, kernel: np.ndarray, threads: int,
                  stride: int = 1, group: int = 1):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(kernel, "W")]
    for name, value in (("x_scale", np.float32(0.02)), ("x_zp", np.uint8(0)),
                        ("w_scale", np.float32(0.01)), ("w_zp", np.int8(0)),
                        ("y_scale", np.float32(0.5)), ("y_zp", np.uint8(128))):
        inits.append(numpy_helper.from_array(np.array(value), name))
    node = helper.make_node("QLinearConv", ["X", "x_scale", "x_zp", "W", "w_scale", "w_zp",
                                            "y_scale", "y_zp"], ["Y"], pads=[r // 2] * 4,
                            strides=[stride] * 2, group=group)
    oh, ow = -(-h // stride), -(-w // stride)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("X", TensorProto.UINT8, [1, c, h, w])],
        [helper.make_tensor_value_info("Y", TensorProto.UINT8, [1, k, oh, ow])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def bench_conv(spec: str, target: str, args: argparse.Namespace) -> dict:
    """int8 conv2d (`topi.nn.conv2d_nchw_int8`, requantized to uint8 for onnxruntime's
    QLinearConv) against our float32 conv2d and QLinearConv."""
    chw, k, r = spec.split("-")
    c, h, w = (int(v) for v in chw.split("x"))
    k, r = int(k), int(r)
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (1, c, h, w)).astype("uint8")
    wt = rng.integers(-128, 128, (k, c, r, r)).astype("int8")
    with tl.Target(target), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = tl.placeholder(a.shape, "uint8", name="data")
        kernel = tl.placeholder(wt.shape, "int8", name="kernel")
        acc = topi.nn.conv2d_nchw_int8(data, kernel, 1, r // 2, 1)
        q = topi.nn.qnn.requantize(acc, 0.02 * 0.01, 0, 0.5, 128, out_dtype="uint8")
        int8 = tl.build(topi.x86.schedule_conv2d_nchw_int8(q), [data, kernel, q], target=target)
        df = tl.placeholder(a.shape, "float32", name="data")
        kf = tl.placeholder(wt.shape, "float32", name="kernel")
        of = topi.nn.conv2d_nchw(df, kf, 1, r // 2, 1)
        fp32 = tl.build(topi.x86.schedule_conv2d_nchw(of), [df, kf, of], target=target)
    out = np.zeros((1, k, h, w), "uint8")
    af, wf, off = a.astype("float32"), wt.astype("float32"), np.zeros((1, k, h, w), "float32")
    row = {"shape": f"conv {spec}", "target": target,
           "int8 kind": int8_dot_kind(tl.Target(target))}
    row["int8/fp32"] = compare(lambda: int8(a, wt, out), lambda: fp32(af, wf, off),
                               repeat=args.rounds).speedup
    if args.ort and target == "llvm":
        session = _conv_session(c, h, w, k, r, wt, args.threads)
        int8(a, wt, out)
        theirs = session.run(None, {"X": a})[0]
        row["QLinear max diff"] = int(np.abs(out.astype(int) - theirs.astype(int)).max())
        row["int8/ort QLinear"] = compare(lambda: int8(a, wt, out),
                                          lambda: session.run(None, {"X": a}),
                                          repeat=args.rounds).speedup
    return row


def bench_depthwise(spec: str, target: str, args: argparse.Namespace) -> dict:
    """int8 depthwise conv2d as a quantized model runs it (`depthwise_conv2d_NCHWc_int8`,
    uint8 NCHW[x]c in, requantized to uint8 NCHW[x]c, the kernel packed beforehand) against
    our float32 `depthwise_conv2d_NCHWc` (blocked in and out) and onnxruntime's QLinearConv
    with one group per channel (NCHW uint8)."""
    from topi.nn.conv2d_int8 import depthwise_conv2d_NCHWc_int8

    chw, r, stride = spec.split("-")
    c, h, w = (int(v) for v in chw.split("x"))
    r, stride = int(r), int(stride)
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (1, c, h, w)).astype("uint8")
    wt = rng.integers(-128, 128, (c, 1, r, r)).astype("int8")
    with tl.Target(target), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lanes = int8_lanes()
        data = tl.placeholder((1, c // lanes, h, w, lanes), "uint8", name="data")
        kernel = tl.placeholder(wt.shape, "int8", name="kernel")
        acc = depthwise_conv2d_NCHWc_int8(data, kernel, stride, r // 2, 1)
        # The epilogue a QDQ model fuses: a float rescale per channel, then QuantizeLinear.
        scale = tl.placeholder((c // lanes, lanes), "float32", name="scale")
        scaled = tl.compute(acc.shape, lambda b, o, y, x, i: acc[b, o, y, x, i].astype(
            "float32") * scale[o, i], name="rescale", tag="elemwise")
        q = topi.nn.qnn.quantize(scaled, 0.5, 128, out_dtype="uint8")
        int8 = tl.build(topi.x86.schedule_conv2d_nchw_int8(q), [data, kernel, scale, q],
                        target=target)
        block = tl.Target(target).vector_lanes("float32")
        df = tl.placeholder((1, c // block, h, w, block), "float32", name="data")
        kf = tl.placeholder((c // block, r, r, block), "float32", name="kernel")
        of = topi.nn.depthwise_conv2d_NCHWc(df, kf, stride, r // 2)
        fp32 = tl.build(topi.x86.schedule_depthwise_conv2d_NCHWc(of), [df, kf, of],
                        target=target)
    blocked = a.reshape(1, c // lanes, lanes, h, w).transpose(0, 1, 3, 4, 2).copy()
    rescale = np.full((c // lanes, lanes), 0.02 * 0.01, "float32")
    out = np.zeros(tuple(int(d) for d in q.shape), "uint8")
    af = np.zeros(tuple(int(d) for d in df.shape), "float32")
    wf = np.zeros(tuple(int(d) for d in kf.shape), "float32")
    off = np.zeros(tuple(int(d) for d in of.shape), "float32")
    row = {"shape": f"depthwise {spec}", "target": target,
           "int8 kind": int8_dot_kind(tl.Target(target))}
    row["int8/fp32"] = compare(lambda: int8(blocked, wt, rescale, out), lambda: fp32(af, wf, off),
                               repeat=args.rounds).speedup
    if args.ort and target == "llvm":
        session = _conv_session(c, h, w, c, r, wt, args.threads, stride, group=c)
        int8(blocked, wt, rescale, out)
        theirs = session.run(None, {"X": a})[0]
        ours = out.transpose(0, 1, 4, 2, 3).reshape(theirs.shape)
        row["QLinear max diff"] = int(np.abs(ours.astype(int) - theirs.astype(int)).max())
        row["int8/ort QLinear"] = compare(lambda: int8(blocked, wt, rescale, out),
                                          lambda: session.run(None, {"X": a}),
                                          repeat=args.rounds).speedup
    return row


def _quantized_model(name: str, workdir: str) -> tuple[object, object, dict]:
    """(float ONNX model, its QDQ quantization by quantize_static, one input) of torchvision's
    `name` with random weights."""
    import onnx
    from bench_wild import _export, _vision
    from onnxruntime import quantization
    from onnxruntime.quantization.shape_inference import quant_pre_process

    module, inputs = _vision(name)
    model, _ = _export(module.eval(), inputs)
    feed_name = model.graph.input[0].name
    onnx.save(model, f"{workdir}/exported.onnx")
    # onnxruntime's advice before quantize_static: shapes inferred, batch norms folded.
    quant_pre_process(f"{workdir}/exported.onnx", f"{workdir}/float.onnx")
    model = onnx.load(f"{workdir}/float.onnx")
    rng = np.random.default_rng(0)
    batches = iter([{feed_name: rng.standard_normal(inputs[0].shape).astype("float32")}
                    for _ in range(8)])

    class Reader(quantization.CalibrationDataReader):
        def get_next(self):
            return next(batches, None)

    quantization.quantize_static(
        f"{workdir}/float.onnx", f"{workdir}/qdq.onnx", Reader(),
        quant_format=quantization.QuantFormat.QDQ, per_channel=True,
        activation_type=quantization.QuantType.QUInt8, weight_type=quantization.QuantType.QInt8)
    x = rng.standard_normal(inputs[0].shape).astype("float32")
    return model, onnx.load(f"{workdir}/qdq.onnx"), {feed_name: x}


def bench_model(name: str, args: argparse.Namespace) -> dict:
    """A quantized torchvision model: ours against onnxruntime's int8 session and against our
    float32 build."""
    import tempfile

    import onnxruntime as ort
    import topi.graph as tg

    with tempfile.TemporaryDirectory() as workdir:
        model, qdq, feeds = _quantized_model(name, workdir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        int8, fp32 = tg.build(tg.from_onnx(qdq)), tg.build(tg.from_onnx(model))
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(qdq.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    ours, theirs = int8(**feeds)[0].ravel(), session.run(None, feeds)[0].ravel()
    row = {"shape": f"model {name}", "target": "llvm",
           "int8 kind": int8_dot_kind(tl.Target("llvm")),
           "cosine": f"{ours @ theirs / np.linalg.norm(ours) / np.linalg.norm(theirs):.5f}",
           "same top-1": bool(ours.argmax() == theirs.argmax())}
    row["int8/ort QDQ model"] = compare(lambda: int8(**feeds), lambda: session.run(None, feeds),
                                        repeat=args.rounds).speedup
    row["int8/fp32"] = compare(lambda: int8(**feeds), lambda: fp32(**feeds),
                               repeat=args.rounds).speedup
    return row


COLUMNS = ["shape", "target", "int8 kind", "exact", "int8/fp32", "bf16/fp32",
           "int8/ort MatMulInteger", "int8/ort QLinearMatMul", "int8/ort QLinear",
           "QLinear max diff", "int8/ort QDQ model", "cosine", "same top-1"]


def _table(rows: list[dict]) -> str:
    columns = [c for c in COLUMNS if any(c in r for r in rows)]

    def cell(value: object) -> str:
        return f"{value:.2f}" if isinstance(value, float) else str(value) if value is not None \
            else "-"

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def _flags() -> str:
    host = tl.Target("llvm")
    return ", ".join(f"{f}={'yes' if host._has(f) else 'no'}"
                     for f in ("avx512vnni", "avxvnni", "avx512bf16"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--convs", default=",".join(CONVS), help="'' for none")
    parser.add_argument("--depthwise", default=",".join(DEPTHWISE), help="'' for none")
    parser.add_argument("--models", default="", help="quantized torchvision models, e.g. "
                        "resnet50 (needs torch, torchvision and onnxruntime)")
    parser.add_argument("--targets", default="llvm,llvm -mcpu=haswell")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=tl.get_num_threads())
    parser.add_argument("--no-ort", dest="ort", action="store_false")
    args = parser.parse_args()
    tl.set_num_threads(args.threads)
    rows = [bench(shape, target, args) for shape in filter(None, args.shapes.split(","))
            for target in args.targets.split(",")]
    rows += [bench_conv(spec, target, args) for spec in filter(None, args.convs.split(","))
             for target in args.targets.split(",")]
    rows += [bench_depthwise(spec, target, args)
             for spec in filter(None, args.depthwise.split(","))
             for target in args.targets.split(",")]
    rows += [bench_model(name, args) for name in filter(None, args.models.split(","))]
    print(f"\n{tl.Target('llvm')} ({_flags()}), {args.threads} threads; ratios: the first "
          "named's speed over the second's (> 1: faster)")
    print(_table(rows))


if __name__ == "__main__":
    main()
