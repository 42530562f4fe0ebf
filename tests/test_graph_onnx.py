"""from_onnx: every supported op against onnxruntime on small awkward shapes (built and run
with the fallback configs), across opsets, and clear errors for what is not supported."""

from __future__ import annotations

import numpy as np
import pytest

import topi.graph as tg

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
ort = pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
from onnx import TensorProto, helper, numpy_helper

from topi.graph.onnx import UnsupportedError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

_ELEM = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64,
         "int32": TensorProto.INT32, "float64": TensorProto.DOUBLE,
         "float16": TensorProto.FLOAT16, "bool": TensorProto.BOOL}


def make_model(op_type: str, inputs: dict[str, np.ndarray], attrs: dict | None = None,
               consts: dict[str, np.ndarray] | None = None, order: list[str] | None = None,
               outputs: int = 1, opset: int = 17):
    """A one-node model: `inputs` are graph inputs, `consts` initializers; `order` lists the
    node's input names ("" for an omitted optional input)."""
    consts = consts or {}
    names = order if order is not None else [*inputs, *consts]
    out_names = [f"y{k}" for k in range(outputs)]
    node = helper.make_node(op_type, names, out_names, name=f"the_{op_type.lower()}",
                            **(attrs or {}))
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, _ELEM[str(v.dtype)], v.shape) for k, v in inputs.items()],
        [onnx.ValueInfoProto(name=k) for k in out_names],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(model, inputs: dict[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-5) -> None:
    expected = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, inputs)
    g = tg.from_onnx(model)
    actual = tg.build(g)(**inputs)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def rand(rng, *shape, low=-1.0, high=1.0) -> np.ndarray:
    return rng.uniform(low, high, size=shape).astype("float32")


@pytest.mark.parametrize("attrs, wshape", [
    ({"pads": [1, 2, 0, 1], "strides": [2, 1]}, (5, 3, 3, 2)),
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (4, 3, 3, 3)),
    ({"auto_pad": "SAME_LOWER", "strides": [1, 2]}, (4, 3, 2, 3)),
    ({"pads": [2, 0, 1, 1], "dilations": [2, 3]}, (4, 3, 3, 2)),
    ({"auto_pad": "VALID"}, (7, 3, 1, 1)),
    ({"group": 3, "pads": [1, 1, 1, 1]}, (6, 1, 3, 3)),  # depthwise, multiplier 2
    ({"group": 3, "kernel_shape": [3, 3]}, (3, 1, 3, 3)),  # depthwise
])
def test_conv(attrs, wshape, rng):
    x = {"x": rand(rng, 1, 3, 9, 7)}
    consts = {"w": rand(rng, *wshape), "b": rand(rng, wshape[0])}
    check(make_model("Conv", x, attrs, consts), x)


def test_grouped_conv_without_bias(rng):
    x = {"x": rand(rng, 2, 4, 6, 5)}
    check(make_model("Conv", x, {"group": 2, "pads": [1, 1, 1, 1]}, {"w": rand(rng, 6, 2, 3, 3)}),
          x)


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 0]},
    {"strides": [2, 3], "group": 2, "dilations": [1, 2]},
    {"strides": [2, 2], "output_shape": [10, 9]},
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
])
def test_conv_transpose(attrs, rng):
    x = {"x": rand(rng, 1, 4, 5, 4)}
    consts = {"w": rand(rng, 4, 3, 3, 3), "b": rand(rng, 3 * attrs.get("group", 1))}
    check(make_model("ConvTranspose", x, attrs, consts), x)


@pytest.mark.parametrize("attrs, cshape", [
    ({}, (7,)), ({"transA": 1, "alpha": 0.5, "beta": 2.0}, (3, 7)), ({"transB": 1}, (1, 7)),
])
def test_gemm(attrs, cshape, rng):
    a = rand(rng, 5, 3) if attrs.get("transA") else rand(rng, 3, 5)
    b = rand(rng, 7, 5) if attrs.get("transB") else rand(rng, 5, 7)
    check(make_model("Gemm", {"a": a}, attrs, {"b": b, "c": rand(rng, *cshape)}), {"a": a})


@pytest.mark.parametrize("sa, sb, b_const", [
    ((3, 5), (5, 7), True), ((2, 3, 5), (5, 4), True), ((2, 3, 5), (2, 5, 4), False),
    ((2, 1, 3, 5), (4, 5, 2), False),
])
def test_matmul(sa, sb, b_const, rng):
    a, b = rand(rng, *sa), rand(rng, *sb)
    if b_const:
        check(make_model("MatMul", {"a": a}, consts={"b": b}), {"a": a})
    else:
        check(make_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b})


