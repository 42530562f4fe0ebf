"""resize2d's separable compute (column tap tables, horizontal pass over input rows) and its x86
schedule (`topi.x86.resize.schedule_resize2d`): values against the numpy reference and PyTorch's
F.interpolate on awkward sizes, every method and coordinate transformation, AVX-512 and AVX2,
with elementwise ops fused before and after, and the stage structure the speed relies on."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
import topi
from topi import testing as T
from topi.nn.resize import COORDINATE_MODES, NEAREST_MODES, ROWS_TAG, TABLE_TAG
from topi.x86.resize import schedule_resize2d

from topi_check import run_op

# (input h, w) -> (output h, w): 1, primes, up and down, integer (2x, 3x) and other scales
SIZES = [((1, 1), (3, 5)), ((5, 7), (11, 3)), ((7, 13), (2, 29)), ((4, 4), (8, 8)),
         ((13, 5), (13, 10)), ((5, 3), (15, 9)), ((6, 9), (17, 9)), ((11, 3), (1, 1))]
METHODS = [("nearest", nm, False) for nm in NEAREST_MODES] + [
    ("linear", NEAREST_MODES[0], False), ("cubic", NEAREST_MODES[0], False),
    ("cubic", NEAREST_MODES[0], True)]


def _resize(x: np.ndarray, size, schedule=schedule_resize2d, before=None, after=None, **attrs):
    data = tl.placeholder(x.shape, str(x.dtype), name="x")
    src = data if before is None else before(data)
    out = topi.nn.resize2d(src, size, **attrs)
    out = out if after is None else after(out)
    return run_op(out, [data], [x], schedule)


@pytest.mark.parametrize("method,nearest_mode,exclude", METHODS)
def test_every_mode_and_size_matches_reference(method, nearest_mode, exclude) -> None:
    rng = np.random.default_rng(23)
    for (ih, iw), size in SIZES:
        x = rng.standard_normal((2, 3, ih, iw)).astype("float32")
        for mode in COORDINATE_MODES:
            attrs = dict(method=method, coordinate_transformation_mode=mode,
                         nearest_mode=nearest_mode, exclude_outside=exclude)
            ref = T.resize2d_python(x, size, method, mode, nearest_mode, exclude_outside=exclude)
            np.testing.assert_allclose(_resize(x, size, **attrs), ref, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{(ih, iw)}->{size} {attrs}")


def test_avx2_and_float64_match_reference() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 5, 7, 11)).astype("float32")
    with tl.Target("llvm -mcpu=haswell"):
        for method in ("nearest", "linear", "cubic"):
            for size in ((29, 37), (3, 5), (14, 22)):
                ref = T.resize2d_python(x, size, method, "half_pixel")
                np.testing.assert_allclose(_resize(x, size, method=method), ref,
                                           rtol=1e-5, atol=1e-5, err_msg=f"{method} {size}")
    x64 = x.astype("float64")
    # the compute evaluates cubic weights in float32 (as before the separable form), the
    # reference in float64
    for method, tol in (("linear", 1e-12), ("cubic", 1e-5)):
        np.testing.assert_allclose(_resize(x64, (19, 23), method=method),
                                   T.resize2d_python(x64, (19, 23), method, "half_pixel"),
                                   rtol=tol, atol=tol)


def test_fused_elementwise_before_and_after() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 4, 9, 6)).astype("float32")
    out = _resize(x, (31, 20), method="linear", before=lambda t: topi.nn.relu(t),
                  after=lambda t: topi.nn.multiply(t, 2.0))
    ref = 2.0 * T.resize2d_python(np.maximum(x, 0), (31, 20), "linear", "half_pixel")
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    flat = _resize(x, (31, 20), method="cubic", after=lambda t: topi.nn.reshape(t, (4, 620)))
    np.testing.assert_allclose(flat, T.resize2d_python(x, (31, 20), "cubic", "half_pixel")
                               .reshape(4, 620), rtol=1e-5, atol=1e-5)


def test_matches_torch_interpolate() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 3, 7, 13)).astype("float32")
    t = torch.from_numpy(x)
    cases = [("bilinear", False, "linear", "pytorch_half_pixel"),
             ("bilinear", True, "linear", "align_corners"),
             ("bicubic", False, "cubic", "half_pixel"),
             ("bicubic", True, "cubic", "align_corners")]
    for mode, corners, method, transform in cases:
        for size in ((28, 52), (5, 3), (2, 27)):  # size 1: ONNX and torch differ
            expected = torch.nn.functional.interpolate(t, size=size, mode=mode,
                                                       align_corners=corners).numpy()
            actual = _resize(x, size, method=method, coordinate_transformation_mode=transform)
            np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5,
                                       err_msg=f"{mode} {corners} {size}")
    nearest = torch.nn.functional.interpolate(t, scale_factor=2, mode="nearest").numpy()
    np.testing.assert_array_equal(
        _resize(x, (14, 26), coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        nearest)


def _stages(out: tl.Tensor) -> dict[str, tl.Operation]:
    found: dict[str, tl.Operation] = {}

    def walk(op: tl.Operation) -> None:
        if isinstance(op, tl.ComputeOp) and op.name not in found:
            found[op.name] = op
            for t in op.input_tensors:
                walk(t.op)

    walk(out.op)
    return found


def test_separable_structure() -> None:
    """Upsampling reads column taps from tables and rows from the horizontal pass, computed per
    plane inside the output's loop; downsampling or keeping the height interpolates directly."""
    x = tl.placeholder((1, 21, 28, 28), "float32")
    up = topi.nn.resize2d(x, (224, 224), method="linear")
    stages = _stages(up)
    assert sorted(op.tag for op in stages.values()).count(TABLE_TAG) == 4
    rows = [op for op in stages.values() if op.tag == ROWS_TAG]
    assert len(rows) == 1 and [int(a.dom.extent) for a in rows[0].axis] == [1, 21, 28, 224]
    s = schedule_resize2d([up])
    assert s[rows[0]].attach_stage is s[up]
    for size in ((5, 56), (28, 56)):  # the height downsampled or kept: one pass
        direct = topi.nn.resize2d(x, size, method="cubic")
        assert not any(op.tag == ROWS_TAG for op in _stages(direct).values())
    nearest = topi.nn.resize2d(x, (56, 56))
    assert list(_stages(nearest)) == ["resize2d"]  # one read per output, its index ox // 2
    assert "// 2" in str(tl.lower(schedule_resize2d([nearest]), [x, nearest]))
