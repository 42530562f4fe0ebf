"""2-D convolution computes: NCHW (dense, depthwise, grouped) and NHWC.

`conv2d_nchw` is written over a channel-blocked kernel: the kernel is packed to
(K/w, C, R, S, w) and the convolution produces (N, K/w, OH, OW, w), which the tagged output
stage reads back as NCHW; w is one vector of the current target (`pack_width`: 16 float32 with
AVX-512, 8 with AVX2). Packing is a pure layout change (any schedule may inline it), but it is
what lets an x86 schedule hold a block of output channels in one vector register and load the
matching kernel values with one contiguous load (shared/DESIGN.md, "Performance design").
Every conv records its arguments in `attrs["workload"]`, the same tuple its "<op>.x86" tuning task
takes, so that a schedule can look up the tuned config of exactly this workload.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import tensorlang as tl
from tensorlang.expr import Expr

from .transform import pad
from .utils import (
    PaddingLike,
    as_pair,
    ceil_div,
    check_tensor,
    const_shape,
    get_pad_tuple,
    json_args,
    pack_width,
)


@dataclass(frozen=True)
class WindowGeometry:
    """Stride, dilation, padding and the output size of a 2-D window over an (H, W) plane."""

    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad: tuple[int, int, int, int]  # top, left, bottom, right
    out_h: int
    out_w: int


def window_geometry(
    op: str,
    in_hw: tuple[int, int],
    kernel_hw: tuple[int, int],
    stride: int | tuple[int, int],
    padding: PaddingLike,
    dilation: int | tuple[int, int],
) -> WindowGeometry:
    """Resolve the TVM-style window arguments of `op` and check the output is not empty."""
    sh, sw = as_pair(stride, f"{op}: stride")
    dh, dw = as_pair(dilation, f"{op}: dilation")
    eff_h, eff_w = (kernel_hw[0] - 1) * dh + 1, (kernel_hw[1] - 1) * dw + 1
    top, left, bottom, right = get_pad_tuple(padding, (eff_h, eff_w))
    out_h = (in_hw[0] + top + bottom - eff_h) // sh + 1
    out_w = (in_hw[1] + left + right - eff_w) // sw + 1
    if out_h < 1 or out_w < 1:
        raise ValueError(
            f"{op}: the dilated kernel {eff_h}x{eff_w} is larger than the padded input "
            f"{in_hw[0] + top + bottom}x{in_hw[1] + left + right}"
        )
    return WindowGeometry((sh, sw), (dh, dw), (top, left, bottom, right), out_h, out_w)


def _out_dtype(data: tl.Tensor, out_dtype: str | None) -> str:
    return data.dtype if out_dtype is None else str(out_dtype)


def _pad_nchw(data: tl.Tensor, g: WindowGeometry) -> tl.Tensor:
    top, left, bottom, right = g.pad
    return pad(data, [0, 0, top, left], [0, 0, bottom, right], name="data_pad")


def blocked_conv(read: Callable[[Expr, Expr, Expr, Expr], Expr], kernel_vec: tl.Tensor,
                 batch: int, in_channels: int, g: WindowGeometry, dtype: str,
                 channel: Callable[[Expr, Expr], Expr] | None = None,
                 shared_input_blocks: int | None = None) -> tl.Tensor:
    """The convolution stage of the x86 conv schedule: (N, K/w, OH, OW, w) output channels in
    blocks of w over a kernel packed as (K/w, C, R, S, w), summing over `in_channels` input
    channels, kernel rows and kernel columns (in that order of reduce axes); `read(n, c, iy, ix)`
    reads the padded input, whatever its layout. Tagged "conv2d_nchw_blocked".

    `channel(ko, rc)` is the input channel that step `rc` of output block `ko` reads (`rc`
    itself by default; a grouped convolution starts each block at its first group's inputs),
    and `shared_input_blocks` says how many consecutive output blocks read the same input
    channels (all of them by default): the schedule only stacks those in one register block."""
    blocks, _, r, s, width = const_shape(kernel_vec, "blocked_conv: kernel")
    rc = tl.reduce_axis((0, in_channels), name="rc")
    ry = tl.reduce_axis((0, r), name="ry")
    rx = tl.reduce_axis((0, s), name="rx")
    (sh, sw), (dh, dw) = g.stride, g.dilation
    channel = channel or (lambda ko, c: c)
    return tl.compute(
        (batch, blocks, g.out_h, g.out_w, width),
        lambda b, ko, y, x, ki: tl.sum(
            read(b, channel(ko, rc), y * sh + ry * dh, x * sw + rx * dw).astype(dtype)
            * kernel_vec[ko, rc, ry, rx, ki].astype(dtype),
            axis=[rc, ry, rx],
        ),
        name="conv2d_nchw_blocked",
        tag="conv2d_nchw_blocked",
        attrs={"window": (g.stride, g.dilation),
               "shared_input_blocks": shared_input_blocks or blocks},
    )


#: conv2d_nchw for other operand types, by (data, kernel) dtype: `topi.nn.conv2d_int8`, which
#: builds on this module, registers its uint8 x int8 convolution here.
NCHW_BY_DTYPES: dict[tuple[str, str], Callable[..., tl.Tensor]] = {}


def conv2d_nchw(
    data: tl.Tensor,
    kernel: tl.Tensor,
    stride: int | tuple[int, int],
    padding: PaddingLike,
    dilation: int | tuple[int, int] = 1,
    out_dtype: str | None = None,
) -> tl.Tensor:
    """2-D convolution: data (N, C, H, W), kernel (K, C, R, S) -> (N, K, OH, OW).

    Args:
        data: the input, NCHW.
        kernel: the filters, OIHW.
        stride: an int or (h, w).
        padding: an int, (pad_h, pad_w), (top, left, bottom, right), "SAME" or "VALID".
        dilation: an int or (h, w).
        out_dtype: the accumulation and output dtype (the input dtype by default).

    Returns:
        The output tensor, tagged "conv2d_nchw".
    """
    check_tensor(data, "conv2d_nchw: data", 4)
    check_tensor(kernel, "conv2d_nchw: kernel", 4)
    other = NCHW_BY_DTYPES.get((data.dtype, kernel.dtype))
    if other is not None:  # uint8 x int8: the int8 path
        return other(data, kernel, stride, padding, dilation, out_dtype=out_dtype)
    n, c, h, w = const_shape(data, "conv2d_nchw")
    k, kc, r, s = const_shape(kernel, "conv2d_nchw")
    if kc != c:
        raise ValueError(f"conv2d_nchw: kernel has {kc} input channels but data has {c}")
    g = window_geometry("conv2d_nchw", (h, w), (r, s), stride, padding, dilation)
    dtype = _out_dtype(data, out_dtype)
    padded = _pad_nchw(data, g)
    width = pack_width(dtype)
    blocks = ceil_div(k, width)
    zero = tl.const(0, kernel.dtype)

    def pack(ko: Expr, ci: Expr, ry: Expr, rx: Expr, ki: Expr) -> Expr:
        read = kernel[ko * width + ki, ci, ry, rx]
        if k % width == 0:
            return read
        return tl.if_then_else(ko * width + ki < k, read, zero)

    kernel_vec = tl.compute(
        (blocks, c, r, s, width), pack, name="kernel_vec", tag="injective,kernel_pack"
    )
    conv = blocked_conv(lambda b, ci, y, x: padded[b, ci, y, x], kernel_vec, n, c, g, dtype)
    workload = json_args((n, c, h, w), (k, c, r, s), stride, padding, dilation, dtype)
    return tl.compute(
        (n, k, g.out_h, g.out_w),
        lambda b, ko, y, x: conv[b, ko // width, y, x, ko % width],
        name="conv2d_nchw",
        tag="conv2d_nchw",
        attrs={"workload": workload},
    )


def conv2d_nhwc(
    data: tl.Tensor,
    kernel: tl.Tensor,
    stride: int | tuple[int, int],
    padding: PaddingLike,
    dilation: int | tuple[int, int] = 1,
    out_dtype: str | None = None,
) -> tl.Tensor:
    """2-D convolution: data (N, H, W, C), kernel (R, S, C, K) (HWIO) -> (N, OH, OW, K).

    The output channel is the innermost axis of both the kernel and the output, so this layout
    needs no packing to vectorize over output channels.

    Args:
        data: the input, NHWC.
        kernel: the filters, HWIO.
        stride: an int or (h, w).
        padding: an int, (pad_h, pad_w), (top, left, bottom, right), "SAME" or "VALID".
        dilation: an int or (h, w).
        out_dtype: the accumulation and output dtype (the input dtype by default).

    Returns:
        The output tensor, tagged "conv2d_nhwc".
    """
    check_tensor(data, "conv2d_nhwc: data", 4)
    check_tensor(kernel, "conv2d_nhwc: kernel", 4)
    n, h, w, c = const_shape(data, "conv2d_nhwc")
    r, s, kc, k = const_shape(kernel, "conv2d_nhwc")
    if kc != c:
        raise ValueError(f"conv2d_nhwc: kernel has {kc} input channels but data has {c}")
    g = window_geometry("conv2d_nhwc", (h, w), (r, s), stride, padding, dilation)
    dtype = _out_dtype(data, out_dtype)
    top, left, bottom, right = g.pad
    padded = pad(data, [0, top, left, 0], [0, bottom, right, 0], name="data_pad")
    rc = tl.reduce_axis((0, c), name="rc")
    ry = tl.reduce_axis((0, r), name="ry")
    rx = tl.reduce_axis((0, s), name="rx")
    (sh, sw), (dh, dw) = g.stride, g.dilation
    workload = json_args((n, h, w, c), (r, s, c, k), stride, padding, dilation, dtype)
    return tl.compute(
        (n, g.out_h, g.out_w, k),
        lambda b, y, x, ko: tl.sum(
            padded[b, y * sh + ry * dh, x * sw + rx * dw, rc].astype(dtype)
            * kernel[ry, rx, rc, ko].astype(dtype),
            axis=[ry, rx, rc],
        ),
        name="conv2d_nhwc",
        tag="conv2d_nhwc",
        attrs={"workload": workload, "window": (g.stride, g.dilation)},
    )


def depthwise_conv2d_nchw(
    data: tl.Tensor,
    kernel: tl.Tensor,
    stride: int | tuple[int, int],
    padding: PaddingLike,
    dilation: int | tuple[int, int] = 1,
    out_dtype: str | None = None,
) -> tl.Tensor:
    """Depthwise convolution: data (N, C, H, W), kernel (C, M, R, S) -> (N, C * M, OH, OW).

    Output channel `c * M + m` filters input channel `c` with kernel[c, m].

    Returns:
        The output tensor, tagged "depthwise_conv2d_nchw".
    """
    check_tensor(data, "depthwise_conv2d_nchw: data", 4)
    check_tensor(kernel, "depthwise_conv2d_nchw: kernel", 4)
    n, c, h, w = const_shape(data, "depthwise_conv2d_nchw")
    kc, m, r, s = const_shape(kernel, "depthwise_conv2d_nchw")
    if kc != c:
        raise ValueError(f"depthwise_conv2d_nchw: kernel has {kc} channels but data has {c}")
    g = window_geometry("depthwise_conv2d_nchw", (h, w), (r, s), stride, padding, dilation)
    dtype = _out_dtype(data, out_dtype)
    padded = _pad_nchw(data, g)
    ry = tl.reduce_axis((0, r), name="ry")
    rx = tl.reduce_axis((0, s), name="rx")
    (sh, sw), (dh, dw) = g.stride, g.dilation
    workload = json_args((n, c, h, w), (c, m, r, s), stride, padding, dilation, dtype)
    return tl.compute(
        (n, c * m, g.out_h, g.out_w),
        lambda b, oc, y, x: tl.sum(
            padded[b, oc // m, y * sh + ry * dh, x * sw + rx * dw].astype(dtype)
            * kernel[oc // m, oc % m, ry, rx].astype(dtype),
            axis=[ry, rx],
        ),
        name="depthwise_conv2d_nchw",
        tag="depthwise_conv2d_nchw",
        attrs={"workload": workload},
    )


def group_conv2d_nchw(
    data: tl.Tensor,
    kernel: tl.Tensor,
    stride: int | tuple[int, int],
    padding: PaddingLike,
    dilation: int | tuple[int, int],
    groups: int,
    out_dtype: str | None = None,
) -> tl.Tensor:
    """Grouped convolution: data (N, C, H, W), kernel (K, C / groups, R, S) -> (N, K, OH, OW).

    Output channel k belongs to group k // (K / groups) and reads only that group's inputs.

    Returns:
        The output tensor, tagged "group_conv2d_nchw".
    """
    check_tensor(data, "group_conv2d_nchw: data", 4)
    check_tensor(kernel, "group_conv2d_nchw: kernel", 4)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"group_conv2d_nchw: groups must be a positive int, got {groups!r}")
    n, c, h, w = const_shape(data, "group_conv2d_nchw")
    k, kc, r, s = const_shape(kernel, "group_conv2d_nchw")
    if c % groups or k % groups:
        raise ValueError(
            f"group_conv2d_nchw: channels in ({c}) and out ({k}) must divide by groups={groups}"
        )
    if kc != c // groups:
        raise ValueError(
            f"group_conv2d_nchw: kernel has {kc} input channels, expected {c // groups} "
            f"({c} channels in {groups} groups)"
        )
    g = window_geometry("group_conv2d_nchw", (h, w), (r, s), stride, padding, dilation)
    dtype = _out_dtype(data, out_dtype)
    padded = _pad_nchw(data, g)
    rc = tl.reduce_axis((0, kc), name="rc")
    ry = tl.reduce_axis((0, r), name="ry")
    rx = tl.reduce_axis((0, s), name="rx")
    (sh, sw), (dh, dw) = g.stride, g.dilation
    per_group = k // groups
    return tl.compute(
        (n, k, g.out_h, g.out_w),
        lambda b, oc, y, x: tl.sum(
            padded[b, oc // per_group * kc + rc, y * sh + ry * dh, x * sw + rx * dw].astype(dtype)
            * kernel[oc, rc, ry, rx].astype(dtype),
            axis=[rc, ry, rx],
        ),
        name="group_conv2d_nchw",
        tag="group_conv2d_nchw",
        attrs={"workload": json_args((n, c, h, w), (k, kc, r, s), stride, padding, dilation,
                                     groups, dtype)},
    )
