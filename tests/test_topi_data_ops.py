"""The data ops (resize2d, pad modes, cumsum, tile, broadcast_to, gathers, scatters, trilu,
group/instance norm): topi computes against their numpy references, the references against
onnxruntime and PyTorch, and every op through a graph."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from topi_check import run_op

import tensorlang as tl
import topi
import topi.graph as tg

T = topi.testing
RESIZE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_half_pixel_for_nn", "half_pixel_symmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


def _build(fn, arrays: list[np.ndarray], schedule=topi.x86.schedule_injective, **attrs):
    """Run a topi compute on placeholders shaped like `arrays` and return its value."""
    inputs = [tl.placeholder(a.shape, str(a.dtype), name=f"in{k}") for k, a in enumerate(arrays)]
    return run_op(fn(*inputs, **attrs), inputs, arrays, schedule)


def _ort(op: str, order: list[str], arrays: dict[str, np.ndarray],
         consts: dict[str, np.ndarray] | None = None, opset: int = 19, **attrs) -> np.ndarray:
    """onnxruntime's result of a one-node model: `order` names the node's inputs ("" for an
    omitted optional one), fed from `arrays` (model inputs) or `consts` (initializers)."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper

    consts = consts or {}
    node = helper.make_node(op, order, ["Y"], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in arrays.items()],
        # the output has the dtype of the first input in every op checked here
        [helper.make_tensor_value_info(
            "Y", helper.np_dtype_to_tensor_dtype(next(iter(arrays.values())).dtype), None)],
        [numpy_helper.from_array(a, n) for n, a in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, arrays)[0]


