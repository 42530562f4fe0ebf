"""Property-based fuzzing: random computes under random legal schedules must equal numpy.

Each test draws a computation (elementwise chains, reductions, rfactor, matmul, a padded
convolution), applies a random sequence of schedule primitives that are legal for it, builds,
runs and compares. Only legal requests are drawn, since the compiler refuses the others with
ScheduleError rather than ignoring them: no vectorize or parallel on a reduction axis, one
vectorized loop per stage, no split or fuse of an axis already marked, and no stage computed
inside a vectorized loop. tests/test_honest_primitives.py checks that each of those is refused.
"""

from __future__ import annotations

import numpy as np
from conftest import random_array, tolerance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorlang as tl
from tensorlang.expr import IterKind
from tensorlang.schedule import LoopAnnotation

FUZZ = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
dims = st.integers(min_value=1, max_value=17)
dtypes = st.sampled_from(["float32", "float64", "int32", "int8", "int64"])


def random_loop_schedule(data, s: tl.Schedule, T) -> None:
    """Apply up to six random primitives to stage T (each one legal by construction)."""
    stage = s[T]
    for _ in range(data.draw(st.integers(0, 6), label="steps")):
        leaves = list(stage.leaf_iter_vars)
        action = data.draw(
            st.sampled_from(["split", "nparts", "reorder", "fuse", "vectorize", "parallel", "unroll"]),
            label="action",
        )
        axis = data.draw(st.sampled_from(leaves), label="axis")
        plain = axis not in stage.annotations and axis not in stage.pragmas
        if action == "split" and plain:
            stage.split(axis, factor=data.draw(st.integers(1, 9), label="factor"))
        elif action == "nparts" and plain:
            stage.split(axis, nparts=data.draw(st.integers(1, 5), label="nparts"))
        elif action == "reorder":
            stage.reorder(*data.draw(st.permutations(leaves), label="order"))
        elif action == "fuse" and plain:
            position = leaves.index(axis)
            if position + 1 < len(leaves):
                inner = leaves[position + 1]
                if inner.kind is axis.kind and inner not in stage.annotations:
                    stage.fuse(axis, inner)
        elif action == "vectorize":
            target = leaves[-1] if data.draw(st.booleans(), label="innermost") else axis
            if (target.kind is IterKind.DATA_PAR and target not in stage.annotations
                    and LoopAnnotation.VECTORIZE not in stage.annotations.values()):
                stage.vectorize(target)
        elif action == "parallel" and plain and axis.kind is IterKind.DATA_PAR:
            stage.parallel(axis)
        elif action == "unroll" and plain:
            stage.unroll(axis)


def attach_points(stage: tl.Stage) -> list:
    """The loops of `stage` another stage may be computed at: those outside its vector loop."""
    leaves = list(stage.leaf_iter_vars)
    vector = [k for k, iv in enumerate(leaves) if stage.annotations.get(iv) is
              LoopAnnotation.VECTORIZE]
    return leaves[: vector[0]] if vector else leaves


def check(s, args, inputs, expected, dtype):
    f = tl.build(s, args)
    out = np.zeros(expected.shape, expected.dtype)
    f(*inputs, out)
    np.testing.assert_allclose(out, expected, **tolerance(dtype))


@FUZZ
@given(data=st.data(), n=dims, m=dims, dtype=dtypes)
def test_elementwise_chain(data, n, m, dtype):
    rng = np.random.default_rng(n * 31 + m)
    A = tl.placeholder((n, m), dtype, name="A")
    B = tl.placeholder((m,), dtype, name="B")
    X = tl.compute((n, m), lambda i, j: A[i, j] * 2 + B[j], name="X")
    Y = tl.compute((n, m), lambda i, j: tl.maximum(X[i, j], A[i, j]) - B[j], name="Y")
    s = tl.create_schedule(Y.op)
    random_loop_schedule(data, s, Y)
    placement = data.draw(st.sampled_from(["root", "inline", "at"]), label="placement")
    if placement == "inline":
        s[X].compute_inline()
    elif placement == "at" and attach_points(s[Y]):
        s[X].compute_at(s[Y], data.draw(st.sampled_from(attach_points(s[Y])), label="at"))
    random_loop_schedule(data, s, X)
    a, b = random_array((n, m), dtype, rng), random_array((m,), dtype, rng)
    x = (a * 2 + b).astype(dtype)
    check(s, [A, B, Y], [a, b], (np.maximum(x, a) - b).astype(dtype), dtype)


@FUZZ
@given(data=st.data(), n=dims, m=dims, dtype=dtypes, reducer=st.sampled_from(["sum", "max", "min"]))
def test_reduction(data, n, m, dtype, reducer):
    rng = np.random.default_rng(n * 7 + m)
    A = tl.placeholder((n, m), dtype, name="A")
    k = tl.reduce_axis((0, m), name="k")
    R = tl.compute((n,), lambda i: getattr(tl, reducer)(A[i, k], axis=k), name="R")
    s = tl.create_schedule(R.op)
    random_loop_schedule(data, s, R)
    a = random_array((n, m), dtype, rng)
    expected = getattr(np, reducer)(a, axis=1).astype(dtype)
    check(s, [A, R], [a], expected, dtype)


