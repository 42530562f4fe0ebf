"""Fixtures of the torch.compile backend's tests: Dynamo reset around each test, and the
Modules the backend builds."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from topi.graph import torch_compile


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
