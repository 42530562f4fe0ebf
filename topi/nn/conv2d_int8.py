"""int8 conv2d: uint8 data with int8 kernels (OIHW) -> int32, on VNNI's blocked layouts.

The data is read in NCHW[x]c with `ic_bn` channels per block (a multiple of 4): NCHW data is
copied into it, blocked data (a previous int8 convolution's output) is read as it is, and a copy
fills the padding with the data's zero point only where there is padding. The kernel is blocked
as (OC/oc_bn, IC/ic_bn, KH, KW, ic_bn/4, oc_bn, 4): for one (kh, kw) and 4 input channels, oc_bn
output channels of 4 int8 each are one vector, the kernel operand of one `vpdpbusd` (oc_bn = the
target's int32 lanes, 16 with AVX-512). The product stage (tag "conv2d_NCHWc_int8") computes
NCHW[oc_bn]c int32 with five reduction axes (input channel block, kh, kw, groups of 4 within the
block, the 4), so that its innermost (oc lane, channel of 4) is exactly the dot intrinsic.
`conv2d_NCHWc_int8` returns it blocked (a model keeps its int8 activations so, with the
requantizing epilogue fused); `conv2d_nchw_int8` returns it to NCHW. Channels are padded with
zeros to whole blocks. `depthwise_conv2d_NCHWc_int8` (tag "depthwise_conv2d_NCHWc_int8") is
the depthwise form: the same data copy and zero point correction, channels in the lanes.
"""

from __future__ import annotations

import tensorlang as tl

from .conv2d import NCHW_BY_DTYPES, window_geometry
from .dense_int8 import BF16_GROUP, GROUP, int8_lanes
from .utils import const_shape

TAG = "conv2d_NCHWc_int8"
DEPTHWISE_TAG = "depthwise_conv2d_NCHWc_int8"
BF16_TAG = "conv2d_NCHWc_bf16"


