"""A genetic-algorithm tuner: configs are genes (one digit per knob), fitness is throughput."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..result import MeasureInput, MeasureResult, gflops
from ..space import ConfigEntity
from ..task import Task
from .base import Tuner


class GATuner(Tuner):
    """Keeps a population; each generation keeps the elite, then breeds the rest by
    fitness-proportional selection, one-point crossover and per-knob mutation.

    Args:
        task: the task.
        pop_size: individuals per generation.
        elite_num: best individuals copied into the next generation unchanged.
        mutation_prob: probability that a knob of a child is set to a random value.
        seed: random seed.
    """

    def __init__(self, task: Task, pop_size: int = 100, elite_num: int = 3,
                 mutation_prob: float = 0.1, seed: int | None = None):
        super().__init__(task, seed)
        self.pop_size = max(2, min(pop_size, len(self.space)))
        self.elite_num = min(elite_num, self.pop_size)
        self.mutation_prob = mutation_prob
        self.fitness: dict[int, float] = {}
        self._queue: list[int] = self._random_unvisited(self.pop_size)
        # The fallback (measured first by the base loop) belongs to the first generation.
        seed = [self.fallback.index] if self.fallback is not None else []
        self._generation = seed + [i for i in self._queue if i not in seed]

    def next_batch(self, n: int) -> list[ConfigEntity]:
        out: list[ConfigEntity] = []
        while len(out) < n and self.has_next():
            if not self._queue:
                self._queue = self._breed()
                if not self._queue:
                    break
            index = self._queue.pop(0)
            if index not in self.visited and all(c.index != index for c in out):
                out.append(self.space.get(index))
        return out

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        super().update(inputs, results)
        for inp, res in zip(inputs, results):
            self.fitness[inp.config.index] = gflops(self.task.flop or 1e9, res)

    def _breed(self) -> list[int]:
        scored = [i for i in self._generation if i in self.fitness]
        if len(scored) < 2:
            self._generation = self._random_unvisited(self.pop_size)
            return list(self._generation)
        genes = self.space.points2knobs(np.asarray(scored, dtype=np.int64))
        fit = np.asarray([self.fitness[i] for i in scored])
        elite = [scored[k] for k in np.argsort(-fit)[: self.elite_num]]
        prob = fit + 1e-8
        prob = prob / prob.sum()
        dims = np.asarray(self.space.dims)
        children: list[int] = []
        seen = set(self.visited)
        attempts = 0
        while len(children) < self.pop_size - len(elite) and attempts < 20 * self.pop_size:
            attempts += 1
            a, b = self.rng.choice(len(scored), size=2, p=prob)
            cut = self.rng.integers(0, genes.shape[1] + 1)
            child = np.concatenate([genes[a, :cut], genes[b, cut:]])
            mutate = self.rng.random(len(dims)) < self.mutation_prob
            child[mutate] = self.rng.integers(0, dims[mutate])
            index = int(self.space.knobs2points(child[None, :])[0])
            if index not in seen and self.space.is_valid(index):
                seen.add(index)
                children.append(index)
        if len(children) < self.pop_size - len(elite):
            fill = [i for i in self._random_unvisited(self.pop_size) if i not in seen]
            children += fill[: self.pop_size - len(elite) - len(children)]
        self._generation = elite + children
        return children
