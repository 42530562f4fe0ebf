"""Constants and prepacked weights start on a cache line (topi.graph.aligned): vector loads from
a misaligned weight straddle two lines each."""

from __future__ import annotations

import numpy as np
import pytest

import topi.graph as tg
from topi.graph.aligned import aligned_copy, aligned_empty


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("shape", [(), (1,), (3, 5), (7, 1, 13), (2, 33, 16)])
@pytest.mark.parametrize("dtype", ["float32", "int8", "bool", "float64"])
def test_aligned_copy_keeps_values_and_starts_on_a_line(shape, dtype):
    value = (np.arange(int(np.prod(shape))) % 3).astype(dtype).reshape(shape)
    out = aligned_copy(value[::-1] if value.ndim else value)
    assert _address(out) % 64 == 0 and out.flags.c_contiguous
    assert out.dtype == value.dtype and out.shape == value.shape
    np.testing.assert_array_equal(out, value[::-1] if value.ndim else value)
    assert aligned_empty(shape, dtype).shape == shape


def test_graph_constants_are_aligned_and_read_only():
    g = tg.Graph()
    for array in (np.ones((5, 7), "float32")[1:], [1, 2, 3], 2.5):
        node = g.constant(array)
        assert _address(node.value) % 64 == 0
        assert not node.value.flags.writeable
        np.testing.assert_array_equal(node.value, np.asarray(array))


def test_object_constants_are_still_refused_by_dtype():
    with pytest.raises(TypeError, match="unsupported dtype"):
        tg.Graph().constant(np.array(["a", None], dtype=object))


def test_built_module_arrays_are_aligned():
    """Every array a built conv model's kernels read (packed weights, biases, the arena's
    buffers) starts on a cache line."""
    g = tg.Graph()
    x = g.input("x", (1, 32, 9, 9), "float32")
    w = g.constant(np.random.default_rng(0).standard_normal((64, 32, 3, 3)).astype("float32"))
    b = g.constant(np.zeros(64, "float32"))
    g.output(g.relu(g.bias_add(g.conv2d(x, w, padding=1), b)))
    with pytest.warns(UserWarning):
        module = tg.build(g)
        np.testing.assert_allclose(module(x=np.ones((1, 32, 9, 9), "float32"))[0].shape,
                                   (1, 64, 9, 9))
    for step in module.steps:
        for a in step.arrays:
            assert _address(a) % 64 == 0, (step.name, a.shape)
