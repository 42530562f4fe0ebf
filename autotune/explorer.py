"""Explorers: search a config space for the maxima of a cost model's score.

Between the cost model and the tuner. Simulated annealing runs many chains at once; each step
moves every chain to a neighbour (one knob changed) and accepts by the Metropolis rule, all as
numpy operations over the chains. Chains persist across calls, so the search continues where it
left off as the model improves. `diverse_pick` then chooses a batch that is both good and spread
over knob values, so one batch does not spend its trials on near-copies of one config.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

import numpy as np

from .space import ConfigSpace

ScoreFn = Callable[[np.ndarray], np.ndarray]


class Explorer(Protocol):
    """Finds the config indices with the highest scores."""

    def find_maximums(self, score_fn: ScoreFn, num: int, exclude: Iterable[int]) -> list[int]:
        """Up to `num` distinct indices not in `exclude`, best first."""


def _random_neighbors(space: ConfigSpace, points: np.ndarray,
                      rng: np.random.Generator) -> np.ndarray:
    """Each point with one randomly chosen knob (with more than one value) set to another value."""
    dims = np.asarray(space.dims, dtype=np.int64)
    movable = np.flatnonzero(dims > 1)
    if movable.size == 0:
        return points.copy()
    digits = space.points2knobs(points)
    rows = np.arange(len(points))
    knob = movable[rng.integers(0, movable.size, size=len(points))]
    step = rng.integers(1, dims[knob])  # never 0: the point really moves
    digits[rows, knob] = (digits[rows, knob] + step) % dims[knob]
    return space.knobs2points(digits)


class SimulatedAnnealing:
    """Parallel, persistent simulated annealing over a config space.

    Args:
        space: the space to search.
        n_chains: chains advanced together.
        n_iter: maximum steps per call.
        temp: (start, end) temperature, on the scale of the scores' standard deviation.
        early_stop: stop after this many steps without a change in the best-`num` set.
        seed: random seed.
    """

    def __init__(self, space: ConfigSpace, n_chains: int = 128, n_iter: int = 500,
                 temp: tuple[float, float] = (1.0, 0.0), early_stop: int = 50,
                 seed: int | np.random.Generator | None = None):
        self.space = space
        self.n_chains = n_chains
        self.n_iter = n_iter
        self.temp = temp
        self.early_stop = early_stop
        self.rng = np.random.default_rng(seed)
        self._points: np.ndarray | None = None

    def start_from(self, indices: Iterable[int]) -> None:
        """Move the first chains to `indices` (e.g. the best configs measured so far, the
        fallback among them), so the search explores around known good configs too."""
        starts = np.asarray([int(i) for i in indices][: self.n_chains], dtype=np.int64)
        if self._points is None or len(self._points) != self.n_chains:
            self._points = self.space.sample(self.rng, self.n_chains)
        self._points[: len(starts)] = starts

    def _scores(self, score_fn: ScoreFn, points: np.ndarray) -> np.ndarray:
        scores = np.asarray(score_fn(points), dtype=float)
        if self.space._filters:
            valid = np.fromiter((self.space.is_valid(int(p)) for p in points), bool, len(points))
            scores = np.where(valid, scores, -np.inf)
        return np.where(np.isnan(scores), -np.inf, scores)

    def find_maximums(self, score_fn: ScoreFn, num: int, exclude: Iterable[int]) -> list[int]:
        """Up to `num` distinct indices not in `exclude` with the highest `score_fn`, best first."""
        excluded = np.asarray(sorted({int(e) for e in exclude}), dtype=np.int64)
        points = self._points
        if points is None or len(points) != self.n_chains:
            points = self.space.sample(self.rng, self.n_chains)
        scores = self._scores(score_fn, points)
        best_idx = np.empty(0, dtype=np.int64)
        best_score = np.empty(0)
        best_idx, best_score = self._merge(best_idx, best_score, points, scores, excluded, num)
        t0, t1 = self.temp
        unchanged = 0
        for step in range(self.n_iter):
            temperature = t0 + (t1 - t0) * step / max(self.n_iter - 1, 1)
            proposal = _random_neighbors(self.space, points, self.rng)
            new_scores = self._scores(score_fn, proposal)
            finite = scores[np.isfinite(scores)]
            scale = float(finite.std()) if finite.size > 1 and finite.std() > 0 else 1.0
            with np.errstate(over="ignore", invalid="ignore"):  # -inf scores: invalid configs
                delta = (new_scores - scores) / scale
                prob = np.exp(np.minimum(delta, 0.0) / max(temperature, 1e-9))
            accept = (self.rng.random(len(points)) < np.nan_to_num(prob)) | (delta > 0)
            points = np.where(accept, proposal, points)
            scores = np.where(accept, new_scores, scores)
            before = best_idx
            best_idx, best_score = self._merge(best_idx, best_score, proposal, new_scores,
                                               excluded, num)
            unchanged = unchanged + 1 if np.array_equal(before, best_idx) else 0
            if unchanged >= self.early_stop:
                break
        self._points = points
        finite = np.isfinite(best_score)
        best_idx, best_score = best_idx[finite], best_score[finite]
        return [int(i) for i in best_idx[np.argsort(-best_score, kind="stable")]]

    @staticmethod
    def _merge(best_idx: np.ndarray, best_score: np.ndarray, points: np.ndarray,
               scores: np.ndarray, excluded: np.ndarray, num: int) -> tuple[np.ndarray, np.ndarray]:
        """The top `num` distinct, non-excluded points among the current best and new ones."""
        idx = np.concatenate([best_idx, points])
        sc = np.concatenate([best_score, scores])
        idx, first = np.unique(idx, return_index=True)
        sc = sc[first]
        keep = ~np.isin(idx, excluded, assume_unique=False)
        idx, sc = idx[keep], sc[keep]
        if len(idx) > num:
            top = np.argpartition(-sc, num - 1)[:num]
            idx, sc = idx[top], sc[top]
        order = np.argsort(idx)
        return idx[order], sc[order]


def diverse_pick(space: ConfigSpace, candidates: list[int], scores: np.ndarray, num: int,
                 diversity: float = 0.5) -> list[int]:
    """Greedily pick `num` candidates maximising normalised score plus `diversity` times the
    number of knob values they add to the batch (a submodular coverage bonus)."""
    if len(candidates) <= num:
        return list(candidates)
    digits = space.points2knobs(np.asarray(candidates, dtype=np.int64))
    s = np.asarray(scores, dtype=float)
    span = s.max() - s.min()
    s = (s - s.min()) / span if span > 0 else np.zeros_like(s)
    covered = [set() for _ in range(digits.shape[1])]
    chosen: list[int] = []
    available = np.ones(len(candidates), dtype=bool)
    for _ in range(num):
        bonus = np.zeros(len(candidates))
        for k, seen in enumerate(covered):
            if seen:
                bonus += ~np.isin(digits[:, k], list(seen))
            else:
                bonus += 1
        gain = np.where(available, s + diversity * bonus / max(digits.shape[1], 1), -np.inf)
        j = int(np.argmax(gain))
        chosen.append(candidates[j])
        available[j] = False
        for k in range(digits.shape[1]):
            covered[k].add(int(digits[j, k]))
    return chosen
