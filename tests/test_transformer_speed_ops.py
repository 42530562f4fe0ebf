"""The kernels transformers spend their time in, scheduled for speed: row-wise normalisations
(softmax, log_softmax, layer_norm, RMSNorm's mean) one row at a time with the statistics in
vector lanes, checked against numpy on awkward shapes and on the AVX2 target too."""

from __future__ import annotations

import numpy as np
import pytest
from topi_check import assert_close, run_op, uniform

import tensorlang as tl
from topi import nn, x86
from topi import testing as ref
from topi.x86.rows import schedule_rows

TARGETS = ["llvm", "llvm -mcpu=haswell"]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape", [(1, 4, 13, 128), (3, 17), (2, 7, 37), (5, 1), (1, 16), (2, 9)])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_rows(shape, op, target, rng):
    x = tl.placeholder(shape, name="x")
    a = (uniform(rng, *shape) * 50).astype("float32")  # large values: needs the max shift
    with tl.Target(target):
        out = getattr(nn, op)(x, -1)
        assert_close(run_op(out, [x], [a], x86.schedule_softmax),
                     getattr(ref, f"{op}_python")(a, -1))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,axis", [((1, 128, 256), -1), ((3, 19), -1), ((2, 3, 37), (1, 2)),
                                        ((1, 1, 5), -1)])
def test_layer_norm_rows(shape, axis, target, rng):
    axes = [axis] if isinstance(axis, int) else list(axis)
    norm_shape = tuple(shape[a] for a in axes)
    x = tl.placeholder(shape, name="x")
    gamma, beta = tl.placeholder(norm_shape, name="gamma"), tl.placeholder(norm_shape, name="beta")
    arrays = [uniform(rng, *shape) * 3 + 1, uniform(rng, *norm_shape), uniform(rng, *norm_shape)]
    with tl.Target(target):
        out = nn.layer_norm(x, gamma, beta, axis)
        assert_close(run_op(out, [x, gamma, beta], arrays, x86.schedule_layer_norm),
                     ref.layer_norm_python(*arrays, axis))


@pytest.mark.parametrize("shape", [(1, 29, 67), (2, 128, 256)])
def test_rms_norm_mean_rows(shape, rng):
    """RMSNorm's statistic as exported: mean(x * x, axis=-1, keepdims) + eps, then rsqrt."""
    x = tl.placeholder(shape, name="x")
    square = nn.multiply(x, x)
    mean = nn.mean(square, axis=-1, keepdims=True)
    out = tl.compute(mean.shape, lambda *i: tl.rsqrt(mean[i] + tl.const(1e-6, "float32")))
    a = uniform(rng, *shape)
    assert schedule_rows([out]) is not None
    expected = 1 / np.sqrt((a.astype("float64") ** 2).mean(-1, keepdims=True) + 1e-6)
    assert_close(run_op(out, [x], [a], x86.schedule_reduce), expected.astype("float32"))


@pytest.mark.parametrize("shape", [(1, 16, 197, 197), (3, 40, 37), (2, 61, 300)])
def test_a_sum_over_rows_as_the_output(shape, rng):
    """The kernel's output is the reduction itself (ConViT's attention sums): its partials in
    vector lanes are factored out before its rows are split into parallel chunks."""
    x = tl.placeholder(shape, name="x")
    out = nn.sum(x, axis=-1, keepdims=True)
    a = uniform(rng, *shape)
    assert schedule_rows([out]) is not None
    expected = a.astype("float64").sum(-1, keepdims=True)
    assert_close(run_op(out, [x], [a], x86.schedule_reduce), expected.astype("float32"))


def test_softmax_statistics_per_row():
    """Each row's max and sum are computed inside the row loop, one value at a time (under the
    fused parallel loop of (heads, row chunks) too), not as whole passes over the tensor."""
    x = tl.placeholder((1, 4, 128, 128), name="x")
    out = nn.softmax(x, -1)
    text = str(tl.lower(x86.schedule_softmax([out]), [x, out]))
    assert "softmax_maxelem = allocate((1, 1, 1,)" in text
    assert "softmax_expsum = allocate((1, 1, 1,)" in text
    assert "ramp(" in text and ", 128, 16)" not in text  # no reads strided by a row


