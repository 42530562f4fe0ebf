"""Model-free tuners: random search and grid search (baselines, and fine for tiny spaces)."""

from __future__ import annotations

from ..space import ConfigEntity
from ..task import Task
from .base import Tuner


class RandomTuner(Tuner):
    """Tries configs in a random order, never one twice."""

    def next_batch(self, n: int) -> list[ConfigEntity]:
        return [self.space.get(i) for i in self._random_unvisited(n)]


class GridSearchTuner(Tuner):
    """Tries configs in index order (the last knob varies fastest)."""

    def __init__(self, task: Task, seed: int | None = None):
        super().__init__(task, seed)
        self._cursor = 0

    def next_batch(self, n: int) -> list[ConfigEntity]:
        out: list[ConfigEntity] = []
        while len(out) < n and self._cursor < self.space.range_length:
            index = self._cursor
            self._cursor += 1
            if index not in self.visited and self.space.is_valid(index):
                out.append(self.space.get(index))
        return out
