"""Blocks of queries and the keys they see, read from an attention mask known at import.

A causal mask hides the upper triangle of the scores, a sliding window everything but a band:
computed whole, half or more of the products, exponentials and sums of an attention go to
scores that the softmax turns into zeros. Split into blocks of consecutive queries, each block
needs only the run of keys that any of its queries sees (the first block of a causal attention
reads the first keys alone, the last one all of them), so each block is an attention of its own
over its run of keys, at the cost of a few more, smaller kernels. `query_blocks` picks the
number of blocks that leaves the least work, counting each block's kernels as a fixed cost and
doubling the count only for a clear saving (each block's kernels are compiled too).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Block counts tried: powers of two up to this many.
MAX_BLOCKS = 16
#: Fewest queries in a block: smaller blocks pay more for their kernels than they save.
MIN_BLOCK_ROWS = 32
#: What one block's kernels (two products and a softmax) cost over their work, counted as this
#: many more queries over all the keys.
BLOCK_COST_ROWS = 16
#: Splitting the whole attention in two, and each doubling of the block count after, must save
#: at least this fraction of the work left: each doubling doubles the distinct kernels a cold
#: build compiles (every block reads its own run of keys), for a few percent at most past 4
#: blocks (a causal 1024 x 1024: 8 blocks do 5% less work than 4, with 12 kernels more).
MIN_SAVING = 0.1
#: Mask values at or below this hide a key: half of float32's lowest value (transformers' masks
#: hold float32's lowest value; -inf is below it too).
HIDDEN = float(np.finfo(np.float32).min) / 2


@dataclass(frozen=True)
class QueryBlock:
    """Queries [rows_begin, rows_end) attend only to keys [keys_begin, keys_end)."""

    rows_begin: int
    rows_end: int
    keys_begin: int
    keys_end: int


def attended(mask: np.ndarray) -> np.ndarray:
    """Where a mask lets a query see a key: a bool mask's True, a float mask's values above
    `HIDDEN` (a softmax turns the scores they are added to into exact zeros, as it does -inf)."""
    if mask.dtype == bool:
        return mask
    return ~(mask <= HIDDEN)  # NaN is seen


def _keys_read(masks: np.ndarray) -> np.ndarray:
    """(queries, keys): which keys a query reads under any of `masks` (n, queries, keys). A row
    that sees no key reads none where it is all -inf (or False: its output is zeros) and all of
    them where its values are merely the lowest (the softmax spreads it evenly over every key,
    as PyTorch's does)."""
    seen = attended(masks)
    dead = ~masks.any(axis=-1) if masks.dtype == bool else np.isneginf(masks).all(axis=-1)
    even = ~seen.any(axis=-1) & ~dead
    return (seen | even[..., None]).any(axis=0)


def query_blocks(mask: np.ndarray, length: int, keys: int) -> list[QueryBlock] | None:
    """The blocks of queries (in order, covering all `length` of them) with the keys each block
    sees under `mask` (broadcasting against (..., length, keys)), or None where computing the
    attention whole costs least. A query that sees no key widens no block (its output is
    zeros whatever it reads); a block of such queries reads the first key."""
    if mask.ndim < 2 or mask.shape[-1] != keys or mask.shape[-2] not in (1, length):
        return None
    seen = np.broadcast_to(_keys_read(mask.reshape(-1, *mask.shape[-2:])), (length, keys))
    alive = seen.any(axis=1)
    first = np.where(alive, seen.argmax(axis=1), keys)
    last = np.where(alive, keys - seen[:, ::-1].argmax(axis=1), 0)
    best, best_cost = None, length * keys
    count = 1
    while count <= MAX_BLOCKS and -(-length // count) >= min(MIN_BLOCK_ROWS, length):
        blocks = _split(first, last, length, count)
        cost = sum((b.rows_end - b.rows_begin + BLOCK_COST_ROWS) * (b.keys_end - b.keys_begin)
                   for b in blocks)
        if cost < best_cost * (1 - MIN_SAVING):
            best, best_cost = blocks, cost
        count *= 2
    return best


def _split(first: np.ndarray, last: np.ndarray, length: int, count: int) -> list[QueryBlock]:
    """`count` blocks of consecutive queries (equal but for the last) with the run of keys from
    the first key any of them sees to the last."""
    rows = -(-length // count)
    blocks = []
    for r in range(0, length, rows):
        begin, end = int(first[r:r + rows].min()), int(last[r:r + rows].max())
        blocks.append(QueryBlock(r, min(r + rows, length), *((begin, end) if begin < end
                                                              else (0, 1))))
    return blocks