@FUZZ
@given(data=st.data(), n=dims, m=dims, dtype=dtypes, reducer=st.sampled_from(["sum", "max", "min"]))
def test_rfactor(data, n, m, dtype, reducer):
    """rfactor of a whole axis or of one part of a split, then random schedules of both stages
    (the factored axis is a data axis of the partial stage, so it may be parallel)."""
    rng = np.random.default_rng(n * 5 + m)
    A = tl.placeholder((n, m), dtype, name="A")
    k = tl.reduce_axis((0, m), name="k")
    R = tl.compute((n,), lambda i: getattr(tl, reducer)(A[i, k], axis=k), name="R")
    s = tl.create_schedule(R.op)
    how = data.draw(st.sampled_from(["whole", "factor", "nparts"]), label="how")
    if how == "whole":
        axis = k
    else:
        size = data.draw(st.integers(1, 9), label="size")
        ko, ki = s[R].split(k, factor=size) if how == "factor" else s[R].split(k, nparts=size)
        axis = data.draw(st.sampled_from([ko, ki]), label="factored")
    RF = s.rfactor(R, axis, factor_axis=data.draw(st.integers(0, 1), label="factor_axis"))
    random_loop_schedule(data, s, RF)
    random_loop_schedule(data, s, R)
    a = random_array((n, m), dtype, rng)
    expected = getattr(np, reducer)(a, axis=1).astype(dtype)
    check(s, [A, R], [a], expected, dtype)


@FUZZ
@given(data=st.data(), n=dims, m=dims, l=dims, dtype=st.sampled_from(["float32", "int32"]))
def test_matmul_with_caches(data, n, m, l, dtype):
    rng = np.random.default_rng(n + m * 3 + l * 5)
    A = tl.placeholder((n, l), dtype, name="A")
    B = tl.placeholder((l, m), dtype, name="B")
    k = tl.reduce_axis((0, l), name="k")
    C = tl.compute((n, m), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tl.create_schedule(C.op)
    if data.draw(st.booleans(), label="cache_write"):
        CC = s.cache_write(C, "local")
        random_loop_schedule(data, s, C)
        if attach_points(s[C]):
            s[CC].compute_at(s[C], data.draw(st.sampled_from(attach_points(s[C])), label="at"))
        random_loop_schedule(data, s, CC)
    else:
        if data.draw(st.booleans(), label="cache_read"):
            BB = s.cache_read(B, "local", [C])
            random_loop_schedule(data, s, C)
            if attach_points(s[C]):
                s[BB].compute_at(s[C], data.draw(st.sampled_from(attach_points(s[C])), label="at"))
        else:
            random_loop_schedule(data, s, C)
    a, b = random_array((n, l), dtype, rng), random_array((l, m), dtype, rng)
    check(s, [A, B, C], [a, b], (a @ b).astype(dtype), dtype)


@FUZZ
@given(data=st.data(), n=st.integers(1, 12), r=st.integers(1, 4), pad=st.integers(0, 2))
def test_padded_convolution(data, n, r, pad):
    rng = np.random.default_rng(n * 13 + r + pad)
    size = n + 2 * pad - r + 1
    if size < 1:
        return
    A = tl.placeholder((n, n), "float32", name="A")
    W = tl.placeholder((r, r), "float32", name="W")
    P = tl.compute(
        (n + 2 * pad, n + 2 * pad),
        lambda i, j: tl.if_then_else(
            (i >= pad) & (i < n + pad) & (j >= pad) & (j < n + pad), A[i - pad, j - pad], 0.0
        ),
        name="P",
    )
    ry, rx = tl.reduce_axis((0, r), name="ry"), tl.reduce_axis((0, r), name="rx")
    C = tl.compute(
        (size, size), lambda i, j: tl.sum(P[i + ry, j + rx] * W[ry, rx], axis=[ry, rx]), name="C"
    )
    s = tl.create_schedule(C.op)
    random_loop_schedule(data, s, C)
    placement = data.draw(st.sampled_from(["root", "inline", "at"]), label="placement")
    if placement == "inline":
        s[P].compute_inline()
    elif placement == "at" and attach_points(s[C]):
        s[P].compute_at(s[C], data.draw(st.sampled_from(attach_points(s[C])), label="at"))
        random_loop_schedule(data, s, P)
    a, w = random_array((n, n), "float32", rng), random_array((r, r), "float32", rng)
    padded = np.pad(a, pad)
    expected = sum(
        padded[y : y + size, x : x + size] * w[y, x] for y in range(r) for x in range(r)
    ).astype("float32")
    check(s, [A, W, C], [a, w], expected, "float32")
