"""A one-line progress display for tuning (trials, current and best GFLOP/s, time, ETA).

A tuner callback; it rewrites one terminal line, or prints a line per batch when the output is
not a terminal, so logs stay readable.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from .result import MeasureInput, MeasureResult, gflops


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    """Prints `[name] trials 64/1000 | cur 12.3 | best 45.6 GFLOP/s | 0:12 elapsed | ETA 2:55`."""

    def __init__(self, total: int, name: str = "tune", stream: TextIO | None = None):
        self.total = total
        self.name = name
        self.stream = stream if stream is not None else sys.stderr
        self.start = time.perf_counter()
        self.done = 0
        self.best = 0.0

    def __call__(self, tuner: Any, inputs: Sequence[MeasureInput],
                 results: Sequence[MeasureResult]) -> None:
        self.done += len(results)
        current = max((gflops(i.task.flop, r) for i, r in zip(inputs, results)), default=0.0)
        self.best = max(self.best, current)
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        line = (f"[{self.name}] trials {self.done}/{self.total} | cur {current:.2f} | "
                f"best {self.best:.2f} GFLOP/s | {_clock(elapsed)} elapsed | ETA {_clock(eta)}")
        if self.stream.isatty():
            end = "\n" if self.done >= self.total else ""
            self.stream.write("\r" + line + end)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        """End the line (when tuning stopped before the last trial)."""
        if self.stream.isatty() and self.done < self.total:
            self.stream.write("\n")
            self.stream.flush()
