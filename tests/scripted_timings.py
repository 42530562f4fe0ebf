"""A stand-in for a built kernel whose timings are scripted, and the run settings that the
adaptive-repeat tests time it with: what `artifact._time` decides from given costs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from autotune.artifact import RunSettings


class ScriptedModule:
    """A module whose time evaluator returns the next scripted costs, one per repeat."""

    def __init__(self, costs: Sequence[float]):
        self.costs = list(costs)
        self.taken = 0

    def time_evaluator(self, number: int, repeat: int, min_repeat_ms: float = 0):
        def evaluate(*arrays: np.ndarray):
            out = self.costs[self.taken:self.taken + repeat]
            self.taken += repeat
            return type("Timings", (), {"results": tuple(out)})()

        return evaluate


def scripted_settings(**kw: object) -> RunSettings:
    """Six repeats at most, two at least, a 5% interval target; `kw` overrides."""
    base = dict(number=1, repeat=6, min_repeat_ms=0, run_timeout=1.0, flush_cache=False,
                check_correctness=False, max_seconds=1.0, ci_target=0.05, min_repeat=2)
    base.update(kw)
    return RunSettings(**base)  # type: ignore[arg-type]
