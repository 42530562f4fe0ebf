"""Copy stages (padding, panel packing, slices) that a kernel keeps to itself run as one call of
the runtime's box copy instead of loops: checked against numpy on awkward shapes, dtypes, fill
values, conditions and schedules, and that the call is really what runs."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
import topi


def _doubled(stage: tl.Tensor) -> tl.Tensor:
    """A consumer that keeps `stage` inside the kernel: twice each element (bool: itself)."""
    if stage.dtype == "bool":
        return tl.compute(stage.shape, lambda *i: stage[i], name="doubled")
    return tl.compute(stage.shape, lambda *i: stage[i] + stage[i], name="doubled")


def _twice(x: np.ndarray) -> np.ndarray:
    return x if x.dtype == bool else x + x


def _build(stage: tl.Tensor, inputs: list[tl.Tensor], schedule=None) -> tl.Module:
    out = _doubled(stage)
    s = tl.create_schedule(out.op)
    if schedule is not None:
        schedule(s, stage)
    return tl.build(s, [*inputs, out])


def _lowered(stage: tl.Tensor, inputs: list[tl.Tensor]) -> str:
    out = _doubled(stage)
    return str(tl.lower(tl.create_schedule(out.op), [*inputs, out]).main)


def _run(module: tl.Module, arrays: list[np.ndarray], out_shape, dtype) -> np.ndarray:
    out = np.full(out_shape, 7, dtype=dtype)
    module(*arrays, out)
    return out


def _random(shape, dtype: str, rng: np.random.Generator) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-100 if np.dtype(dtype).kind == "i" else 0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32", "int64",
                                   "uint8", "bool"])
@pytest.mark.parametrize("shape, before, after", [
    ((1, 3, 7, 5), (0, 0, 1, 2), (0, 0, 2, 1)),     # a conv's pad: odd sizes, asymmetric
    ((2, 1, 1, 13), (1, 0, 3, 0), (0, 2, 0, 4)),    # every dimension padded somewhere
    ((17,), (5,), (0,)),                            # one dimension, prime length
    ((4, 1, 6, 6, 16), (0, 0, 1, 1, 0), (0, 0, 1, 1, 0)),  # NCHW16c, rows merge across c
])
def test_pad_matches_numpy(dtype: str, shape, before, after) -> None:
    rng = np.random.default_rng(0)
    a = tl.placeholder(shape, dtype=dtype, name="a")
    value = True if dtype == "bool" else 3
    padded = topi.nn.pad(a, before, after, pad_value=value, name="padded")
    assert "tl_copy_box" in _lowered(padded, [a])
    data = _random(shape, dtype, rng)
    expect = np.pad(data, list(zip(before, after)), constant_values=value)
    got = _run(_build(padded, [a]), [data], expect.shape, dtype)
    np.testing.assert_array_equal(got, _twice(expect))


@pytest.mark.parametrize("n, lanes", [(37, 16), (5, 8), (1, 4), (64, 16)])
def test_panel_packing_with_a_partial_last_panel(n: int, lanes: int) -> None:
    """A panel pack whose last panel the source does not fill: the tail condition mixes the
    panel and the lane (j * lanes + l < n), solved per row."""
    k = 11
    b = tl.placeholder((k, n), name="b")
    panels = -(-n // lanes)
    packed = tl.compute(
        (panels, k, lanes),
        lambda j, kk, l: tl.if_then_else(j * lanes + l < n, b[kk, j * lanes + l], 0.0),
        name="packed")
    assert "tl_copy_box" in _lowered(packed, [b])
    data = np.random.default_rng(1).standard_normal((k, n)).astype("float32")
    wide = np.zeros((k, panels * lanes), "float32")
    wide[:, :n] = data
    expect = wide.reshape(k, panels, lanes).transpose(1, 0, 2)
    got = _run(_build(packed, [b]), [data], expect.shape, "float32")
    np.testing.assert_array_equal(got, expect + expect)


def test_slices_steps_and_conditions_of_any_coefficient() -> None:
    """Outer axes that step the source by 2 and go backwards, a condition with coefficients
    other than one (2i + 3j <= 20, 3l >= i + 1, 2l + j <= 15, 2l >= 1,
    2l <= 2i + 7), an equality, and a
    bound on a sum of axes."""
    a = tl.placeholder((23, 9, 12), name="a")
    sliced = tl.compute(
        (6, 4, 9),
        lambda i, j, l: tl.if_then_else(
            (2 * i + 3 * j <= 20) & (j * 1 >= 1) & (i + l < 12) & ((i - i) == 0)
            & (3 * l >= i + 1) & (2 * l + j <= 15) & (2 * l >= 1) & (2 * l <= 2 * i + 7),
            a[22 - 2 * i, j + 3, l + 2], -1.5),
        name="sliced")
    assert "tl_copy_box" in _lowered(sliced, [a])
    data = np.random.default_rng(2).standard_normal((23, 9, 12)).astype("float32")
    i, j, l = np.meshgrid(np.arange(6), np.arange(4), np.arange(9), indexing="ij")
    keep = ((2 * i + 3 * j <= 20) & (j >= 1) & (i + l < 12) & (3 * l >= i + 1)
            & (2 * l + j <= 15) & (2 * l >= 1) & (2 * l <= 2 * i + 7))
    expect = np.where(keep, data[22 - 2 * i, j + 3, l + 2], np.float32(-1.5))
    got = _run(_build(sliced, [a]), [data], expect.shape, "float32")
    np.testing.assert_array_equal(got, expect + expect)


@pytest.mark.parametrize("k", [2, 3])
def test_row_bounds_round_towards_minus_infinity(k: int) -> None:
    """k * l <= i - 3 and k * l >= i - 7 along the row: bounds from negative sums must round
    down (i - 3 = -1 allows no l with k = 2; truncation would allow l = 0)."""
    a = tl.placeholder((12, 9), name="a")
    kept = tl.compute((12, 9), lambda i, l: tl.if_then_else(
        (k * l <= i - 3) & (k * l >= i - 7), a[i, l], 9.0), name="kept")
    assert "tl_copy_box" in _lowered(kept, [a])
    data = np.random.default_rng(5).standard_normal((12, 9)).astype("float32")
    i, l = np.meshgrid(np.arange(12), np.arange(9), indexing="ij")
    expect = np.where((k * l <= i - 3) & (k * l >= i - 7), data, np.float32(9.0))
    got = _run(_build(kept, [a]), [data], expect.shape, "float32")
    np.testing.assert_array_equal(got, expect + expect)


def _random_schedule(rng: np.random.Generator):
    def schedule(s: tl.Schedule, stage: tl.Tensor) -> None:
        axes = list(stage.op.axis)
        last = axes[-1]
        _, inner = s[stage].split(last, factor=int(rng.integers(1, 9)))
        if rng.random() < 0.5:
            s[stage].vectorize(inner)
        if len(axes) > 1 and rng.random() < 0.7:
            s[stage].parallel(s[stage].fuse(*axes[:-1]) if rng.random() < 0.5 else axes[0])
    return schedule


@pytest.mark.parametrize("seed", range(8))
def test_any_schedule_of_a_copy_stage_gives_the_same_copy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 5))
    shape = tuple(int(x) for x in rng.integers(1, 8, rank))
    before = tuple(int(x) for x in rng.integers(0, 3, rank))
    after = tuple(int(x) for x in rng.integers(0, 3, rank))
    a = tl.placeholder(shape, name="a")
    padded = topi.nn.pad(a, before, after, pad_value=float(rng.integers(-2, 3)), name="padded")
    data = rng.standard_normal(shape).astype("float32")
    expect = np.pad(data, list(zip(before, after)),
                    constant_values=float(padded.op.body[0].false_value.value))
    got = _run(_build(padded, [a], _random_schedule(rng)), [data], expect.shape, "float32")
    np.testing.assert_array_equal(got, expect + expect)


def test_symbolic_sizes_are_read_at_run_time() -> None:
    n = tl.var("n")
    a = tl.placeholder((n, 5), name="a")
    padded = topi.nn.pad(a, (2, 1), (1, 0), name="padded")
    assert "tl_copy_box" in _lowered(padded, [a])
    module = _build(padded, [a])
    for rows in (1, 3, 10):
        data = np.arange(rows * 5, dtype="float32").reshape(rows, 5)
        expect = np.pad(data, ((2, 1), (1, 0)))
        np.testing.assert_array_equal(_run(module, [data], expect.shape, "float32"), 2 * expect)


def test_outputs_and_transposing_copies_keep_their_loops() -> None:
    """A kernel's own output keeps the loops its schedule asks for, and a copy whose innermost
    axis walks the source with a stride (a transpose) is left to vectorized loops."""
    a = tl.placeholder((6, 7), name="a")
    padded = topi.nn.pad(a, (1, 1), (1, 1), name="padded")
    s = tl.create_schedule(padded.op)
    assert "tl_copy_box" not in str(tl.lower(s, [a, padded]).main)
    transposed = tl.compute((7, 6), lambda i, j: a[j, i], name="transposed")
    assert "tl_copy_box" not in _lowered(transposed, [a])
    data = np.random.default_rng(3).standard_normal((6, 7)).astype("float32")
    got = _run(_build(transposed, [a]), [data], (7, 6), "float32")
    np.testing.assert_array_equal(got, 2 * data.T)


def test_an_exported_library_carries_the_box_copy(tmp_path) -> None:
    a = tl.placeholder((3, 4), name="a")
    padded = topi.nn.pad(a, (1, 0), (0, 2), pad_value=-1.0, name="padded")
    module = _build(padded, [a])
    module.export_library(tmp_path / "padded.so")
    loaded = tl.load_module(tmp_path / "padded.so")
    data = np.arange(12, dtype="float32").reshape(3, 4)
    expect = np.pad(data, ((1, 0), (0, 2)), constant_values=-1.0)
    np.testing.assert_array_equal(_run(loaded, [data], expect.shape, "float32"), 2 * expect)


def test_a_large_parallel_copy_splits_its_rows_across_threads() -> None:
    """Rows split between tasks at any point (not whole runs): every row written once."""
    a = tl.placeholder((3, 1001, 37), name="a")
    padded = topi.nn.pad(a, (0, 1, 3), (0, 2, 0), pad_value=1.0, name="padded")

    def parallel(s: tl.Schedule, stage: tl.Tensor) -> None:
        s[stage].parallel(stage.op.axis[0])

    data = np.random.default_rng(4).standard_normal((3, 1001, 37)).astype("float32")
    expect = np.pad(data, ((0, 0), (1, 2), (3, 0)), constant_values=1.0)
    previous = tl.get_num_threads()
    try:
        for threads in (1, 2, 3):
            tl.set_num_threads(threads)
            got = _run(_build(padded, [a], parallel), [data], expect.shape, "float32")
            np.testing.assert_array_equal(got, 2 * expect)
    finally:
        tl.set_num_threads(previous)
