"""The side-by-side timing helper used by the benchmarks and tutorials."""

from __future__ import annotations

import time

from tensorlang.benchmark import calls_per_sample, compare


def test_compare_orders_a_fast_and_a_slow_callable():
    result = compare(lambda: None, lambda: time.sleep(0.002), repeat=3, min_seconds=0.004, settle=0)
    assert result.speedup > 10
    assert result.reference >= 0.002 > result.ours
    ours, reference = result.gflops(1e6)
    assert ours > reference


def test_samples_last_at_least_min_seconds():
    assert calls_per_sample(lambda: time.sleep(0.001), min_seconds=0.01) >= 2
    assert calls_per_sample(lambda: time.sleep(0.02), min_seconds=0.01) == 1
