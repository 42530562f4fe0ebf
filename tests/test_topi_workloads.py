"""The operator cases of Apache TVM's own TOPI tests (tvm_topi_workloads.json, v0.19.0) against
numpy, with the default x86 schedules and the semantics each test applied (bias, relu, ...).

Every case of every list whose operator topi has runs, on every machine: the lists of conv2d
(NCHW, NHWC), depthwise conv2d (NCHW), dense, batch_matmul, matmul, pooling (2-D and global) and
softmax/log_softmax. The JSON lives in the shared folder beside the repository (`../shared/`);
without it the module fails rather than skipping, so a run never checks less than it claims.
Lists of operators topi does not have yet (conv2d_NCHWc, depthwise NHWC/NCHWc, pool1d/pool3d,
pool2d_grad, adaptive_pool, tensordot) are not run; `NO_OPERATOR_YET` at the end names them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from topi_check import assert_close, run_op, uniform

import tensorlang as tl
from topi import nn, x86
from topi import testing as ref

_REPO = Path(__file__).resolve().parent.parent
_CANDIDATES = [
    _REPO / "tests" / "data" / "tvm_topi_workloads.json",
    _REPO.parent / "shared" / "tvm_topi_workloads.json",
    Path("/work/shared/tvm_topi_workloads.json"),
]
_PATH = next((p for p in _CANDIDATES if p.exists()), None)
if _PATH is None:
    raise FileNotFoundError(
        "tvm_topi_workloads.json not found in any of: " + ", ".join(map(str, _CANDIDATES)))
_DATA = json.loads(_PATH.read_text())
# Untuned templates warn once per workload; these tests run them untuned on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def cases(op: str) -> list:
    """Every case of `op`'s list (failing when the list is missing or empty)."""
    items = _DATA[op]["cases"]
    assert items, f"the workload list {op} is empty"
    return items


def _padding(p):
    return tuple(p) if isinstance(p, list) else p


@pytest.mark.parametrize("case", cases("conv2d_nchw"))
def test_conv2d_nchw(case, rng):
    n, c, size, k, r, stride, padding, dilation, add_bias, apply_relu = case
    padding = _padding(padding)
    data = tl.placeholder((n, c, size, size), name="data")
    kernel = tl.placeholder((k, c, r, r), name="kernel")
    arrays = [uniform(rng, n, c, size, size), uniform(rng, k, c, r, r)]
    inputs = [data, kernel]
    out = nn.conv2d_nchw(data, kernel, stride, padding, dilation)
    expected = ref.conv2d_nchw_python(*arrays, stride, padding, dilation)
    if add_bias:
        bias = tl.placeholder((k, 1, 1), name="bias")
        out = nn.add(out, bias)
        inputs.append(bias)
        arrays.append(uniform(rng, k, 1, 1))
        expected = expected + arrays[2]
    if apply_relu:
        out, expected = nn.relu(out), ref.relu_python(expected)
    assert_close(run_op(out, inputs, arrays, x86.schedule_conv2d_nchw), expected, c * r * r)


@pytest.mark.parametrize("case", cases("depthwise_conv2d_nchw"))
def test_depthwise_conv2d_nchw(case, rng):
    n, c, size, m, r, stride, padding, dilation, scale_shift, apply_relu = case
    data = tl.placeholder((n, c, size, size), name="data")
    kernel = tl.placeholder((c, m, r, r), name="kernel")
    arrays = [uniform(rng, n, c, size, size), uniform(rng, c, m, r, r)]
    inputs = [data, kernel]
    out = nn.depthwise_conv2d_nchw(data, kernel, stride, padding, dilation)
    expected = ref.depthwise_conv2d_nchw_python(*arrays, stride, padding, dilation)
    if scale_shift:
        scale, shift = tl.placeholder((c * m,), name="scale"), tl.placeholder((c * m,),
                                                                              name="shift")
        out = nn.bias_add(nn.multiply(out, nn.reshape(scale, (c * m, 1, 1))), shift)
        inputs += [scale, shift]
        arrays += [uniform(rng, c * m), uniform(rng, c * m)]
        expected = ref.bias_add_python(expected * arrays[2][:, None, None], arrays[3])
    if apply_relu:
        out, expected = nn.relu(out), ref.relu_python(expected)
    assert_close(run_op(out, inputs, arrays, x86.schedule_depthwise_conv2d_nchw), expected, r * r)


@pytest.mark.parametrize("case", cases("conv2d_nhwc"))
def test_conv2d_nhwc(case, rng):
    n, c, size, k, r, stride, padding, dilation = case
    padding = _padding(padding)
    data = tl.placeholder((n, size, size, c), name="data")
    kernel = tl.placeholder((r, r, c, k), name="kernel")
    arrays = [uniform(rng, n, size, size, c), uniform(rng, r, r, c, k)]
    out = nn.conv2d_nhwc(data, kernel, stride, padding, dilation)
    expected = ref.conv2d_nhwc_python(*arrays, stride, padding, dilation)
    assert_close(run_op(out, [data, kernel], arrays, x86.schedule_conv2d_nhwc), expected,
                 c * r * r)


