"""`torch.linalg.solve_triangular` imported as matrix products (`topi.graph.triangular`),
against PyTorch: both triangles, both sides, unit diagonals, sizes that are no power of two,
broadcast batches, float32 and float64, and a system whose substitution cancels heavily."""

from __future__ import annotations

import numpy as np
import pytest

import topi.graph as tg

torch = pytest.importorskip("torch", reason="the torch extra is not installed")


class Solve(torch.nn.Module):
    def __init__(self, upper: bool, left: bool, unitriangular: bool) -> None:
        super().__init__()
        self.options = dict(upper=upper, left=left, unitriangular=unitriangular)

    def forward(self, a, b):
        return torch.linalg.solve_triangular(a, b, **self.options)


def triangular(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Random values with a diagonal of magnitude 1 to 2 (both signs): well conditioned, but
    the other triangle is filled too (a solve must not read it)."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.rand(shape, generator=gen, dtype=dtype) - 0.5
    signs = torch.where(torch.rand(shape[:-1], generator=gen) < 0.5, -1.0, 1.0).to(dtype)
    return a + torch.diag_embed(signs * (1 + torch.rand(shape[:-1], generator=gen, dtype=dtype)))


def check(module: torch.nn.Module, a: torch.Tensor, b: torch.Tensor, rtol: float) -> None:
    g = tg.from_torch(module.eval(), (a, b))
    assert "linalg_solve_triangular" not in {n.op for n in g.nodes}
    expected = module(a, b).numpy()
    actual = tg.build(g)(**{n.name: t.numpy() for n, t in zip(g.inputs, (a, b))})[0]
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * np.abs(expected).max())


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_every_form_matches_pytorch(upper, left, unitriangular):
    a = triangular((2, 13, 13), torch.float32, seed=1)
    b = torch.randn((2, 13, 5) if left else (2, 5, 13), generator=torch.Generator().manual_seed(2))
    check(Solve(upper, left, unitriangular), a, b, rtol=1e-4)


@pytest.mark.parametrize("n", [1, 7, 64])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sizes_and_dtypes(n, dtype):
    a = triangular((3, n, n), dtype, seed=n)
    b = torch.randn(3, n, 4, dtype=dtype, generator=torch.Generator().manual_seed(0))
    check(Solve(False, True, n % 2 == 0), a, b, rtol=1e-4 if dtype == torch.float32 else 1e-10)


def test_batches_broadcast():
    a = triangular((2, 1, 9, 9), torch.float32, seed=3)
    b = torch.randn(3, 9, 6, generator=torch.Generator().manual_seed(4))
    check(Solve(True, True, False), a, b, rtol=1e-4)


def test_a_system_whose_powers_grow_stays_accurate():
    """A unit lower triangle of ones: its inverse is bidiagonal, but the powers of its strict
    triangle reach binomial coefficients near 1e17 at 64 rows, where a power series in it
    loses every digit in float32."""
    a = torch.ones(64, 64).tril()
    b = torch.randn(64, 3, generator=torch.Generator().manual_seed(5))
    check(Solve(False, True, True), a, b, rtol=1e-5)
