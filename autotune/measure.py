"""Measurement: build configs into artifacts in parallel, then time them one at a time.

The stage between the tuner and the log, behind two small protocols so that the tuner never
knows where the work happens. A `Builder` turns a batch of `MeasureInput`s into `Artifact`s
(machine code plus what identifies it; see artifact.py) or error results; a `Runner` times a
batch of artifacts into `MeasureResult`s. A config is compiled once, by the builder; configs
whose lowered IR is identical are timed once.

`LocalBuilder` and `LocalRunner` do both on this machine in isolated worker processes
(workers.py): a template error, a compile error, a crash or a hang costs one typed result and
one worker, never the tuner. `DaskBuilder` / `DaskRunner` (farm.py) farm them out.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from . import hostcpu
from .artifact import (Artifact, RunSettings, TaskSpec, build_job, first_call_limit, prepare_run,
                       run_job)
from .result import MeasureErrorNo, MeasureInput, MeasureResult
from .workers import Job, Outcome, WorkerPool

_PRELOAD = ("autotune.artifact", "autotune.features")


@runtime_checkable
class Builder(Protocol):
    """Compiles configs into artifacts (LocalBuilder, DaskBuilder, or your own)."""

    def build(self, inputs: Sequence[MeasureInput],
              feature_kind: str | None = None) -> list[Artifact | MeasureResult]:
        """One `Artifact` per input, in order, or a `MeasureResult` saying why not
        (INSTANTIATION_ERROR, COMPILE_ERROR, BUILD_TIMEOUT). `feature_kind` ("itervar",
        "curve" or None) asks for each config's features, in `Artifact.features`."""

    def close(self) -> None:
        """Release what the builder holds (processes, connections); it may be used again."""


@runtime_checkable
class Runner(Protocol):
    """Times artifacts (LocalRunner, DaskRunner, or your own)."""

    def run(self, artifacts: Sequence[Artifact],
            best_seconds: float | None = None) -> list[MeasureResult]:
        """One `MeasureResult` per artifact, in order; no timing overlaps another on the same
        machine. `best_seconds`, the best cost measured so far for the task, lets a runner cut
        hopeless configs short."""

    def close(self) -> None:
        """Release what the runner holds (processes, connections); it may be used again."""


def _error(outcome: Outcome, machine: str = "") -> MeasureResult:
    return MeasureResult((), outcome.error_no, outcome.error_msg, outcome.seconds,
                         machine=machine)