def _graph_run(op: str, arrays: dict[str, np.ndarray], consts: dict[str, np.ndarray] = (),
               **attrs) -> tuple[np.ndarray, np.ndarray]:
    """(built module's output, numpy reference's output) of a one-op graph."""
    g = tg.Graph()
    nodes = [g.input(n, a.shape, str(a.dtype)) for n, a in arrays.items()]
    nodes += [g.constant(a, name=n) for n, a in dict(consts).items()]
    g.output(g.apply(op, *nodes, **attrs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = tg.build(g)(**arrays)[0]
    return out, tg.reference.run_reference(g, arrays)[0]


# -- resize2d ---------------------------------------------------------------------------------


RESIZE_SIZES = [((1, 1), (3, 2)), ((3, 5), (7, 4)), ((7, 4), (2, 9)), ((6, 6), (4, 13)),
                ((13, 2), (1, 1)), ((5, 7), (5, 3))]


def _resize_cases():
    for method in ("nearest", "linear", "cubic"):
        for mode in RESIZE_MODES:
            for nearest_mode in (NEAREST_MODES if method == "nearest" else NEAREST_MODES[:1]):
                for exclude in ((False, True) if method == "cubic" else (False,)):
                    yield method, mode, nearest_mode, exclude


def test_resize2d_reference_matches_onnxruntime() -> None:
    rng = _rng()
    checked = 0
    for (in_hw, out_hw), (method, mode, nearest_mode, exclude) in itertools.product(
            RESIZE_SIZES, _resize_cases()):
        if nearest_mode == "round_prefer_ceil" and mode in ("asymmetric", "tf_half_pixel_for_nn"):
            # at exact .5 ties that float32 lands one ulp below (7 -> 2: 1 / (2/7) is
            # 3.4999998), onnxruntime's build still rounds up; both follow ONNX's formula
            continue
        x = rng.standard_normal((1, 2, *in_hw)).astype("float32")
        expected = _ort_resize(x, out_hw, method, mode, nearest_mode, exclude)
        actual = T.resize2d_python(x, out_hw, method, mode, nearest_mode,
                                   exclude_outside=exclude)
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{in_hw}->{out_hw} {method} {mode} {nearest_mode}")
        checked += 1
    assert checked > 200


def _ort_resize(x: np.ndarray, size: tuple[int, int], method: str, mode: str,
                nearest_mode: str = "round_prefer_floor", exclude: bool = False) -> np.ndarray:
    sizes = np.array([*x.shape[:2], *size], "int64")
    return _ort("Resize", ["X", "", "", "sizes"], {"X": x}, {"sizes": sizes}, mode=method,
                coordinate_transformation_mode=mode, nearest_mode=nearest_mode,
                exclude_outside=int(exclude))


def test_resize2d_reference_matches_torch_interpolate() -> None:
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = _rng()
    # (interpolate kwargs, resize2d method, mode, nearest mode); torch's bilinear is half_pixel
    # (pytorch_half_pixel differs from it only at an output size of 1, where it reads pixel 0)
    cases = [
        ({"mode": "nearest"}, "nearest", "asymmetric", "floor"),
        ({"mode": "bilinear", "align_corners": False}, "linear", "half_pixel", "floor"),
        ({"mode": "bilinear", "align_corners": True}, "linear", "align_corners", "floor"),
        ({"mode": "bicubic", "align_corners": False}, "cubic", "half_pixel", "floor"),
        ({"mode": "bicubic", "align_corners": True}, "cubic", "align_corners", "floor"),
    ]
    for (in_hw, out_hw), (kwargs, method, mode, nearest_mode) in itertools.product(
            [*RESIZE_SIZES, ((10, 10), (20, 30)), ((9, 11), (30, 17))], cases):
        x = rng.standard_normal((2, 3, *in_hw)).astype("float32")
        expected = F.interpolate(torch.from_numpy(x), size=out_hw, **kwargs).numpy()
        actual = T.resize2d_python(x, out_hw, method, mode, nearest_mode)
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{in_hw}->{out_hw} {kwargs}")
    x = rng.standard_normal((1, 1, 5, 3)).astype("float32")
    torch_size1 = F.interpolate(torch.from_numpy(x), size=(1, 1), mode="bilinear").numpy()
    onnx_size1 = T.resize2d_python(x, (1, 1), "linear", "pytorch_half_pixel")
    assert onnx_size1.item() == x[0, 0, 0, 0] and torch_size1.item() == x[0, 0, 2, 1]


def test_resize2d_compute_matches_reference() -> None:
    rng = _rng()
    x = rng.standard_normal((1, 2, 5, 7)).astype("float32")
    for method, mode, nearest_mode, exclude in _resize_cases():
        if method == "nearest" and mode not in ("half_pixel", "asymmetric"):
            continue  # every nearest mode on two transformations; the others below
        for size in ((3, 11), (8, 2)):
            out = _build(topi.nn.resize2d, [x], size=size, method=method,
                         coordinate_transformation_mode=mode, nearest_mode=nearest_mode,
                         exclude_outside=exclude)
            ref = T.resize2d_python(x, size, method, mode, nearest_mode, exclude_outside=exclude)
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{size} {method} {mode} {nearest_mode}")
    for mode in RESIZE_MODES:  # integers (nearest only), 1x1 in and out
        xi = rng.integers(-100, 100, (2, 3, 4, 1)).astype("int32")
        out = _build(topi.nn.resize2d, [xi], size=(9, 3), coordinate_transformation_mode=mode)
        np.testing.assert_array_equal(out, T.resize2d_python(xi, (9, 3), "nearest", mode))
    one = rng.standard_normal((1, 3, 1, 1)).astype("float32")
    np.testing.assert_allclose(_build(topi.nn.resize2d, [one], size=(1, 1), method="cubic"), one)


def test_resize2d_rejects_bad_arguments() -> None:
    x = tl.placeholder((1, 1, 4, 4), "float32")
    with pytest.raises(ValueError, match="method"):
        topi.nn.resize2d(x, (2, 2), method="area")
    with pytest.raises(ValueError, match="coordinate_transformation_mode"):
        topi.nn.resize2d(x, (2, 2), coordinate_transformation_mode="tf_crop_and_resize")
    with pytest.raises(ValueError, match="size"):
        topi.nn.resize2d(x, (0, 2))
    with pytest.raises(TypeError, match="float"):
        topi.nn.resize2d(tl.placeholder((1, 1, 4, 4), "uint8"), (2, 2), method="linear")


# -- pad modes --------------------------------------------------------------------------------


def test_pad_reflect_and_edge_match_numpy_and_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = _rng()
    cases = [((3, 5), (2, 4), (1, 0)), ((1, 4, 1, 3), (0, 3, 2, 2), (1, 7, 0, 1)),
             ((2, 7), (6, 13), (6, 20))]  # the last pads past the size: reflection repeats
    for (shape, before, after), mode, dtype in itertools.product(
            cases, ("reflect", "edge"), ("float32", "int32")):
        x = (rng.standard_normal(shape) * 50).astype(dtype)
        out = _build(topi.nn.pad, [x], pad_before=before, pad_after=after, mode=mode)
        ref = T.pad_python(x, before, after, mode=mode)
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(ref, np.pad(x, list(zip(before, after)), mode=mode))
    x = rng.standard_normal((2, 3, 6, 5)).astype("float32")
    padded = T.pad_python(x, (0, 0, 2, 1), (0, 0, 3, 4), mode="reflect")
    torch_pad = torch.nn.functional.pad(torch.from_numpy(x), (1, 4, 2, 3), mode="reflect")
    np.testing.assert_array_equal(padded, torch_pad.numpy())
    padded = T.pad_python(x, (0, 0, 7, 1), (0, 0, 3, 9), mode="edge")
    torch_pad = torch.nn.functional.pad(torch.from_numpy(x), (1, 9, 7, 3), mode="replicate")
    np.testing.assert_array_equal(padded, torch_pad.numpy())
    with pytest.raises(ValueError, match="mode"):
        topi.nn.pad(tl.placeholder((3,)), (1,), (1,), mode="circular")


def test_pad_modes_through_the_graph() -> None:
    x = _rng().standard_normal((1, 2, 4, 5)).astype("float32")
    for mode in ("constant", "reflect", "edge"):
        out, ref = _graph_run("pad", {"x": x}, pad_before=(0, 0, 1, 3), pad_after=(0, 0, 2, 0),
                              pad_value=1.5, mode=mode)
        np.testing.assert_array_equal(out, ref)
        expected = np.pad(x, [(0, 0), (0, 0), (1, 2), (3, 0)], mode=mode,
                          **({"constant_values": 1.5} if mode == "constant" else {}))
        np.testing.assert_array_equal(out, expected)


# -- cumsum, tile, broadcast_to, trilu --------------------------------------------------------


def test_cumsum_matches_numpy_torch_and_onnxruntime() -> None:
    torch = pytest.importorskip("torch")
    rng = _rng()
    for shape, axis, dtype in [((3, 7), 1, "float32"), ((5, 1, 4), 0, "int32"),
                               ((2, 13), -1, "int64"), ((1,), 0, "float32")]:
        x = (rng.standard_normal(shape) * 10).astype(dtype)
        for exclusive, reverse in itertools.product((False, True), repeat=2):
            out = _build(topi.nn.cumsum, [x], topi.x86.schedule_reduce, axis=axis,
                         exclusive=exclusive, reverse=reverse)
            ref = T.cumsum_python(x, axis, exclusive, reverse)
            expected = _ort("CumSum", ["x", "axis"], {"x": x},
                            {"axis": np.array(axis, "int64")}, opset=14,
                            exclusive=int(exclusive), reverse=int(reverse))
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
            np.testing.assert_allclose(ref, expected, rtol=1e-5, atol=1e-4)
            assert out.dtype == x.dtype
        np.testing.assert_allclose(T.cumsum_python(x, axis),
                                   torch.cumsum(torch.from_numpy(x), axis).numpy(), rtol=1e-5,
                                   atol=1e-4)


def test_tile_and_broadcast_to_match_numpy() -> None:
    rng = _rng()
    for shape, reps in [((2, 3), (3, 1)), ((5,), (2, 1, 3)), ((1, 3, 2), (2,)), ((1,), (7,))]:
        x = rng.integers(-9, 9, shape).astype("int32")
        np.testing.assert_array_equal(_build(topi.nn.tile, [x], reps=reps), np.tile(x, reps))
    for shape, target in [((3, 1), (2, 3, 5)), ((1,), (4,)), ((7, 1, 2), (7, 3, 2))]:
        x = rng.standard_normal(shape).astype("float32")
        np.testing.assert_array_equal(_build(topi.nn.broadcast_to, [x], shape=target),
                                      np.broadcast_to(x, target))
    with pytest.raises(ValueError, match="broadcast"):
        topi.nn.broadcast_to(tl.placeholder((3, 2)), (3, 3))
    with pytest.raises(ValueError, match="reps"):
        topi.nn.tile(tl.placeholder((3, 2)), (0, 1))


def test_trilu_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = _rng()
    for shape, k, dtype in [((5, 7), 0, "float32"), ((2, 3, 4), -1, "int32"),
                            ((3, 6, 2), 2, "float32"), ((1, 1), 0, "bool"), ((4, 5), 9, "int64")]:
        x = (rng.standard_normal(shape) * 10).astype(dtype)
        for upper in (True, False):
            out = _build(topi.nn.trilu, [x], k=k, upper=upper)
            t = torch.from_numpy(x)
            expected = (torch.triu(t, k) if upper else torch.tril(t, k)).numpy()
            np.testing.assert_array_equal(out, expected)
            np.testing.assert_array_equal(T.trilu_python(x, k, upper), expected)


# -- gathers and scatters ---------------------------------------------------------------------


def test_gather_elements_matches_torch_and_clamps() -> None:
    torch = pytest.importorskip("torch")
    rng = _rng()
    x = rng.standard_normal((3, 5, 4)).astype("float32")
    for axis, ishape in [(0, (2, 5, 4)), (1, (3, 7, 2)), (-1, (1, 5, 6))]:
        n = x.shape[axis]
        idx = rng.integers(-n, n, ishape).astype("int64")
        out = _build(topi.nn.gather_elements, [x, idx], axis=axis)
        wrapped = np.where(idx < 0, idx + n, idx)
        expected = torch.gather(torch.from_numpy(x), axis, torch.from_numpy(wrapped)).numpy()
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(T.gather_elements_python(x, idx, axis), expected)
    far = np.array([[[9, -20, 3, 0]]], "int32")  # out of range: clamped, never read outside
    out = _build(topi.nn.gather_elements, [x, far], axis=1)
    np.testing.assert_array_equal(out, x[:1, [4, 0, 3, 0]].diagonal(axis1=1, axis2=2)[None])
    np.testing.assert_array_equal(out, T.gather_elements_python(x, far, 1))


def test_gather_nd_matches_onnxruntime() -> None:
    rng = _rng()
    x = rng.standard_normal((2, 3, 5, 4)).astype("float32")
    for ishape, batch_dims in [((4, 2), 0), ((3, 1, 3), 0), ((2, 6, 1), 1), ((2, 3, 2), 2),
                               ((4,), 0)]:
        m = ishape[-1]
        bounds = np.array(x.shape[batch_dims:batch_dims + m])
        idx = (rng.integers(0, 1 << 20, ishape) % bounds - (rng.random(ishape) < 0.3) * bounds)
        idx = idx.astype("int64")
        out = _build(topi.nn.gather_nd, [x, idx], batch_dims=batch_dims)
        expected = _ort("GatherND", ["x", "i"], {"x": x, "i": idx}, batch_dims=batch_dims)
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(T.gather_nd_python(x, idx, batch_dims), expected)


def _distinct_rows(rng: np.random.Generator, count: int, bounds: tuple[int, ...]) -> np.ndarray:
    flat = rng.choice(int(np.prod(bounds)), count, replace=False)
    rows = np.stack(np.unravel_index(flat, bounds), -1)
    negative = rng.random(rows.shape) < 0.3
    return np.where(negative, rows - np.array(bounds), rows).astype("int64")


def test_scatter_nd_matches_onnxruntime() -> None:
    rng = _rng()
    data = rng.standard_normal((4, 3, 5)).astype("float32")
    for lead, k in [((3,), 1), ((2, 2), 2), ((5,), 3), ((), 2)]:
        idx = _distinct_rows(rng, int(np.prod(lead)), data.shape[:k]).reshape(*lead, k)
        updates = rng.standard_normal((*lead, *data.shape[k:])).astype("float32")
        out = _build(topi.nn.scatter_nd, [data, idx, updates], topi.x86.schedule_reduce)
        expected = _ort("ScatterND", ["d", "i", "u"], {"d": data, "i": idx, "u": updates})
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(T.scatter_nd_python(data, idx, updates), expected)
    mask = np.zeros((3, 4), bool)  # a bool mask, as models build them
    idx = np.array([[0, 1], [2, -1]], "int64")
    out = _build(topi.nn.scatter_nd, [mask, idx, np.ones(2, bool)], topi.x86.schedule_reduce)
    np.testing.assert_array_equal(out, T.scatter_nd_python(mask, idx, np.ones(2, bool)))
    assert out.sum() == 2 and out[0, 1] and out[2, 3]


def test_scatter_elements_matches_onnxruntime_and_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = _rng()
    data = rng.integers(-50, 50, (4, 5, 3)).astype("int32")
    for axis, ishape in [(0, (3, 5, 3)), (1, (2, 4, 1)), (-1, (4, 5, 2))]:
        n = data.shape[axis]
        # distinct indices along the axis for each position of the others
        idx = np.argsort(rng.random((*ishape[:axis % 3], n, *ishape[axis % 3 + 1:])), axis=axis)
        idx = np.take(idx, np.arange(ishape[axis]), axis=axis)
        idx = np.where(rng.random(idx.shape) < 0.3, idx - n, idx).astype("int64")
        updates = rng.integers(100, 200, ishape).astype("int32")
        out = _build(topi.nn.scatter_elements, [data, idx, updates], topi.x86.schedule_reduce,
                     axis=axis)
        expected = _ort("ScatterElements", ["d", "i", "u"], {"d": data, "i": idx, "u": updates},
                        axis=axis)
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(T.scatter_elements_python(data, idx, updates, axis),
                                      expected)
        wrapped = torch.from_numpy(np.where(idx < 0, idx + n, idx))
        scattered = torch.from_numpy(data).scatter(axis, wrapped, torch.from_numpy(updates))
        np.testing.assert_array_equal(out, scattered.numpy())


# -- group and instance norm ------------------------------------------------------------------


def test_group_and_instance_norm_match_torch() -> None:
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = _rng()
    for shape, groups in [((2, 6, 5, 3), 3), ((1, 5, 7), 5), ((3, 4, 1, 1), 1), ((1, 7, 3, 2), 7)]:
        x = (rng.standard_normal(shape) * 3 + 1).astype("float32")
        gamma = rng.standard_normal(shape[1]).astype("float32")
        beta = rng.standard_normal(shape[1]).astype("float32")
        out = _build(topi.nn.group_norm, [x, gamma, beta], topi.x86.schedule_reduce,
                     num_groups=groups, epsilon=1e-3)
        t = [torch.from_numpy(a) for a in (x, gamma, beta)]
        expected = F.group_norm(t[0], groups, t[1], t[2], eps=1e-3).numpy()
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(T.group_norm_python(x, gamma, beta, groups, 1e-3), expected,
                                   rtol=1e-4, atol=1e-4)
        if x.ndim > 2 and int(np.prod(shape[2:])) > 1:
            out = _build(topi.nn.instance_norm, [x, gamma, beta], topi.x86.schedule_reduce)
            expected = F.instance_norm(t[0], weight=t[1], bias=t[2]).numpy()
            np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(T.instance_norm_python(x, gamma, beta), expected,
                                       rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="divide"):
        topi.nn.group_norm(tl.placeholder((1, 6, 2)), tl.placeholder((6,)),
                           tl.placeholder((6,)), 4)


# -- every op through a graph -----------------------------------------------------------------


def test_data_ops_through_the_graph() -> None:
    rng = _rng()
    x = rng.standard_normal((2, 3, 5, 4)).astype("float32")
    c3 = rng.standard_normal(3).astype("float32")
    idx4 = rng.integers(-5, 5, (2, 3, 2, 4)).astype("int64")
    cases = [
        ("resize2d", {"x": x}, {}, {"size": (7, 3), "method": "linear",
                                    "coordinate_transformation_mode": "align_corners"}),
        ("resize2d", {"x": x}, {}, {"size": (10, 8)}),
        ("cumsum", {"x": x}, {}, {"axis": 2, "reverse": True}),
        ("tile", {"x": x}, {}, {"reps": (1, 2, 1, 3)}),
        ("broadcast_to", {"x": c3.reshape(3, 1, 1)}, {}, {"shape": (2, 3, 5, 4)}),
        ("trilu", {"x": x}, {}, {"k": 1, "upper": False}),
        ("gather_elements", {"x": x, "i": idx4}, {}, {"axis": 2}),
        ("gather_nd", {"x": x}, {"i": np.array([[1, -1], [0, 2]], "int64")}, {}),
        ("scatter_nd", {"x": x}, {"i": np.array([[1, 2, 3], [0, 0, -1]], "int64"),
                                  "u": rng.standard_normal((2, 4)).astype("float32")}, {}),
        ("scatter_elements", {"x": x}, {"i": np.array([[[[4, 0, 2, 1]]]], "int64"),
                                        "u": np.ones((1, 1, 1, 4), "float32")}, {"axis": 2}),
        ("group_norm", {"x": x}, {"g": c3, "b": c3}, {"num_groups": 3}),
        ("instance_norm", {"x": x}, {"g": c3, "b": c3}, {"epsilon": 1e-3}),
    ]
    for op, arrays, consts, attrs in cases:
        out, ref = _graph_run(op, arrays, consts, **attrs)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5, err_msg=op)
        assert out.dtype == ref.dtype, op