def test_attention_scores_are_one_batch_matmul_without_transpose(rng):
    """q @ k^T over (batch, heads): the transpose of k cancels against batch_matmul's layout."""
    q, k = rand(rng, 1, 3, 7, 5), rand(rng, 1, 3, 7, 5)
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        n, TensorProto.FLOAT, v.shape) for n, v in (("q", q), ("k", k))],
        [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    check(model, {"q": q, "k": k})
    live = tg.passes.remove_dead_nodes(tg.from_onnx(model))
    assert [n.op for n in live.ops] == ["reshape", "reshape", "batch_matmul", "reshape"]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"])
def test_broadcast_binary(op, rng):
    a, b = rand(rng, 2, 3, 5, low=0.1), rand(rng, 3, 1, low=0.5)
    check(make_model(op, {"a": a, "b": b}), {"a": a, "b": b}, rtol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32"])
@pytest.mark.parametrize("op", ["Add", "MatMul", "ReduceSum", "Max"])
def test_other_dtypes(op, dtype, rng):
    a = (rng.uniform(-4, 4, (3, 5))).astype(dtype)
    b = (rng.uniform(-4, 4, (5, 5) if op == "MatMul" else (1, 5))).astype(dtype)
    inputs = {"a": a} if op == "ReduceSum" else {"a": a, "b": b}
    tol = 1e-2 if dtype == "float16" else 1e-6
    check(make_model(op, inputs), inputs, rtol=tol, atol=tol)


@pytest.mark.parametrize("op, attrs", [
    ("Relu", {}), ("LeakyRelu", {"alpha": 0.3}), ("Sigmoid", {}), ("HardSigmoid", {}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.6}), ("HardSwish", {}), ("Tanh", {}), ("Erf", {}),
    ("Sqrt", {}), ("Exp", {}), ("Abs", {}), ("Neg", {}), ("Identity", {}),
])
def test_unary(op, attrs, rng):
    x = {"x": rand(rng, 3, 17, low=0.0 if op == "Sqrt" else -4.0, high=4.0)}
    check(make_model(op, x, attrs), x, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20(approximate, rng):
    x = {"x": rand(rng, 2, 19, low=-3, high=3)}
    check(make_model("Gelu", x, {"approximate": approximate}, opset=20), x)


@pytest.mark.parametrize("bounds", [(-0.5, 0.5), (None, 0.2), (0.0, 6.0)])
def test_clip(bounds, rng):
    x = {"x": rand(rng, 4, 9, low=-2, high=8)}
    consts, order = {}, ["x"]
    for name, v in zip(("lo", "hi"), bounds):
        if v is None:
            order.append("")
        else:
            consts[name] = np.array(v, "float32")
            order.append(name)
    check(make_model("Clip", x, consts=consts, order=order), x)


@pytest.mark.parametrize("to", [TensorProto.INT32, TensorProto.DOUBLE, TensorProto.FLOAT])
def test_cast(to, rng):
    x = {"x": rand(rng, 3, 7, low=-20, high=20)}
    check(make_model("Cast", x, {"to": to}), x)


def test_batch_normalization(rng):
    x = {"x": rand(rng, 2, 3, 5, 4)}
    consts = {"s": rand(rng, 3), "b": rand(rng, 3), "m": rand(rng, 3),
              "v": rand(rng, 3, low=0.5, high=2.0)}
    check(make_model("BatchNormalization", x, {"epsilon": 1e-3}, consts), x)


@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [2, 3], "ceil_mode": 1, "strides": [2, 2]}),
    ("MaxPool", {"kernel_shape": [3, 2], "auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    ("MaxPool", {"kernel_shape": [2, 2], "pads": [1, 0, 1, 1], "dilations": [2, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "count_include_pad": 1}),
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {}),
    # ceil_mode's last window would start in the bottom/right padding: it is dropped
    ("MaxPool", {"kernel_shape": [2, 2], "ceil_mode": 1, "strides": [3, 3],
                 "pads": [1, 1, 1, 1]}),
])
def test_pooling(op, attrs, rng):
    x = {"x": rand(rng, 1, 3, 9, 8)}
    check(make_model(op, x, attrs), x)
    x = {"x": rand(rng, 2, 2, 4, 7)}
    check(make_model(op, x, attrs), x)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(1, 5, 7), (2, 3, 1), (1, 2, 3, 5, 4)])
def test_global_pooling_of_sequences_and_volumes(op, shape, rng):
    x = {"x": rand(rng, *shape)}
    check(make_model(op, x, {}), x)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([-1, 0], 0), (None, 0)])
