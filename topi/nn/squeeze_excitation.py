"""Squeeze-and-excitation gates as one compute: global average pool, two small dense layers
with their activations, and the gate, from the block's input to the per-channel scale.

An SE block (EfficientNet, MobileNet-V3, RegNet-Y) computes
`x * gate(W2 @ act(W1 @ mean_hw(x) + b1) + b2)`. As separate graph ops that is a pooling kernel,
two 1x1 convolutions on a 1x1 map (whose conv schedules spend ~0.1 ms on a mat-vec of a few
thousand weights) and a multiply. Here the pool, both mat-vecs and the gate are the stages of one
kernel (`se_gate`); `se_scaled_weight` also multiplies the gate into the input channels of the
convolution that reads the scaled block (conv(x * s, W) = conv(x, W * s) per input channel), so
that the scaled block is never written. The block input is NCHW or NCHW<b>c; the gate comes out
in the same layout (spatial size 1).

Weights are given as the stages read them, with the channel axis that is reduced first:
`squeeze` (C, S) is W1 transposed, `excite` (S, C) is W2 transposed, both in logical (NCHW)
channel order, so each mat-vec reads rows of contiguous outputs (vector lanes over outputs).
"""

from __future__ import annotations

import tensorlang as tl
from tensorlang.expr import Expr

from .logistic import sigmoid
from .utils import check_tensor, const_shape

ACTIVATIONS = ("relu", "silu")
GATES = ("sigmoid", "hard_sigmoid")


def _activation(kind: str, v: Expr) -> Expr:
    if kind == "relu":
        return tl.maximum(v, tl.const(0.0, v.dtype))
    return v * sigmoid(v)


def _gate(kind: str, v: Expr, alpha: float, beta: float) -> Expr:
    if kind == "sigmoid":
        return sigmoid(v)
    zero, one = tl.const(0.0, v.dtype), tl.const(1.0, v.dtype)
    return tl.maximum(zero, tl.minimum(one, v * tl.const(alpha, v.dtype)
                                       + tl.const(beta, v.dtype)))


def _check(x: tl.Tensor, squeeze: tl.Tensor, squeeze_bias: tl.Tensor, excite: tl.Tensor,
           excite_bias: tl.Tensor, act: str, gate: str) -> tuple[int, int, int]:
    """(batch, channels, squeezed channels), or the error naming the culprit."""
    check_tensor(x, "se_gate: x")
    if x.ndim not in (4, 5):
        raise ValueError(f"se_gate: x must be NCHW or NCHW<b>c (4 or 5 dimensions), got "
                         f"shape {tuple(x.shape)}")
    shape = const_shape(x, "se_gate")
    batch, channels = shape[0], shape[1] * (shape[4] if x.ndim == 5 else 1)
    check_tensor(squeeze, "se_gate: squeeze", 2)
    check_tensor(excite, "se_gate: excite", 2)
    check_tensor(squeeze_bias, "se_gate: squeeze_bias", 1)
    check_tensor(excite_bias, "se_gate: excite_bias", 1)
    c, s = const_shape(squeeze, "se_gate")
    if c != channels:
        raise ValueError(f"se_gate: squeeze has {c} input channels but x has {channels}")
    if const_shape(excite, "se_gate") != (s, channels):
        raise ValueError(f"se_gate: excite must be ({s}, {channels}), got "
                         f"{tuple(excite.shape)}")
    if const_shape(squeeze_bias, "se_gate") != (s,):
        raise ValueError(f"se_gate: squeeze_bias must have {s} entries, got "
                         f"{tuple(squeeze_bias.shape)}")
    if const_shape(excite_bias, "se_gate") != (channels,):
        raise ValueError(f"se_gate: excite_bias must have {channels} entries, got "
                         f"{tuple(excite_bias.shape)}")
    if act not in ACTIVATIONS:
        raise ValueError(f"se_gate: act must be one of {ACTIVATIONS}, got {act!r}")
    if gate not in GATES:
        raise ValueError(f"se_gate: gate must be one of {GATES}, got {gate!r}")
    return batch, channels, s


