"""Squeeze-and-excitation gates as one compute: global average pool, two small dense layers
with their activations, and the gate, from the block's input to the per-channel scale.

An SE block (EfficientNet, MobileNet-V3, RegNet-Y) computes
`x * gate(W2 @ act(W1 @ mean_hw(x) + b1) + b2)`. As separate graph ops that is a pooling kernel,
two 1x1 convolutions on a 1x1 map (mat-vecs), a layout transform where the squeezed channels
make no block, and a multiply. Here the pool, both mat-vecs and the gate are the stages of one
kernel (`se_gate`); `se_scaled_weight` also multiplies the gate into the input channels of the
convolution that reads the scaled block (conv(x * s, W) = conv(x, W * s) per input channel), so
that the scaled block is never written. The block input is NCHW or NCHW<b>c; the gate comes out
in the same layout (spatial size 1).

Weights are given with the reduced channel axis first: `squeeze` (C, S) is W1 transposed,
`excite` (S, C) is W2 transposed, both in logical (NCHW) channel order. The computes pack them
into panels of PANEL outputs (a kernel-pack stage: pre-packed at build time for constants), so
that the mat-vecs, bound by how fast the weights stream in, read each panel contiguously.
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


#: Output channels per weight panel: the mat-vecs read their weights packed as (outputs / PANEL,
#: inputs, PANEL), each panel one contiguous stream (a vector of AVX-512, two of AVX2).
PANEL = 16


def _panels(weight: tl.Tensor, rows: int, name: str) -> tl.Tensor:
    """`weight` (inputs, outputs) packed into panels of PANEL outputs, `rows` inputs each (the
    inputs past the weight's own read as zero, as do the outputs past its last); tagged as a
    kernel pack, so that a constant weight is packed once, at build time."""
    inputs, outputs = weight.shape
    zero = tl.const(0.0, weight.dtype)

    def f(b: Expr, k: Expr, v: Expr) -> Expr:
        j = b * PANEL + v
        if rows == inputs and outputs % PANEL == 0:
            return weight[k, j]
        # The read is clamped into the weight: a select may evaluate both of its sides.
        inside = weight[tl.minimum(k, inputs - 1), tl.minimum(j, outputs - 1)]
        return tl.if_then_else((k < inputs) & (j < outputs), inside, zero)

    return tl.compute((-(-outputs // PANEL), rows, PANEL), f, name=name,
                      tag="injective,kernel_pack")


def _padded(vector: tl.Tensor, index: Expr) -> Expr:
    """vector[index], zero past its end (the padded outputs of a panel)."""
    size = vector.shape[0]
    if size % PANEL == 0:
        return vector[index]
    return tl.if_then_else(index < size, vector[tl.minimum(index, size - 1)],
                           tl.const(0.0, vector.dtype))


def _excitation(x: tl.Tensor, squeeze: tl.Tensor, squeeze_bias: tl.Tensor, excite: tl.Tensor,
                act: str) -> tl.Tensor:
    """W2 @ act(W1 @ mean_hw(x) + b1) before the excite bias, (N, C / PANEL, PANEL) (rounded up,
    logical channel order): the pool, the squeeze mat-vec, its activation and the excite
    mat-vec as four stages. The squeezed channels are padded to whole panels with zero weights
    and biases (act(0) = 0 for both activations), so the excite reduces over whole panels."""
    shape = const_shape(x, "se_gate")
    n, c, s = shape[0], squeeze.shape[0], squeeze.shape[1]
    s_blocks = -(-s // PANEL)
    ry = tl.reduce_axis((0, shape[2]), name="ry")
    rx = tl.reduce_axis((0, shape[3]), name="rx")
    w1 = _panels(squeeze, c, "se_squeeze_pack")
    w2 = _panels(excite, s_blocks * PANEL, "se_excite_pack")
    if x.ndim == 5:
        blocks, block = shape[1], shape[4]
        pool = tl.compute((n, blocks, block),
                          lambda i, co, ci: tl.sum(x[i, co, ry, rx, ci], axis=[ry, rx]),
                          name="se_pool", tag="se_pool")
        rco = tl.reduce_axis((0, blocks), name="rco")
        rci = tl.reduce_axis((0, block), name="rci")
        squeezed = tl.compute(
            (n, s_blocks, PANEL), lambda i, b, v: tl.sum(
                pool[i, rco, rci] * w1[b, rco * block + rci, v], axis=[rco, rci]),
            name="se_squeeze", tag="se_matvec")
    else:
        pool = tl.compute((n, c), lambda i, k: tl.sum(x[i, k, ry, rx], axis=[ry, rx]),
                          name="se_pool", tag="se_pool")
        rc = tl.reduce_axis((0, c), name="rc")
        squeezed = tl.compute((n, s_blocks, PANEL), lambda i, b, v: tl.sum(
            pool[i, rc] * w1[b, rc, v], axis=rc), name="se_squeeze", tag="se_matvec")
    inv = tl.const(1.0 / (shape[2] * shape[3]), x.dtype)  # the mean, applied after the mat-vec
    hidden = tl.compute((n, s_blocks, PANEL), lambda i, b, v: _activation(
        act, squeezed[i, b, v] * inv + _padded(squeeze_bias, b * PANEL + v)),
        name="se_hidden", tag="se_hidden")
    rso = tl.reduce_axis((0, s_blocks), name="rso")
    rsi = tl.reduce_axis((0, PANEL), name="rsi")
    return tl.compute((n, -(-c // PANEL), PANEL), lambda i, b, v: tl.sum(
        hidden[i, rso, rsi] * w2[b, rso * PANEL + rsi, v], axis=[rso, rsi]),
        name="se_excite", tag="se_matvec")


def _excited(excited: tl.Tensor, i: Expr, k: Expr) -> Expr:
    """Channel k of image i of `_excitation`'s panels."""
    return excited[i, k // PANEL, k % PANEL]


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
            gate, _excited(excited, i, k) + excite_bias[k], alpha, beta), name="se_gate",
            tag="se_gate")
    block = x.shape[4]

    def f(i: Expr, co: Expr, y: Expr, z: Expr, ci: Expr) -> Expr:
        k = co * block + ci
        return _gate(gate, _excited(excited, i, k) + excite_bias[k], alpha, beta)

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
    gates = tl.compute((channels,), lambda k: _gate(gate, _excited(excited, 0, k) + excite_bias[k],
                                                    alpha, beta), name="se_gate",
                       tag="se_gate")
    return tl.compute(weight.shape, lambda *i: weight[i] * gates[i[1]],
                      name="se_scaled_weight", tag="se_scaled_weight")
