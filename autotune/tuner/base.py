"""The tuner loop: propose a batch, measure it, learn from it, repeat.

A tuner only has to say which configs to try next (`next_batch`) and what to learn from results
(`update`); the loop, callbacks, early stopping, history loading and the bookkeeping of the best
config live here. Every tuner measures the task's fallback config first (what the template builds
untuned), so a run never ends with a config slower than the untuned schedule as its best.
Measurement is anything with the `Measurer` interface, or a plain function `measure(inputs) ->
results` (handy for tests and simulations).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..measure import MeasureOption, Measurer, measure_option
from ..record import Record
from ..result import MeasureInput, MeasureResult, gflops
from ..space import ConfigEntity
from ..task import Task

Callback = Callable[[Any, Sequence[MeasureInput], Sequence[MeasureResult]], None]
MeasureFn = Callable[[Sequence[MeasureInput]], Sequence[MeasureResult]]


class _FunctionMeasurer:
    """Adapts `measure(inputs) -> results` to the Measurer interface."""

    def __init__(self, fn: MeasureFn):
        self.fn = fn
        self.features: dict[int, np.ndarray] = {}
        self.overlapping = False

    def submit_builds(self, inputs: Sequence[MeasureInput]) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_result([None] * len(inputs))
        return future

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[Any]) -> list[MeasureResult]:
        results = list(self.fn(inputs))
        if len(results) != len(inputs):
            raise ValueError(f"the measure function returned {len(results)} results for "
                             f"{len(inputs)} inputs")
        return results

    def close(self) -> None:
        """Nothing to release: the function owns its resources."""


class Tuner:
    """Base class of tuners.

    Attributes:
        task: the task being tuned.
        visited: indices proposed so far (never proposed again).
        best_config, best_result, best_flops: the fastest config measured (or loaded).
        trial_count: measurements seen by `update`.
        fallback: the task's fallback config, measured first (None when outside the space).
    """

    #: Features the builders should compute along the way (None: the tuner needs none).
    feature_kind: str | None = None

    def __init__(self, task: Task, seed: int | None = None):
        if not isinstance(task, Task):
            raise TypeError(f"a tuner needs an autotune Task, got {type(task).__name__}")
        self.task = task
        self.space = task.config_space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.visited: set[int] = set()
        self.best_config: ConfigEntity | None = None
        self.best_result: MeasureResult | None = None
        self.best_flops = 0.0
        self.trial_count = 0
        self._best_trial = 0
        self.fallback = task.fallback_config()

    # -- what subclasses implement ------------------------------------------------------------

    def next_batch(self, n: int) -> list[ConfigEntity]:
        """Up to `n` configs to measure next, none proposed before."""
        raise NotImplementedError

    def has_next(self) -> bool:
        """Whether unproposed configs remain."""
        return len(self.visited) < len(self.space)

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Learn from measurements (the base class keeps track of the best)."""
        for inp, res in zip(inputs, results):
            self.trial_count += 1
            self.visited.add(inp.config.index)
            flops = gflops(self.task.flop, res) if self.task.flop else (
                1.0 / res.mean if res.ok else 0.0)
            if res.ok and (self.best_result is None or res.mean < self.best_result.mean):
                self.best_config, self.best_result, self.best_flops = inp.config, res, flops
                self._best_trial = self.trial_count

    # -- helpers for subclasses ------------------------------------------------------------------

    def _random_unvisited(self, n: int) -> list[int]:
        """Up to `n` distinct random valid indices not visited (marks nothing)."""
        left = len(self.space) - len(self.visited)
        n = min(n, left)
        out: list[int] = []
        chosen: set[int] = set()
        if left <= 4 * n or len(self.space) <= 4096:
            pool = [int(i) for i in self.space.valid_indices() if int(i) not in self.visited]
            picks = self.rng.permutation(len(pool))[:n]
            return [pool[p] for p in picks]
        while len(out) < n:
            for i in self.space.sample(self.rng, 2 * (n - len(out))):
                i = int(i)
                if i not in self.visited and i not in chosen and len(out) < n:
                    out.append(i)
                    chosen.add(i)
        return out

    def _propose(self, n: int) -> list[ConfigEntity]:
        batch: list[ConfigEntity] = []
        if n > 0 and self.fallback is not None and self.fallback.index not in self.visited:
            batch.append(self.fallback)  # the baseline every run must beat comes first
            self.visited.add(self.fallback.index)
        if len(batch) < n and self.has_next():
            batch += self.next_batch(n - len(batch))
        for c in batch:
            self.visited.add(c.index)
        return batch

    def _measurer(self, option: MeasureOption | MeasureFn | None) -> tuple[Any, bool]:
        if option is None:
            option = measure_option()
        if isinstance(option, MeasureOption):
            return Measurer(option, self.feature_kind), option.overlapping
        if callable(option):
            return _FunctionMeasurer(option), False
        raise TypeError(f"measure_option must come from autotune.measure_option() or be a "
                        f"function of inputs, got {type(option).__name__}")

    def _learn_features(self, features: dict[int, np.ndarray]) -> None:
        """Receive features that the builders computed (model-based tuners keep them)."""

    # -- the loop --------------------------------------------------------------------------------

    def tune(self, n_trial: int, measure_option: MeasureOption | MeasureFn | None = None,
             early_stopping: int | None = None, callbacks: Iterable[Callback] = (),
             batch_size: int = 16) -> None:
        """Measure up to `n_trial` configs.

        Args:
            n_trial: the number of measurements to make.
            measure_option: from `autotune.measure_option(...)` (default builder and runner when
                None), or a function `measure(inputs) -> results`.
            early_stopping: stop after this many trials without a new best.
            callbacks: called as `callback(tuner, inputs, results)` after each batch.
            batch_size: configs per batch.
        """
        if n_trial < 0:
            raise ValueError(f"n_trial must be >= 0, got {n_trial}")
        callbacks = list(callbacks)
        measurer, overlapping = self._measurer(measure_option)
        remaining = n_trial

        def start_next() -> tuple[list[ConfigEntity], Any]:
            nonlocal remaining
            batch = self._propose(min(batch_size, remaining))
            remaining -= len(batch)
            return batch, measurer.submit_builds(self._inputs(batch)) if batch else None

        batch, future = start_next()
        try:
            while batch:
                inputs = self._inputs(batch)
                builds = future.result()
                next_batch: list[ConfigEntity] = []
                if overlapping and remaining > 0:
                    next_batch, future = start_next()
                results = measurer.run(inputs, builds)
                self._learn_features(measurer.features)
                self.update(inputs, results)
                for cb in callbacks:
                    cb(self, inputs, results)
                if (early_stopping is not None
                        and self.trial_count - self._best_trial >= early_stopping):
                    break
                if not overlapping and remaining > 0:
                    next_batch, future = start_next()
                batch = next_batch
        finally:
            measurer.close()

    def _inputs(self, batch: Sequence[ConfigEntity]) -> list[MeasureInput]:
        return [MeasureInput(self.task, c) for c in batch]

    # -- history --------------------------------------------------------------------------------

    def load_history(self, records: Iterable[Record]) -> None:
        """Learn from logged measurements: those of this task's workload and CPU signature are
        marked as visited and count towards the best; model-based tuners also learn from the others
        (other shapes of the same template) to start from a better model."""
        own_inputs: list[MeasureInput] = []
        own_results: list[MeasureResult] = []
        others: list[Record] = []
        for r in records:
            own_cpu = r.cpu_signature == self.task.compile_target.cpu_signature
            if r.key == self.task.key and own_cpu:
                if 0 <= r.config_index < self.space.range_length:
                    config = self.space.get(r.config_index)
                    if config.matches(r.knobs):  # else logged by another template version
                        own_inputs.append(MeasureInput(self.task, config))
                        own_results.append(r.result)
            elif r.template_name == self.task.name:
                others.append(r)
        if others:
            self._transfer(others)
        if own_inputs:
            self.update(own_inputs, own_results)

    def _transfer(self, records: list[Record]) -> None:
        """Learn from other workloads of the same template (model-based tuners override)."""

