"""Graph ops that the layout pass puts in so that values stay channel-blocked: the layer norm
over the channels of an NCHW[x]c value (ConvNeXt's channels-last LayerNorm, with its
permutes gone); registered with its topi compute, x86 schedule and numpy reference (the pattern
of `ops.py`)."""

from __future__ import annotations

import numpy as np

from ..nn.channel_norm import layer_norm_NCHWc
from ..testing import layer_norm_python
from ..x86.channel_norm import schedule_layer_norm_NCHWc
from .ops import OpPattern, register_op


def _reference(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
               epsilon: float = 1e-5) -> np.ndarray:
    """layer_norm_NCHWc in numpy: the channel axes of NCHW[x]c are the blocks and the lanes."""
    return layer_norm_python(x, gamma, beta, axis=(1, 4), epsilon=epsilon)


register_op("layer_norm_NCHWc",
            lambda x, gamma, beta, epsilon=1e-5: layer_norm_NCHWc(x, gamma, beta, epsilon),
            schedule_layer_norm_NCHWc, OpPattern.REDUCTION, reference=_reference)