def _excitation(x: tl.Tensor, squeeze: tl.Tensor, squeeze_bias: tl.Tensor, excite: tl.Tensor,
                act: str) -> tl.Tensor:
    """W2 @ act(W1 @ mean_hw(x) + b1), (N, C) in logical channel order, before the excite bias:
    the pool, the squeeze mat-vec, its activation and the excite mat-vec as four stages."""
    shape = const_shape(x, "se_gate")
    n, c, s = shape[0], squeeze.shape[0], squeeze.shape[1]
    ry = tl.reduce_axis((0, shape[2]), name="ry")
    rx = tl.reduce_axis((0, shape[3]), name="rx")
    if x.ndim == 5:
        blocks, block = shape[1], shape[4]
        pool = tl.compute((n, blocks, block),
                          lambda i, co, ci: tl.sum(x[i, co, ry, rx, ci], axis=[ry, rx]),
                          name="se_pool", tag="se_pool")
        rco = tl.reduce_axis((0, blocks), name="rco")
        rci = tl.reduce_axis((0, block), name="rci")
        squeezed = tl.compute(
            (n, s), lambda i, j: tl.sum(pool[i, rco, rci] * squeeze[rco * block + rci, j],
                                        axis=[rco, rci]), name="se_squeeze", tag="se_matvec")
    else:
        pool = tl.compute((n, c), lambda i, k: tl.sum(x[i, k, ry, rx], axis=[ry, rx]),
                          name="se_pool", tag="se_pool")
        rc = tl.reduce_axis((0, c), name="rc")
        squeezed = tl.compute((n, s), lambda i, j: tl.sum(pool[i, rc] * squeeze[rc, j], axis=rc),
                              name="se_squeeze", tag="se_matvec")
    inv = tl.const(1.0 / (shape[2] * shape[3]), x.dtype)  # the mean, applied after the mat-vec
    hidden = tl.compute((n, s), lambda i, j: _activation(act, squeezed[i, j] * inv
                                                         + squeeze_bias[j]),
                        name="se_hidden", tag="se_hidden")
    rs = tl.reduce_axis((0, s), name="rs")
    return tl.compute((n, c), lambda i, k: tl.sum(hidden[i, rs] * excite[rs, k], axis=rs),
                      name="se_excite", tag="se_matvec")


def se_gate(x: tl.Tensor, squeeze: tl.Tensor, squeeze_bias: tl.Tensor, excite: tl.Tensor,
            excite_bias: tl.Tensor, act: str = "relu", gate: str = "sigmoid",
            alpha: float = 0.2, beta: float = 0.5) -> tl.Tensor:
    """The SE gate of `x`: gate(W2 @ act(W1 @ mean_hw(x) + b1) + b2) per image and channel.

    Args:
        x: the block input, (N, C, H, W) or (N, C/b, H, W, b).
        squeeze: W1 transposed, (C, S).
        squeeze_bias: b1, (S,).
        excite: W2 transposed, (S, C).
        excite_bias: b2, (C,).
        act: the inner activation, "relu" or "silu".
        gate: "sigmoid" or "hard_sigmoid" (max(0, min(1, alpha * v + beta))).
        alpha, beta: the hard sigmoid's slope and offset.

    Returns:
        The gate in x's layout with a 1 x 1 plane: (N, C, 1, 1) or (N, C/b, 1, 1, b), tagged
        "se_gate".
    """
    batch, channels, _ = _check(x, squeeze, squeeze_bias, excite, excite_bias, act, gate)
    excited = _excitation(x, squeeze, squeeze_bias, excite, act)
    if x.ndim == 4:
        return tl.compute((batch, channels, 1, 1), lambda i, k, y, z: _gate(
            gate, excited[i, k] + excite_bias[k], alpha, beta), name="se_gate", tag="se_gate")
    block = x.shape[4]

    def f(i: Expr, co: Expr, y: Expr, z: Expr, ci: Expr) -> Expr:
        k = co * block + ci
        return _gate(gate, excited[i, k] + excite_bias[k], alpha, beta)

    return tl.compute((batch, channels // block, 1, 1, block), f, name="se_gate", tag="se_gate")


def se_scaled_weight(x: tl.Tensor, squeeze: tl.Tensor, squeeze_bias: tl.Tensor,
                     excite: tl.Tensor, excite_bias: tl.Tensor, weight: tl.Tensor,
                     act: str = "relu", gate: str = "sigmoid", alpha: float = 0.2,
                     beta: float = 0.5) -> tl.Tensor:
    """The weight of a convolution that reads `x` scaled by its SE gate, with the gate folded
    into its input channels: conv(x * gate, weight) = conv(x, result). One image only (the
    result is per image).

    Args:
        x, squeeze, squeeze_bias, excite, excite_bias, act, gate, alpha, beta: as `se_gate`.
        weight: the convolution's weight with input channels on axis 1: OIHW (K, C, R, S) or
            conv2d_NCHWc's (K/b, C, R, S, b).

    Returns:
        `weight` with input channel c multiplied by the gate of channel c, tagged
        "se_scaled_weight".
    """
    batch, channels, _ = _check(x, squeeze, squeeze_bias, excite, excite_bias, act, gate)
    if batch != 1:
        raise ValueError(f"se_scaled_weight: x must hold one image (the weight is per image), "
                         f"got batch {batch}")
    check_tensor(weight, "se_scaled_weight: weight")
    if weight.ndim not in (4, 5) or const_shape(weight, "se_scaled_weight")[1] != channels:
        raise ValueError(f"se_scaled_weight: weight must be (K, {channels}, R, S) or "
                         f"(K/b, {channels}, R, S, b), got {tuple(weight.shape)}")
    excited = _excitation(x, squeeze, squeeze_bias, excite, act)
    gates = tl.compute((channels,), lambda k: _gate(gate, excited[0, k] + excite_bias[k],
                                                    alpha, beta), name="se_gate",
                       tag="se_gate")
    return tl.compute(weight.shape, lambda *i: weight[i] * gates[i[1]],
                      name="se_scaled_weight", tag="se_scaled_weight")