class LocalBuilder:
    """Compiles configs in parallel worker processes on this machine.

    Args:
        timeout: seconds allowed per config; past it the config is a BUILD_TIMEOUT.
        n_parallel: worker processes (default: the number of CPUs).
        nice: the workers' niceness relative to this process while a timing runs
            (`timing`). Builds overlap the timing of the previous batch
            (`MeasureOption.overlap`): niced, they take the cores only when the timed kernel
            leaves them idle (a kernel timed beside a build on every core loses about a tenth
            of its time slices at nice 10); between timings they build at full priority, so
            that other work on a busy machine does not starve them.
    """

    def __init__(self, timeout: float = 10, n_parallel: int | None = None, nice: int = 10):
        if timeout <= 0:
            raise ValueError(f"LocalBuilder timeout must be > 0, got {timeout}")
        self.timeout = float(timeout)
        self.n_parallel = n_parallel or os.cpu_count() or 1
        self.nice = nice
        self._pool: WorkerPool | None = None

    def build(self, inputs: Sequence[MeasureInput],
              feature_kind: str | None = None) -> list[Artifact | MeasureResult]:
        """Build each input: an Artifact, or a MeasureResult carrying the error."""
        return self.build_specs([(TaskSpec.of(i.task), i.config.index) for i in inputs],
                                feature_kind)

    def build_specs(self, configs: Sequence[tuple[TaskSpec, int]],
                    feature_kind: str | None = None) -> list[Artifact | MeasureResult]:
        """`build` for configs given as (task spec, config index), as they reach a farm."""
        if self._pool is None:
            self._pool = WorkerPool(self.n_parallel, _PRELOAD)
        jobs = [Job(build_job, (spec, index, feature_kind), self.timeout,
                    MeasureErrorNo.BUILD_TIMEOUT, MeasureErrorNo.COMPILE_ERROR)
                for spec, index in configs]
        return [o.value if o.error_no is MeasureErrorNo.NO_ERROR else _error(o)
                for o in self._pool.run(jobs)]

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        """Yield the cores to a timing that runs meanwhile: the workers are niced by `nice`
        inside the block."""
        if self._pool is None or not self.nice:
            yield
            return
        self._pool.renice(self.nice)
        try:
            yield
        finally:
            self._pool.renice(0)

    def close(self) -> None:
        """Stop the worker processes."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


class LocalRunner:
    """Times artifacts one at a time on this machine, each in an isolated worker process.

    Args:
        number: kernel calls per repeat (the mean of them is one cost).
        repeat: costs recorded per config (at most, with `ci_target`).
        min_repeat_ms: raise `number` until one repeat lasts this long.
        timeout: seconds allowed for running one config; past it: RUN_TIMEOUT.
        cooldown_interval: seconds to sleep between configs (lets clocks settle).
        enable_cpu_cache_flush: evict the caches before each repeat (cold-cache timings).
        check_correctness: compare each config's output with the default schedule's on the same
            random inputs; mismatches are WRONG_ANSWER.
        max_measure_seconds: when `number * repeat` calls would take longer than this (judged
            from a first call), the first call's time is the only cost recorded: slow configs
            are losers anyway, and timing them fully would dominate the tuning time.
        relative_cutoff: a config whose second (warm) call, or every repeat so far, is this
            many times slower than the best cost measured so far in the tuning run is cut
            short and recorded as measured slow (`MeasureResult.slow`) with the calls timed so
            far; one whose run outlasts the time a competitive config would need is stopped
            and recorded as slow with the seconds it ran (a lower bound), so that the cost
            model still learns that it is slow.
        ci_target: adaptive repeats: stop repeating once the 95% confidence interval of the
            mean cost is within this fraction of it (after `min_repeat` repeats, at most
            `repeat`); 0 times every config `repeat` times.
        min_repeat: the fewest repeats with `ci_target`.
        cold_factor: a first (cold) call this many times `relative_cutoff` times the best cost
            marks a config slow at once (the inputs are made and the code loaded before it,
            so it is hardly slower than a warm call).
        probe_seconds: a first call is only killed once it has run this long and past the
            slow mark. Without `fork` a kill costs a fresh worker (its imports compete with
            the next timing), so a call ending sooner is waited for and the config recorded
            as slow by the worker itself (default 0.5 s); with `fork` a kill costs a child
            process, and a first call is stopped at the slow mark (default 0).
        fork: time each config that runs against a best cost in a forked child of the runner
            worker (where the platform has fork): a hopeless config is stopped at about
            `cold_factor` x `relative_cutoff` times the best cost, a crash costs a child, and
            the worker and its inputs live on. Off: the worker runs the configs itself, and a
            stopped or crashed config costs the worker (replaced by a started standby).
            Full timings (no best cost: the verdict's rounds) always run in a worker of their
            own, unforked: the rounds of a config then share its process and memory, where
            forked children of a sub-microsecond kernel timed 0.63 or 0.92 us by child.
    """

    def __init__(self, number: int = 4, repeat: int = 3, min_repeat_ms: float = 0,
                 timeout: float = 10, cooldown_interval: float = 0.0,
                 enable_cpu_cache_flush: bool = False, check_correctness: bool = False,
                 max_measure_seconds: float = 1.0, relative_cutoff: float = 2.0,
                 ci_target: float = 0.05, min_repeat: int = 2, cold_factor: float = 1.25,
                 probe_seconds: float | None = None, fork: bool = True):
        if number < 1 or repeat < 1 or min_repeat < 1:
            raise ValueError(f"LocalRunner needs number, repeat and min_repeat >= 1, got "
                             f"{number}, {repeat}, {min_repeat}")
        if timeout <= 0:
            raise ValueError(f"LocalRunner timeout must be > 0, got {timeout}")
        self.number = number
        self.repeat = repeat
        self.min_repeat_ms = min_repeat_ms
        self.timeout = float(timeout)
        self.cooldown_interval = cooldown_interval
        self.enable_cpu_cache_flush = enable_cpu_cache_flush
        self.check_correctness = check_correctness
        self.max_measure_seconds = max_measure_seconds
        self.relative_cutoff = relative_cutoff
        self.ci_target = ci_target
        self.min_repeat = min_repeat
        self.cold_factor = cold_factor
        self.fork = fork and hasattr(os, "fork")
        self.probe_seconds = (probe_seconds if probe_seconds is not None
                              else 0.0 if self.fork else 0.5)
        self._pools: dict[bool, WorkerPool] = {}  # forked or not -> the runner worker

    def run(self, artifacts: Sequence[Artifact],
            best_seconds: float | None = None) -> list[MeasureResult]:
        """Time each artifact; one MeasureResult per artifact.

        `best_seconds`, the best cost measured so far for this task, enables the relative cutoff
        (against it, or the best cost of this batch once lower).
        """
        fork = self.fork and best_seconds is not None
        if fork not in self._pools:  # a worker that forks never runs a kernel itself
            self._pools[fork] = WorkerPool(1, _PRELOAD, standby=not self.fork)
        pool = self._pools[fork]
        machine = hostcpu.this_host().describe()
        results = []
        for k, artifact in enumerate(artifacts):
            if k and self.cooldown_interval > 0:
                time.sleep(self.cooldown_interval)
            # The cutoff follows the best cost measured in this batch too: a better config found
            # early in a batch tightens it for the rest (most configs of a batch are slow).
            best_seconds = _best(best_seconds, results)
            settings = self.settings(best_seconds)
            job = Job(run_job, (artifact, settings), settings.run_timeout,
                      MeasureErrorNo.RUN_TIMEOUT, MeasureErrorNo.RUNTIME_ERROR,
                      fork=fork, prepare=prepare_run)
            (outcome,) = pool.run([job])
            if outcome.error_no is MeasureErrorNo.NO_ERROR:
                costs, slow = outcome.value
                results.append(MeasureResult(tuple(costs), MeasureErrorNo.NO_ERROR, "",
                                             outcome.seconds, machine=machine, slow=slow))
            elif outcome.error_no is MeasureErrorNo.RUN_TIMEOUT and best_seconds is not None:
                # Stopped past the time a competitive config needs: slow, and its first call
                # at least this slow (what the cost model learns from).
                bound = first_call_limit(settings)
                results.append(MeasureResult((bound,), MeasureErrorNo.NO_ERROR, "",
                                             outcome.seconds, machine=machine, slow=True))
            else:
                results.append(_error(outcome, machine))
        return results

    def settings(self, best_seconds: float | None = None) -> RunSettings:
        """What a run job needs to know, given the best cost so far."""
        return RunSettings(self.number, self.repeat, self.min_repeat_ms,
                           self._run_timeout(best_seconds), self.enable_cpu_cache_flush,
                           self.check_correctness, self.max_measure_seconds, best_seconds,
                           self.relative_cutoff, self.ci_target, self.min_repeat,
                           self.cold_factor, self.probe_seconds,
                           self.fork and best_seconds is not None)

    def _run_timeout(self, best_seconds: float | None) -> float:
        """The time one config may run: `timeout`, or less once a best cost is known. A config
        that can still compete (within `relative_cutoff` of the best) always fits its full
        measurement; a hopeless one is stopped early instead of running for seconds."""
        if best_seconds is None:
            return self.timeout
        calls = 2 + self.number * self.repeat
        budget = calls * self.relative_cutoff * best_seconds + self.repeat * self.min_repeat_ms / 1e3
        return min(self.timeout, budget + 0.25)

    def close(self) -> None:
        """Stop the worker processes."""
        for pool in self._pools.values():
            pool.close()
        self._pools = {}


def _best(best_seconds: float | None, results: Sequence[MeasureResult]) -> float | None:
    """`best_seconds` lowered to the best mean cost among `results`; None stays None (no
    cutoff asked for: re-measurements time every config fully)."""
    if best_seconds is None:
        return None
    return min([best_seconds, *(r.mean for r in results if r.ok and not r.slow)])


@dataclass
class MeasureOption:
    """A builder and a runner; `overlap` builds the next batch while this one is timed (the
    default). Overlapped builds share the cores with the timed kernel, which is why
    `LocalBuilder` nices its workers; turn it off (`overlap=False`) for timings that no build
    may disturb. Overlap changes no result but the timings' noise: each batch is proposed
    from the results of all batches measured before it was built."""

    builder: Builder
    runner: Runner
    overlap: bool | None = None

    @property
    def overlapping(self) -> bool:
        """Whether the next batch is built while this one is timed."""
        return True if self.overlap is None else self.overlap

    def close(self) -> None:
        """Release the builder's and the runner's processes and connections."""
        self.builder.close()
        self.runner.close()


def measure_option(builder: Builder | None = None, runner: Runner | None = None,
                   overlap: bool | None = None) -> MeasureOption:
    """Bundle a builder and a runner for `tune` (defaults: LocalBuilder(), LocalRunner()).

    Any object with the `Builder` / `Runner` methods will do (e.g. `DaskBuilder`,
    `DaskRunner`).
    """
    if builder is not None and not isinstance(builder, Builder):
        raise TypeError(f"builder must implement autotune.Builder (build, close), got "
                        f"{type(builder).__name__}")
    if runner is not None and not isinstance(runner, Runner):
        raise TypeError(f"runner must implement autotune.Runner (run, close), got "
                        f"{type(runner).__name__}")
    return MeasureOption(builder or LocalBuilder(), runner or LocalRunner(), overlap)


class _HeldOpen(MeasureOption):
    """A MeasureOption whose `close` waits for the end of `kept_open`'s block."""

    def close(self) -> None:
        pass


@contextlib.contextmanager
def kept_open(option: MeasureOption | Callable[..., Any] | None
              ) -> Iterator[MeasureOption | Callable[..., Any]]:
    """`option` (a default one when None) for a series of `tune` calls: its worker processes
    start once and stop when the block ends, not at the end of every call (a model's tuning
    makes a call per round of each task, and a round of 32 fast trials took about as long as
    starting three workers that import numpy, LLVM and the compiler). A measure function is
    yielded as it is."""
    if option is not None and not isinstance(option, MeasureOption):
        yield option
        return
    owned = option if option is not None else measure_option()
    try:
        yield _HeldOpen(owned.builder, owned.runner, owned.overlap)
    finally:
        owned.close()


def round_robin(count: int, rounds: int,
                time_in_order: Callable[[list[int]], Sequence[MeasureResult]]
                ) -> list[list[MeasureResult]]:
    """Time `count` candidates in `rounds` rounds, each round all of them one after another,
    and each round starting one candidate later, so that a drift of the machine's load (and
    whatever running first or last does) hits every candidate alike.

    Args:
        count: the number of candidates.
        rounds: how many times each is timed.
        time_in_order: times the candidates at the given positions, in that order; one result
            per position.

    Returns:
        results[candidate][round].
    """
    out: list[list[MeasureResult]] = [[] for _ in range(count)]
    for r in range(rounds if count else 0):
        order = [(r + k) % count for k in range(count)]
        results = time_in_order(order)
        if len(results) != count:
            raise RuntimeError(f"timing {count} candidates returned {len(results)} results")
        for k, res in zip(order, results):
            out[k].append(res)
    return out


class Measurer:
    """Measures batches of one task: build, skip configs whose code was already timed, run.

    Attributes:
        features: index -> feature vector, for configs whose features the builders returned.
        build_seconds, run_seconds: totals, for throughput reports.
        slow_count: configs the runner cut short as measured slow.
    """

    def __init__(self, option: MeasureOption, feature_kind: str | None = None):
        self.option = option
        self.feature_kind = feature_kind
        self.features: dict[int, np.ndarray] = {}
        self._by_hash: dict[str, MeasureResult] = {}
        self._kept: dict[int, Artifact] = {}  # config index -> artifact, for `remeasure`
        self._wanted: set[int] = set()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self.build_seconds = 0.0
        self.run_seconds = 0.0
        self.slow_count = 0

    def submit_builds(self, inputs: Sequence[MeasureInput], features: bool = True
                      ) -> concurrent.futures.Future[list[Artifact | MeasureResult]]:
        """Start building in the background (while the runner measures another batch), with
        the features the tuner wants unless `features` is False."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1)
        return self._executor.submit(self.option.builder.build, list(inputs),
                                     self.feature_kind if features else None)

    def run(self, inputs: Sequence[MeasureInput],
            builds: Sequence[Artifact | MeasureResult]) -> list[MeasureResult]:
        """Time the inputs whose builds succeeded; duplicates of timed code reuse the result."""
        results: list[MeasureResult | None] = [None] * len(inputs)
        to_run: list[int] = []
        first_of_hash: dict[str, int] = {}
        for k, (inp, b) in enumerate(zip(inputs, builds)):
            if isinstance(b, MeasureResult):
                results[k] = b
                continue
            self.build_seconds += b.build_seconds
            if b.features is not None:
                self.features[inp.config.index] = b.features
            if b.ir_hash in self._by_hash:
                results[k] = self._by_hash[b.ir_hash]
            elif b.ir_hash not in first_of_hash:
                first_of_hash[b.ir_hash] = k
                to_run.append(k)
        start = time.perf_counter()
        best = min((r.mean for r in self._by_hash.values() if r.ok), default=None)
        artifacts: list[Artifact] = [builds[k] for k in to_run]  # type: ignore[misc]
        timing = getattr(self.option.builder, "timing", contextlib.nullcontext)
        with timing():  # builds overlapped with this run yield the cores to it
            measured = self._run_against(artifacts, best)
        self.run_seconds += time.perf_counter() - start
        self.slow_count += sum(r.slow for r in measured)
        for k, res in zip(to_run, measured):
            results[k] = res
            self._by_hash[builds[k].ir_hash] = res  # type: ignore[union-attr]
        for k, (inp, b) in enumerate(zip(inputs, builds)):
            if results[k] is None:
                results[k] = self._by_hash[b.ir_hash]  # type: ignore[union-attr]
        self._kept = {i: a for i, a in self._kept.items() if i in self._wanted}
        for inp, b, res in zip(inputs, builds, results):
            if isinstance(b, Artifact) and res is not None and res.ok:
                self._kept[inp.config.index] = b
        return [r for r in results if r is not None]

    def _run_against(self, artifacts: list[Artifact], best: float | None
                     ) -> list[MeasureResult]:
        """Time `artifacts` with the runner, cutting those far slower than `best` short. With
        no best yet (the first batch), configs are timed one at a time until one runs, and the
        rest against it: a first batch of 16 random GEMM configs otherwise ran each in full,
        up to the 10 s timeout (70 s in all, against 15 s)."""
        runner = self.option.runner
        measured: list[MeasureResult] = []
        while len(measured) < len(artifacts):
            rest = artifacts[len(measured):]
            chunk = rest if best is not None else rest[:1]
            results = runner.run(chunk, best)
            if len(results) != len(chunk):
                raise RuntimeError(f"{type(runner).__name__}.run returned {len(results)} "
                                   f"results for {len(chunk)} artifacts")
            measured += results
            if best is None:
                best = min((r.mean for r in results if r.ok), default=None)
        return measured

    def keep(self, indices: Iterable[int]) -> None:
        """Keep the artifacts of these configs for `remeasure` (so that it compiles nothing
        again); the others are dropped at the next `run`, which keeps its own batch's until
        the next call."""
        self._wanted = set(indices)

    def measure(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        """Build and run `inputs` now."""
        return self.run(inputs, self.submit_builds(inputs).result())

    def remeasure(self, inputs: Sequence[MeasureInput],
                  rounds: int) -> list[list[MeasureResult]]:
        """Time `inputs` afresh (ignoring the timings kept for `run`) in `rounds` round-robin
        rounds: one result per input and round, `[input][round]`. Kept artifacts (`keep`) are
        reused, the other inputs built; inputs with identical code are timed once per round; a
        failed build is that input's result in every round."""
        missing = [i for i in inputs if i.config.index not in self._kept]
        built = iter(self.submit_builds(missing, features=False).result() if missing else [])
        builds = [self._kept[i.config.index] if i.config.index in self._kept else next(built)
                  for i in inputs]
        slot: dict[str, int] = {}  # ir_hash -> position among the artifacts to time
        artifacts: list[Artifact] = []
        for b in builds:
            if isinstance(b, Artifact) and b.ir_hash not in slot:
                slot[b.ir_hash] = len(artifacts)
                artifacts.append(b)
        timed = round_robin(len(artifacts), rounds,
                            lambda order: self.option.runner.run([artifacts[k] for k in order]))
        return [[b] * rounds if isinstance(b, MeasureResult) else timed[slot[b.ir_hash]]
                for b in builds]

    def close(self) -> None:
        """Stop the background build thread and release the builder and runner."""
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None
        self.option.close()
