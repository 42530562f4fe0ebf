"""A layer norm over the channels of a channel-blocked NCHW[x]c tensor: ConvNeXt's channels-last
LayerNorm (and its LayerNorm2d) run where the convolutions keep their activations, with no
transpose to NHWC and back.

Each pixel (n, h, w) is normalised over its C = C/x * x channels, which in NCHW[x]c lie x
contiguous lanes at a time, C/x blocks apart. So each statistic is reduced in two steps: over
the blocks into one vector of x partial results per pixel (contiguous vector adds), then over
those lanes. The variance is taken around the mean (two passes over the pixel's channels, which
a schedule keeps in cache), not as E[x^2] - mean^2, which cancels for inputs far from zero.
"""

from __future__ import annotations

import tensorlang as tl

from .utils import check_same_dim, check_tensor, const_shape


def layer_norm_NCHWc(x: tl.Tensor, gamma: tl.Tensor, beta: tl.Tensor,
                     epsilon: float = 1e-5) -> tl.Tensor:
    """Normalise x[n, :, h, w, :] (NCHW[x]c: shape (N, C/x, H, W, x)) over its channels, then
    scale by gamma and shift by beta, both laid out as (C/x, x).

    Returns:
        The output, NCHW[x]c, tagged "layer_norm_NCHWc_output".

    Raises:
        ValueError: x is not 5-D, or gamma/beta are not (C/x, x).
    """
    check_tensor(x, "layer_norm_NCHWc: x", 5)
    if not x.dtype.startswith("float"):
        raise TypeError(f"layer_norm_NCHWc: x must be a float tensor, got {x.dtype}")
    n, blocks, h, w, lanes = const_shape(x, "layer_norm_NCHWc: x")
    for name, t in (("gamma", gamma), ("beta", beta)):
        check_tensor(t, f"layer_norm_NCHWc: {name}", 2)
        check_same_dim(t.shape[0], blocks, f"layer_norm_NCHWc: {name} blocks")
        check_same_dim(t.shape[1], lanes, f"layer_norm_NCHWc: {name} lanes")
    inv_count = tl.const(1.0 / (blocks * lanes), x.dtype)

    def reduced(value, name: str) -> tl.Tensor:  # noqa: ANN001 - value(n, cb, h, w, lane)
        """sum over the channels of value, per pixel: over the blocks in lanes, then lanes."""
        cb = tl.reduce_axis((0, blocks), name=f"{name}_block")
        partial = tl.compute((n, h, w, lanes),
                             lambda i, y, z, c: tl.sum(value(i, cb, y, z, c), axis=cb),
                             name=f"{name}_lanes", tag=f"{name}_lanes")
        lane = tl.reduce_axis((0, lanes), name=f"{name}_lane")
        return tl.compute((n, h, w), lambda i, y, z: tl.sum(partial[i, y, z, lane], axis=lane),
                          name=name, tag=name)

    total = reduced(lambda *i: x[i], "layer_norm_NCHWc_sum")

    def centred(i, cb, y, z, c):  # noqa: ANN001, ANN202
        return x[i, cb, y, z, c] - total[i, y, z] * inv_count

    squares = reduced(lambda *i: centred(*i) * centred(*i), "layer_norm_NCHWc_varsum")
    eps = tl.const(float(epsilon), x.dtype)
    # One reciprocal square root per pixel, as a stage of its own (inlined, each of the C/x
    # output vectors of the pixel would take it again).
    scale = tl.compute((n, h, w), lambda i, y, z: tl.rsqrt(squares[i, y, z] * inv_count + eps),
                       name="layer_norm_NCHWc_scale", tag="layer_norm_NCHWc_scale")

    def f(i, cb, y, z, c):  # noqa: ANN001, ANN202
        return centred(i, cb, y, z, c) * scale[i, y, z] * gamma[cb, c] + beta[cb, c]

    return tl.compute(x.shape, f, name="layer_norm_NCHWc", tag="layer_norm_NCHWc_output")
