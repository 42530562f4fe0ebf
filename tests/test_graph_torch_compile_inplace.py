"""torch.compile(backend="tensorlang") of graphs that write into their inputs: a key/value cache
updated in place at positions known only at run time (`index_copy_`, `index_put_`) runs
compiled, the caller's cache holding what eager PyTorch writes (transformers' `generate()` with a
static cache: tests/test_graph_torch_compile_decoders.py)."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
from torch import nn

from topi.graph.torch_compile import TensorlangCompileWarning

from compile_fixtures import builds, fresh_dynamo  # noqa: F401  (fixtures)

pytestmark = pytest.mark.filterwarnings("ignore:.*fallback config", "ignore::FutureWarning")


class CacheStep(nn.Module):
    """One decoding step: the new keys written into the cache at run-time positions, then
    attention of the new query over the cache."""

    def __init__(self, put: bool) -> None:
        super().__init__()
        self.put = put
        self.k, self.q = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x, cache, pos):
        if self.put:
            cache[:, pos] = self.k(x)
        else:
            cache.index_copy_(1, pos, self.k(x))
        scores = (self.q(x) @ cache.transpose(1, 2)).softmax(-1)
        return scores @ cache


@pytest.mark.parametrize("put", [False, True], ids=["index_copy_", "index_put_"])
def test_cache_written_at_run_time_positions(put, builds):
    torch.manual_seed(0)
    model = CacheStep(put).eval()
    fast = torch.compile(model, backend="tensorlang")
    ours, theirs = torch.zeros(2, 13, 8), torch.zeros(2, 13, 8)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error", TensorlangCompileWarning)
        # (index_put_ counts negative positions from the end)
        for positions in ([0], [1, 2], [3, 4], [12], [-2 if put else 11], [5, 6]):
            pos = torch.tensor(positions)
            x = torch.randn(2, len(positions), 8)
            torch.testing.assert_close(fast(x, ours, pos), model(x, theirs, pos), rtol=1e-4,
                                       atol=1e-5, msg=f"positions {positions}")
            torch.testing.assert_close(ours, theirs, msg=f"the cache after {positions}")
    assert len(builds) == 2  # one token, two tokens