def test_reductions(op, opset, axes, keepdims, rng):
    x = {"x": rand(rng, 3, 5, 7)}
    attrs, consts = {"keepdims": keepdims}, {}
    if axes is not None:
        if op == "ReduceSum" or opset >= 18:
            consts["axes"] = np.array(axes, "int64")
        else:
            attrs["axes"] = axes
    check(make_model(op, x, attrs, consts, opset=opset), x, rtol=1e-4)


@pytest.mark.parametrize("op, attrs", [("Softmax", {"axis": 1}), ("Softmax", {}),
                                       ("LogSoftmax", {"axis": -1})])
def test_softmax(op, attrs, rng):
    x = {"x": rand(rng, 2, 5, 11, low=-5, high=5)}
    check(make_model(op, x, attrs), x)


@pytest.mark.parametrize("axis, with_bias", [(-1, True), (1, False)])
def test_layer_normalization(axis, with_bias, rng):
    x = {"x": rand(rng, 2, 3, 7)}
    norm = (3, 7) if axis == 1 else (7,)
    consts = {"s": rand(rng, *norm), **({"b": rand(rng, *norm)} if with_bias else {})}
    check(make_model("LayerNormalization", x, {"axis": axis, "epsilon": 1e-3}, consts), x,
          rtol=1e-4, atol=1e-5)


def test_shape_with_start_and_end(rng):
    x = {"x": rand(rng, 2, 3, 4, 5)}
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=-1),
             helper.make_node("Reshape", ["x", "s2"], ["y"]),
             helper.make_node("Concat", ["minus1", "s"], ["s2"], axis=0)]
    nodes = [nodes[0], nodes[2], nodes[1]]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, (2, 3, 4, 5))], [onnx.ValueInfoProto(name="y")],
        [numpy_helper.from_array(np.array([-1], "int64"), "minus1")])
    check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]), x)


