"""The fast call path (runtime/fastcall.c): same results and same errors as the Python checker.

Every case first calls the kernel with good arrays (so that the fast path has accepted this
signature once), then with one bad argument, and expects exactly the error that a Module without
the fast path raises. No timing here: benchmarks/bench_core.py measures the call overhead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.runtime import Module
from tensorlang.runtime.args import ParamSpec, Signature
from tensorlang.runtime.fastcall import extension, fast_caller

Args = tuple[np.ndarray, np.ndarray, np.ndarray]


def _build() -> Module:
    """C[i, j] = A[i, j] + B[j] * 2 with A, C of shape (n, 4) and B of shape (4,)."""
    n = tl.var("n")
    A = tl.placeholder((n, 4), "float32", name="A")
    B = tl.placeholder((4,), "float32", name="B")
    C = tl.compute((n, 4), lambda i, j: A[i, j] + B[j] * 2.0, name="C")
    return tl.build(tl.create_schedule(C.op), [A, B, C])


@pytest.fixture(scope="module")
def fast() -> Module:
    mod = _build()
    assert mod._fast is not None, "the fast call path was not built"
    return mod


@pytest.fixture(scope="module")
def slow() -> Module:
    mod = _build()
    mod._fast = None  # the Python checker only: the reference for every error
    return mod


def _args(n: int = 3) -> Args:
    rng = np.random.default_rng(n)
    return (rng.random((n, 4), dtype="float32"), rng.random(4, dtype="float32"),
            np.zeros((n, 4), "float32"))


def _read_only(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x.flags.writeable = False
    return x


def _misaligned(x: np.ndarray) -> np.ndarray:
    raw = np.zeros(x.nbytes + 1, np.uint8)
    y = raw[1:].view(x.dtype).reshape(x.shape)
    y[...] = x
    return y


def _shifted(n: int, b: np.ndarray) -> tuple:
    """A and C as two views of one buffer, C one row ahead of A."""
    base = np.zeros((n + 1, 4), "float32")
    return base[1:], b, base[:n]


BAD: dict[str, Callable[[Args], tuple]] = {
    "too few": lambda t: t[:2],
    "too many": lambda t: (*t, t[2]),
    "ndim": lambda t: (t[0].reshape(-1), t[1], t[2]),
    "const dim": lambda t: (t[0], np.zeros(5, "float32"), t[2]),
    "symbolic dim": lambda t: (t[0], t[1], np.zeros((len(t[0]) + 1, 4), "float32")),
    "dtype": lambda t: (t[0], t[1], t[2].astype("float64")),
    "int dtype": lambda t: (t[0].astype("int32"), t[1], t[2]),
    "byte order": lambda t: (t[0].astype(">f4"), t[1], t[2]),
    "strided": lambda t: (np.zeros((len(t[0]), 8), "float32")[:, ::2], t[1], t[2]),
    "transposed": lambda t: (np.zeros((4, len(t[0])), "float32").T, t[1], t[2]),
    "negative stride": lambda t: (t[0], t[1][::-1], t[2]),
    "read-only output": lambda t: (t[0], t[1], _read_only(t[2])),
    "misaligned": lambda t: (_misaligned(t[0]), t[1], t[2]),
    "overlap": lambda t: (t[0], t[1], t[0]),
    "partial overlap": lambda t: _shifted(len(t[0]), t[1]),
    "list": lambda t: (t[0], [1.0, 2.0, 3.0, 4.0], t[2]),
    "scalar": lambda t: (t[0], 2.0, t[2]),
}


def _error(mod: Module, args: tuple) -> tuple[type, str]:
    with pytest.raises((TypeError, ValueError)) as info:
        mod(*args)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("case", sorted(BAD))
def test_same_error_after_a_hit(fast: Module, slow: Module, case: str) -> None:
    good = _args(3)
    fast(*good)  # the fast path accepts this signature first
    np.testing.assert_allclose(good[2], good[0] + good[1] * 2, rtol=1e-6)
    bad = BAD[case](_args(3))
    assert _error(fast, bad) == _error(slow, bad)
    fast(*good)  # and still works afterwards
    assert fast._fast(good) is None


@pytest.mark.parametrize("n", [0, 1, 3, 17, 1000])
def test_results_for_each_size(fast: Module, n: int) -> None:
    a, b, c = _args(n)
    assert fast._fast((a, b, c)) is None  # taken by the fast path, not the fallback
    np.testing.assert_allclose(c, a + b * 2, rtol=1e-6)
    c[...] = 0
    fast(a, b, c)
    np.testing.assert_allclose(c, a + b * 2, rtol=1e-6)


def test_fallback_runs_nothing(fast: Module) -> None:
    a, b, c = _args(3)
    c[...] = -1
    assert fast._fast((a, b, c.astype("float64"))) is NotImplemented
    assert fast._fast((a, b)) is NotImplemented
    assert fast._fast([a, b, c]) is NotImplemented
    assert (c == -1).all()


def test_other_array_types_take_the_python_path(fast: Module) -> None:
    a, b, c = _args(4)

    class Sub(np.ndarray):
        pass

    fast(a.view(Sub), b, c)
    np.testing.assert_allclose(c, a + b * 2, rtol=1e-6)
    c[...] = 0
    fast(a, np.frombuffer(b.tobytes(), "float32"), c)  # read-only input, a fresh dtype object
    np.testing.assert_allclose(c, a + b * 2, rtol=1e-6)


def test_torch_tensors_zero_copy(fast: Module) -> None:
    torch = pytest.importorskip("torch")
    a, b, _ = _args(5)
    out = torch.zeros((5, 4), dtype=torch.float32)
    fast(torch.from_numpy(a), torch.from_numpy(b), out)
    np.testing.assert_allclose(out.numpy(), a + b * 2, rtol=1e-6)  # written in place
    with pytest.raises(ValueError, match=r"argument 0 \(A\).*C-contiguous"):
        fast(torch.zeros((4, 5)).T, torch.from_numpy(b), out)


def test_status_through_the_fast_path() -> None:
    W = tl.placeholder((6, 3), "float32", name="W")
    idx = tl.placeholder((4,), "int32", name="idx")
    out = tl.compute((4, 3), lambda i, j: W[idx[i], j], name="Gather")
    mod = tl.build(tl.create_schedule(out.op), [W, idx, out])
    w = np.arange(18, dtype="float32").reshape(6, 3)
    got = np.zeros((4, 3), "float32")
    good = np.array([0, 5, 2, 1], "int32")
    assert mod._fast is not None and mod._fast((w, good, got)) is None
    np.testing.assert_array_equal(got, w[good])
    with pytest.raises(IndexError, match="reading W"):
        mod(w, np.array([0, 6, 2, 1], "int32"), got)
    mod(w, good, got)  # the status does not stick


def test_threads_share_a_module(fast: Module) -> None:
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for k in range(200):
                n = 1 + (seed + k) % 7
                a, b, c = _args(n)
                fast(a, b, c)
                np.testing.assert_allclose(c, a + b * 2, rtol=1e-6)
                with pytest.raises(ValueError):
                    fast(a, b, np.zeros((n + 1, 4), "float32"))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def _sig(shapes: list[tuple], shape_vars: tuple[str, ...] = ("n",)) -> Signature:
    params = tuple(ParamSpec(f"P{i}", np.dtype("float32"), s, i == len(shapes) - 1)
                   for i, s in enumerate(shapes))
    return Signature("k", params, shape_vars)


def test_which_signatures_get_a_fast_path() -> None:
    assert extension() is not None
    assert fast_caller(_sig([("n", 4), ("n", 4)]), 0) is not None
    assert fast_caller(_sig([(3,), (3,)], ()), 0) is not None
    # a dimension that is an expression of a shape variable: the Python checker solves it
    assert fast_caller(_sig([(("*", "n", 16),), (("*", "n", 16),)]), 0) is None
    # more arguments than the C entry point calls
    limit = extension().MAX_ARGS
    assert fast_caller(_sig([(2,)] * limit, ()), 0) is not None
    assert fast_caller(_sig([(2,)] * (limit + 1), ()), 0) is None
