"""Every topi op against its numpy reference on awkward shapes, with its default x86 schedule,
alone and with a fused elementwise tail; and argument checking."""

from __future__ import annotations

import numpy as np
import pytest
from topi_check import assert_close, dense_case, run_op, uniform

import tensorlang as tl
import topi
from topi import nn, x86
from topi import testing as ref

# Untuned templates warn once per workload; these tests run them untuned on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CONV_CASES = [
    # N, C, H, W, K, R, S, stride, padding, dilation
    (1, 3, 17, 17, 7, 1, 1, 1, 0, 1),
    (2, 5, 9, 11, 20, 3, 3, 2, 1, 2),
    (1, 19, 13, 13, 33, 3, 3, 1, "SAME", 1),
    (1, 16, 10, 10, 16, 3, 3, 2, (1, 2, 2, 1), 1),
    (1, 8, 7, 7, 17, 5, 3, (2, 1), (2, 1), (1, 2)),
    (3, 4, 6, 6, 5, 2, 2, 1, "VALID", 1),
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("tail", ["none", "bias_relu"])
def test_conv2d_nchw(case, tail, rng):
    n, c, h, w, k, r, s, stride, padding, dilation = case
    data = tl.placeholder((n, c, h, w), name="data")
    kernel = tl.placeholder((k, c, r, s), name="kernel")
    out = nn.conv2d_nchw(data, kernel, stride, padding, dilation)
    inputs, arrays = [data, kernel], [uniform(rng, n, c, h, w), uniform(rng, k, c, r, s)]
    expected = ref.conv2d_nchw_python(*arrays, stride, padding, dilation)
    if tail == "bias_relu":
        bias = tl.placeholder((k,), name="bias")
        out = nn.relu(nn.bias_add(out, bias))
        inputs.append(bias)
        arrays.append(uniform(rng, k))
        expected = ref.relu_python(ref.bias_add_python(expected, arrays[2]))
    assert_close(run_op(out, inputs, arrays, x86.schedule_conv2d_nchw), expected, c * r * s)


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_nhwc(case, rng):
    n, c, h, w, k, r, s, stride, padding, dilation = case
    data = tl.placeholder((n, h, w, c), name="data")
    kernel = tl.placeholder((r, s, c, k), name="kernel")
    out = nn.relu(nn.conv2d_nhwc(data, kernel, stride, padding, dilation))
    arrays = [uniform(rng, n, h, w, c), uniform(rng, r, s, c, k)]
    expected = ref.relu_python(ref.conv2d_nhwc_python(*arrays, stride, padding, dilation))
    assert_close(run_op(out, [data, kernel], arrays, x86.schedule_conv2d_nhwc), expected,
                 c * r * s)


@pytest.mark.parametrize("case", [
    (1, 5, 9, 9, 1, 3, 1, 1, 1), (2, 3, 13, 11, 2, 5, 2, "SAME", 2), (1, 17, 7, 7, 1, 3, 2,
                                                                         "VALID", 1)])
@pytest.mark.parametrize("fused", [False, True])
def test_depthwise_conv2d_nchw(case, fused, rng):
    n, c, h, w, m, r, stride, padding, dilation = case
    data = tl.placeholder((n, c, h, w), name="data")
    kernel = tl.placeholder((c, m, r, r), name="kernel")
    out = nn.depthwise_conv2d_nchw(data, kernel, stride, padding, dilation)
    arrays = [uniform(rng, n, c, h, w), uniform(rng, c, m, r, r)]
    expected = ref.depthwise_conv2d_nchw_python(*arrays, stride, padding, dilation)
    if fused:
        out, expected = nn.relu(out), ref.relu_python(expected)
    assert_close(run_op(out, [data, kernel], arrays, x86.schedule_depthwise_conv2d_nchw),
                 expected, r * r)


