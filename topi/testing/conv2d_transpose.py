"""numpy reference of the transposed convolution: every input pixel scatters its kernel-weighted
copy into the output (the definition), in float64."""

from __future__ import annotations

import numpy as np

from ..nn.utils import as_pair, get_pad_tuple


def conv2d_transpose_nchw_python(data: np.ndarray, kernel: np.ndarray, stride=1, padding=0,
                                 output_padding=0, dilation=1, groups: int = 1) -> np.ndarray:
    """Transposed convolution (the gradient of conv2d by its input), NCHW, by scattering each input
    pixel.
    """
    n, c, h, w = data.shape
    _, k_per_group, r, s = kernel.shape
    sh, sw = as_pair(stride, "stride")
    dh, dw = as_pair(dilation, "dilation")
    oph, opw = (output_padding,) * 2 if isinstance(output_padding, int) else output_padding
    top, left, bottom, right = get_pad_tuple(padding, (r, s))
    full_h = (h - 1) * sh + dh * (r - 1) + 1 + oph
    full_w = (w - 1) * sw + dw * (s - 1) + 1 + opw
    full = np.zeros((n, k_per_group * groups, full_h, full_w))
    c_per_group = c // groups
    for g in range(groups):
        x = data[:, g * c_per_group:(g + 1) * c_per_group].astype(np.float64)
        wk = kernel[g * c_per_group:(g + 1) * c_per_group].astype(np.float64)
        for y in range(r):
            for xx in range(s):
                contrib = np.einsum("nchw,ck->nkhw", x, wk[:, :, y, xx])
                full[:, g * k_per_group:(g + 1) * k_per_group,
                     y * dh:y * dh + (h - 1) * sh + 1:sh,
                     xx * dw:xx * dw + (w - 1) * sw + 1:sw] += contrib
    return full[:, :, top:full_h - bottom, left:full_w - right].astype(data.dtype)
