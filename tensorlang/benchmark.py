"""Side-by-side timing: our kernel against a reference (numpy, PyTorch) in one process.

This machine has slow spells that no counter shows, so a lone absolute time means little. The
two callables are run alternately and the median of the pairwise time ratios is reported, which
cancels drifts that affect both. Before each sample the process pauses briefly: thread pools
(OpenBLAS's, ours) spin for a while after a call, and a sample must not compete with the other
side's idle spinning threads.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Comparison:
    """Median seconds per call of each side and the median of the pairwise ratios."""

    ours: float
    reference: float
    speedup: float  # reference time / our time: > 1 means we are faster

    def gflops(self, flop: float) -> tuple[float, float]:
        """GFLOP/s of (ours, reference) for a kernel of `flop` floating-point operations."""
        return flop / self.ours / 1e9, flop / self.reference / 1e9


def _time(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def calls_per_sample(fn: Callable[[], object], min_seconds: float = 0.02) -> int:
    """How many calls make one timing sample of at least `min_seconds` (one warm-up call)."""
    elapsed = _time(fn, 1)
    return max(1, int(min_seconds / max(elapsed, 1e-9)) + 1)


def compare(
    ours: Callable[[], object],
    reference: Callable[[], object],
    repeat: int = 7,
    min_seconds: float = 0.05,
    settle: float = 0.2,
) -> Comparison:
    """Time `ours` and `reference` alternately `repeat` times each.

    Args:
        ours: a zero-argument callable running our kernel once.
        reference: a zero-argument callable running the reference once.
        repeat: number of (ours, reference) pairs.
        min_seconds: each sample repeats a call until it lasts at least this long.
        settle: seconds to pause before each sample, so the other side's threads go idle.
    """
    n_ours = calls_per_sample(ours, min_seconds)
    n_ref = calls_per_sample(reference, min_seconds)
    pairs = []
    for _ in range(repeat):
        time.sleep(settle)
        t_ours = _time(ours, n_ours)
        time.sleep(settle)
        t_ref = _time(reference, n_ref)
        pairs.append((t_ours, t_ref))
    return Comparison(
        ours=statistics.median(p[0] for p in pairs),
        reference=statistics.median(p[1] for p in pairs),
        speedup=statistics.median(p[1] / p[0] for p in pairs),
    )
