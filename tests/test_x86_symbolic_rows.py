"""Row-wise reductions with symbolic rows or row length (topi/x86/symbolic_rows.py) against
numpy, at awkward sizes, on the host and with AVX2, in parallel and in the serial variant."""

from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from topi import nn, x86
from topi import testing as ref
from topi.x86.common import symbolic_outputs_small
from topi.x86.symbolic_rows import schedule_symbolic_rows

TARGETS = ["llvm", "llvm -mcpu=haswell"]


def _build(out: tl.Tensor, inputs: list[tl.Tensor], target: str, serial: bool):
    with tl.Target(target):
        if serial:
            with symbolic_outputs_small():
                s = x86.schedule_softmax(out)
        else:
            s = x86.schedule_softmax(out)
        text = str(tl.lower(s, [*inputs, out]))
        assert ".rf = allocate" in text  # statistics in vector lanes, not the generic schedule
        assert ("parallel" in text) != serial
        return tl.build(s, [*inputs, out])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("serial", [False, True])
def test_attention_softmax_with_a_symbolic_sequence(target, serial):
    """(batch, heads, seq, seq) with a mask added: seq rows of seq, both symbolic."""
    b, n = tl.var("b"), tl.var("n")
    scores, mask = tl.placeholder((b, 4, n, n), name="s"), tl.placeholder((b, 1, 1, n), name="m")
    out = nn.softmax(nn.add(scores, mask), -1)
    f = _build(out, [scores, mask], target, serial)
    rng = np.random.default_rng(0)
    for batch, size in [(1, 1), (1, 5), (2, 17), (3, 16), (1, 61)]:
        sa = (rng.standard_normal((batch, 4, size, size)) * 20).astype("float32")
        ma = rng.standard_normal((batch, 1, 1, size)).astype("float32")
        got = np.empty(sa.shape, "float32")
        f(sa, ma, got)
        np.testing.assert_allclose(got, ref.softmax_python(sa + ma, -1), rtol=1e-5, atol=1e-6,
                                   err_msg=f"{batch} x {size}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("serial", [False, True])
def test_layer_norm_with_symbolic_rows(target, serial):
    b, n = tl.var("b"), tl.var("n")
    x = tl.placeholder((b, n, 37), name="x")
    gamma, beta = tl.placeholder((37,), name="gamma"), tl.placeholder((37,), name="beta")
    out = nn.layer_norm(x, gamma, beta, -1)
    f = _build(out, [x, gamma, beta], target, serial)
    rng = np.random.default_rng(1)
    ga, ba = rng.standard_normal(37).astype("float32"), rng.standard_normal(37).astype("float32")
    for batch, size in [(1, 1), (2, 7), (3, 29)]:
        xa = (rng.standard_normal((batch, size, 37)) * 3 + 1).astype("float32")
        got = np.empty(xa.shape, "float32")
        f(xa, ga, ba, got)
        np.testing.assert_allclose(got, ref.layer_norm_python(xa, ga, ba, -1), rtol=1e-4,
                                   atol=1e-4, err_msg=f"{batch} x {size}")


def test_static_and_column_reductions_are_not_its_own():
    n = tl.var("n")
    assert schedule_symbolic_rows(nn.softmax(tl.placeholder((3, 17), name="x"), -1)) is None
    assert schedule_symbolic_rows(nn.softmax(tl.placeholder((n, 17), name="x"), 0)) is None


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("serial", [False, True])
def test_lanes_reduced_by_halves_keep_masks_and_nan(target, serial):
    """The partial results' lanes reduced by halves (16 -> 8 -> 4 -> 2): rows masked with the
    dtype's most negative value on all but a few columns, a row holding a NaN (NaN out, as
    numpy), log_softmax's sum too."""
    b, n = tl.var("b"), tl.var("n")
    x = tl.placeholder((b, n), name="x")
    outs = {"softmax": (nn.softmax(x, -1), ref.softmax_python),
            "log_softmax": (nn.log_softmax(x, -1), ref.log_softmax_python)}
    rng = np.random.default_rng(2)
    for name, (out, expected) in outs.items():
        f = _build(out, [x], target, serial)
        for rows, size in [(1, 1), (3, 2), (2, 17), (5, 33), (1, 64)]:
            xa = (rng.standard_normal((rows, size)) * 10).astype("float32")
            xa[:, 1::3] = np.finfo("float32").min
            if rows > 2:
                xa[1, size // 2] = np.nan
            got = np.empty(xa.shape, "float32")
            f(xa, got)
            with np.errstate(invalid="ignore"):
                want = expected(xa, -1)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name} {rows} x {size}")
