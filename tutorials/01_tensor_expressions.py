"""Tensor expressions: describing *what* to compute, before any schedule says *how*.

    python tutorials/01_tensor_expressions.py

tensorlang separates the two, as Halide and TVM do. This lesson only uses the default schedule
(one loop per axis, in order) and shows the loop IR that each kind of expression lowers to; the
next lesson changes the loops without changing the results. Every step is compiled and checked
against numpy.

1. placeholder: an input tensor with a shape and a dtype.
2. compute: a new tensor, one expression per output point (here: elementwise).
3. reduce_axis and sum: a reduction (a matrix-vector product).
4. a symbolic dimension (`tl.var`): one kernel for every size, bound when it is called.
5. a pipeline of stages (a compute reading another) and conditional expressions.
6. the flop count and the code: `tl.build` compiles to machine code for this CPU.
"""

from __future__ import annotations

import os

import numpy as np

import tensorlang as tl

SMALL = os.environ.get("TL_TUTORIAL_SMALL") == "1"  # CI runs every tutorial at small sizes
ROWS, COLS = (5, 7) if SMALL else (64, 48)
rng = np.random.default_rng(0)


def show(title: str, s: tl.Schedule, args: list[tl.Tensor]) -> tl.Module:
    """Print the loop IR of a schedule and return the compiled kernel."""
    print(f"=== {title}")
    print(tl.lower(s, args, name=title.split(":")[0].replace(" ", "_")))
    return tl.build(s, args)


# 1-2. An elementwise compute: B[i, j] = exp(A[i, j]) * 2 + 1. `compute` takes the output shape
# and a function from output indices to one expression; nothing runs yet: A and B are symbolic.
A = tl.placeholder((ROWS, COLS), "float32", name="A")
B = tl.compute((ROWS, COLS), lambda i, j: tl.exp(A[i, j]) * 2 + 1, name="B")
print(f"{B.name} is a {ROWS} x {COLS} {B.dtype} compute over {A.name}; nothing has run yet")
f = show("elementwise: B = exp(A) * 2 + 1", tl.create_schedule(B.op), [A, B])
a = rng.random((ROWS, COLS), dtype=np.float32)
b = np.empty_like(a)
f(a, b)
np.testing.assert_allclose(b, np.exp(a) * 2 + 1, rtol=1e-5)

# 3. A reduction: y[i] = sum over k of M[i, k] * x[k]. The reduction axis is an IterVar of its
# own; the lowered IR initialises y[i] and then accumulates into it in the innermost loop.
M = tl.placeholder((ROWS, COLS), "float32", name="M")
x = tl.placeholder((COLS,), "float32", name="x")
k = tl.reduce_axis((0, COLS), name="k")
y = tl.compute((ROWS,), lambda i: tl.sum(M[i, k] * x[k], axis=k), name="y")
f = show("reduction: y = M @ x", tl.create_schedule(y.op), [M, x, y])
m, xv = rng.random((ROWS, COLS), dtype=np.float32), rng.random(COLS, dtype=np.float32)
yv = np.empty(ROWS, "float32")
f(m, xv, yv)
np.testing.assert_allclose(yv, m @ xv, rtol=1e-5)

# 4. A symbolic size: n is a variable of the kernel, bound from the arrays' shapes at each call,
# so the same compiled code serves every n (the loop bound in the IR is `n`).
n = tl.var("n")
V = tl.placeholder((n,), "float32", name="V")
W = tl.compute((n,), lambda i: tl.maximum(V[i], 0.0), name="relu")
f = show("symbolic size: relu(V) for any n", tl.create_schedule(W.op), [V, W])
for size in (1, 3, ROWS * COLS):
    v = rng.standard_normal(size).astype("float32")
    w = np.empty_like(v)
    f(v, w)
    np.testing.assert_array_equal(w, np.maximum(v, 0))

# 5. A pipeline: P pads A by one zero on every side with a conditional expression, and S sums
# 3x3 windows of P (a box blur without the division). Each compute is a stage with its own
# loops; by default P is computed in full before S (the next lesson inlines or interleaves it).
P = tl.compute(
    (ROWS + 2, COLS + 2),
    lambda i, j: tl.if_then_else(
        (i >= 1) & (i <= ROWS) & (j >= 1) & (j <= COLS), A[i - 1, j - 1], 0.0),
    name="P",
)
di = tl.reduce_axis((0, 3), name="di")
dj = tl.reduce_axis((0, 3), name="dj")
S = tl.compute((ROWS, COLS), lambda i, j: tl.sum(P[i + di, j + dj], axis=[di, dj]), name="S")
f = show("pipeline: pad, then 3x3 window sums", tl.create_schedule(S.op), [A, S])
s_out = np.empty_like(a)
f(a, s_out)
padded = np.pad(a, 1)
expected = sum(padded[r:r + ROWS, c:c + COLS] for r in range(3) for c in range(3))
np.testing.assert_allclose(s_out, expected, rtol=1e-5)

# 6. What the machine runs: the kernel's LLVM IR and assembly are one call away. The default
# schedule leaves vectorization to LLVM; the next lessons ask for it explicitly.
f = tl.build(tl.create_schedule(y.op), [M, x, y], name="matvec")
define = next(line for line in f.get_source("ll").splitlines() if line.startswith("define"))
arithmetic = [line.strip() for line in f.get_source("asm").splitlines()
              if line.strip().startswith(("vfmadd", "vmul", "vadd"))]
print(f"=== the reduction as LLVM IR: {define}")
print("its floating-point instructions:", *arithmetic[:6], sep="\n    ")
print("\nall expressions match numpy")
