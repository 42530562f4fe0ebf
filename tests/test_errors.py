"""Every bad input raises the documented, named error at the call that makes it."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl


def simple():
    A = tl.placeholder((4, 5), "float32", name="A")
    B = tl.compute((4, 5), lambda i, j: A[i, j] + 1, name="B")
    return A, B


def gemm():
    A = tl.placeholder((4, 6), "float32", name="A")
    W = tl.placeholder((6, 5), "float32", name="W")
    k = tl.reduce_axis((0, 6), name="k")
    C = tl.compute((4, 5), lambda i, j: tl.sum(A[i, k] * W[k, j], axis=k), name="C")
    return A, W, C


def test_bool_of_expression_points_to_operators():
    x = tl.var("x")
    with pytest.raises(TypeError, match="if_then_else"):
        bool(x < 3)
    with pytest.raises(TypeError, match="&"):
        if x > 1 and x < 3:
            pass


def test_node_equality_in_containers_means_identity():
    x, y = tl.var("x"), tl.var("y")
    assert x in [y, x]
    assert y not in [x]
    assert {x: 1}[x] == 1


def test_unknown_dtype():
    with pytest.raises(TypeError, match="float128"):
        tl.placeholder((2,), "float128")


def test_negative_dimension():
    with pytest.raises(ValueError, match="dimension 0"):
        tl.placeholder((-1, 3))


def test_wrong_index_count():
    A = tl.placeholder((2, 3), name="A")
    with pytest.raises(IndexError, match="A has 2 dimensions"):
        tl.compute((2,), lambda i: A[i])


def test_float_index():
    A = tl.placeholder((2,), name="A")
    with pytest.raises(TypeError, match="index 0"):
        tl.compute((2,), lambda i: A[i * 0.5])


def test_lambda_arity():
    with pytest.raises(TypeError, match="2 dimensions"):
        tl.compute((2, 3), lambda i: i)


def test_reduction_axis_outside_its_reduction():
    A = tl.placeholder((4, 4), name="A")
    k = tl.reduce_axis((0, 4), name="k")
    with pytest.raises(ValueError, match="axis k is used outside the reduction"):
        tl.compute((4,), lambda i: tl.sum(A[i, k], axis=k) + A[i, k])


def test_reduce_over_data_axis():
    A = tl.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="not a reduce_axis"):
        tl.compute((4,), lambda i: tl.sum(A[i], axis=i))


def test_bitwise_on_float():
    A = tl.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="bool or integer"):
        tl.compute((4,), lambda i: A[i] & A[i])


def test_axis_of_other_stage():
    A, B = simple()
    C = tl.compute((4, 5), lambda i, j: B[i, j] * 2, name="C")
    s = tl.create_schedule(C.op)
    with pytest.raises(tl.ScheduleError, match=r"axis i is not an axis of stage C"):
        s[C].split(B.op.axis[0], factor=2)


def test_axis_already_split():
    A, B = simple()
    s = tl.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=2)
    with pytest.raises(tl.ScheduleError, match="already been split"):
        s[B].vectorize(B.op.axis[0])


def test_parallel_reduction_axis():
    A, W, C = gemm()
    s = tl.create_schedule(C.op)
    with pytest.raises(tl.ScheduleError, match="k of stage C is a reduction axis"):
        s[C].parallel(C.op.reduce_axis[0])


def test_reorder_axis_from_another_stage():
    A, B = simple()
    C = tl.compute((4, 5), lambda i, j: B[i, j] * 2, name="C")
    s = tl.create_schedule(C.op)
    with pytest.raises(tl.ScheduleError, match="stage C"):
        s[C].reorder(C.op.axis[1], B.op.axis[0])


def test_reorder_duplicate():
    A, B = simple()
    s = tl.create_schedule(B.op)
    with pytest.raises(tl.ScheduleError, match="twice"):
        s[B].reorder(B.op.axis[0], B.op.axis[0])


def test_compute_at_non_consumer():
    A, B = simple()
    C = tl.compute((4, 5), lambda i, j: B[i, j] * 2, name="C")
    D = tl.compute((4, 5), lambda i, j: A[i, j] * 2, name="D")
    s = tl.create_schedule([C.op, D.op])
    with pytest.raises(tl.ScheduleError, match="does not read stage B"):
        s[B].compute_at(s[D], D.op.axis[0])


def test_compute_at_axis_not_of_parent():
    A, B = simple()
    C = tl.compute((4, 5), lambda i, j: B[i, j] * 2, name="C")
    s = tl.create_schedule(C.op)
    with pytest.raises(tl.ScheduleError, match="stage C"):
        s[B].compute_at(s[C], B.op.axis[0])


def test_split_bad_factor():
    A, B = simple()
    s = tl.create_schedule(B.op)
    with pytest.raises(tl.ScheduleError, match="factor must be >= 1"):
        s[B].split(B.op.axis[0], factor=0)
    with pytest.raises(TypeError, match="factor"):
        s[B].split(B.op.axis[0], factor=2.5)
    with pytest.raises(tl.ScheduleError, match="exactly one"):
        s[B].split(B.op.axis[0])


def test_fuse_not_adjacent():
    A = tl.placeholder((2, 3, 4), name="A")
    B = tl.compute((2, 3, 4), lambda i, j, k: A[i, j, k], name="B")
    s = tl.create_schedule(B.op)
    i, j, k = B.op.axis
    with pytest.raises(tl.ScheduleError, match="not adjacent"):
        s[B].fuse(i, k)


def test_inline_output_or_reduction():
    A, W, C = gemm()
    D = tl.compute((4, 5), lambda i, j: C[i, j] + 1, name="D")
    s = tl.create_schedule(D.op)
    with pytest.raises(tl.ScheduleError, match="output"):
        s[D].compute_inline()
    with pytest.raises(tl.ScheduleError, match="reduction"):
        s[C].compute_inline()


def test_cache_write_after_split():
    A, W, C = gemm()
    s = tl.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=2)
    with pytest.raises(tl.ScheduleError, match="cache_write first"):
        s.cache_write(C, "local")


def test_placeholder_missing_from_args():
    A, B = simple()
    s = tl.create_schedule(B.op)
    with pytest.raises(ValueError, match="A is read"):
        tl.lower(s, [B])


def test_output_missing_from_args():
    A, B = simple()
    s = tl.create_schedule(B.op)
    with pytest.raises(ValueError, match="output tensor B"):
        tl.lower(s, [A])


def test_build_without_args():
    A, B = simple()
    with pytest.raises(TypeError, match="args"):
        tl.build(tl.create_schedule(B.op))


@pytest.fixture(scope="module")
def kernel():
    n = tl.var("n")
    A = tl.placeholder((n, 3), "float32", name="A")
    B = tl.placeholder((n, 3), "float32", name="B")
    C = tl.compute((n, 3), lambda i, j: A[i, j] + B[i, j], name="C")
    return tl.build(tl.create_schedule(C.op), [A, B, C])


def test_call_wrong_count(kernel):
    a = np.zeros((2, 3), "float32")
    with pytest.raises(TypeError, match="3"):
        kernel(a, a)


def test_call_wrong_ndim(kernel):
    a = np.zeros((2, 3), "float32")
    with pytest.raises(ValueError, match="B"):
        kernel(a, np.zeros(6, "float32"), a.copy())


def test_call_wrong_shape(kernel):
    a = np.zeros((2, 3), "float32")
    with pytest.raises(ValueError, match="C"):
        kernel(a, a, np.zeros((2, 4), "float32"))


def test_call_inconsistent_symbolic_dim(kernel):
    a = np.zeros((2, 3), "float32")
    with pytest.raises(ValueError, match="n"):
        kernel(a, np.zeros((5, 3), "float32"), a.copy())


def test_call_wrong_dtype(kernel):
    a = np.zeros((2, 3), "float32")
    with pytest.raises(TypeError, match="float64"):
        kernel(a, np.zeros((2, 3)), a.copy())


def test_call_readonly_output(kernel):
    a = np.zeros((2, 3), "float32")
    c = np.zeros((2, 3), "float32")
    c.setflags(write=False)
    with pytest.raises(ValueError, match="C"):
        kernel(a, a, c)


def test_call_strided_view_rejected(kernel):
    big = np.zeros((4, 6), "float32")
    a = np.zeros((2, 3), "float32")
    with pytest.raises(ValueError, match="contiguous"):
        kernel(big[::2, ::2], a, a.copy())


def test_call_not_an_array(kernel):
    a = np.zeros((2, 3), "float32")
    with pytest.raises(TypeError, match="A"):
        kernel("not an array", a, a.copy())


def test_integer_division_by_zero_in_data_gives_zero():
    A = tl.placeholder((6,), "int32", name="A")
    B = tl.placeholder((6,), "int32", name="B")
    Q = tl.compute((6,), lambda i: A[i] // B[i], name="Q")
    R = tl.compute((6,), lambda i: A[i] % B[i], name="R")
    f = tl.build(tl.create_schedule([Q.op, R.op]), [A, B, Q, R])
    a = np.array([7, -7, 7, -7, 5, 0], "int32")
    b = np.array([2, 2, -2, 0, 0, 0], "int32")
    q, r = np.zeros(6, "int32"), np.zeros(6, "int32")
    f(a, b, q, r)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(q, a // b)
        np.testing.assert_array_equal(r, a % b)


def test_rfactor_rejects_bad_requests():
    A, W, C = gemm()
    s = tl.create_schedule(C.op)
    with pytest.raises(TypeError, match="expected a Tensor"):
        s.rfactor(C.op, C.op.reduce_axis[0])
    with pytest.raises(tl.ScheduleError, match=r"axis i of stage C is not a reduction axis"):
        s.rfactor(C, C.op.axis[0])
    with pytest.raises(tl.ScheduleError, match=r"factor_axis must be an int in \[0, 2\]"):
        s.rfactor(C, C.op.reduce_axis[0], factor_axis=3)
    _, B = simple()
    with pytest.raises(tl.ScheduleError, match="stage B is not a single reduction"):
        tl.create_schedule(B.op).rfactor(B, B.op.axis[0])
    s[C].vectorize(C.op.axis[1])
    with pytest.raises(tl.ScheduleError, match="stage C is already scheduled; call rfactor first"):
        s.rfactor(C, C.op.reduce_axis[0])
    s = tl.create_schedule(C.op)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=2)
    s[C].split(ki, factor=2)
    with pytest.raises(tl.ScheduleError, match="already scheduled"):
        s.rfactor(C, ko)
    with pytest.raises(tl.ScheduleError, match="already been split"):
        s.rfactor(C, ki)
