"""int8 conv2d: uint8 data (NCHW) with int8 kernels (OIHW) -> int32, on VNNI's blocked layouts.

Inside, data is copied into NCHW[x]c with `ic_bn` channels per block (a multiple of 4) and the
padding filled with the data's zero point; the kernel is blocked as
(OC/oc_bn, IC/ic_bn, KH, KW, ic_bn/4, oc_bn, 4): for one (kh, kw) and 4 input channels, oc_bn
output channels of 4 int8 each are one vector, the kernel operand of one `vpdpbusd` (oc_bn = the
target's int32 lanes, 16 with AVX-512). The product stage (tag "conv2d_NCHWc_int8") computes
NCHW[oc_bn]c int32 with five reduction axes (input channel block, kh, kw, groups of 4 within the
block, the 4), so that its innermost (oc lane, channel of 4) is exactly the dot intrinsic; the
output stage returns it to NCHW. Channels are padded with zeros to whole blocks.
"""

from __future__ import annotations

import tensorlang as tl

from .conv2d import window_geometry
from .dense_int8 import GROUP, int8_lanes
from .utils import const_shape

TAG = "conv2d_NCHWc_int8"


def _ic_block(channels: int) -> int:
    """Input channels per block: up to 16, a multiple of 4."""
    padded = -(-channels // GROUP) * GROUP
    return next(b for b in (16, 8, 4) if padded % b == 0)


def conv2d_nchw_int8(data: tl.Tensor, kernel: tl.Tensor, stride=1, padding=0, dilation=1,
                     data_zero_point: int = 0, out_dtype: str = "int32") -> tl.Tensor:
    """sum over (ic, kh, kw) of (data - data_zero_point) * kernel, uint8 data (N, C, H, W),
    int8 kernel (K, C, R, S) -> int32 (N, K, OH, OW); padding counts as the zero point.

    The zero point is subtracted as a per-channel correction (zero point x the kernel's sums),
    so the product stays uint8 x int8.

    Raises:
        ValueError: dtypes other than uint8 / int8 / int32, or channel counts that differ.
    """
    if data.dtype != "uint8" or kernel.dtype != "int8" or out_dtype != "int32":
        raise ValueError(f"conv2d_nchw_int8: uint8 data, int8 kernel, int32 out; got "
                         f"{data.dtype}, {kernel.dtype}, {out_dtype}")
    n, c, h, w = const_shape(data, "conv2d_nchw_int8: data")
    k, kc, r, s = const_shape(kernel, "conv2d_nchw_int8: kernel")
    if kc != c:
        raise ValueError(f"conv2d_nchw_int8: data has {c} channels, the kernel {kc}")
    g = window_geometry("conv2d_nchw_int8", (h, w), (r, s), stride, padding, dilation)
    (sh, sw), (dh, dw) = g.stride, g.dilation
    top, left, bottom, right = g.pad
    ic_bn, oc_bn = _ic_block(c), int8_lanes()
    ic_chunks, oc_chunks = -(-c // ic_bn), -(-k // oc_bn)
    hp, wp = h + top + bottom, w + left + right
    zp = tl.const(data_zero_point, "uint8")

    def pack_data(b, ico, y, x, ici):
        ch, yy, xx = ico * ic_bn + ici, y - top, x - left
        inside = (ch < c) & (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        value = data[b, tl.minimum(ch, c - 1), tl.minimum(tl.maximum(yy, 0), h - 1),
                     tl.minimum(tl.maximum(xx, 0), w - 1)]
        # Arithmetic, not a select: a select whose side reads memory branches per element.
        fill = tl.if_then_else(ch < c, zp, tl.const(0, "uint8"))
        keep = inside.astype("uint8")
        return value * keep + fill * (tl.const(1, "uint8") - keep)

    data_vec = tl.compute((n, ic_chunks, hp, wp, ic_bn), pack_data, name="data_vec",
                          tag="injective,int8_data_pack")

    def pack_kernel(oco, ico, y, x, icf, oci, ics):
        oc, ic = oco * oc_bn + oci, ico * ic_bn + icf * GROUP + ics
        value = kernel[tl.minimum(oc, k - 1), tl.minimum(ic, c - 1), y, x]
        return tl.if_then_else((oc < k) & (ic < c), value, tl.const(0, "int8"))

    kernel_vec = tl.compute((oc_chunks, ic_chunks, r, s, ic_bn // GROUP, oc_bn, GROUP),
                            pack_kernel, name="kernel_vec", tag="injective,kernel_pack")
    ico = tl.reduce_axis((0, ic_chunks), name="ico")
    ky = tl.reduce_axis((0, r), name="ky")
    kx = tl.reduce_axis((0, s), name="kx")
    icf = tl.reduce_axis((0, ic_bn // GROUP), name="icf")
    ics = tl.reduce_axis((0, GROUP), name="ics")
    conv = tl.compute(
        (n, oc_chunks, g.out_h, g.out_w, oc_bn),
        lambda b, oco, y, x, oci: tl.sum(
            data_vec[b, ico, y * sh + ky * dh, x * sw + kx * dw, icf * GROUP + ics].astype("int32")
            * kernel_vec[oco, ico, ky, kx, icf, oci, ics].astype("int32"),
            axis=[ico, ky, kx, icf, ics]),
        name="conv2d_NCHWc_int8", tag=TAG,
        attrs={"workload": ((n, c, h, w), (k, c, r, s), g.stride, g.pad, g.dilation,
                            data_zero_point)})
    if data_zero_point:
        # (x - zp) * w summed = x * w summed - zp * (sum of w over ic, kh, kw) per channel.
        # Summed from the blocked kernel (zeros where padded), which a graph packs beforehand.
        axes = [tl.reduce_axis((0, extent), name=f"r{i}") for i, extent in
                enumerate((ic_chunks, r, s, ic_bn // GROUP, GROUP))]
        kernel_sum = tl.compute((k,), lambda o: tl.sum(kernel_vec[
            o // oc_bn, axes[0], axes[1], axes[2], axes[3], o % oc_bn, axes[4]].astype("int32"),
            axis=axes), name="kernel_sum")
        return tl.compute((n, k, g.out_h, g.out_w), lambda b, o, y, x: conv[
            b, o // oc_bn, y, x, o % oc_bn] - kernel_sum[o] * data_zero_point,
            name="conv2d_int8_out", tag="injective")
    return tl.compute((n, k, g.out_h, g.out_w), lambda b, o, y, x: conv[
        b, o // oc_bn, y, x, o % oc_bn], name="conv2d_int8_out", tag="injective")