def _ic_block(channels: int) -> int:
    """Input channels per block: up to 16, a multiple of 4."""
    padded = -(-channels // GROUP) * GROUP
    return next(b for b in (16, 8, 4) if padded % b == 0)


def _pack_kernel(kernel: tl.Tensor, ic_bn: int, oc_bn: int, group: int,
                 dtype: str) -> tl.Tensor:
    """OIHW -> (OC/oc_bn, IC/ic_bn, KH, KW, ic_bn/group, oc_bn, group) in `dtype`, zeros past
    K and C."""
    k, c, r, s = const_shape(kernel, "conv2d: kernel")

    def pack(oco, ico, y, x, icf, oci, ics):
        oc, ic = oco * oc_bn + oci, ico * ic_bn + icf * group + ics
        value = kernel[tl.minimum(oc, k - 1), tl.minimum(ic, c - 1), y, x].astype(dtype)
        return tl.if_then_else((oc < k) & (ic < c), value, tl.const(0, dtype))

    return tl.compute((-(-k // oc_bn), -(-c // ic_bn), r, s, ic_bn // group, oc_bn, group),
                      pack, name="kernel_vec", tag="injective,kernel_pack")


def _pad_data(data: tl.Tensor, c: int, ic_bn: int, pad: tuple, zero_point: int,
              dtype: str) -> tl.Tensor:
    """The data in NCHW[ic_bn]c and `dtype` with the spatial padding (and the channels past
    `c`) filled with the zero point: a copy of NCHW data, or of blocked data that needs padding
    or converting; other blocked data is read as it is."""
    top, left, bottom, right = pad
    blocked = data.ndim == 5
    if blocked and not any(pad) and data.dtype == dtype:
        return data
    n, h, w = (int(data.shape[i]) for i in (0, 2, 3))
    zp = tl.const(zero_point, dtype)

    def pack(b, ico, y, x, ici):
        ch, yy, xx = ico * ic_bn + ici, y - top, x - left
        inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        yc, xc = tl.minimum(tl.maximum(yy, 0), h - 1), tl.minimum(tl.maximum(xx, 0), w - 1)
        if blocked:
            value, fill = data[b, ico, yc, xc, ici].astype(dtype), zp
        else:
            inside = inside & (ch < c)
            value = data[b, tl.minimum(ch, c - 1), yc, xc].astype(dtype)
            # Channels past c meet zero weights: any value; the zero point keeps the
            # correction (zero point x the kernel's sums) exact as well.
            fill = tl.if_then_else(ch < c, zp, tl.const(0, dtype))
        if dtype != "uint8":  # bfloat16: no arithmetic of its own
            return tl.if_then_else(inside, value, fill)
        # Arithmetic, not a select: a select whose side reads memory branches per element.
        keep = inside.astype("uint8")
        return value * keep + fill * (tl.const(1, "uint8") - keep)

    return tl.compute((n, -(-c // ic_bn), h + top + bottom, w + left + right, ic_bn), pack,
                      name="data_vec", tag="injective,int8_data_pack")


def _check_data(data: tl.Tensor, kernel_channels: int, group: int, what: str) -> tuple:
    """(n, c, h, w, ic_bn) of NCHW or NCHW[b]c data, checked against the kernel's input
    channels (blocked data: its whole blocks)."""
    if data.ndim not in (4, 5):
        raise ValueError(f"{what}: data must be NCHW or NCHW[b]c, got shape {tuple(data.shape)}")
    shape = const_shape(data, f"{what}: data")
    n, h, w = shape[0], shape[2], shape[3]
    c = shape[1] * shape[4] if data.ndim == 5 else shape[1]
    if data.ndim == 5 and shape[4] % group:
        raise ValueError(f"{what}: a data block of {shape[4]} channels is not a multiple of "
                         f"{group}")
    block = shape[4] if data.ndim == 5 else 1
    if c != -(-kernel_channels // block) * block:
        raise ValueError(f"{what}: data has {c} channels, the kernel {kernel_channels}")
    return n, c, h, w, shape[4] if data.ndim == 5 else _ic_block(c)


def _blocked_conv(data: tl.Tensor, kernel: tl.Tensor, stride, padding, dilation,
                  data_zero_point: int, group: int, oc_bn: int, acc: str, tag: str,
                  operands: tuple[str, str]) -> tl.Tensor:
    """The NCHW[oc_bn]c product of the module docstring, `group` input channels per lane of
    the dot (4 int8, 2 bf16), on data and kernel of the `operands` dtypes (converted in their
    copies), accumulated in `acc`."""
    k, kc, r, s = const_shape(kernel, f"{tag}: kernel")
    n, c, h, w, ic_bn = _check_data(data, kc, group, tag)
    g = window_geometry(tag, (h, w), (r, s), stride, padding, dilation)
    (sh, sw), (dh, dw) = g.stride, g.dilation
    data_vec = _pad_data(data, c, ic_bn, g.pad, data_zero_point, operands[0])
    kernel_vec = _pack_kernel(kernel, ic_bn, oc_bn, group, operands[1])
    reduce = [tl.reduce_axis((0, extent), name=name) for extent, name in
              ((-(-c // ic_bn), "ico"), (r, "ky"), (s, "kx"), (ic_bn // group, "icf"),
               (group, "ics"))]
    ico, ky, kx, icf, ics = reduce
    return tl.compute(
        (n, -(-k // oc_bn), g.out_h, g.out_w, oc_bn),
        lambda b, oco, y, x, oci: tl.sum(
            data_vec[b, ico, y * sh + ky * dh, x * sw + kx * dw, icf * group + ics].astype(acc)
            * kernel_vec[oco, ico, ky, kx, icf, oci, ics].astype(acc), axis=reduce),
        name=tag, tag=tag, attrs={"workload": ((n, c, h, w), (k, c, r, s), g.stride, g.pad,
                                               g.dilation, data_zero_point)})


def conv2d_NCHWc_int8(data: tl.Tensor, kernel: tl.Tensor, stride=1, padding=0, dilation=1,
                      data_zero_point: int = 0, out_block: int | None = None) -> tl.Tensor:
    """sum over (ic, kh, kw) of (data - data_zero_point) * kernel -> int32 NCHW[oc_bn]c
    (N, ceil(K/oc_bn), OH, OW, oc_bn), oc_bn = `out_block` (by default the current target's
    int32 lanes, what the dot intrinsic needs); channels past K are 0.

    data is uint8 NCHW (N, C, H, W) or NCHW[b]c (N, C/b, H, W, b) with b a multiple of 4 (what
    a previous int8 convolution's requantized output is, so a model's activations stay blocked
    from one convolution to the next); the kernel is int8 OIHW (K, C, R, S). Padding counts as
    the zero point, which is subtracted as a per-channel correction (zero point x the
    kernel's sums) so that the product stays uint8 x int8.

    Raises:
        ValueError: dtypes other than uint8 / int8, channel counts that differ, a block that
            is not a multiple of 4.
    """
    if data.dtype != "uint8" or kernel.dtype != "int8":
        raise ValueError(f"conv2d_NCHWc_int8: uint8 data and an int8 kernel; got "
                         f"{data.dtype}, {kernel.dtype}")
    oc_bn = out_block or int8_lanes()
    if oc_bn != int8_lanes():
        raise ValueError(f"conv2d_NCHWc_int8: an output block of {oc_bn} channels on a target "
                         f"whose int32 vectors have {int8_lanes()} lanes")
    conv = _blocked_conv(data, kernel, stride, padding, dilation, data_zero_point, GROUP, oc_bn,
                         "int32", TAG, ("uint8", "int8"))
    return _zero_point_corrected(conv, data_zero_point, lane_axis=5)


def _zero_point_corrected(conv: tl.Tensor, data_zero_point: int, lane_axis: int) -> tl.Tensor:
    """`conv` (sums of x * w, the padding counted as the zero point) less zp x the sum of each
    output channel's weights: (x - zp) * w summed, with the product itself uint8 x int8.
    The weights are summed from the blocked kernel (`conv`'s second input, output channel
    blocks on axis 0 and their lanes on `lane_axis`, zeros where padded), which a graph packs
    beforehand."""
    if not data_zero_point:
        return conv
    kernel_vec = conv.op.input_tensors[1]
    summed = [i for i in range(1, kernel_vec.ndim) if i != lane_axis]
    axes = [tl.reduce_axis((0, int(kernel_vec.shape[i])), name=f"r{i}") for i in summed]

    def total(oco, oci):
        index = [oco] + [None] * (kernel_vec.ndim - 1)
        index[lane_axis] = oci
        for i, axis in zip(summed, axes):
            index[i] = axis
        return tl.sum(kernel_vec[tuple(index)].astype("int32"), axis=axes)

    kernel_sum = tl.compute((kernel_vec.shape[0], kernel_vec.shape[lane_axis]), total,
                            name="kernel_sum")
    return tl.compute(conv.shape, lambda b, oco, y, x, oci: conv[b, oco, y, x, oci]
                      - kernel_sum[oco, oci] * data_zero_point,
                      name="conv2d_int8_zero_point", tag="injective")


def depthwise_conv2d_NCHWc_int8(data: tl.Tensor, kernel: tl.Tensor, stride=1, padding=0,
                                dilation=1, data_zero_point: int = 0,
                                out_block: int | None = None) -> tl.Tensor:
    """Depthwise sum over (kh, kw) of (data - data_zero_point) * kernel -> int32 NCHW[b]c
    (N, ceil(C/b), OH, OW, b), b = `out_block` (by default the target's int32 lanes);
    channels past C are 0.

    data is uint8 NCHW (N, C, H, W) or NCHW[b]c (an int8 convolution's requantized output,
    read as it is where there is no padding); the kernel is int8 (C, 1, R, S). A depthwise
    convolution sums no channels, so VNNI's dot of 4 does not apply: the channels are the
    vector lanes, and each tap widens a vector of uint8 data and one of int8 weights to int32
    and multiply-adds them (values of 16 bits, which LLVM multiplies with `vpmaddwd`). The data
    is copied into (N, C/b, H + pads, W + pads, b) uint8 with the padding as the zero point, the
    kernel into (C/b, R, S, b) int8; the zero point is subtracted as zp x the weights' sums,
    as in `conv2d_NCHWc_int8`.

    Raises:
        ValueError: dtypes other than uint8 / int8, a kernel that is not (C, 1, R, S), a
            blocked input of another block.
    """
    what = "depthwise_conv2d_NCHWc_int8"
    if data.dtype != "uint8" or kernel.dtype != "int8":
        raise ValueError(f"{what}: uint8 data and an int8 kernel; got {data.dtype}, "
                         f"{kernel.dtype}")
    if kernel.ndim != 4 or const_shape(kernel, f"{what}: kernel")[1] != 1:
        raise ValueError(f"{what}: the kernel must be (C, 1, R, S), got shape "
                         f"{tuple(kernel.shape)}")
    lanes = out_block or int8_lanes()
    if data.ndim == 5 and int(data.shape[4]) != lanes:
        raise ValueError(f"{what}: a data block of {int(data.shape[4])} channels for an "
                         f"output block of {lanes}")
    c, _, r, s = const_shape(kernel, f"{what}: kernel")
    n, data_c, h, w, _ = _check_data(data, c, 1, what)
    g = window_geometry(what, (h, w), (r, s), stride, padding, dilation)
    (sh, sw), (dh, dw) = g.stride, g.dilation
    data_vec = _pad_data(data, data_c, lanes, g.pad, data_zero_point, "uint8")
    kernel_vec = tl.compute(
        (-(-c // lanes), r, s, lanes),
        lambda co, y, x, ci: tl.if_then_else(
            co * lanes + ci < c, kernel[tl.minimum(co * lanes + ci, c - 1), 0, y, x],
            tl.const(0, "int8")), name="kernel_vec", tag="injective,kernel_pack")
    ky, kx = tl.reduce_axis((0, r), name="ky"), tl.reduce_axis((0, s), name="kx")
    conv = tl.compute(
        (n, -(-c // lanes), g.out_h, g.out_w, lanes),
        lambda b, co, y, x, ci: tl.sum(
            data_vec[b, co, y * sh + ky * dh, x * sw + kx * dw, ci].astype("int32")
            * kernel_vec[co, ky, kx, ci].astype("int32"), axis=[ky, kx]),
        name=DEPTHWISE_TAG, tag=DEPTHWISE_TAG,
        attrs={"workload": ((n, c, h, w), (c, 1, r, s), g.stride, g.pad, g.dilation,
                            data_zero_point)})
    return _zero_point_corrected(conv, data_zero_point, lane_axis=3)


def depthwise_conv2d_nchw_int8(data: tl.Tensor, kernel: tl.Tensor, stride=1, padding=0,
                               dilation=1, data_zero_point: int = 0) -> tl.Tensor:
    """Depthwise (data - data_zero_point) * kernel summed over (kh, kw), uint8 NCHW data and
    int8 (C, 1, R, S) kernel -> int32 NCHW: `depthwise_conv2d_NCHWc_int8` returned to NCHW."""
    if data.ndim != 4:
        raise ValueError(f"depthwise_conv2d_nchw_int8: NCHW data, got shape "
                         f"{tuple(data.shape)}")
    blocked = depthwise_conv2d_NCHWc_int8(data, kernel, stride, padding, dilation,
                                          data_zero_point)
    return _to_nchw(blocked, int(kernel.shape[0]), "depthwise_conv2d_int8_out")


def conv2d_NCHWc_bf16(data: tl.Tensor, kernel: tl.Tensor, stride=1, padding=0,
                      dilation=1) -> tl.Tensor:
    """bfloat16 data (NCHW, or NCHW[b]c with b even) and OIHW kernel -> float32 NCHW[16]c,
    summed in float32 by pairs of input channels (AVX512-BF16's `vdpbf16ps`): the int8
    convolution's blocked product with pairs in place of groups of 4. float32 data or kernel
    is rounded to bfloat16 in its copy (`build(precision="bf16")`).

    Raises:
        ValueError: dtypes other than bfloat16 / float32, channel counts that differ, an odd
            block.
    """
    if {data.dtype, kernel.dtype} - {"bfloat16", "float32"}:
        raise ValueError(f"conv2d_NCHWc_bf16: bfloat16 or float32 data and kernel; got "
                         f"{data.dtype}, {kernel.dtype}")
    return _blocked_conv(data, kernel, stride, padding, dilation, 0, BF16_GROUP, 16, "float32",
                         BF16_TAG, ("bfloat16", "bfloat16"))


def _to_nchw(blocked: tl.Tensor, channels: int, name: str) -> tl.Tensor:
    lanes = int(blocked.shape[4])
    n, _, out_h, out_w, _ = (int(d) for d in blocked.shape)
    return tl.compute((n, channels, out_h, out_w), lambda b, o, y, x: blocked[
        b, o // lanes, y, x, o % lanes], name=name, tag="injective")


def conv2d_nchw_int8(data: tl.Tensor, kernel: tl.Tensor, stride=1, padding=0, dilation=1,
                     data_zero_point: int = 0, out_dtype: str | None = "int32") -> tl.Tensor:
    """sum over (ic, kh, kw) of (data - data_zero_point) * kernel, uint8 data (N, C, H, W),
    or blocked as `conv2d_NCHWc_int8` reads it, int8 kernel (K, C, R, S) -> int32
    (N, K, OH, OW); padding counts as the zero point: `conv2d_NCHWc_int8` with its output
    returned to NCHW.

    Raises:
        ValueError: dtypes other than uint8 / int8 / int32, or channel counts that differ.
    """
    if out_dtype not in ("int32", None) or data.ndim not in (4, 5):
        raise ValueError(f"conv2d_nchw_int8: NCHW or NCHW[x]c data and an int32 out_dtype; "
                         f"got shape {tuple(data.shape)}, {out_dtype}")
    blocked = conv2d_NCHWc_int8(data, kernel, stride, padding, dilation, data_zero_point)
    return _to_nchw(blocked, int(kernel.shape[0]), "conv2d_int8_out")


NCHW_BY_DTYPES["uint8", "int8"] = conv2d_nchw_int8  # topi.nn.conv2d_nchw's int8 path


def conv2d_nchw_bf16(data: tl.Tensor, kernel: tl.Tensor, stride=1, padding=0,
                     dilation=1) -> tl.Tensor:
    """bfloat16 NCHW data and OIHW kernel -> float32 NCHW: `conv2d_NCHWc_bf16` returned to
    NCHW (a model keeps it blocked instead, see `passes.int8_layout`)."""
    if data.ndim != 4:
        raise ValueError(f"conv2d_nchw_bf16: NCHW data, got shape {tuple(data.shape)}")
    blocked = conv2d_NCHWc_bf16(data, kernel, stride, padding, dilation)
    return _to_nchw(blocked, int(kernel.shape[0]), "conv2d_bf16_out")
