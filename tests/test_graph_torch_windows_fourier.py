"""from_torch: `Tensor.unfold` (strided windows) on awkward sizes and steps along every axis, and
the Fourier transforms (`torch.fft`) as dense products with cosine and sine matrices, on odd and
even sizes, complex arithmetic (rotary embeddings as complex numbers), each against PyTorch;
complex values the frontend does not translate raise."""

from __future__ import annotations

import numpy as np
import pytest

import topi.graph as tg

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
from torch import nn

from topi.graph.importer import UnsupportedError

from test_graph_torch import Lambda, check

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


@pytest.mark.parametrize("shape, dim, size, step", [
    ((2, 7, 5), 1, 3, 2),     # a last position no window reaches
    ((2, 7, 5), -1, 2, 3),    # the last axis, step past the size
    ((13,), 0, 13, 1),        # one window of everything
    ((3, 11, 4), 0, 1, 5),    # windows of one element
    ((1, 4, 9, 6), 2, 4, 4),  # non-overlapping, as HaloNet's queries
    ((1, 4, 9, 6), 3, 6, 7),  # a step longer than the axis: one window
])
def test_unfold_matches_pytorch(shape: tuple, dim: int, size: int, step: int) -> None:
    g = check(Lambda(lambda x: (x * 2).unfold(dim, size, step) + 1), shape)
    assert {"take"} <= {n.op for n in g.ops}


def test_unfold_into_empty_windows() -> None:
    check(Lambda(lambda x: x.unfold(1, 0, 2).sum(-1) + x[:, :3]), (2, 5))


def test_unfold_twice_cuts_blocks_with_halos() -> None:
    """HaloNet's keys: overlapping 2-D windows, two unfolds of a padded map."""
    def blocks(x: torch.Tensor) -> torch.Tensor:
        padded = nn.functional.pad(x, (1, 1, 1, 1))
        return padded.unfold(2, 4, 2).unfold(3, 4, 2).reshape(1, 3, -1, 16).sum(-1)

    check(Lambda(blocks), (1, 3, 6, 10))


def test_unfold_of_a_weight_folds_at_import() -> None:
    g = check(Lambda(lambda x, w: x + w.unfold(0, 3, 2).sum(-1), torch.randn(9, 5)),
              (4, 5))
    assert "take" not in {n.op for n in g.ops}


@pytest.mark.parametrize("shape", [(1, 13, 24), (2, 7, 9), (1, 1, 5)])
def test_fnet_fourier_mixing_is_dense_products(shape: tuple) -> None:
    """FNet's mixing, the real part of fftn over the last two axes, on odd and even sizes; the
    imaginary part, which nothing reads, costs nothing: four dense products."""
    g = check(Lambda(lambda x: torch.fft.fftn(x, dim=(-2, -1)).real), shape, rtol=1e-4,
              atol=1e-4)
    assert sum(n.op == "dense" for n in g.ops) == 4


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("n, dim", [(7, 1), (8, 0), (5, (0, 1))])
def test_fft_of_a_real_input_matches_pytorch(norm: str, n: int, dim: object) -> None:
    def parts(x: torch.Tensor) -> torch.Tensor:
        z = torch.fft.fftn(x, dim=dim, norm=norm) if isinstance(dim, tuple) else \
            torch.fft.fft(x, dim=dim, norm=norm)
        return torch.view_as_real(z)

    check(Lambda(parts), (n, 6) if dim == 1 else (n, 3), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [6, 7])
def test_rfft_and_inverse_fft_match_pytorch(n: int) -> None:
    """A one-sided transform keeps n // 2 + 1 frequencies; the inverse of the full transform
    returns the input (a complex input: real and imaginary parts both read)."""
    check(Lambda(lambda x: torch.view_as_real(torch.fft.rfft(x, dim=-1))), (3, n), rtol=1e-4,
          atol=1e-4)
    check(Lambda(lambda x: torch.view_as_real(torch.fft.ifft(torch.fft.fft(x * x)))), (2, n),
          rtol=1e-4, atol=1e-4)


def _rotary(x: torch.Tensor) -> torch.Tensor:
    """DeepSeek-V2's and Llama 4's rotary embedding: pairs of features as complex numbers times
    e^(i position frequency) (torch.polar of values known now), back to real pairs."""
    positions = torch.arange(x.shape[-2], dtype=torch.float32)
    frequencies = 1.0 / 10000 ** (torch.arange(0, x.shape[-1], 2) / x.shape[-1])
    angles = positions[:, None] * frequencies
    rotation = torch.polar(torch.ones_like(angles), angles) * 0.5
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * rotation[None, :, None, :].transpose(1, 2)).flatten(-2)


def _complex_arithmetic(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Sums, differences (alpha), products by real tensors and complex numbers, and the parts of
    complex tensors moved by views, slices, expands and transposes."""
    z = torch.view_as_complex(x)
    w = torch.view_as_complex(y.transpose(0, 1).contiguous())
    u = torch.add(z, w[:, :1].expand(-1, z.shape[1]), alpha=-2) * (1.5 - 0.5j)
    v = torch.sub(u, z.unsqueeze(0)[0] * x[:, :1, 0]) - 3 + torch.fft.fft(x[..., 0])
    return torch.view_as_real(v.transpose(0, 1)[1:])


@pytest.mark.parametrize("shape", [(1, 2, 7, 8), (2, 3, 5, 4)])
def test_rotary_embedding_as_complex_numbers(shape: tuple) -> None:
    check(Lambda(_rotary), shape)


def test_complex_arithmetic_matches_pytorch() -> None:
    check(Lambda(_complex_arithmetic), (3, 5, 2), (5, 3, 2))


def test_complex_values_elsewhere_raise_naming_the_op() -> None:
    module = Lambda(lambda x: torch.view_as_real(torch.fft.fft(x) / torch.fft.fft(x))).eval()
    with pytest.raises(UnsupportedError, match="complex"):
        tg.from_torch(module, (torch.randn(2, 5),))
    with pytest.raises(UnsupportedError, match="unsupported"):
        tg.from_torch(Lambda(lambda x: torch.fft.irfft(torch.fft.rfft(x))).eval(),
                      (torch.randn(2, 6),))


def test_fourier_matrices_are_exact_on_large_sizes() -> None:
    """The angles are reduced mod n before the cosine: the largest products stay accurate."""
    from topi.graph.fourier import _matrices

    cos, sin = _matrices(1023, 1023, 1.0, "float64")
    want = np.fft.fft(np.eye(1023))
    np.testing.assert_allclose(cos - 1j * sin, want, atol=1e-9)
