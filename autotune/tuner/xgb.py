"""The model-based tuner: XGBoost cost model + simulated annealing + diverse batch picks.

Glue between the narrow interfaces: features (`FeatureExtractor`), a `CostModel`, an `Explorer`.
The first `plan_size` trials are random; afterwards, each time `refit_every` new measurements have
arrived (or the plan has run out), the model is refitted and the explorer plans the next configs:
its best `n * diversity_filter_ratio` are thinned to a diverse `n`, where n is the larger of
`plan_size` and `refit_every`. Planning costs a lowering per new candidate the annealing visits
(features of loop IR), far more than the fit itself, so planning every other batch halves the
model's share of the tuning time, and a plan lowers at most `lowerings_per_trial` new configs
for each config it plans: the annealing goes on over configs already lowered (every measured
config, every earlier candidate) once that budget is spent. Each proposal is a random
unvisited config with probability `eps` instead (so the model cannot get stuck in a corner).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..cost_model import CostModel, XGBoostCostModel
from ..explorer import Explorer, SimulatedAnnealing, diverse_pick
from ..features import FeatureExtractor
from ..record import Record
from ..result import MeasureInput, MeasureResult
from ..space import ConfigEntity
from ..task import Task, create_task
from .base import Tuner

#: Annealing chains restarted from the fastest measured configs at each model fit.
_SEED_CHAINS = 4
#: The fewest new configs a plan may lower, whatever its size: the annealing's first step
#: alone scores one config per chain.
_MIN_PLAN_LOWERINGS = 64
#: Spaces up to this size are scored whole: each config is lowered once in the task's life.
_WHOLE_SPACE = 512


class XGBTuner(Tuner):
    """Tuner driven by an XGBoost cost model.

    Args:
        task: the task.
        loss_type: "rank" (pairwise ranking) or "reg" (regression on throughput).
        feature_type: "itervar", "curve" or "knob" (see `autotune.features`).
        plan_size: random trials before the first fit, and the fewest configs planned per fit.
        refit_every: new measurements between model fits (and plans); None: `plan_size`.
        diversity_filter_ratio: the explorer returns this many times `plan_size` candidates,
            then a diverse subset is kept (None or 1: keep the best).
        eps: probability of a random proposal.
        model: a CostModel to use instead of XGBoost.
        explorer: an Explorer to use instead of simulated annealing.
        seed: random seed (numpy and xgboost).
        lowerings_per_trial: new configs a plan may lower (for loop-IR features) per config it
            plans, and at least `_MIN_PLAN_LOWERINGS`; None: no limit (nor in a space of at
            most `_WHOLE_SPACE` configs). A convolution's config takes 20-100 ms to lower, so an
            unbounded annealing over a space of thousands costs minutes a plan.
    """

    def __init__(self, task: Task, loss_type: str = "rank", feature_type: str = "itervar",
                 plan_size: int = 32, diversity_filter_ratio: float | None = 2.0,
                 eps: float = 0.05, model: CostModel | None = None,
                 explorer: Explorer | None = None, seed: int | None = None,
                 refit_every: int | None = 64, lowerings_per_trial: float | None = 1.0):
        super().__init__(task, seed)
        if lowerings_per_trial is not None and lowerings_per_trial <= 0:
            raise ValueError(f"lowerings_per_trial must be > 0, got {lowerings_per_trial}")
        self.lowerings_per_trial = lowerings_per_trial
        if refit_every is not None and refit_every < 1:
            raise ValueError(f"refit_every must be >= 1, got {refit_every}")
        self.refit_every = refit_every or plan_size
        self.loss_type = loss_type
        self.feature_type = feature_type
        self.feature_kind = feature_type if feature_type != "knob" else None
        self.plan_size = plan_size
        self.diversity_filter_ratio = diversity_filter_ratio
        self.eps = eps
        self.model: CostModel = model or XGBoostCostModel(loss_type, seed=seed)
        self.extractor = FeatureExtractor(task, feature_type)
        if explorer is None:
            # Loop-IR features cost a lowering per new candidate: search less widely with them.
            cheap = feature_type == "knob"
            explorer = SimulatedAnnealing(
                self.space, n_chains=128 if cheap else 32, n_iter=500 if cheap else 60,
                early_stop=50 if cheap else 15, seed=self.rng,
            )
        self.explorer = explorer
        self.xs_index: list[int] = []
        self.ys: list[float] = []
        self._transfer_xs: list[np.ndarray] = []
        self._transfer_ys: list[np.ndarray] = []
        self._plan: list[int] = []
        self._since_fit = 0

    # -- proposing -------------------------------------------------------------------------------

    def next_batch(self, n: int) -> list[ConfigEntity]:
        out: list[int] = []
        while len(out) < n and len(self.visited) + len(out) < len(self.space):
            candidate = None
            if self._plan and self.rng.random() >= self.eps:
                while self._plan:
                    index = self._plan.pop(0)
                    if index not in self.visited and index not in out:
                        candidate = index
                        break
            if candidate is None:
                picks = [i for i in self._random_unvisited(len(out) + 1) if i not in out]
                if not picks:
                    break
                candidate = picks[0]
            out.append(candidate)
        return [self.space.get(i) for i in out]

    # -- learning --------------------------------------------------------------------------------

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        super().update(inputs, results)
        for inp, res in zip(inputs, results):
            self.xs_index.append(inp.config.index)
            self.ys.append(1.0 / res.mean if res.ok and res.mean > 0 else 0.0)
        self._since_fit += len(inputs)
        enough = len(self.ys) >= min(self.plan_size, max(8, len(self.space) // 4))
        if enough and (self._since_fit >= self.refit_every or not self._plan):
            self._fit_and_plan()

    def _learn_features(self, features: dict[int, np.ndarray]) -> None:
        for index, row in features.items():
            self.extractor.put(index, row)

    def _training_set(self) -> tuple[np.ndarray, np.ndarray, list[int]]:
        xs = self.extractor.get(self.xs_index)
        ys = np.asarray(self.ys)
        ok = ~np.isnan(xs).any(axis=1)
        xs, ys = xs[ok], ys[ok]
        ys = ys / ys.max() if ys.size and ys.max() > 0 else ys
        all_xs, all_ys, groups = [xs], [ys], [len(ys)]
        for txs, tys in zip(self._transfer_xs, self._transfer_ys):
            if txs.shape[1] == xs.shape[1]:
                all_xs.append(txs)
                all_ys.append(tys)
                groups.append(len(tys))
        return np.concatenate(all_xs), np.concatenate(all_ys), groups

    def _score(self, indices: np.ndarray) -> np.ndarray:
        xs = self.extractor.get(indices)
        bad = np.isnan(xs).any(axis=1)
        scores = np.full(len(indices), -np.inf)
        if (~bad).any():
            scores[~bad] = self.model.predict(xs[~bad])
        return scores

    def _fit_and_plan(self) -> None:
        xs, ys, groups = self._training_set()
        if len(ys) < 2 or not np.any(ys > 0):
            return
        self.model.fit(xs, ys, groups)
        self._since_fit = 0
        start_from = getattr(self.explorer, "start_from", None)
        if start_from is not None:  # a few chains continue from the fastest configs measured
            order = np.argsort(-np.asarray(self.ys), kind="stable")[:_SEED_CHAINS]
            start_from(self.xs_index[k] for k in order if self.ys[k] > 0)
        size = max(self.plan_size, self.refit_every)
        ratio = self.diversity_filter_ratio or 1.0
        wanted = int(size * ratio)
        candidates = self._search(wanted, size)
        if ratio > 1.0 and len(candidates) > size:
            scores = self._score(np.asarray(candidates, dtype=np.int64))
            candidates = diverse_pick(self.space, candidates, scores, size)
        self._plan = candidates[:size]

    # -- transfer learning ----------------------------------------------------------------------

    def _transfer(self, records: list[Record]) -> None:
        """Features and normalised throughputs of other shapes of this template, one ranking
        group per workload, added to every later fit."""
        by_workload: dict[tuple[str, str], list[Record]] = {}
        for r in records:
            by_workload.setdefault((r.key, r.target), []).append(r)
        for group in by_workload.values():
            other = create_task(group[0].workload[0], group[0].workload[1], group[0].target)
            if self.feature_type == "knob" and other.config_space.dims != self.space.dims:
                continue  # knob indices only mean the same thing in an identical space
            extractor = FeatureExtractor(other, self.feature_type)
            space = other.config_space
            valid = [r for r in group if 0 <= r.config_index < space.range_length
                     and space.get(r.config_index).matches(r.knobs)]
            xs = extractor.get([r.config_index for r in valid])
            ys = np.asarray([1.0 / r.result.mean if r.result.ok else 0.0 for r in valid])
            ok = ~np.isnan(xs).any(axis=1)
            if ok.sum() < 2 or ys[ok].max() <= 0:
                continue
            self._transfer_xs.append(xs[ok])
            self._transfer_ys.append(ys[ok] / ys[ok].max())
        if self._transfer_xs and not self.ys:
            self._fit_transfer_only()

    def _fit_transfer_only(self) -> None:
        """Plan the first batch from the transferred model instead of random configs."""
        xs = np.concatenate(self._transfer_xs)
        ys = np.concatenate(self._transfer_ys)
        width = self.extractor.get([self.space.sample(self.rng, 1)[0]]).shape[1]
        if xs.shape[1] != width:
            return
        self.model.fit(xs, ys, [len(t) for t in self._transfer_ys])
        self._plan = self._search(self.plan_size, self.plan_size)

    def _search(self, wanted: int, planned: int) -> list[int]:
        """The explorer's best `wanted` unvisited configs, lowering at most the budget of
        `planned` trials."""
        if self.lowerings_per_trial is not None and len(self.space) > _WHOLE_SPACE:
            self.extractor.budget = max(_MIN_PLAN_LOWERINGS,
                                        int(self.lowerings_per_trial * planned))
        try:
            return self.explorer.find_maximums(self._score, wanted, self.visited)
        finally:
            self.extractor.budget = None
