"""Evolutionary search (Ansor's, OSDI 2020 section 5.2): the XGBoost tuner with a population of
programs in place of simulated annealing.

Why: a sketch's space is large and its loop-IR features cost a lowering per config scored.
Simulated annealing's chains wander one knob at a time and score about 2000 configs per plan
(most of the tuner's time on a GEMM or a convolution sketch); a population that breeds from its
fittest members reaches the model's maxima in a few generations of a few dozen new programs.

Each generation scores the population with the cost model (the features of the configs already
scored are cached), keeps the best as parents, and breeds children by
  - crossover (optional): a child takes each stage's knobs ("C.tile0", "C.unroll": the part of
    the name before the first dot) from one of two parents;
  - mutation of one knob: a tile size moves a factor between two levels of its split (a
    neighbouring candidate of the same extent), an annotation (unroll depth, parallel loops,
    vector width) or a compute location (inline, at the reader, at the tile) takes another value.
Children are always points of the config space (only candidates of each knob are chosen) that
pass its filters; a program the sketch rejects (`cfg.raise_error`: a register block too large)
does not lower, scores -inf and dies out. Parents are drawn by rank, so a model on any scale
(ranking or regression) selects the same way. The best configs ever scored, measured ones
excluded, are what the tuner measures next; the measured fastest seed each new population.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..explorer import ScoreFn
from ..space import ConfigSpace, SplitKnob
from ..task import Task
from .xgb import XGBTuner

#: Programs per generation, generations per plan, and the share of a generation bred by
#: crossover (the rest by mutation of one parent); the best `ELITE` survive unchanged.
POPULATION = 64
GENERATIONS = 4
CROSSOVER = 0.2
ELITE = 8


def _split_sizes(knob: SplitKnob) -> np.ndarray:
    """The explicit sizes of each entity of a split knob (all but the outermost, which takes
    the rest of the extent)."""
    return np.asarray([e.size[1:] for e in knob.entities], dtype=np.int64).reshape(len(knob), -1)


class Mutator:
    """Mutation and crossover over the knob digits of a config space (see the module doc)."""

    def __init__(self, space: ConfigSpace):
        self.space = space
        self.dims = np.asarray(space.dims, dtype=np.int64)
        self.movable = np.flatnonzero(self.dims > 1)
        knobs = list(space.knobs.values())
        self._sizes: dict[int, np.ndarray] = {
            k: _split_sizes(knob) for k, knob in enumerate(knobs)
            if isinstance(knob, SplitKnob) and len(knob) > 1}
        stages: dict[str, list[int]] = {}
        for k, name in enumerate(space.knobs):
            stages.setdefault(name.split(".")[0], []).append(k)
        self.stages = [np.asarray(v, dtype=np.int64) for v in stages.values()]

    def mutate(self, index: int, rng: np.random.Generator, tries: int = 8) -> int:
        """`index` with one knob changed (a neighbouring tile size for a split), a valid config;
        `index` itself when no knob can change or no try is valid."""
        if self.movable.size == 0:
            return index
        digits = self.space.point2knob(int(index))
        for _ in range(tries):
            child = list(digits)
            k = int(self.movable[rng.integers(0, self.movable.size)])
            options = self._neighbours(k, child[k])
            if options.size:
                child[k] = int(options[rng.integers(0, options.size)])
            else:
                child[k] = int((child[k] + rng.integers(1, self.dims[k])) % self.dims[k])
            point = self.space.knob2point(child)
            if self.space.is_valid(point):
                return point
        return index

    def _neighbours(self, knob: int, entity: int) -> np.ndarray:
        """The entities of split knob `knob` whose explicit sizes differ from `entity`'s in one
        level (a factor moved between it and the outermost) or two (a factor moved between
        them); empty for a knob that is no split."""
        sizes = self._sizes.get(knob)
        if sizes is None or sizes.shape[1] == 0:
            return np.empty(0, dtype=np.int64)
        differ = (sizes != sizes[entity]).sum(axis=1)
        return np.flatnonzero((differ >= 1) & (differ <= 2))

    def crossover(self, a: int, b: int, rng: np.random.Generator) -> int:
        """A child taking each stage's knobs from `a` or `b` at random (`a` when invalid)."""
        da = np.asarray(self.space.point2knob(int(a)))
        db = np.asarray(self.space.point2knob(int(b)))
        child = da.copy()
        for knobs in self.stages:
            if rng.random() < 0.5:
                child[knobs] = db[knobs]
        point = self.space.knob2point(child.tolist())
        return point if self.space.is_valid(point) else int(a)


