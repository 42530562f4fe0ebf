"""The progress bar of tuning: trials done, current and best GFLOP/s, elapsed time and ETA.

A tuner callback on top of tqdm rather than a hand-written line: tqdm fits the bar to the
terminal's width, smooths the rate behind its ETA, works in notebooks, and turns itself off when
the output is not a terminal, so logs and CI output stay free of carriage returns.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

from tqdm import tqdm

from .result import MeasureInput, MeasureResult, gflops


class Progress:
    """Shows a bar on stderr, or nothing when it is not a terminal:

        matmul.x86:  50%|█████     | 500/1000 [01:02<01:01, 8.1trial/s, cur 98.1 best 143.2 GFLOP/s]


    Args:
        total: the trials this run will make.
        name: the label in front of the bar (the task name).
        stream: where to draw it (default: sys.stderr).
        disable: True hides it, False forces it, None (default) shows it only on a terminal.
    """

    def __init__(self, total: int, name: str = "tune", stream: TextIO | None = None,
                 disable: bool | None = None):
        self.best = 0.0
        self.bar = tqdm(total=total, desc=name, unit="trial", dynamic_ncols=True,
                        file=stream if stream is not None else sys.stderr, disable=disable)

    def __call__(self, tuner: Any, inputs: Sequence[MeasureInput],
                 results: Sequence[MeasureResult]) -> None:
        current = max((gflops(i.task.flop, r) for i, r in zip(inputs, results)), default=0.0)
        self.best = max(self.best, current)
        self.bar.set_postfix_str(f"cur {current:.1f} best {self.best:.1f} GFLOP/s",
                                 refresh=False)
        self.bar.update(len(results))

    def finish(self) -> None:
        """Close the bar (also when tuning stopped before the last trial)."""
        self.bar.close()
