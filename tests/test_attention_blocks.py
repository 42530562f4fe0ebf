"""Attention over blocks of queries, each over the keys its mask lets it see
(`topi.graph.attention_blocks`): which blocks a mask gives, and models whose causal, windowed,
padded or grouped attention is split that way, against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import topi.graph as tg
from topi.graph.attention_blocks import QueryBlock, attended, query_blocks

torch = pytest.importorskip("torch", reason="the torch extra is not installed")


def causal(length: int, keys: int | None = None) -> np.ndarray:
    return np.tril(np.ones((length, keys or length), bool))


def window(length: int, size: int) -> np.ndarray:
    rows, cols = np.indices((length, length))
    return (cols <= rows) & (cols > rows - size)


def covers(blocks: list[QueryBlock], mask: np.ndarray) -> None:
    """The blocks run over all queries in order, and each sees every key its queries see."""
    seen = attended(mask).reshape(-1, *mask.shape[-2:]).any(axis=0)
    assert blocks[0].rows_begin == 0 and blocks[-1].rows_end == seen.shape[0]
    for a, b in zip(blocks, blocks[1:]):
        assert a.rows_end == b.rows_begin
    for b in blocks:
        outside = seen[b.rows_begin:b.rows_end].copy()
        outside[:, b.keys_begin:b.keys_end] = False
        assert not outside.any(), b


@pytest.mark.parametrize("length", [160, 257, 1024])
def test_a_causal_mask_gives_blocks_over_growing_prefixes(length):
    blocks = query_blocks(causal(length), length, length)
    assert blocks is not None and len(blocks) > 1
    covers(blocks, causal(length))
    assert all(b.keys_begin == 0 and b.keys_end == b.rows_end for b in blocks)


def test_a_sliding_window_skips_keys_on_both_sides():
    mask = np.where(window(509, 64), 0.0, np.finfo(np.float32).min).astype(np.float32)
    blocks = query_blocks(mask[None, None], 509, 509)
    assert blocks is not None
    covers(blocks, mask)
    assert any(b.keys_begin > 0 for b in blocks)


def test_masks_with_nothing_to_skip_stay_whole():
    assert query_blocks(np.ones((128, 128), bool), 128, 128) is None
    assert query_blocks(np.zeros((1, 1, 128, 128), np.float32), 128, 128) is None
    # a row broadcast over the queries, or a mask of one key column: no structure
    assert query_blocks(np.ones((1, 128), bool), 128, 128) is None
    assert query_blocks(causal(128)[:, :1], 128, 128) is None
    # too few queries to pay for more kernels
    assert query_blocks(causal(8), 8, 8) is None
    assert query_blocks(causal(64), 64, 64) is None


def test_padded_keys_are_left_out_of_every_query():
    """A padding mask broadcast over the queries: all of them skip the padded keys."""
    mask = np.ones((2, 1, 1, 300), bool)
    mask[:, ..., 200:] = False
    blocks = query_blocks(mask, 100, 300)
    assert blocks == [QueryBlock(0, 100, 0, 200)]


def test_the_union_over_batches_and_heads_is_kept():
    mask = np.stack([causal(128), causal(128)[::-1, ::-1]])[:, None]
    assert query_blocks(mask, 128, 128) is None


class Attention(torch.nn.Module):
    def __init__(self, mask: torch.Tensor | None = None, causal: bool = False,
                 gqa: bool = False) -> None:
        super().__init__()
        self.mask, self.causal, self.gqa = mask, causal, gqa

    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=self.mask, is_causal=self.causal, enable_gqa=self.gqa)


def run(module: torch.nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
        products: int | None = None) -> None:
    """`module` imported and built against PyTorch (whose NaN, for a query that sees no key,
    is our zeros), with `products` batch_matmuls where given."""
    g = tg.from_torch(module.eval(), (q, k, v))
    if products is not None:
        assert sum(n.op == "batch_matmul" for n in g.nodes) == products
    feeds = {n.name: t.numpy() for n, t in zip(g.inputs, (q, k, v))}
    with torch.no_grad():
        expected = module(q, k, v).nan_to_num().numpy()
    np.testing.assert_allclose(tg.build(g)(**feeds)[0], expected, rtol=1e-4, atol=1e-5)


def qkv(*shape: int, kv_heads: int | None = None) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    kv = (*shape[:-3], kv_heads or shape[-3], *shape[-2:])
    return (torch.randn(shape, generator=gen), torch.randn(kv, generator=gen),
            torch.randn(kv, generator=gen))


def blocks_of(mask: np.ndarray) -> int:
    """How many blocks `mask` splits its attention into (more than one)."""
    blocks = query_blocks(mask, mask.shape[-2], mask.shape[-1])
    assert blocks is not None and len(blocks) > 1
    return len(blocks)


@pytest.mark.parametrize("length", [167, 256])
def test_causal_attention_in_blocks_matches_pytorch(length):
    run(Attention(causal=True), *qkv(1, 3, length, 16), products=2 * blocks_of(causal(length)))


def test_windowed_float_mask_in_blocks_matches_pytorch():
    mask = torch.where(torch.from_numpy(window(211, 48)), 0.0, torch.finfo(torch.float32).min)
    run(Attention(mask), *qkv(2, 2, 211, 8), products=2 * blocks_of(mask.numpy()))


def test_grouped_queries_in_blocks_match_pytorch():
    run(Attention(causal=True, gqa=True), *qkv(1, 6, 160, 8, kv_heads=2),
        products=2 * blocks_of(causal(160)))


def test_a_batch_of_padded_causal_masks_matches_pytorch():
    """Each batch row pads a different number of keys (a row with nothing to attend to gives
    zeros, as PyTorch's); the blocks keep the union of what the rows see."""
    mask = torch.from_numpy(causal(176)).repeat(3, 1, 1, 1)
    mask[1, ..., 150:] = False
    mask[2, ..., :5, :] = False
    run(Attention(mask), *qkv(3, 2, 176, 8), products=2 * blocks_of(mask.numpy()))


def test_a_row_of_lowest_values_spreads_over_every_key_as_in_pytorch():
    """A float mask whose row holds only the dtype's lowest value (a padded query in
    transformers' masks) averages all the values, and -inf rows give zeros."""
    lowest = torch.finfo(torch.float32).min
    mask = torch.where(torch.from_numpy(causal(512)), 0.0, lowest)
    mask[130] = lowest
    mask[9] = -torch.inf
    blocks = query_blocks(mask.numpy(), 512, 512)
    assert blocks is not None
    assert [(b.keys_begin, b.keys_end) for b in blocks if b.rows_begin <= 130 < b.rows_end] \
        == [(0, 512)]
    run(Attention(mask), *qkv(1, 1, 512, 8), products=2 * len(blocks))