class EvolutionarySearch:
    """An explorer (`autotune.explorer.Explorer`) breeding a population of configs towards the
    cost model's maxima.

    Args:
        space: the space to search.
        population: programs per generation.
        generations: generations per call of `find_maximums`.
        crossover: share of children bred by crossover.
        elite: best programs kept unchanged into the next generation.
        seed: random seed.
    """

    def __init__(self, space: ConfigSpace, population: int = POPULATION,
                 generations: int = GENERATIONS, crossover: float = CROSSOVER,
                 elite: int = ELITE, seed: int | np.random.Generator | None = None):
        if population < 2 or generations < 1 or not 0 <= crossover <= 1 or elite < 0:
            raise ValueError(f"EvolutionarySearch: population >= 2, generations >= 1, "
                             f"0 <= crossover <= 1 and elite >= 0, got {population}, "
                             f"{generations}, {crossover}, {elite}")
        self.space = space
        self.population = population
        self.generations = generations
        self.crossover = crossover
        self.elite = min(elite, population)
        self.rng = np.random.default_rng(seed)
        self.mutator = Mutator(space)
        self._seeds: list[int] = []
        self._survivors: list[int] = []
        #: The mean score of each generation of the last call (how the population improved).
        self.history: list[float] = []

    def start_from(self, indices: Iterable[int]) -> None:
        """Seed the next population with `indices` (the fastest configs measured so far)."""
        self._seeds = [int(i) for i in indices][: self.population]

    def _scores(self, score_fn: ScoreFn, points: np.ndarray) -> np.ndarray:
        scores = np.asarray(score_fn(points), dtype=float)
        return np.where(np.isnan(scores), -np.inf, scores)

    def _initial(self) -> np.ndarray:
        start = list(dict.fromkeys(self._seeds + self._survivors))[: self.population]
        fill = self.space.sample(self.rng, self.population - len(start))
        return np.asarray(start + [int(i) for i in fill], dtype=np.int64)

    def _breed(self, points: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """The next generation: the elite, then children of parents drawn by rank."""
        alive = np.flatnonzero(np.isfinite(scores))
        if alive.size == 0:
            return self.space.sample(self.rng, self.population)
        order = alive[np.argsort(-scores[alive], kind="stable")]
        ranked = points[order]
        weight = 1.0 / (1.0 + np.arange(ranked.size))
        weight /= weight.sum()
        children = [int(i) for i in ranked[: self.elite]]
        while len(children) < self.population:
            a = int(ranked[self.rng.choice(ranked.size, p=weight)])
            if ranked.size > 1 and self.rng.random() < self.crossover:
                b = int(ranked[self.rng.choice(ranked.size, p=weight)])
                a = self.mutator.crossover(a, b, self.rng)
            children.append(self.mutator.mutate(a, self.rng))
        return np.asarray(children, dtype=np.int64)

    def find_maximums(self, score_fn: ScoreFn, num: int, exclude: Iterable[int]) -> list[int]:
        """Up to `num` distinct indices not in `exclude` with the highest `score_fn`, best
        first, from every program the generations scored."""
        excluded = {int(e) for e in exclude}
        seen: dict[int, float] = {}
        points = self._initial()
        self.history = []
        for generation in range(self.generations):
            scores = self._scores(score_fn, points)
            for p, s in zip(points.tolist(), scores.tolist()):
                seen[p] = s
            finite = scores[np.isfinite(scores)]
            self.history.append(float(finite.mean()) if finite.size else -np.inf)
            if generation + 1 < self.generations:
                points = self._breed(points, scores)
        self._survivors = [p for p, _ in sorted(seen.items(), key=lambda kv: -kv[1])
                           if np.isfinite(seen[p])][: self.elite]
        best = sorted(((s, p) for p, s in seen.items() if p not in excluded and np.isfinite(s)),
                      key=lambda sp: -sp[0])
        return [p for _, p in best[:num]]


class EvolutionaryTuner(XGBTuner):
    """The XGBoost tuner (same model, features, plan cadence, transfer learning and verdict)
    planning by evolutionary search; the default tuner of auto-scheduled tasks.

    Args:
        task: the task.
        population, generations, crossover, elite: of the `EvolutionarySearch`.
        seed: random seed.
        **options: the `XGBTuner` options (loss_type, feature_type, plan_size, ...).
    """

    def __init__(self, task: Task, population: int = POPULATION,
                 generations: int = GENERATIONS, crossover: float = CROSSOVER,
                 elite: int = ELITE, seed: int | None = None, **options: object):
        search = EvolutionarySearch(task.config_space, population, generations, crossover,
                                    elite, seed=seed)
        super().__init__(task, explorer=search, seed=seed, **options)  # type: ignore[arg-type]
