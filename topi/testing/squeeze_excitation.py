"""numpy references of the squeeze-and-excitation kernels (`topi.nn.squeeze_excitation`),
written as the block reads in a model: mean, dense, activation, dense, gate, in float64."""

from __future__ import annotations

import numpy as np

from .layout import to_nchw, to_nchwc


def _gates(x: np.ndarray, squeeze: np.ndarray, squeeze_bias: np.ndarray, excite: np.ndarray,
           excite_bias: np.ndarray, act: str, gate: str, alpha: float,
           beta: float) -> np.ndarray:
    """(N, C) gates of an NCHW or NCHW<b>c block input."""
    plain = (to_nchw(x) if x.ndim == 5 else x).astype(np.float64)
    hidden = plain.mean(axis=(2, 3)) @ squeeze + squeeze_bias
    hidden = np.maximum(hidden, 0.0) if act == "relu" else hidden / (1.0 + np.exp(-hidden))
    v = hidden @ excite + excite_bias
    return 1.0 / (1.0 + np.exp(-v)) if gate == "sigmoid" else np.clip(v * alpha + beta, 0, 1)


def se_gate_python(x: np.ndarray, squeeze: np.ndarray, squeeze_bias: np.ndarray,
                   excite: np.ndarray, excite_bias: np.ndarray, act: str = "relu",
                   gate: str = "sigmoid", alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    """The gate in x's layout with a 1 x 1 plane."""
    g = _gates(x, squeeze, squeeze_bias, excite, excite_bias, act, gate, alpha, beta)
    g = g.reshape(*g.shape, 1, 1).astype(x.dtype)
    return to_nchwc(g, x.shape[4]) if x.ndim == 5 else g


def se_scaled_weight_python(x: np.ndarray, squeeze: np.ndarray, squeeze_bias: np.ndarray,
                            excite: np.ndarray, excite_bias: np.ndarray, weight: np.ndarray,
                            act: str = "relu", gate: str = "sigmoid", alpha: float = 0.2,
                            beta: float = 0.5) -> np.ndarray:
    """`weight` with input channel c (axis 1) scaled by the gate of channel c of one image."""
    (g,) = _gates(x, squeeze, squeeze_bias, excite, excite_bias, act, gate, alpha, beta)
    shape = [1] * weight.ndim
    shape[1] = -1
    return (weight * g.reshape(shape)).astype(weight.dtype)
