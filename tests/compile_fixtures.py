"""Fixtures of the torch.compile backend's tests: Dynamo reset around each test, the Modules
the backend builds, and the check that a model compiles whole and right."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from topi.graph import torch_compile
from topi.graph.torch_compile import TensorlangCompileWarning


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def builds(monkeypatch) -> list:
    """The Modules the backend builds, in order."""
    built = []
    build = torch_compile.build

    def counting(*args, **kwargs):
        built.append(build(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(torch_compile, "build", counting)
    return built


def assert_whole_and_right(model: torch.nn.Module, *inputs: torch.Tensor,
                           tol: float = 2e-3) -> None:
    """`model` compiled runs every graph compiled and matches eager to `tol` of its largest
    output, on the first and the second call."""
    model = model.eval()
    with torch.no_grad():
        want = model(*inputs)
    fast = torch.compile(model, backend="tensorlang")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", TensorlangCompileWarning)
        for _ in range(2):
            got = fast(*inputs)
            got, expected = (got.logits, want.logits) if hasattr(got, "logits") else (got, want)
            err = (got - expected).abs().max() / expected.abs().max()
            assert err < tol, f"max |ours - eager| / max |eager| = {float(err):.2e}"
