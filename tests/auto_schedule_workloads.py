"""Plain computes (no schedule, no knobs) that the auto-scheduler tests tune, with numpy
references: a GEMM (and one with a fused bias + relu), a row softmax in four stages, a layer
norm (also with its reductions inside the normalizing expression), a five-point stencil, a direct
3x3 convolution over a padded compute, attention scores over heads (also scaled around the
reduction), a padded max pool, a reduction to a scalar and a GEMM with a symbolic row count."""

from __future__ import annotations

import numpy as np

import tensorlang as tl


def gemm(M, N, K):
    A = tl.placeholder((M, K), name="A")
    B = tl.placeholder((K, N), name="B")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def gemm_relu(M, N, K):
    A = tl.placeholder((M, K), name="A")
    B = tl.placeholder((K, N), name="B")
    bias = tl.placeholder((N,), name="bias")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((M, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = tl.compute((M, N), lambda i, j: tl.maximum(C[i, j] + bias[j], 0.0), name="D")
    return [A, B, bias, D]


def softmax(N, D):
    X = tl.placeholder((N, D), name="X")
    k1 = tl.reduce_axis((0, D), name="k1")
    M = tl.compute((N,), lambda i: tl.max(X[i, k1], axis=k1), name="M")
    E = tl.compute((N, D), lambda i, j: tl.exp(X[i, j] - M[i]), name="E")
    k2 = tl.reduce_axis((0, D), name="k2")
    S = tl.compute((N,), lambda i: tl.sum(E[i, k2], axis=k2), name="S")
    Y = tl.compute((N, D), lambda i, j: E[i, j] / S[i], name="Y")
    return [X, Y]


def layer_norm(N, D):
    X = tl.placeholder((N, D), name="X")
    G = tl.placeholder((D,), name="G")
    B = tl.placeholder((D,), name="B")
    k1 = tl.reduce_axis((0, D), name="k1")
    s1 = tl.compute((N,), lambda i: tl.sum(X[i, k1], axis=k1), name="s1")
    mu = tl.compute((N,), lambda i: s1[i] / D, name="mean")
    k2 = tl.reduce_axis((0, D), name="k2")
    s2 = tl.compute((N,), lambda i: tl.sum((X[i, k2] - mu[i]) * (X[i, k2] - mu[i]), axis=k2),
                    name="s2")
    var = tl.compute((N,), lambda i: s2[i] / D, name="var")
    Y = tl.compute((N, D), lambda i, j: (X[i, j] - mu[i]) * tl.rsqrt(var[i] + 1e-5) * G[j]
                   + B[j], name="Y")
    return [X, G, B, Y]


def stencil(H, W):
    X = tl.placeholder((H, W), name="X")
    Y = tl.compute((H - 2, W - 2), lambda i, j: X[i + 1, j + 1] * 0.5 + 0.125 * (
        X[i, j + 1] + X[i + 2, j + 1] + X[i + 1, j] + X[i + 1, j + 2]), name="Y")
    return [X, Y]


def conv3x3(C, H, W, K):
    X = tl.placeholder((1, C, H, W), name="X")
    Wt = tl.placeholder((K, C, 3, 3), name="W")
    P = tl.compute((1, C, H + 2, W + 2), lambda n, c, y, x: tl.if_then_else(
        (y >= 1) & (y <= H) & (x >= 1) & (x <= W), X[n, c, y - 1, x - 1], 0.0), name="P")
    rc = tl.reduce_axis((0, C), name="rc")
    ry = tl.reduce_axis((0, 3), name="ry")
    rx = tl.reduce_axis((0, 3), name="rx")
    O = tl.compute((1, K, H, W), lambda n, k, y, x: tl.sum(
        P[n, rc, y + ry, x + rx] * Wt[k, rc, ry, rx], axis=[rc, ry, rx]), name="O")
    return [X, Wt, O]


def layer_norm_inline(N, D):
    """A layer norm as people write it: the mean and the variance are reductions inside the
    normalizing expression (each becomes a stage of its own, `tensorlang.reduction_stages`)."""
    X = tl.placeholder((N, D), name="X")
    G = tl.placeholder((D,), name="G")
    B = tl.placeholder((D,), name="B")
    k1 = tl.reduce_axis((0, D), name="k1")
    mu = tl.compute((N,), lambda i: tl.sum(X[i, k1], axis=k1) / D, name="mean")
    k2 = tl.reduce_axis((0, D), name="k2")
    Y = tl.compute((N, D), lambda i, j: (X[i, j] - mu[i]) * tl.rsqrt(
        tl.sum((X[i, k2] - mu[i]) * (X[i, k2] - mu[i]), axis=k2) / D + 1e-5) * G[j] + B[j],
        name="Y")
    return [X, G, B, Y]


def scores_scaled(B, H, S, D):
    """Attention scores scaled by 1/sqrt(D) around the reduction, in one expression."""
    Q = tl.placeholder((B, H, S, D), name="Q")
    K = tl.placeholder((B, H, S, D), name="K")
    d = tl.reduce_axis((0, D), name="d")
    O = tl.compute((B, H, S, S), lambda b, h, i, j: tl.sum(
        Q[b, h, i, d] * K[b, h, j, d], axis=d) * (1.0 / D ** 0.5), name="S")
    return [Q, K, O]


def scores(B, H, S, D):
    Q = tl.placeholder((B, H, S, D), name="Q")
    K = tl.placeholder((B, H, S, D), name="K")
    d = tl.reduce_axis((0, D), name="d")
    O = tl.compute((B, H, S, S), lambda b, h, i, j: tl.sum(Q[b, h, i, d] * K[b, h, j, d],
                                                            axis=d), name="S")
    return [Q, K, O]


def maxpool(C, H, W):
    X = tl.placeholder((1, C, H, W), name="X")
    ry = tl.reduce_axis((0, 3), name="ry")
    rx = tl.reduce_axis((0, 3), name="rx")
    P = tl.compute((1, C, H + 2, W + 2), lambda n, c, y, x: tl.if_then_else(
        (y >= 1) & (y <= H) & (x >= 1) & (x <= W), X[n, c, y - 1, x - 1], -1e30), name="P")
    O = tl.compute((1, C, H // 2, W // 2), lambda n, c, y, x: tl.max(
        P[n, c, y * 2 + ry, x * 2 + rx], axis=[ry, rx]), name="O")
    return [X, O]


def total(N, M):
    X = tl.placeholder((N, M), name="X")
    a = tl.reduce_axis((0, N), name="a")
    b = tl.reduce_axis((0, M), name="b")
    O = tl.compute((), lambda: tl.sum(X[a, b], axis=[a, b]), name="O")
    return [X, O]


def gemm_symbolic(N, K):
    n = tl.var("n")
    A = tl.placeholder((n, K), name="A")
    B = tl.placeholder((K, N), name="B")
    k = tl.reduce_axis((0, K), name="k")
    C = tl.compute((n, N), lambda i, j: tl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def _softmax_ref(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _layer_norm_ref(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * g + b


def _stencil_ref(x):
    return x[1:-1, 1:-1] * 0.5 + 0.125 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2]
                                          + x[1:-1, 2:])


def _conv_ref(x, w):
    n, c, h, wd = x.shape
    p = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd), np.float32)
    for ry in range(3):
        for rx in range(3):
            out += np.einsum("kc,nchw->nkhw", w[:, :, ry, rx], p[:, :, ry:ry + h, rx:rx + wd])
    return out


def _maxpool_ref(x):
    n, c, h, w = x.shape
    p = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-1e30)
    out = np.full((n, c, h // 2, w // 2), -np.inf, np.float32)
    for ry in range(3):
        for rx in range(3):
            out = np.maximum(out, p[:, :, ry:ry + h - 1:2, rx:rx + w - 1:2][:, :, :h // 2,
                                                                             :w // 2])
    return out


def random_arrays(tensors, rng) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Random float32 inputs and zeroed outputs for a workload's static-shaped tensors."""
    ins = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in tensors
           if not isinstance(t.op, tl.ComputeOp)]
    outs = [np.zeros([int(d) for d in t.shape], "float32") for t in tensors
            if isinstance(t.op, tl.ComputeOp)]
    return ins, outs


def check_against_numpy(name: str, s, tensors, target: str, rng, tol: float = 2e-3) -> None:
    """Build schedule `s` of workload `name`, run it on random inputs and compare its (last)
    output with the workload's numpy reference."""
    f = tl.build(s, tensors, target=target)
    ins, outs = random_arrays(tensors, rng)
    f(*ins, *outs)
    np.testing.assert_allclose(outs[-1], REFERENCES[name](*ins), rtol=tol, atol=tol)


REFERENCES = {
    "gemm": lambda a, b: a @ b,
    "gemm_relu": lambda a, b, c: np.maximum(a @ b + c, 0),
    "gemm_symbolic": lambda a, b: a @ b,
    "softmax": _softmax_ref,
    "layer_norm": _layer_norm_ref,
    "layer_norm_inline": _layer_norm_ref,
    "stencil": _stencil_ref,
    "conv3x3": _conv_ref,
    "scores": lambda q, k: q @ np.swapaxes(k, -1, -2),
    "scores_scaled": lambda q, k: q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]),
    "maxpool": _maxpool_ref,
    "total": lambda x: np.asarray(x.sum(dtype=np.float64), dtype=np.float32),
}
"""numpy reference of each workload: inputs -> its (last) output."""
