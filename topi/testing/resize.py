"""numpy reference of resize2d (ONNX Resize with sizes, NCHW): per axis, the source coordinate of
every output index in float32 (as onnxruntime computes it), then neighbour indices and weights."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..nn.resize import check_resize_args, coordinate_constants, cubic_weights


def _source_coords(in_size: int, out_size: int, mode: str) -> np.ndarray:
    f32 = np.float32
    x = np.arange(out_size, dtype=f32)
    scale, numerator, offset = (f32(v) for v in coordinate_constants(in_size, out_size, mode))
    if mode == "align_corners":
        if out_size == 1:
            return np.zeros(1, f32)
        return x * numerator / f32(out_size - 1)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + f32(0.5)) / scale
    if mode == "pytorch_half_pixel" and out_size == 1:
        return np.zeros(1, f32)
    if mode == "half_pixel_symmetric":
        return (np.float64(offset) + (x.astype(np.float64) + 0.5) / np.float64(scale) - 0.5).astype(f32)
    return (x + f32(0.5)) / scale - f32(0.5)


def _taps(in_size: int, out_size: int, method: str, mode: str, nearest_mode: str, a: float,
          exclude_outside: bool) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights), each (out_size, taps): the input rows each output row mixes."""
    if in_size == out_size:  # an axis kept at its size is copied (onnxruntime's rule)
        return np.arange(in_size)[:, None], np.ones((in_size, 1))
    coord = _source_coords(in_size, out_size, mode)
    if method == "nearest":
        low = np.floor(coord)
        frac = coord - low
        picked = {
            "floor": low,
            "ceil": np.ceil(coord),
            "round_prefer_floor": low + (frac > 0.5),
            "round_prefer_ceil": low + (frac >= 0.5),
        }[nearest_mode]
        return np.clip(picked.astype(np.int64), 0, in_size - 1)[:, None], np.ones((out_size, 1))
    if method == "linear":
        c = np.clip(coord, 0, in_size - 1)
        low = np.floor(c)
        w1 = (c - low).astype(np.float64)
        i0 = low.astype(np.int64)
        return np.stack([i0, np.minimum(i0 + 1, in_size - 1)], 1), np.stack([1 - w1, w1], 1)
    low = np.floor(coord)
    t = (coord - low).astype(np.float64)
    raw = low.astype(np.int64)[:, None] + np.arange(-1, 3)
    weights = np.stack(cubic_weights(t, a), 1)
    if exclude_outside:
        weights = np.where((raw >= 0) & (raw < in_size), weights, 0.0)
        weights /= weights.sum(1, keepdims=True)
    return np.clip(raw, 0, in_size - 1), weights


def resize2d_python(
    x: np.ndarray,
    size: Sequence[int],
    method: str = "nearest",
    coordinate_transformation_mode: str = "half_pixel",
    nearest_mode: str = "round_prefer_floor",
    cubic_coeff_a: float = -0.75,
    exclude_outside: bool = False,
    extrapolation_value: float = 0.0,
    layout: str = "NCHW",
) -> np.ndarray:
    """`x` (NCHW) resized to `size` = (out_h, out_w) with ONNX Resize's semantics; with `layout`
    "NCHW<b>c", `x` and the result are channel-blocked (N, C/b, H, W, b)."""
    check_resize_args(method, coordinate_transformation_mode, nearest_mode)
    if layout != "NCHW":
        n, blocks, h, w, b = x.shape
        out = resize2d_python(x.transpose(0, 1, 4, 2, 3).reshape(n, blocks * b, h, w), size,
                              method, coordinate_transformation_mode, nearest_mode,
                              cubic_coeff_a, exclude_outside)
        return out.reshape(n, blocks, b, *size).transpose(0, 1, 3, 4, 2).copy()
    _, _, in_h, in_w = x.shape
    args = (method, coordinate_transformation_mode, nearest_mode, cubic_coeff_a,
            bool(exclude_outside))
    rows, wy = _taps(in_h, size[0], *args)
    cols, wx = _taps(in_w, size[1], *args)
    if method == "nearest":
        return x[:, :, rows[:, 0]][:, :, :, cols[:, 0]].copy()
    # out[n, c, i, j] = sum_p sum_q wy[i, p] wx[j, q] x[n, c, rows[i, p], cols[j, q]]
    gathered = x.astype(np.float64)[:, :, rows][:, :, :, :, cols]  # (N, C, OH, P, OW, Q)
    out = np.einsum("ncipjq,ip,jq->ncij", gathered, wy, wx)
    return out.astype(x.dtype)