def test_softmax_on_other_axis_keeps_the_generic_schedule(rng):
    """Not a trailing-axis reduction: no row schedule, and still right."""
    x = tl.placeholder((3, 19, 5), name="x")
    out = nn.softmax(x, 1)
    assert schedule_rows([out]) is None
    a = uniform(rng, 3, 19, 5) * 20
    assert_close(run_op(out, [x], [a], x86.schedule_softmax), ref.softmax_python(a, 1))


def _linear_model(rows: int, k: int, n: int, rng: np.random.Generator):
    """ONNX: x (1, rows, k) -> MatMul -> Add bias -> Relu -> MatMul -> Add bias -> Add the
    Relu's output (a residual from rows of the same shape) -> Mul by a scalar."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    def const(name: str, *shape: int):
        return numpy_helper.from_array(uniform(rng, *shape), name)

    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]),
             helper.make_node("Add", ["m1", "b1"], ["l1"]),
             helper.make_node("Relu", ["l1"], ["r1"]),
             helper.make_node("MatMul", ["r1", "w2"], ["m2"]),
             helper.make_node("Add", ["b2", "m2"], ["l2"]),
             helper.make_node("Add", ["l2", "r1"], ["res"]),
             helper.make_node("Mul", ["res", "half"], ["y"])]
    inits = [const("w1", k, n), const("b1", n), const("w2", n, n), const("b2", 1, 1, n),
             numpy_helper.from_array(np.array(0.5, "float32"), "half")]
    graph = helper.make_graph(nodes, "linear", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, rows, k])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, rows, n])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("rows,k,n", [(13, 7, 19), (128, 64, 48)])
def test_linear_epilogues_fuse_across_the_row_reshape(rows, k, n, rng):
    """A 3-D MatMul is imported as a dense over folded rows; its bias, activation, residual
    and scaling are computed on the rows, so they fuse into the dense kernels (the first
    dense reads the 3-D input through its row reshape: fold_gemm_permutes)."""
    ort = pytest.importorskip("onnxruntime")
    import topi.graph as tg
    from topi.graph.passes import optimize

    model = _linear_model(rows, k, n, rng)
    g = tg.from_onnx(model)
    fused = [sorted(n.op for n in node.body.ops) for node in optimize(g).ops
             if node.body is not None]
    assert ["add", "dense", "relu", "reshape"] in fused
    assert ["add", "add", "dense", "multiply"] in fused
    x = uniform(rng, 1, rows, k)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    assert_close(tg.build(g)(x=x)[0], expected, k * n)


def test_masked_softmax_rows(rng):
    """A mask of the dtype's most negative value (causal attention): masked scores get ~0 and
    the rest a softmax of their own, as in numpy."""
    shape = (2, 19, 37)
    x = tl.placeholder(shape, name="x")
    a = uniform(rng, *shape) * 10
    a[..., ::3] = np.finfo("float32").min
    a[0, 0, :] = np.finfo("float32").min  # a row masked whole: uniform, as numpy gives
    for op in ("softmax", "log_softmax"):
        out = getattr(nn, op)(x, -1)
        got = run_op(out, [x], [a], x86.schedule_softmax)
        expected = getattr(ref, f"{op}_python")(a, -1)
        if op == "softmax":
            assert_close(got, expected)
        else:  # log of a floored exp: -87 - log(sum) where numpy has -3.4e38
            live = expected > -1e30
            assert_close(got[live], expected[live])
            assert (got[~live] < -80).all()


@pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5])
def test_small_integer_powers_import_as_products(exponent, rng):
    """Pow by a constant 2 or 3 becomes multiplies (exact, and no libm pow call per lane of a
    negative base); other exponents stay a power."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    import topi.graph as tg

    graph = helper.make_graph(
        [helper.make_node("Pow", ["x", "e"], ["y"])], "pow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 17])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 17])],
        [numpy_helper.from_array(np.array(exponent, "float32"), "e")])
    g = tg.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    ops = {n.op for n in g.ops}
    assert ops == ({"power"} if exponent == 0.5 else {"multiply"})
    x = uniform(rng, 3, 17) + (1.0 if exponent == 0.5 else 0.0)
    assert_close(tg.build(g)(x=x)[0], x.astype("float64") ** exponent)
