"""Reductions inside expressions: each becomes a stage `<compute>.red<N>` that the expression
reads. Checked against numpy on awkward sizes and dtypes, with several and nested reductions,
conditions and tuple reducers, under hand-written and random schedules of the new stage,
through the auto-scheduler, a template and `tensorlang tune FILE.py:func`; and the errors for
what cannot work."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from conftest import random_array, tolerance
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz_schedules import FUZZ, attach_points, random_loop_schedule

import autotune
import tensorlang as tl
from autotune.space import FallbackConfig, InstantiationError
from tensorlang.cli import main

AVX2 = "llvm -mcpu=haswell"  # the sketch tests read traces made for one vector width
SIZES = [(1, 1), (1, 13), (7, 1), (5, 13), (11, 29)]


def build_run(s, args, inputs):
    """Build `s`, call it on `inputs` and fresh zeroed outputs (the rest of `args`)."""
    f = tl.build(s, args)
    outs = [np.zeros(tl.get_const_tuple(t.shape), t.dtype) for t in args[len(inputs):]]
    f(*inputs, *outs)
    return outs[0] if len(outs) == 1 else outs


def reduction_stage(tensor, index=0):
    """The stage a compute's reduction became (its input named `<compute>.red<index>`)."""
    name = f"{tensor.op.name}.red{index}"
    return next(t for t in tensor.op.input_tensors if t.op.name == name)


def mean_of_rows(n, d, dtype):
    X = tl.placeholder((n, d), dtype, name="X")
    k = tl.reduce_axis((0, d), name="k")
    if dtype.startswith("int"):
        C = tl.compute((n,), lambda i: tl.sum(X[i, k], axis=k) * 3 - 1, name="C")
        return X, C, lambda x: x.sum(1) * 3 - 1
    C = tl.compute((n,), lambda i: tl.sum(X[i, k], axis=k) / d, name="C")
    return X, C, lambda x: x.mean(1)


def attention_scores(h, n, d, dtype="float32"):
    Q = tl.placeholder((h, n, d), dtype, name="Q")
    K = tl.placeholder((h, n, d), dtype, name="K")
    r = tl.reduce_axis((0, d), name="d")
    S = tl.compute((h, n, n), lambda b, i, j: tl.sum(Q[b, i, r] * K[b, j, r], axis=r) * 0.125,
                   name="S")
    return Q, K, S


def scores_reference(q, k):
    return np.einsum("hid,hjd->hij", q, k) * 0.125


# -- the split into stages ----------------------------------------------------------------------


def test_the_reduction_becomes_a_stage_the_expression_reads():
    X, C, _ = mean_of_rows(4, 6, "float32")
    (red,) = C.op.input_tensors
    assert red.name == "C.red0" and tl.get_const_tuple(red.shape) == (4,)
    assert not C.op.reduce_axis and red.op.reduce_axis[0].name == "k"
    text = str(tl.lower(tl.create_schedule(C.op), [X, C]))
    assert "C.red0 = allocate((4,), float32" in text
    assert "C.red0[i] = C.red0[i] + X[i * 6 + k]" in text
    assert "C[i] = C.red0[i] / 6.0" in text