@pytest.mark.parametrize("groups", [1, 2, 3])
def test_group_conv2d_nchw(groups, rng):
    data = tl.placeholder((2, 6, 9, 8), name="data")
    kernel = tl.placeholder((12, 6 // groups, 3, 3), name="kernel")
    out = nn.group_conv2d_nchw(data, kernel, 2, 1, 1, groups)
    arrays = [uniform(rng, 2, 6, 9, 8), uniform(rng, 12, 6 // groups, 3, 3)]
    expected = ref.group_conv2d_nchw_python(*arrays, 2, 1, 1, groups)
    assert_close(run_op(out, [data, kernel], arrays, x86.schedule_group_conv2d_nchw), expected, 54)


@pytest.mark.parametrize("m,k,n", [(1, 7, 5), (13, 33, 47), (2, 64, 100)])
@pytest.mark.parametrize("tail", ["none", "bias", "bias_relu"])
def test_dense(m, k, n, tail, rng):
    out, inputs, arrays, expected = dense_case(rng, m, k, n, tail)
    assert_close(run_op(out, inputs, arrays, x86.schedule_dense), expected, k)


@pytest.mark.parametrize("sa,sb,ta,tb", [
    ((7, 5), (5, 19), False, False), ((5, 7), (19, 5), True, True), ((33, 17), (40, 17), False, True),
    ((3, 4, 5), (1, 5, 6), False, False), ((2, 3, 4, 5), (3, 6, 5), False, True),
])
def test_matmul(sa, sb, ta, tb, rng):
    a, b = tl.placeholder(sa, name="a"), tl.placeholder(sb, name="b")
    arrays = [uniform(rng, *sa), uniform(rng, *sb)]
    out = nn.matmul(a, b, ta, tb)
    assert_close(run_op(out, [a, b], arrays, x86.schedule_matmul),
                 ref.matmul_python(*arrays, ta, tb), 20)


@pytest.mark.parametrize("bx,by", [(1, 1), (3, 1), (1, 3), (4, 4)])
def test_batch_matmul(bx, by, rng):
    x, y = tl.placeholder((bx, 9, 20), name="x"), tl.placeholder((by, 17, 20), name="y")
    arrays = [uniform(rng, bx, 9, 20), uniform(rng, by, 17, 20)]
    out = nn.batch_matmul(x, y)
    assert_close(run_op(out, [x, y], arrays, x86.schedule_batch_matmul),
                 ref.batch_matmul_python(*arrays), 20)


def test_batch_matmul_dynamic(rng):
    b, k = tl.var("b"), tl.var("k")
    x = tl.placeholder((b, tl.var("m"), k), name="x")
    y = tl.placeholder((b, tl.var("n"), k), name="y")
    out = nn.batch_matmul(x, y)
    f = tl.build(x86.schedule_batch_matmul(out), [x, y, out])
    for b, m, n, k in [(1, 3, 5, 7), (5, 16, 20, 32)]:
        xa, ya = uniform(rng, b, m, k), uniform(rng, b, n, k)
        result = np.zeros((b, m, n), "float32")
        f(xa, ya, result)
        assert_close(result, ref.batch_matmul_python(xa, ya), k)


POOL_CASES = [
    # shape NCHW, kernel, stride, dilation, padding, ceil_mode, count_include_pad
    ((1, 3, 13, 13), 3, 2, 1, 1, False, True),
    ((2, 5, 12, 11), (2, 3), (2, 1), (1, 2), (0, 1, 2, 1), True, False),
    ((1, 4, 9, 9), 3, 3, 2, (1, 0, 2, 2), True, True),
]


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_pool2d(case, pool_type, layout, rng):
    shape, kernel, stride, dilation, padding, ceil_mode, include = case
    if layout == "NHWC":
        shape = (shape[0], shape[2], shape[3], shape[1])
    data = tl.placeholder(shape, name="data")
    arrays = [uniform(rng, *shape)]
    out = nn.pool2d(data, kernel, stride, dilation, padding, pool_type, ceil_mode, layout, include)
    expected = ref.pool2d_python(arrays[0], kernel, stride, dilation, padding, pool_type,
                                 ceil_mode, layout, include)
    assert_close(run_op(out, [data], arrays, x86.schedule_pool), expected)


def test_max_avg_pool2d_wrappers(rng):
    data = tl.placeholder((1, 2, 7, 7), name="data")
    a = uniform(rng, 1, 2, 7, 7)
    out = nn.max_pool2d(data, 3, 2, 1)
    assert_close(run_op(out, [data], [a], x86.schedule_max_pool2d),
                 ref.max_pool2d_python(a, 3, 2, 1))
    out = nn.avg_pool2d(data, 3, 2, 1, count_include_pad=False)
    assert_close(run_op(out, [data], [a], x86.schedule_avg_pool2d),
                 ref.avg_pool2d_python(a, 3, 2, 1, count_include_pad=False))


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_global_pool2d(pool_type, layout, rng):
    shape = (2, 19, 5, 3) if layout == "NCHW" else (2, 5, 3, 19)
    data = tl.placeholder(shape, name="data")
    a = uniform(rng, *shape)
    out = nn.relu(nn.global_pool2d(data, pool_type, layout))
    expected = ref.relu_python(ref.global_pool2d_python(a, pool_type, layout))
    assert_close(run_op(out, [data], [a], x86.schedule_global_pool), expected)


@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 17), 1), ((3, 17), 0), ((2, 5, 33), 1)])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(shape, axis, op, rng):
    x = tl.placeholder(shape, name="x")
    a = (uniform(rng, *shape) * 50).astype("float32")  # large values: needs the max shift
    out = getattr(nn, op)(x, axis)
    assert_close(run_op(out, [x], [a], x86.schedule_softmax),
                 getattr(ref, f"{op}_python")(a, axis))