def test_shape_arithmetic_folds_into_reshape(rng):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters write a flatten."""
    x = rand(rng, 2, 3, 4)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),
        helper.make_node("Flatten", ["x"], ["flat2"], axis=2),
        helper.make_node("Transpose", ["x"], ["xt"], perm=[2, 0, 1]),
        helper.make_node("Squeeze", ["u", "zero1"], ["sq"]),
        helper.make_node("Unsqueeze", ["x", "axes2"], ["u"]),
    ]
    nodes = nodes[:-2] + [nodes[-1], nodes[-2]]
    init = [numpy_helper.from_array(np.array(0, "int64"), "zero"),
            numpy_helper.from_array(np.array([0], "int64"), "zero1"),
            numpy_helper.from_array(np.array([-1], "int64"), "minus1"),
            numpy_helper.from_array(np.array([0, -1], "int64"), "axes2")]
    outs = [onnx.ValueInfoProto(name=k)
            for k in ("flat", "flat2", "xt", "sq")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, x.shape)], outs, init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    check(model, {"x": x})
    g = tg.from_onnx(model)
    assert {n.op for n in g.ops} == {"reshape", "transpose"}  # the shape ops folded away


@pytest.mark.parametrize("opset, attrs, sizes, outputs", [
    (13, {"axis": 1}, None, 3), (13, {"axis": -1}, [2, 5], 2), (18, {"num_outputs": 3}, None, 3),
])
def test_split(opset, attrs, sizes, outputs, rng):
    x = {"x": rand(rng, 7, 6, 7)}
    consts = {} if sizes is None else {"split": np.array(sizes, "int64")}
    check(make_model("Split", x, attrs, consts, outputs=outputs, opset=opset), x)


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1, 0], [4, 100], None, None), ([-1], [-100], [1], [-2]), ([0, 2], [2, 9], [2, 0], [1, 3]),
])
def test_slice(starts, ends, axes, steps, rng):
    x = {"x": rand(rng, 5, 7, 3)}
    consts = {"starts": np.array(starts, "int64"), "ends": np.array(ends, "int64")}
    order = ["x", "starts", "ends"]
    for name, v in (("axes", axes), ("steps", steps)):
        if v is not None:
            consts[name] = np.array(v, "int64")
            order.append(name)
        elif name == "axes" and steps is not None:
            order.append("")
    check(make_model("Slice", x, consts=consts, order=order), x)


@pytest.mark.parametrize("axis, indices", [(0, [[2, -1], [0, 1]]), (1, [3]), (-1, 1)])
def test_gather(axis, indices, rng):
    x = {"x": rand(rng, 4, 5, 3)}
    idx = np.array(indices, "int64")
    check(make_model("Gather", x, {"axis": axis}, {"i": idx}), x)
    check(make_model("Gather", {"x": x["x"], "i": idx}, {"axis": axis}),
          {"x": x["x"], "i": idx})


def test_concat_and_constant(rng):
    x = rand(rng, 2, 3)
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
                 rand(rng, 2, 4), "c")),
             helper.make_node("Constant", [], ["f"], value_float=2.5),
             helper.make_node("Mul", ["x", "f"], ["x2"]),
             helper.make_node("Concat", ["x2", "c", "x"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, x.shape)], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)])
    check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), {"x": x})


# -- ops of real models ------------------------------------------------------------------------


@pytest.mark.parametrize("equation, shapes, const_b", [
    ("bhid,bhjd->bhij", [(2, 3, 5, 4), (2, 3, 6, 4)], False),
    ("bhij,bhjd->bhid", [(1, 2, 5, 6), (1, 2, 6, 3)], False),
    ("ij,jk->ik", [(5, 7), (7, 3)], True),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 2)], False),
    ("bij->bj", [(2, 3, 4)], False),
    ("i,j->ij", [(3,), (5,)], False),
    ("ij,ij->i", [(4, 5), (4, 5)], False),
    ("ij,jk", [(3, 4), (4, 2)], False),
    ("ab,bc,cd->da", [(2, 3), (3, 4), (4, 5)], False),
    ("bnc,kc->bkn", [(2, 5, 3), (4, 3)], True),
])
def test_einsum(equation, shapes, const_b, rng):
    names = "abc"[:len(shapes)]
    arrays = {n: rand(rng, *sh) for n, sh in zip(names, shapes)}
    consts = {n: arrays.pop(n) for n in names[1:2]} if const_b else {}
    model = make_model("Einsum", arrays, {"equation": equation}, consts,
                       order=list(names))
    check(model, arrays, rtol=1e-4)


def test_einsum_refuses_diagonals():
    model = make_model("Einsum", {"x": np.zeros((3, 3), "float32")}, {"equation": "ii->i"})
    with pytest.raises(UnsupportedError, match=r"\(Einsum\): equation 'ii->i' takes a diagonal"):
        tg.from_onnx(model)


@pytest.mark.parametrize("op, attrs", [("DepthToSpace", {"blocksize": 2, "mode": "DCR"}),
                                       ("DepthToSpace", {"blocksize": 2, "mode": "CRD"}),
                                       ("SpaceToDepth", {"blocksize": 3})])
def test_depth_and_space(op, attrs, rng):
    x = {"x": rand(rng, 2, 8, 3, 6) if op == "DepthToSpace" else rand(rng, 1, 2, 6, 9)}
    check(make_model(op, x, attrs), x)


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
                                "ReduceLogSumExp", "ReduceProd", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("opset, axes, keepdims", [(17, [1], 1), (18, [0, 2], 0), (18, None, 1)])
def test_more_reductions(op, opset, axes, keepdims, rng):
    x = {"x": rand(rng, 3, 4, 5, low=0.5, high=1.5)}
    attrs = {"keepdims": keepdims}
    consts = {}
    if axes is not None and opset >= 18:
        consts = {"axes": np.array(axes, "int64")}
    elif axes is not None:
        attrs["axes"] = axes
    check(make_model(op, x, attrs, consts, opset=opset), x, rtol=1e-4)


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
@pytest.mark.parametrize("count", [1, 3])
def test_variadic(op, count, rng):
    shapes = [(2, 3, 4), (3, 1), (4,)][:count]
    x = {f"x{k}": rand(rng, *sh) for k, sh in enumerate(shapes)}
    check(make_model(op, x), x, rtol=1e-5)


@pytest.mark.parametrize("sa, sb", [((4,), (4, 3)), ((2, 5, 4), (4,)), ((4,), (4,))])
def test_matmul_of_vectors(sa, sb, rng):
    x = {"a": rand(rng, *sa), "b": rand(rng, *sb)}
    check(make_model("MatMul", x), x, rtol=1e-5)


@pytest.mark.parametrize("op, attrs", [
    ("Sign", {}), ("Floor", {}), ("Ceil", {}), ("Round", {}), ("Sin", {}), ("Cos", {}),
    ("Softsign", {}), ("Softplus", {}), ("Mish", {}), ("Elu", {"alpha": 0.7}), ("Selu", {}),
    ("Celu", {"alpha": 1.3}), ("ThresholdedRelu", {"alpha": 0.4}), ("IsNaN", {}),
    ("IsInf", {}), ("IsInf", {"detect_negative": 0}), ("IsInf", {"detect_positive": 0}),
])
def test_more_unary(op, attrs, rng):
    x = rand(rng, 3, 7, low=-3, high=3)
    x[0, :4] = [2.5, -0.5, 1.5, 0.0]  # ties of Round, which goes to even
    x[1, :3] = [np.nan, np.inf, -np.inf] if op.startswith("Is") else [0.25, -2.0, 3.0]
    check(make_model(op, {"x": x}, attrs, opset=18), {"x": x})


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_comparisons(op, dtype, rng):
    a = rng.integers(-2, 3, (2, 3, 4)).astype(dtype)
    b = rng.integers(-2, 3, (3, 1)).astype(dtype)
    check(make_model(op, {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("op", ["And", "Or", "Xor", "Not"])
def test_logic(op, rng):
    x = {"a": rng.random((3, 4)) < 0.5}
    if op != "Not":
        x["b"] = rng.random((4,)) < 0.5
    check(make_model(op, x), x)


@pytest.mark.parametrize("dtype, fmod", [("int64", 0), ("int32", 1), ("float32", 1)])
def test_mod_and_integer_division(dtype, fmod, rng):
    a = rng.integers(-9, 10, (3, 5)).astype(dtype)
    b = np.array([3, -4, 2, -7, 5], dtype)
    x = {"a": a, "b": b}
    check(make_model("Mod", x, {"fmod": fmod}), x, rtol=1e-6)
    if dtype != "float32":
        check(make_model("Div", x), x)


@pytest.mark.parametrize("slope_shape", [(3, 1, 1), (1,), (5,)])
def test_prelu(slope_shape, rng):
    x = {"x": rand(rng, 2, 3, 4, 5)}
    check(make_model("PRelu", x, consts={"slope": rand(rng, *slope_shape)}), x)


def test_where_broadcasts(rng):
    x = {"c": rng.random((3, 1, 4)) < 0.5, "a": rand(rng, 2, 4), "b": rand(rng, 3, 2, 1)}
    check(make_model("Where", x), x)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", [{}, {"axis": -1, "keepdims": 0}, {"axis": 1}])
def test_arg_reductions(op, attrs, rng):
    x = {"x": rand(rng, 3, 5, 4)}
    check(make_model(op, x, attrs), x)


_RESIZES = [
    ({"mode": "nearest"}, (1, 1, 2, 3), None),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, None, (7, 11)),
    ({"mode": "nearest", "nearest_mode": "round_prefer_ceil",
      "coordinate_transformation_mode": "align_corners"}, None, (3, 4)),
    ({"mode": "nearest", "nearest_mode": "ceil",
      "coordinate_transformation_mode": "tf_half_pixel_for_nn"}, None, (9, 5)),
    ({"mode": "linear"}, (1, 1, 2, 2), None),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, None, (1, 13)),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, None, (8, 9)),
    ({"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, None, (3, 4)),
    ({"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"}, None, (7, 3)),
    ({"mode": "cubic"}, None, (9, 10)),
    ({"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, None, (4, 3)),
    # To the input's own size, every option given (a position table already at its size).
    ({"mode": "cubic", "cubic_coeff_a": -0.75, "exclude_outside": 0,
      "coordinate_transformation_mode": "half_pixel"}, None, (5, 6)),
    ({"mode": "nearest", "nearest_mode": "floor", "extrapolation_value": 0.0}, (1, 1, 1, 1),
     None),
]


@pytest.mark.parametrize("attrs, scales, sizes", _RESIZES)
def test_resize(attrs, scales, sizes, rng):
    x = {"x": rand(rng, 1, 2, 5, 6)}
    consts = {"roi": np.zeros(0, "float32")}
    consts["scales"] = np.array(scales or [], "float32")
    if sizes is not None:
        consts["sizes"] = np.array([1, 2, *sizes], "int64")
    check(make_model("Resize", x, attrs, consts, opset=19), x, rtol=1e-4, atol=1e-5)


def test_resize_of_the_spatial_axes_only(rng):
    x = {"x": rand(rng, 1, 2, 4, 5)}
    consts = {"roi": np.zeros(0, "float32"), "scales": np.array([2.0, 3.0], "float32")}
    check(make_model("Resize", x, {"mode": "nearest", "axes": [2, 3]}, consts, opset=18), x)


@pytest.mark.parametrize("mode, pads, opset", [
    ("constant", [0, 1, 2, 0, 0, 2, 1, 3], 17),
    ("reflect", [0, 0, 2, 1, 0, 0, 1, 3], 17),
    ("edge", [0, 0, 3, 1, 0, 0, 1, 2], 17),
    ("wrap", [0, 0, 2, 1, 0, 0, 1, 3], 19),
    ("constant", [0, 0, -1, 2, 0, 0, 1, -2], 17),
])
def test_pad(mode, pads, opset, rng):
    x = {"x": rand(rng, 1, 2, 4, 5)}
    consts = {"pads": np.array(pads, "int64"), "value": np.array(1.5, "float32")}
    check(make_model("Pad", x, {"mode": mode}, consts, opset=opset), x)


def test_pad_of_some_axes(rng):
    x = {"x": rand(rng, 2, 3, 4)}
    consts = {"pads": np.array([1, 2, 0, 3], "int64"), "axes": np.array([-1, 0], "int64")}
    check(make_model("Pad", x, consts=consts, order=["x", "pads", "", "axes"], opset=18), x)


@pytest.mark.parametrize("upper, k", [(1, 0), (0, 0), (1, -1), (0, 2)])
def test_trilu(upper, k, rng):
    x = {"x": rand(rng, 2, 4, 5)}
    check(make_model("Trilu", x, {"upper": upper}, {"k": np.array(k, "int64")}), x)


@pytest.mark.parametrize("attrs", [{}, {"exclusive": 1}, {"reverse": 1},
                                   {"exclusive": 1, "reverse": 1}])
def test_cumsum(attrs, rng):
    x = {"x": rand(rng, 3, 5, 2)}
    check(make_model("CumSum", x, attrs, {"axis": np.array(-2, "int64")}), x, rtol=1e-5)


def test_tile_and_expand(rng):
    x = {"x": rand(rng, 3, 1, 2)}
    check(make_model("Tile", x, consts={"r": np.array([2, 3, 1], "int64")}), x)
    check(make_model("Expand", x, consts={"s": np.array([2, 1, 4, 1], "int64")}), x)


def test_instance_and_group_normalization(rng):
    x = {"x": rand(rng, 2, 6, 3, 5)}
    scale, bias = rand(rng, 6), rand(rng, 6)
    check(make_model("InstanceNormalization", x, {"epsilon": 1e-3}, {"s": scale, "b": bias}), x,
          rtol=1e-4, atol=1e-4)
    check(make_model("GroupNormalization", x, {"num_groups": 3}, {"s": scale, "b": bias},
                     opset=21), x, rtol=1e-4, atol=1e-4)
    scale, bias = rand(rng, 3), rand(rng, 3)  # opset 18: one scale per group
    check(make_model("GroupNormalization", x, {"num_groups": 3}, {"s": scale, "b": bias},
                     opset=18), x, rtol=1e-4, atol=1e-4)


def test_gathers_and_scatters(rng):
    x = {"x": rand(rng, 3, 4, 2)}
    idx = rng.integers(-3, 3, (2, 4, 2)).astype("int64")
    check(make_model("GatherElements", x, {"axis": 0}, {"i": idx}), x)
    check(make_model("GatherND", x, consts={"i": np.array([[1, -1], [0, 2]], "int64")}), x)
    check(make_model("GatherND", x, {"batch_dims": 1},
                     consts={"i": np.array([[2], [0], [3]], "int64")}), x)
    updates = {"x": x["x"], "u": rand(rng, 2, 2)}
    check(make_model("ScatterND", updates, consts={"i": np.array([[2, 1], [0, 3]], "int64")},
                     order=["x", "i", "u"]), updates)
    updates = {"x": x["x"], "u": rand(rng, 3, 1, 2)}
    check(make_model("ScatterElements", updates, {"axis": 1},
                     {"i": np.array([[[0, 3]], [[1, -1]], [[2, 2]]], "int64")},
                     order=["x", "i", "u"]), updates)


@pytest.mark.parametrize("op, attrs, wshape", [
    ("Conv", {"pads": [1, 0, 2, 1, 1, 0], "strides": [2, 1, 2]}, (5, 3, 3, 2, 3)),
    ("Conv", {"group": 3, "strides": [2, 1, 2], "auto_pad": "SAME_UPPER"}, (6, 1, 2, 3, 3)),
    ("Conv", {"dilations": [2, 1, 2], "pads": [1, 1, 1, 0, 0, 2]}, (4, 3, 2, 3, 2)),
    ("MaxPool", {"kernel_shape": [3, 2, 3], "strides": [2, 2, 1], "pads": [1, 0, 1, 1, 1, 1]},
     None),
    ("MaxPool", {"kernel_shape": [2, 2, 2], "strides": [3, 3, 3], "pads": [1, 1, 1, 1, 1, 1],
                 "ceil_mode": 1}, None),
    ("AveragePool", {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2], "pads": [1, 1, 1, 1, 1, 1],
                     "count_include_pad": 1}, None),
    ("AveragePool", {"kernel_shape": [2, 3, 3], "strides": [1, 2, 2], "pads": [0, 1, 1, 1, 1, 1]},
     None),
])
def test_volumes(op, attrs, wshape, rng):
    x = {"x": rand(rng, 1, 3, 7, 8, 9)}
    consts = {"w": rand(rng, *wshape), "b": rand(rng, wshape[0])} if wshape else {}
    check(make_model(op, x, attrs, consts), x)


@pytest.mark.parametrize("image, block, attrs", [
    ((7, 9), (2, 3), {"strides": [1, 2]}),  # overlapping patches add up
    ((6, 9), (2, 3), {"strides": [2, 3]}),  # tiling patches (MobileViT-v2's folding)
    ((5, 8), (3, 2), {"pads": [1, 0, 2, 1], "dilations": [2, 1], "strides": [1, 3]}),
    ((4, 5, 3), (2, 2, 1), {}),  # three spatial dims
])
def test_col2im(image, block, attrs, rng):
    dims = len(image)
    pads = attrs.get("pads", [0] * 2 * dims)
    counts = [(n + pads[d] + pads[d + dims] - attrs.get("dilations", [1] * dims)[d] * (k - 1)
               - 1) // attrs.get("strides", [1] * dims)[d] + 1
              for d, (n, k) in enumerate(zip(image, block))]
    x = {"x": rand(rng, 2, 3 * int(np.prod(block)), int(np.prod(counts)))}
    consts = {"image": np.array(image, "int64"), "block": np.array(block, "int64")}
    check(make_model("Col2Im", x, attrs, consts, opset=18), x)


def test_slices_of_constants_fold_with_onnx_bounds(rng):
    """Slices of shapes fold with numpy, empty ones included (Swin's exports slice a shape past
    its end and concatenate the empty result)."""
    x = rand(rng, 2, 3, 4)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "three", "big"], ["none"]),
             helper.make_node("Slice", ["s", "minus1", "small", "zero", "minus1"], ["rev"]),
             helper.make_node("Concat", ["rev", "none"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    consts = {k: np.array([v], "int64") for k, v in (("three", 3), ("big", 2 ** 63 - 1),
                                                     ("minus1", -1), ("small", -2 ** 63),
                                                     ("zero", 0))}
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, x.shape)], [onnx.ValueInfoProto(name="y")],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), {"x": x})


def test_shape_subgraphs_fold(rng):
    """A causal mask and positions built from the input's shape, as exporters write them, fold
    into constants: the graph keeps only the ops on the input."""
    x = rand(rng, 2, 5, 5)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
        helper.make_node("Range", ["zero", "n", "one"], ["pos"]),
        helper.make_node("Unsqueeze", ["pos", "one1"], ["col"]),
        helper.make_node("Less", ["pos", "col"], ["above"]),  # j > i, as a (n, n) mask
        helper.make_node("Not", ["above"], ["keep"]),
        helper.make_node("Mod", ["pos", "two"], ["odd"]),
        helper.make_node("Equal", ["odd", "one"], ["is_odd"]),
        helper.make_node("Or", ["keep", "is_odd"], ["mask"]),
        helper.make_node("Size", ["x"], ["size"]),
        helper.make_node("Cast", ["size"], ["sizef"], to=TensorProto.FLOAT),
        helper.make_node("ConstantOfShape", ["s"], ["fill"],
                         value=numpy_helper.from_array(np.array([-3.0], "float32"))),
        helper.make_node("Where", ["mask", "x", "fill"], ["masked"]),
        helper.make_node("Expand", ["sizef", "s"], ["big"]),
        helper.make_node("ScatterND", ["big", "where", "upd"], ["big2"]),
        helper.make_node("Add", ["masked", "big2"], ["y"]),
    ]
    consts = {k: np.array(v, "int64") for k, v in (("zero", 0), ("one", 1), ("one1", [1]),
                                                    ("two", 2), ("where", [[0, 1]]))}
    consts["upd"] = np.zeros((1, 5), "float32")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, x.shape)], [onnx.ValueInfoProto(name="y")],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    check(model, {"x": x})
    live = tg.passes.remove_dead_nodes(tg.from_onnx(model))
    assert sorted(n.op for n in live.ops) == ["add", "where"]


# -- errors ------------------------------------------------------------------------------------


def test_every_unsupported_op_is_reported_at_once():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 2))
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="fine"),
             helper.make_node("Det", ["a"], ["b"], name="det1"),
             helper.make_node("Unique", ["b"], ["c"], name="unique1"),
             helper.make_node("Det", ["c"], ["d"], name="det2"),
             helper.make_node("Foo", ["d"], ["y"], name="foo1", domain="com.example")]
    graph = helper.make_graph(nodes, "g", [x], [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example", 1)])
    with pytest.raises(UnsupportedError, match=r"the following operators are not implemented: "
                       r"Det \(2 nodes, first 'det1'\); Unique \(1 node, first 'unique1'\); "
                       r"com.example:Foo \(1 node, first 'foo1'\) \(ops of other domains run "
                       r"kernels given as from_onnx\(\.\.\., custom_ops=.*\)$"):
        tg.from_onnx(model)


def test_corrupt_file_is_a_value_error_naming_it(tmp_path):
    for name, data in (("garbage.onnx", b"\xff\xfe not a protobuf \x00\x01"),
                       ("empty.onnx", b"")):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(ValueError, match=f"{name}.*not a readable ONNX model"):
            tg.from_onnx(path)


def test_unsupported_attribute_names_it():
    model = make_model("Relu", {"x": np.zeros((2,), "float32")}, {"bogus": 3})
    with pytest.raises(UnsupportedError, match=r"'the_relu' \(Relu\): unsupported attribute "
                                               r"'bogus'"):
        tg.from_onnx(model)
    model = make_model("MaxPool", {"x": np.zeros((1, 1, 4, 4), "float32")},
                       {"kernel_shape": [2, 2], "storage_order": 1})
    with pytest.raises(UnsupportedError, match="storage_order"):
        tg.from_onnx(model)
    model = make_model("Gelu", {"x": np.zeros((2,), "float32")}, {"approximate": "fast"},
                       opset=20)
    with pytest.raises(UnsupportedError, match="approximate='fast'"):
        tg.from_onnx(model)


def test_pow_keeps_the_base_dtype(rng):
    x = {"x": rand(rng, 3, 4, low=0.5, high=2.0), "e": np.array([2, 3, 1, 0], "int64")}
    check(make_model("Pow", x), x)
    with pytest.raises(UnsupportedError, match="integer base with a float exponent"):
        tg.from_onnx(make_model("Pow", {"x": np.ones(3, "int32"), "e": np.ones(3, "float32")}))


def test_unsupported_outputs_are_named():
    x = {"x": np.zeros((1, 1, 4, 4), "float32")}
    with pytest.raises(UnsupportedError, match=r"\(MaxPool\): the Indices output"):
        tg.from_onnx(make_model("MaxPool", x, {"kernel_shape": [2, 2]}, outputs=2))
    with pytest.raises(UnsupportedError, match=r"\(Dropout\): output 1 \('y1'\) is not "
                                               r"supported"):
        tg.from_onnx(make_model("Dropout", x, outputs=2))
    with pytest.raises(UnsupportedError, match="training_mode=1"):
        consts = {k: np.ones(1, "float32") for k in "sbmv"}
        tg.from_onnx(make_model("BatchNormalization", x, {"training_mode": 1}, consts))


def test_unsupported_dtype_and_opset_and_shapes():
    x = helper.make_tensor_value_info("x", TensorProto.BFLOAT16, (2, 2))
    y = onnx.ValueInfoProto(name="y")
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    with pytest.raises(TypeError, match="input 'x': unsupported dtype BFLOAT16"):
        tg.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(TypeError, match=r"\(Cast\).*unsupported dtype STRING"):
        tg.from_onnx(make_model("Cast", {"x": np.zeros((2,), "float32")},
                                {"to": TensorProto.STRING}))
    with pytest.raises(ValueError, match="opset is 11"):
        tg.from_onnx(make_model("Relu", {"x": np.zeros((2,), "float32")}, opset=11))
    sym = helper.make_tensor_value_info("x", TensorProto.FLOAT, ("batch", 3))
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [sym], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert str(tg.from_onnx(model).inputs[0].shape[0]) == "batch"  # kept symbolic
    g = tg.from_onnx(model, shapes={"x": (2, 3)})
    assert g.inputs[0].shape == (2, 3)
    with pytest.raises(ValueError, match=r"shapes gives \(2, 4\) for an input declared "
                                          r"\['batch', 3\]"):
        tg.from_onnx(model, shapes={"x": (2, 4)})
    with pytest.raises(ValueError, match=r"shapes names \['y'\], which are not inputs"):
        tg.from_onnx(model, shapes={"x": (2, 3), "y": (1,)})
    with pytest.raises(TypeError, match="ModelProto"):
        tg.from_onnx(42)


def test_non_constant_attribute_input_is_rejected(rng):
    x = {"x": rand(rng, 2, 3), "shape": np.array([3, 2], "int64")}
    with pytest.raises(UnsupportedError, match=r"\(Reshape\): input 'shape' must be a constant"):
        tg.from_onnx(make_model("Reshape", x))


def test_from_onnx_reads_a_file(tmp_path, rng):
    x = {"x": rand(rng, 2, 3)}
    path = tmp_path / "relu.onnx"
    onnx.save(make_model("Relu", x), str(path))
    check(onnx.load(str(path)), x)
    assert tg.from_onnx(path).inputs[0].shape == (2, 3)