def test_the_stage_iterates_over_the_axes_the_reduction_uses():
    X = tl.placeholder((3, 5), name="X")
    k = tl.reduce_axis((0, 5), name="k")
    Y = tl.compute((3, 5), lambda i, j: X[i, j] - tl.sum(X[i, k], axis=k) / 5, name="Y")
    (red,) = Y.op.input_tensors[1:]
    assert [iv.name for iv in red.op.axis] == ["i"]
    x = random_array((3, 5), "float32", np.random.default_rng(0))
    out = build_run(tl.create_schedule(Y.op), [X, Y], [x])
    np.testing.assert_allclose(out, x - x.mean(1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("n,d", SIZES)
def test_scaled_mean_matches_numpy(n, d, dtype):
    X, C, reference = mean_of_rows(n, d, dtype)
    x = random_array((n, d), dtype, np.random.default_rng(n * 31 + d))
    out = build_run(tl.create_schedule(C.op), [X, C], [x])
    np.testing.assert_allclose(out, reference(x).astype(dtype), **tolerance(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("h,n,d", [(1, 1, 1), (2, 7, 13), (3, 5, 64)])
def test_attention_scores_match_numpy(h, n, d, dtype):
    Q, K, S = attention_scores(h, n, d, dtype)
    rng = np.random.default_rng(h + n + d)
    q, k = random_array((h, n, d), dtype, rng), random_array((h, n, d), dtype, rng)
    out = build_run(tl.create_schedule(S.op), [Q, K, S], [q, k])
    np.testing.assert_allclose(out, scores_reference(q, k), **tolerance(dtype))


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_several_reductions_in_one_body(dtype):
    """The range of each row (two reductions over one axis) plus a sum over a column."""
    n, d = 6, 11
    X = tl.placeholder((n, d), dtype, name="X")
    k = tl.reduce_axis((0, d), name="k")
    r = tl.reduce_axis((0, n), name="r")
    Y = tl.compute((n, d), lambda i, j: tl.max(X[i, k], axis=k) - tl.min(X[i, k], axis=k)
                   + tl.sum(X[r, j], axis=r) * X[i, j], name="Y")
    assert sorted(t.name for t in Y.op.input_tensors) == ["X", "Y.red0", "Y.red1", "Y.red2"]
    x = random_array((n, d), dtype, np.random.default_rng(5))
    out = build_run(tl.create_schedule(Y.op), [X, Y], [x])
    expected = (x.max(1, keepdims=True) - x.min(1, keepdims=True) + x.sum(0) * x).astype(dtype)
    np.testing.assert_allclose(out, expected, **tolerance(dtype))


def test_a_reduction_used_twice_is_one_stage():
    n, d = 5, 9
    X = tl.placeholder((n, d), name="X")
    k = tl.reduce_axis((0, d), name="k")

    def centred(i, j):
        mean = tl.sum(X[i, k], axis=k) / d
        return (X[i, j] - mean) * (X[i, j] - mean)

    Y = tl.compute((n, d), centred, name="Y")
    assert [t.name for t in Y.op.input_tensors] == ["X", "Y.red0"]
    x = random_array((n, d), "float32", np.random.default_rng(6))
    out = build_run(tl.create_schedule(Y.op), [X, Y], [x])
    np.testing.assert_allclose(out, (x - x.mean(1, keepdims=True)) ** 2, rtol=1e-4, atol=1e-6)


def variance_in_one_expression(n, d, dtype="float32"):
    """The mean of squared deviations from a mean, in one expression: the inner mean becomes
    V.red0, the outer sum V.red1 (which reads V.red0)."""
    X = tl.placeholder((n, d), dtype, name="X")
    k = tl.reduce_axis((0, d), name="k")
    k2 = tl.reduce_axis((0, d), name="k2")

    def variance(i):
        deviation = X[i, k] - tl.sum(X[i, k2], axis=k2) / d
        return tl.sum(deviation * deviation, axis=k) / d

    return X, tl.compute((n,), variance, name="V")


def test_a_reduction_nested_in_a_reduction():
    X, V = variance_in_one_expression(7, 13, "float64")
    red1 = reduction_stage(V, 1)
    assert [t.name for t in red1.op.input_tensors] == ["X", "V.red0"]
    x = random_array((7, 13), "float64", np.random.default_rng(7))
    out = build_run(tl.create_schedule(V.op), [X, V], [x])
    np.testing.assert_allclose(out, x.var(1), rtol=1e-12)


def test_an_inner_reduction_over_an_enclosing_reduction_axis():
    """sum over k in [2, 7) of max over m of A[i, k, m] times B[k]: the inner maximum depends
    on k, so its stage iterates over k (shifted to start at 0) as a data axis; the whole body
    stays a reduction."""
    A = tl.placeholder((4, 9, 5), "int32", name="A")
    B = tl.placeholder((9,), "int32", name="B")
    k = tl.reduce_axis((2, 7), name="k")
    m = tl.reduce_axis((0, 5), name="m")
    C = tl.compute((4,), lambda i: tl.sum(tl.max(A[i, k, m], axis=m) * B[k], axis=k), name="C")
    assert [iv.name for iv in C.op.reduce_axis] == ["k"]
    red = reduction_stage(C)
    assert tl.get_const_tuple(red.shape) == (4, 5)
    rng = np.random.default_rng(8)
    a, b = random_array((4, 9, 5), "int32", rng), random_array((9,), "int32", rng)
    out = build_run(tl.create_schedule(C.op), [A, B, C], [a, b])
    np.testing.assert_array_equal(out, (a[:, 2:7].max(2) * b[2:7]).sum(1))


def test_symbolic_sizes():
    """A row mean over a symbolic width computed per row, and an inner reduction over an
    enclosing reduction axis of symbolic extent (its stage's extent is that size)."""
    n, d = tl.var("n"), tl.var("d")
    X = tl.placeholder((n, d), name="X")
    k = tl.reduce_axis((0, d), name="k")
    Y = tl.compute((n, d), lambda i, j: X[i, j] - tl.sum(X[i, k], axis=k) / d.astype("float32"),
                   name="Y")
    s = tl.create_schedule(Y.op)
    s[reduction_stage(Y)].compute_at(s[Y], Y.op.axis[0])
    f = tl.build(s, [X, Y])
    A = tl.placeholder((4, n, 5), name="A")
    B = tl.placeholder((n,), name="B")
    kk, m = tl.reduce_axis((0, n), name="kk"), tl.reduce_axis((0, 5), name="m")
    C = tl.compute((4,), lambda i: tl.sum(tl.max(A[i, kk, m], axis=m) * B[kk], axis=kk), name="C")
    g = tl.build(tl.create_schedule(C.op), [A, B, C])
    rng = np.random.default_rng(15)
    for rows, cols in [(1, 1), (5, 13), (3, 100)]:
        x = random_array((rows, cols), "float32", rng)
        y = np.zeros_like(x)
        f(x, y)
        np.testing.assert_allclose(y, x - x.mean(1, keepdims=True), rtol=1e-5, atol=1e-6)
        a, b = random_array((4, cols, 5), "float32", rng), random_array((cols,), "float32", rng)
        c = np.zeros(4, "float32")
        g(a, b, c)
        np.testing.assert_allclose(c, (a.max(2) * b).sum(1), rtol=1e-5, atol=1e-6)


def test_conditions_and_a_triangular_range():
    """A `where=` that reads the data and one that depends on the outer axis (a prefix sum)."""
    n = 9
    X = tl.placeholder((n,), name="X")
    k = tl.reduce_axis((0, n), name="k")
    Y = tl.compute((n,), lambda i: tl.sum(X[k], axis=k, where=k <= i) * 2.0
                   + tl.max(X[k], axis=k, where=X[k] < 0.5) + X[i], name="Y")
    x = random_array((n,), "float32", np.random.default_rng(9))
    out = build_run(tl.create_schedule(Y.op), [X, Y], [x])
    np.testing.assert_allclose(out, np.cumsum(x) * 2 + x[x < 0.5].max() + x, rtol=1e-5)


def test_a_reduction_in_the_condition_of_another():
    """The sum of each row's values above the row's mean: the mean (red0) is read by the
    condition of the sum, which stays the whole body."""
    n, d = 6, 19
    X = tl.placeholder((n, d), "float64", name="X")
    k, m = tl.reduce_axis((0, d), name="k"), tl.reduce_axis((0, d), name="m")
    Y = tl.compute((n,), lambda i: tl.sum(X[i, k], axis=k,
                                          where=X[i, k] > tl.sum(X[i, m], axis=m) / d), name="Y")
    assert [t.op.name for t in Y.op.input_tensors] == ["X", "Y.red0"] and Y.op.reduce_axis
    x = random_array((n, d), "float64", np.random.default_rng(16))
    out = build_run(tl.create_schedule(Y.op), [X, Y], [x])
    np.testing.assert_allclose(out, np.where(x > x.mean(1, keepdims=True), x, 0).sum(1),
                               rtol=1e-12)


def argmax_reducer():
    """(index, value) pairs: the larger value, the first index among equal ones."""
    def combine(x, y):
        take_x = (x[1] > y[1]) | ((x[1] == y[1]) & (x[0] < y[0]))
        return tl.if_then_else(take_x, x[0], y[0]), tl.if_then_else(take_x, x[1], y[1])

    def identity(index_dtype, value_dtype):
        return tl.const(-1, index_dtype), tl.const(np.finfo(value_dtype).min, value_dtype)

    return tl.comm_reducer(combine, identity, name="argmax")


def test_a_tuple_reducer_inside_an_expression():
    """An argmax's index, offset: one stage with both outputs of the reducer."""
    n, d = 6, 17
    X = tl.placeholder((n, d), name="X")
    k = tl.reduce_axis((0, d), name="k")
    argmax = argmax_reducer()
    Y = tl.compute((n,), lambda i: argmax((k, X[i, k]), axis=k)[0] + 100, name="Y")
    red = reduction_stage(Y)
    assert red.op.num_outputs == 2 and red.name == "Y.red0.v0"
    x = random_array((n, d), "float32", np.random.default_rng(10))
    out = build_run(tl.create_schedule(Y.op), [X, Y], [x])
    np.testing.assert_array_equal(out, x.argmax(1) + 100)


def test_outputs_that_are_reductions_of_different_reducers():
    n, d = 5, 8
    X = tl.placeholder((n, d), name="X")
    k = tl.reduce_axis((0, d), name="k")
    lo, hi = tl.compute((n,), lambda i: (tl.min(X[i, k], axis=k), tl.max(X[i, k], axis=k)),
                        name="R")
    x = random_array((n, d), "float32", np.random.default_rng(11))
    a, b = build_run(tl.create_schedule(lo.op), [X, lo, hi], [x])
    np.testing.assert_array_equal(a, x.min(1))
    np.testing.assert_array_equal(b, x.max(1))


# -- schedules of the new stage -----------------------------------------------------------------


def test_compute_at_split_vectorize_parallel_on_the_reduction_stage():
    h, n, d = 2, 11, 21
    Q, K, S = attention_scores(h, n, d)
    red = reduction_stage(S)
    s = tl.create_schedule(S.op)
    b, i, j = S.op.axis
    jo, ji = s[S].split(j, factor=4)
    s[S].parallel(b)
    s[red].compute_at(s[S], jo)
    rb, ri, rj = s[red].op.axis
    (r,) = s[red].op.reduce_axis
    ro, rin = s[red].split(r, factor=5)
    s[red].reorder(rb, ri, ro, rin, rj)
    s[red].vectorize(rj)
    text = str(tl.lower(s, [Q, K, S]))
    assert "S.red0 = allocate((1, 1, 4,), float32" in text
    rng = np.random.default_rng(12)
    q, k = random_array((h, n, d), "float32", rng), random_array((h, n, d), "float32", rng)
    out = build_run(s, [Q, K, S], [q, k])
    np.testing.assert_allclose(out, scores_reference(q, k), rtol=1e-4, atol=1e-5)


def test_parallel_rows_and_rfactor_of_the_reduction_stage():
    n, d = 13, 37
    X, C, reference = mean_of_rows(n, d, "float32")
    red = reduction_stage(C)
    s = tl.create_schedule(C.op)
    (k,) = s[red].op.reduce_axis
    _, ki = s[red].split(k, factor=8)
    partial = s.rfactor(red, ki, factor_axis=1)
    s[partial].vectorize(s[partial].op.axis[1])
    s[red].parallel(s[red].op.axis[0])
    x = random_array((n, d), "float32", np.random.default_rng(13))
    np.testing.assert_allclose(build_run(s, [X, C], [x]), reference(x), rtol=1e-5, atol=1e-6)


def test_cache_write_of_the_reduction_stage_and_inlining_the_consumer():
    """The consumer is elementwise over the reduction: when it is not an output it inlines
    into its own reader, which then reads the reduction stage."""
    n, d = 9, 10
    X = tl.placeholder((n, d), name="X")
    k = tl.reduce_axis((0, d), name="k")
    M = tl.compute((n,), lambda i: tl.sum(X[i, k] * X[i, k], axis=k) * 0.5, name="M")
    Y = tl.compute((n, d), lambda i, j: X[i, j] / (M[i] + 1.0), name="Y")
    red = reduction_stage(M)
    s = tl.create_schedule(Y.op)
    s[M].compute_inline()
    local = s.cache_write(red, "local")
    s[local].compute_at(s[red], s[red].op.axis[0])
    s[red].compute_at(s[Y], Y.op.axis[0])
    x = random_array((n, d), "float32", np.random.default_rng(14))
    expected = x / ((x * x).sum(1, keepdims=True) * 0.5 + 1)
    np.testing.assert_allclose(build_run(s, [X, Y], [x]), expected, rtol=1e-5, atol=1e-6)


def test_the_reduction_stage_cannot_be_inlined():
    X, C, _ = mean_of_rows(4, 6, "float32")
    s = tl.create_schedule(C.op)
    with pytest.raises(tl.ScheduleError, match="C.red0 is a reduction and cannot be inlined"):
        s[reduction_stage(C)].compute_inline()


# -- what cannot work ---------------------------------------------------------------------------


def test_a_reduction_axis_used_outside_its_reduction():
    X = tl.placeholder((4, 5), name="X")
    k = tl.reduce_axis((0, 5), name="k")
    with pytest.raises(ValueError, match="compute 'C': reduction axis k is used outside"):
        tl.compute((4,), lambda i: tl.sum(X[i, k], axis=k) * X[i, k], name="C")


def test_a_reduction_axis_used_in_a_sibling_reduction():
    X = tl.placeholder((4, 5), name="X")
    k = tl.reduce_axis((0, 5), name="k")
    m = tl.reduce_axis((0, 4), name="m")
    with pytest.raises(ValueError, match="reduction axis k is used outside"):
        tl.compute((4,), lambda i: tl.sum(X[i, k], axis=k) + tl.sum(X[m, k], axis=m), name="C")


def test_an_inner_reduction_over_an_axis_of_varying_range():
    X = tl.placeholder((6, 6), name="X")
    k = tl.reduce_axis((0, 6), name="k")

    def triangle(i):
        kt = tl.reduce_axis((0, i + 1), "kt")
        return tl.sum(tl.sum(X[kt, k], axis=k) * 2.0, axis=kt)

    with pytest.raises(ValueError, match="reduction over kt uses kt, whose range"):
        tl.compute((6,), triangle, name="C")


# -- random schedules of both stages ------------------------------------------------------------

FUZZ_FEW = settings(FUZZ, max_examples=40)


@FUZZ_FEW
@given(data=st.data(), n=st.integers(1, 9), d=st.integers(1, 13),
       dtype=st.sampled_from(["float32", "float64", "int32"]),
       reducer=st.sampled_from(["sum", "max", "min"]))
def test_random_schedules_of_the_reduction_and_its_consumer(data, n, d, dtype, reducer):
    """Y[i, j] = X[i, j] * 2 - reduce(X[i, k]) with random loops on both stages and the
    reduction computed at root or at a random loop of Y."""
    X = tl.placeholder((n, d), dtype, name="X")
    k = tl.reduce_axis((0, d), name="k")
    Y = tl.compute((n, d), lambda i, j: X[i, j] * 2 - getattr(tl, reducer)(X[i, k], axis=k),
                   name="Y")
    red = reduction_stage(Y)
    s = tl.create_schedule(Y.op)
    random_loop_schedule(data, s, Y)
    if data.draw(st.booleans(), label="compute_at") and attach_points(s[Y]):
        s[red].compute_at(s[Y], data.draw(st.sampled_from(attach_points(s[Y])), label="at"))
    random_loop_schedule(data, s, red)
    x = random_array((n, d), dtype, np.random.default_rng(n * 17 + d))
    expected = (x * 2 - getattr(np, reducer)(x, axis=1, keepdims=True)).astype(dtype)
    np.testing.assert_allclose(build_run(s, [X, Y], [x]), expected, **tolerance(dtype))


@FUZZ_FEW
@given(data=st.data(), h=st.integers(1, 3), n=st.integers(1, 9), d=st.integers(1, 11))
def test_random_schedules_of_attention_scores(data, h, n, d):
    Q, K, S = attention_scores(h, n, d)
    red = reduction_stage(S)
    s = tl.create_schedule(S.op)
    if data.draw(st.booleans(), label="cache_write"):
        local = s.cache_write(red, "local")
        random_loop_schedule(data, s, red)
        if attach_points(s[red]):
            s[local].compute_at(s[red], data.draw(st.sampled_from(attach_points(s[red])),
                                                  label="local at"))
        random_loop_schedule(data, s, local)
    else:
        random_loop_schedule(data, s, red)
    random_loop_schedule(data, s, S)
    if data.draw(st.booleans(), label="compute_at") and attach_points(s[S]):
        s[red].compute_at(s[S], data.draw(st.sampled_from(attach_points(s[S])), label="at"))
    rng = np.random.default_rng(h * 100 + n * 10 + d)
    q, k = random_array((h, n, d), "float32", rng), random_array((h, n, d), "float32", rng)
    out = build_run(s, [Q, K, S], [q, k])
    np.testing.assert_allclose(out, scores_reference(q, k), rtol=1e-4, atol=1e-5)


# -- auto-scheduling, templates, the command line -----------------------------------------------


def plain_layer_norm(n, d):
    """A layer norm as one writes it: the mean, the variance, then the normalized output."""
    X = tl.placeholder((n, d), name="X")
    k1 = tl.reduce_axis((0, d), name="k1")
    mean = tl.compute((n,), lambda i: tl.sum(X[i, k1], axis=k1) / d, name="mean")
    k2 = tl.reduce_axis((0, d), name="k2")
    var = tl.compute((n,), lambda i: tl.sum((X[i, k2] - mean[i]) * (X[i, k2] - mean[i]),
                                            axis=k2) / d, name="var")
    Y = tl.compute((n, d), lambda i, j: (X[i, j] - mean[i]) * tl.rsqrt(var[i] + 1e-5), name="Y")
    return [X, Y]


def layer_norm_reference(x):
    mean = x.mean(1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(1, keepdims=True) + 1e-5)


def scores_workload(h, n, d):
    return list(attention_scores(h, n, d))


def one_expression_variance(n, d):
    return list(variance_in_one_expression(n, d))


def integer_row_range(n, d):
    X = tl.placeholder((n, d), "int32", name="X")
    k = tl.reduce_axis((0, d), name="k")
    Y = tl.compute((n, d), lambda i, j: X[i, j] * 3 + tl.max(X[i, k], axis=k)
                   - tl.min(X[i, k], axis=k), name="Y")
    return [X, Y]


AUTO_CASES = {
    "layer_norm": (plain_layer_norm, (7, 37), lambda x: layer_norm_reference(x)),
    "layer_norm_one_row": (plain_layer_norm, (1, 64), lambda x: layer_norm_reference(x)),
    "scores": (scores_workload, (2, 9, 13), scores_reference),
    "variance": (one_expression_variance, (5, 31), lambda x: x.var(1)),
    "int_range": (integer_row_range, (3, 17),
                  lambda x: x * 3 + x.max(1, keepdims=True) - x.min(1, keepdims=True)),
}


def _inputs(tensors, rng):
    return [random_array(tl.get_const_tuple(t.shape), t.dtype, rng) for t in tensors
            if isinstance(t.op, tl.PlaceholderOp)]


@pytest.mark.parametrize("case", sorted(AUTO_CASES))
def test_auto_scheduled_programs_match_numpy(case):
    """The untuned sketch and a few sampled ones, each built and checked."""
    func, args, reference = AUTO_CASES[case]
    task = autotune.create_task(func, args)
    rng = np.random.default_rng(len(case))
    space = task.config_space
    built = 0
    for cfg in [FallbackConfig()] + [space.get(int(i)) for i in space.sample(rng, 4)]:
        try:
            with task.compile_target:
                s, tensors, _ = task.auto.schedule(cfg, task.args)
        except InstantiationError:
            continue
        inputs = _inputs(tensors, rng)
        out = build_run(s, tensors, inputs)
        np.testing.assert_allclose(out, reference(*inputs), **tolerance(tensors[-1].dtype),
                                   err_msg=str(task.trace(cfg)))
        built += 1
    assert built >= 2


def test_the_sketch_fuses_the_scores_reduction_into_its_consumer():
    task = autotune.create_task(scores_workload, (2, 16, 32), target=AVX2)
    trace = str(task.trace(FallbackConfig()))
    assert "S.red0.compute_at(S, " in trace


def test_the_sketch_computes_the_layer_norm_sums_per_row_of_the_output():
    task = autotune.create_task(plain_layer_norm, (64, 96), target=AVX2)
    trace = str(task.trace(FallbackConfig())).splitlines()
    assert {"mean.compute_inline()", "var.compute_inline()", "mean.red0.compute_at(Y, i.inner)",
            "var.red0.compute_at(Y, i.inner)"} <= set(trace)


def row_mean(n, d):
    X = tl.placeholder((n, d), name="X")
    k = tl.reduce_axis((0, d), name="k")
    return [X, tl.compute((n,), lambda i: tl.sum(X[i, k], axis=k) / d, name="C")]


def column_mean(n, d):
    X = tl.placeholder((n, d), name="X")
    k = tl.reduce_axis((0, n), name="k")
    return [X, tl.compute((d,), lambda j: tl.sum(X[k, j], axis=k) / n, name="C")]


def scaled_window_max(b, n, d):
    X = tl.placeholder((b, n, d), name="X")
    k = tl.reduce_axis((0, 3), name="k")
    return [X, tl.compute((b, n), lambda a, j: tl.max(X[a, j, k], axis=k) * 2.0, name="C")]


@pytest.mark.parametrize("func,args,reference", [
    (row_mean, (101, 37), lambda x: x.mean(1)),
    (column_mean, (13, 37), lambda x: x.mean(0)),
    (scaled_window_max, (3, 50, 5), lambda x: x[:, :, :3].max(2) * 2),
])
def test_the_reduction_computed_per_vector_block_of_its_expression(func, args, reference):
    """The knob that computes the reduction inside the loop over vector blocks of the
    expression reading it at its own point: configs spread over the knob's half of the space
    match numpy."""
    task = autotune.create_task(func, args, target=AVX2)
    fused = [c for c in task.config_space if c["C.red0.at_consumer"].val]
    rng = np.random.default_rng(17)
    checked = 0
    for cfg in fused[:: max(1, len(fused) // 6)]:
        s, tensors = task.instantiate(cfg)
        x = random_array(tl.get_const_tuple(tensors[0].shape), "float32", rng)
        np.testing.assert_allclose(build_run(s, tensors, [x]), reference(x), rtol=1e-5,
                                   atol=1e-6, err_msg=str(task.trace(cfg)))
        checked += "C.red0.compute_at(C, " in str(task.trace(cfg))
    assert checked >= 2


def _measure_option():
    return autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                   runner=autotune.LocalRunner(number=2, repeat=1))


@pytest.mark.parametrize("case", ["layer_norm", "scores"])
def test_a_short_tuning_run_gives_a_schedule_that_matches_numpy(case, tmp_path):
    func, args, reference = AUTO_CASES[case]
    task = autotune.create_task(func, args)
    log = tmp_path / f"{case}.jsonl"
    result = autotune.tune(task, trials=4, log_file=str(log), measure_option=_measure_option(),
                           progress=False, seed=0, remeasure_top=0)
    assert result.config is not None
    s, tensors = task.apply_best(str(log))
    inputs = _inputs(tensors, np.random.default_rng(3))
    np.testing.assert_allclose(build_run(s, tensors, inputs), reference(*inputs), rtol=1e-4,
                               atol=1e-5)


@autotune.template("test_inline_reductions/scaled_row_sum")
def scaled_row_sum(n, d):
    """A template whose knobs schedule the reduction stage of `sum(X[i, k]) * 0.5 + 1`."""
    X = tl.placeholder((n, d), name="X")
    k = tl.reduce_axis((0, d), name="k")
    Y = tl.compute((n,), lambda i: tl.sum(X[i, k], axis=k) * 0.5 + 1.0, name="Y")
    red = reduction_stage(Y)
    s = tl.create_schedule(Y.op)
    cfg = autotune.get_config()
    (i,) = Y.op.axis
    cfg.define_split("tile_i", i, num_outputs=2)
    cfg.define_knob("at_consumer", [0, 1])
    io, ii = cfg["tile_i"].apply(s, Y, i)
    s[Y].parallel(io)
    if cfg["at_consumer"].val:
        s[red].compute_at(s[Y], ii)
    else:
        s[red].parallel(s[red].op.axis[0])
    cfg.add_flop(n * d)
    return s, [X, Y]


def test_a_template_schedules_the_reduction_stage(tmp_path):
    task = autotune.create_task("test_inline_reductions/scaled_row_sum", (13, 29))
    assert len(task.config_space) > 2
    rng = np.random.default_rng(4)
    x = random_array((13, 29), "float32", rng)
    for index in range(len(task.config_space)):
        s, args = task.instantiate(task.config_space.get(index))
        np.testing.assert_allclose(build_run(s, args, [x]), x.sum(1) * 0.5 + 1, rtol=1e-5)
    log = tmp_path / "row_sum.jsonl"
    autotune.tune(task, trials=3, log_file=str(log), measure_option=_measure_option(),
                  progress=False, seed=0, remeasure_top=0)
    assert [r for r in autotune.load_records(str(log)) if r.result.ok]


def test_tensorlang_tune_a_file_with_an_inline_reduction(tmp_path, capsys):
    source = tmp_path / "inline_reduction_workloads.py"
    source.write_text(textwrap.dedent('''
        import tensorlang as tl

        def centred_rows(n, d):
            X = tl.placeholder((n, d), name="X")
            k = tl.reduce_axis((0, d), name="k")
            Y = tl.compute((n, d), lambda i, j: X[i, j] - tl.sum(X[i, k], axis=k) / d,
                           name="Y")
            return [X, Y]
    '''))
    log = tmp_path / "centred.jsonl"
    code = main(["tune", f"{source}:centred_rows", "--args", "11,40", "--trials", "3",
                 "--no-compare", "-q", "--log", str(log)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "auto/inline_reduction_workloads.centred_rows" in out
    records = [r for r in autotune.load_records(log) if not r.remeasured]
    assert len(records) == 3 and any(r.result.ok and r.trace for r in records)
    code = main(["lower", f"{source}:centred_rows", "--args", "11,40", "--log", str(log)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Y.red0" in out
