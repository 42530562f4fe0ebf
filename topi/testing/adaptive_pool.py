"""numpy reference of adaptive pooling: a loop over the output windows."""

from __future__ import annotations

import numpy as np

from ..nn.adaptive_pool import adaptive_windows
from ..nn.utils import as_pair


def adaptive_pool2d_python(data: np.ndarray, output_size, pool_type: str,
                           layout: str = "NCHW") -> np.ndarray:
    """Adaptive pooling: output cell i covers input rows floor(i*H/out) to ceil((i+1)*H/out)."""
    x = data if layout == "NCHW" else data.transpose(0, 3, 1, 2)
    oh, ow = as_pair(output_size, "output_size")
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    reduce = np.max if pool_type == "max" else np.mean
    for i, (y0, y1) in enumerate(adaptive_windows(h, oh)):
        for j, (x0, x1) in enumerate(adaptive_windows(w, ow)):
            out[:, :, i, j] = reduce(x[:, :, y0:y1, x0:x1].astype(np.float64), axis=(2, 3))
    out = out.astype(data.dtype)
    return out if layout == "NCHW" else out.transpose(0, 2, 3, 1)


def adaptive_avg_pool2d_python(data: np.ndarray, output_size, layout: str = "NCHW"):
    """Adaptive average pooling to `output_size` (PyTorch's AdaptiveAvgPool2d)."""
    return adaptive_pool2d_python(data, output_size, "avg", layout)


def adaptive_max_pool2d_python(data: np.ndarray, output_size, layout: str = "NCHW"):
    """Adaptive max pooling to `output_size` (PyTorch's AdaptiveMaxPool2d)."""
    return adaptive_pool2d_python(data, output_size, "max", layout)
