"""Cost models: predict which configs are fast from their features.

Between features and the explorer. A `CostModel` has `fit(xs, ys)` and `predict(xs)`; higher
predictions mean faster. `XGBoostCostModel` uses only xgboost's public `train`, `DMatrix` and
`Booster.inplace_predict`, so xgboost upgrades do not break it. With `groups`, a ranking model
compares configs only within one workload, which is what makes transfer learning across shapes
work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np


class CostModel(Protocol):
    """What the explorer and the model-based tuner need from a model."""

    def fit(self, xs: np.ndarray, ys: np.ndarray, groups: Sequence[int] | None = None) -> None:
        """Learn from features `xs` (n, d) and scores `ys` (n,), higher = faster."""

    def predict(self, xs: np.ndarray) -> np.ndarray:
        """Scores for features `xs` (n, d)."""


class RandomModel:
    """Random scores: turns a model-based search into a random one (a baseline)."""

    def __init__(self, seed: int | None = None):
        self.rng = np.random.default_rng(seed)

    def fit(self, xs: np.ndarray, ys: np.ndarray, groups: Sequence[int] | None = None) -> None:
        """Nothing to learn."""

    def predict(self, xs: np.ndarray) -> np.ndarray:
        """Random scores: a model that knows nothing (the baseline of the search)."""
        return self.rng.random(len(xs))


class XGBoostCostModel:
    """Gradient-boosted trees over features.

    Args:
        loss_type: "rank" (objective rank:pairwise: only the order matters, robust to noisy
            scales) or "reg" (reg:squarederror on normalised throughput).
        num_rounds: boosting rounds per fit.
        seed: seed of xgboost's sampling.
        num_threads: xgboost threads. One by default: tuning data sets are small, and more
            threads would compete with the measurement workers.
    """

    def __init__(self, loss_type: str = "rank", num_rounds: int = 60, seed: int | None = None,
                 num_threads: int = 1):
        if loss_type not in ("rank", "reg"):
            raise ValueError(f"loss_type must be 'rank' or 'reg', got {loss_type!r}")
        self.loss_type = loss_type
        self.num_rounds = num_rounds
        self.params: dict[str, object] = {
            "max_depth": 6,
            "gamma": 0.0001,
            "min_child_weight": 1,
            "subsample": 1.0,
            "eta": 0.3,
            "lambda": 1.0,
            "alpha": 0.0,
            "objective": "rank:pairwise" if loss_type == "rank" else "reg:squarederror",
            "seed": 0 if seed is None else int(seed) % (2**31),
            "verbosity": 0,
            "nthread": num_threads,
        }
        self._booster: object | None = None

    def fit(self, xs: np.ndarray, ys: np.ndarray, groups: Sequence[int] | None = None) -> None:
        """Train from scratch on (xs, ys); `groups` gives consecutive group sizes for ranking.

        Raises:
            ValueError: shapes disagree.
        """
        import xgboost

        xs = np.asarray(xs, dtype=np.float32)
        ys = np.asarray(ys, dtype=np.float32)
        if xs.ndim != 2 or xs.shape[0] != ys.shape[0]:
            raise ValueError(f"fit: xs {xs.shape} and ys {ys.shape} do not match")
        if xs.shape[0] == 0:
            self._booster = None
            return
        # One thread, as in training: a DMatrix made on every core took 100-140 ms on a busy
        # 2-core machine (its OpenMP threads waiting for a core), for a few hundred rows.
        dtrain = xgboost.DMatrix(xs, label=ys, nthread=self.params["nthread"])
        if self.loss_type == "rank":
            dtrain.set_group(list(groups) if groups is not None else [xs.shape[0]])
        self._booster = xgboost.train(self.params, dtrain, num_boost_round=self.num_rounds)

    def predict(self, xs: np.ndarray) -> np.ndarray:
        """Predicted scores (zeros before the first fit).

        In place, without a DMatrix: the explorer scores a few dozen configs per step, and a
        DMatrix per call cost 80 ms of a 6 s model plan on a busy machine (3 ms in place)."""
        xs = np.asarray(xs, dtype=np.float32)
        if self._booster is None:
            return np.zeros(xs.shape[0])
        return np.asarray(self._booster.inplace_predict(xs), dtype=float)

    @property
    def fitted(self) -> bool:
        """Whether the model has been trained at least once."""
        return self._booster is not None
