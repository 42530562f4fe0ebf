"""x86 schedule and tuning template of the grouped convolution on NCHW[x]c activations
(topi.nn.group_conv2d_NCHWc).

The op computes the blocked stage of conv2d_NCHWc with each output block reading its groups'
input channels, so `schedule_conv2d_nchw_with` serves it: a register block of tile_oh x tile_ow
output points x tile_oc vectors of output channels, accumulated over the block's W input
channels (split by tile_ic), kernel rows and kernel columns; one broadcast input per point and
channel feeds the FMAs of the tile_oc vectors. Only output blocks of one group read the same
inputs, so tile_oc stays within a group (blocks of a vector or more channels per group); the
fallback sizes the block from the current target's registers and tile_ic from its caches, as
for a dense convolution of W input channels.
"""

from __future__ import annotations

from collections.abc import Sequence

import autotune
import tensorlang as tl

from ..nn.conv2d_nchwc import group_conv2d_NCHWc
from .config import conv_template, schedule_tagged
from .conv2d import schedule_conv2d_nchw_with

TASK = "group_conv2d_NCHWc.x86"


def schedule_group_conv2d_NCHWc(outs: tl.Tensor | Sequence[tl.Tensor]) -> tl.Schedule:
    """Schedule group_conv2d_NCHWc and its fused elementwise tail (tuned config when one is
    active)."""
    return schedule_tagged(outs, {"group_conv2d_NCHWc": TASK}, schedule_conv2d_nchw_with)


@autotune.template(TASK)
def group_conv2d_NCHWc_template(cfg, data_shape, kernel_shape, stride, padding, dilation,
                                groups, dtype):
    """Tunable group_conv2d_NCHWc: args ((N, C/bi, H, W, bi), (K/bo, W, R, S, bo), stride,
    padding, dilation, groups, dtype)."""
    channels = data_shape[1] * (data_shape[4] if len(data_shape) == 5 else 1)
    _, _, r, s, _ = kernel_shape

    def conv(data, kernel, stride, padding, dilation, dtype):
        return group_conv2d_NCHWc(data, kernel, stride, padding, dilation, groups, dtype)

    return conv_template(cfg, conv, schedule_conv2d_nchw_with, data_shape, kernel_shape, stride,
                         padding, dilation, dtype, channel_axis=(1, 4),
                         products=channels // groups * r * s)