@pytest.mark.parametrize("shape,axis", [((4, 19), -1), ((2, 3, 5), (1, 2)), ((6, 5), 0)])
def test_layer_norm(shape, axis, rng):
    axes = [axis] if isinstance(axis, int) else list(axis)
    norm_shape = tuple(shape[a] for a in axes)
    x = tl.placeholder(shape, name="x")
    gamma, beta = tl.placeholder(norm_shape, name="gamma"), tl.placeholder(norm_shape, name="beta")
    arrays = [uniform(rng, *shape), uniform(rng, *norm_shape), uniform(rng, *norm_shape)]
    out = nn.layer_norm(x, gamma, beta, axis)
    assert_close(run_op(out, [x, gamma, beta], arrays, x86.schedule_layer_norm),
                 ref.layer_norm_python(*arrays, axis))


@pytest.mark.parametrize("op", ["relu", "gelu", "leaky_relu"])
def test_activations(op, rng):
    x = tl.placeholder((3, 37), name="x")
    a = uniform(rng, 3, 37) * 3
    args = (0.1,) if op == "leaky_relu" else ()
    out = getattr(nn, op)(x, *args)
    assert_close(run_op(out, [x], [a], getattr(x86, f"schedule_{op}")),
                 getattr(ref, f"{op}_python")(a, *args))


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide"])
@pytest.mark.parametrize("sa,sb", [((4, 1, 5), (3, 1)), ((17,), (2, 17)), ((2, 3), ())])
def test_broadcast_binary(op, sa, sb, rng):
    a = tl.placeholder(sa, name="a")
    av = uniform(rng, *sa)
    if sb == ():
        out = getattr(nn, op)(a, 1.5)
        expected = getattr(ref, f"{op}_python")(av, np.float32(1.5))
        inputs, arrays = [a], [av]
    else:
        b = tl.placeholder(sb, name="b")
        bv = uniform(rng, *sb) + 3  # away from zero for divide
        out = getattr(nn, op)(a, b)
        expected = getattr(ref, f"{op}_python")(av, bv)
        inputs, arrays = [a, b], [av, bv]
    assert_close(run_op(out, inputs, arrays, x86.schedule_broadcast), expected)


def test_bias_add_and_batch_norm(rng):
    x = tl.placeholder((2, 7, 3, 5), name="x")
    vecs = [tl.placeholder((7,), name=n) for n in ("gamma", "beta", "mean", "var")]
    xa = uniform(rng, 2, 7, 3, 5)
    va = [uniform(rng, 7), uniform(rng, 7), uniform(rng, 7), uniform(rng, 7) + 2]
    out = nn.batch_norm_inference(x, *vecs)
    assert_close(run_op(out, [x, *vecs], [xa, *va], x86.schedule_batch_norm_inference),
                 ref.batch_norm_inference_python(xa, *va))
    out = nn.bias_add(x, vecs[0])
    assert_close(run_op(out, [x, vecs[0]], [xa, va[0]], x86.schedule_bias_add),
                 ref.bias_add_python(xa, va[0]))