@pytest.mark.parametrize("case", cases("dense"))
def test_dense(case, rng):
    m, k, n, use_bias = case
    data, weight = tl.placeholder((m, k), name="data"), tl.placeholder((n, k), name="weight")
    inputs, arrays = [data, weight], [uniform(rng, m, k), uniform(rng, n, k)]
    bias = None
    if use_bias:
        bias = tl.placeholder((n,), name="bias")
        inputs.append(bias)
        arrays.append(uniform(rng, n))
    out = nn.relu(nn.dense(data, weight, bias))  # the TVM test always applies relu
    assert_close(run_op(out, inputs, arrays, x86.schedule_dense),
                 ref.relu_python(ref.dense_python(*arrays)), k)


@pytest.mark.parametrize("case", cases("batch_matmul"))
def test_batch_matmul(case, rng):
    xb, yb, m, n, k, dynamic = case
    if dynamic:
        b, kv = tl.var("b"), tl.var("k")
        x = tl.placeholder((b, tl.var("m"), kv), name="x")
        y = tl.placeholder((b, tl.var("n"), kv), name="y")
    else:
        x, y = tl.placeholder((xb, m, k), name="x"), tl.placeholder((yb, n, k), name="y")
    out = nn.batch_matmul(x, y)
    f = tl.build(x86.schedule_batch_matmul(out), [x, y, out])
    xa, ya = uniform(rng, xb, m, k), uniform(rng, yb, n, k)
    result = np.zeros((max(xb, yb), m, n), "float32")
    f(xa, ya, result)
    assert_close(result, ref.batch_matmul_python(xa, ya), k)


@pytest.mark.parametrize("case", cases("matmul") + [[*c, False] for c in cases("matmul_2d")])
def test_matmul(case, rng):
    sa, sb, ta, tb, use_bias = case
    a, b = tl.placeholder(sa, name="a"), tl.placeholder(sb, name="b")
    inputs, arrays = [a, b], [uniform(rng, *sa), uniform(rng, *sb)]
    bias = None
    if use_bias:
        n = sb[-2] if tb else sb[-1]
        bias = tl.placeholder((n,), name="bias")
        inputs.append(bias)
        arrays.append(uniform(rng, n))
    out = nn.matmul(a, b, ta, tb, bias)
    assert_close(run_op(out, inputs, arrays, x86.schedule_matmul),
                 ref.matmul_python(*arrays[:2], ta, tb, arrays[2] if use_bias else None), 8)


@pytest.mark.parametrize("case", cases("pool2d"))
def test_pool2d(case, rng):
    shape, kernel, stride, dilation, padding, pool_type, ceil_mode, include, layout = case
    data = tl.placeholder(tuple(shape), name="data")
    a = uniform(rng, *shape)
    out = nn.relu(nn.pool2d(data, kernel, stride, dilation, padding, pool_type, ceil_mode,
                            layout, include))
    expected = ref.relu_python(ref.pool2d_python(a, kernel, stride, dilation, padding, pool_type,
                                                 ceil_mode, layout, include))
    assert_close(run_op(out, [data], [a], x86.schedule_pool), expected)


@pytest.mark.parametrize("case", cases("global_pool2d"))
def test_global_pool2d(case, rng):
    shape, pool_type, layout = case
    data = tl.placeholder(tuple(shape), name="data")
    a = uniform(rng, *shape)
    out = nn.relu(nn.global_pool2d(data, pool_type, layout))
    assert_close(run_op(out, [data], [a], x86.schedule_global_pool),
                 ref.relu_python(ref.global_pool2d_python(a, pool_type, layout)))


@pytest.mark.parametrize("op,case", [("softmax", c) for c in cases("softmax")]
                         + [("log_softmax", c) for c in cases("log_softmax")])
def test_softmax(op, case, rng):
    shape, axis = case
    x = tl.placeholder(tuple(shape), name="x")
    a = uniform(rng, *shape)
    out = getattr(nn, op)(x, axis)
    assert_close(run_op(out, [x], [a], getattr(x86, f"schedule_{op}")),
                 getattr(ref, f"{op}_python")(a, axis))


RUN = {"conv2d_nchw", "depthwise_conv2d_nchw", "conv2d_nhwc", "dense", "batch_matmul", "matmul",
       "matmul_2d", "pool2d", "global_pool2d", "softmax", "log_softmax"}
NO_OPERATOR_YET = {"conv2d_NCHWc", "depthwise_conv2d_nhwc", "depthwise_conv2d_NCHWc", "pool1d",
                   "pool3d", "pool2d_grad", "adaptive_pool", "tensordot"}


def test_every_list_is_run_or_named_as_missing():
    lists = {key for key, value in _DATA.items() if isinstance(value, dict) and "cases" in value}
    assert lists == RUN | NO_OPERATOR_YET, lists ^ (RUN | NO_OPERATOR_YET)
    counted = sum(len(_DATA[op]["cases"]) for op in RUN)
    assert counted == 304, counted  # every case of every list run above