def test_data_movement(rng):
    x = tl.placeholder((2, 3, 5), name="x")
    y = tl.placeholder((2, 4, 5), name="y")
    xa, ya = uniform(rng, 2, 3, 5), uniform(rng, 2, 4, 5)
    cases = [
        (nn.pad(x, (0, 1, 2), (1, 0, 3), 0.5), [x], [xa],
         ref.pad_python(xa, (0, 1, 2), (1, 0, 3), 0.5)),
        (nn.reshape(x, (5, -1)), [x], [xa], ref.reshape_python(xa, (5, -1))),
        (nn.transpose(x, (2, 0, 1)), [x], [xa], ref.transpose_python(xa, (2, 0, 1))),
        (nn.transpose(x), [x], [xa], ref.transpose_python(xa)),
        (nn.concatenate([x, y, x], 1), [x, y], [xa, ya], ref.concatenate_python([xa, ya, xa], 1)),
    ]
    for out, inputs, arrays, expected in cases:
        np.testing.assert_array_equal(run_op(out, inputs, arrays, x86.schedule_injective),
                                      expected)


def test_fused_injective_chain(rng):
    """pad -> add -> relu -> transpose in one schedule: intermediates are inlined."""
    x = tl.placeholder((3, 4), name="x")
    out = nn.transpose(nn.relu(nn.add(nn.pad(x, (1, 0), (0, 2)), 0.25)))
    s = x86.schedule_injective(out)
    text = str(tl.lower(s, [x, out]))
    assert "allocate" not in text
    xa = uniform(rng, 3, 4)
    expected = np.maximum(np.pad(xa, ((1, 0), (0, 2))) + 0.25, 0).T
    assert_close(run_op(out, [x], [xa], s=s), expected)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_elementwise_outputs_smaller_than_l2_stay_on_one_thread(target, rng):
    """Waking the thread pool costs more than adding two L2-sized tensors on one core: a small
    broadcast add runs as plain nested loops, one at least the target's L2 in parallel."""
    with tl.Target(target):
        l2_floats = tl.Target.current().caches.l2 // 4
        for shape, parallel in [((1, 13, 7, 29), False), ((l2_floats // 31 + 1, 31), True)]:
            a = tl.placeholder(shape, name="a")
            b = tl.placeholder((shape[-2], 1), name="b")
            out = nn.relu(nn.add(a, b))
            s = x86.schedule_injective(out)
            text = str(tl.lower(s, [a, b, out]))
            assert ("# parallel" in text) is parallel, text
            av, bv = uniform(rng, *shape), uniform(rng, shape[-2], 1)
            assert_close(run_op(out, [a, b], [av, bv], s=s), np.maximum(av + bv, 0))


def test_top_level_exports():
    assert topi.nn.conv2d_nchw is nn.conv2d_nchw
    for name in topi.x86.__all__:
        assert hasattr(topi.x86, name)


@pytest.mark.parametrize("call,error", [
    (lambda d, k: nn.conv2d_nchw(d, k, 0, 1), ValueError),
    (lambda d, k: nn.conv2d_nchw(d, k, 1, "FULL"), ValueError),
    (lambda d, k: nn.conv2d_nchw(d, k, 1, (1, 2, 3)), TypeError),
    (lambda d, k: nn.conv2d_nchw(d, tl.placeholder((6, 5, 3, 3)), 1, 1), ValueError),
    (lambda d, k: nn.conv2d_nchw(d, k, 1.5, 1), TypeError),
    (lambda d, k: nn.conv2d_nchw("data", k, 1, 1), TypeError),
    (lambda d, k: nn.conv2d_nchw(d, k, 1, 0, dilation=9), ValueError),
    (lambda d, k: nn.group_conv2d_nchw(d, k, 1, 1, 1, 5), ValueError),
    (lambda d, k: nn.dense(d, k), ValueError),
    (lambda d, k: nn.softmax(d, axis=4), ValueError),
    (lambda d, k: nn.reshape(d, (7, -1)), ValueError),
    (lambda d, k: nn.transpose(d, (0, 0, 1, 2)), ValueError),
    (lambda d, k: nn.add(d, k), ValueError),
    (lambda d, k: nn.pool2d(d, 2, 2, 1, 0, "min"), ValueError),
    (lambda d, k: nn.max_pool2d(d, 2, 2, "SAME"), TypeError),
    (lambda d, k: nn.bias_add(d, k), ValueError),
])
def test_bad_arguments(call, error):
    d = tl.placeholder((1, 4, 8, 8), name="d")
    k = tl.placeholder((6, 4, 3, 3), name="k")
    with pytest.raises(error):
        call(d, k)
