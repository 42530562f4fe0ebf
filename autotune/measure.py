"""Measurement: build configs in parallel workers, then time them one at a time in isolation.

The stage between the tuner and the log. `LocalBuilder` instantiates, lowers and compiles each
config in a pool of worker processes (catching template errors, compile errors and build
timeouts) and returns the hash of the lowered IR, so that configs with identical code are timed
only once, and optionally their features. `LocalRunner` times each surviving config in its own
worker process; the runner re-instantiates and rebuilds the config there, which is cheaper and
simpler than shipping native code between processes. A kernel that hangs or crashes costs only
its worker: the result is RUN_TIMEOUT / RUNTIME_ERROR and a fresh worker takes the next job.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .result import MeasureErrorNo, MeasureInput, MeasureResult
from .space import InstantiationError
from .task import Task, create_task, get_template
from .workers import Job, Outcome, StageFailure, WorkerPool, job

# -- what runs inside the workers ----------------------------------------------------------------

_in_worker_job: contextvars.ContextVar[list[Callable[[], None]] | None] = contextvars.ContextVar(
    "autotune_run_hooks", default=None
)
_tasks: dict[tuple[str, str], Task] = {}
_references: dict[tuple[str, str], tuple[list[np.ndarray], list[np.ndarray]]] = {}


def before_run(hook: Callable[[], None]) -> None:
    """Call `hook` in the runner process right before the kernel of this config is run.

    For templates that need per-run setup (and for tests that provoke crashes); outside a
    runner job it does nothing.
    """
    hooks = _in_worker_job.get()
    if hooks is not None:
        hooks.append(hook)


@dataclass(frozen=True)
class TaskRef:
    """What a worker needs to recreate a task: template name, arguments, target, module."""

    name: str
    args: list[Any]
    target: str
    module: str

    @staticmethod
    def of(task: Task) -> TaskRef:
        return TaskRef(task.name, task.workload[1], task.target, task.module)


def _task(ref: TaskRef) -> Task:
    key = (ref.name, repr(ref.args) + ref.target)
    if key not in _tasks:
        try:
            get_template(ref.name)
        except ValueError:
            if ref.module in ("__main__", "__mp_main__"):
                raise
            __import__(ref.module)  # the module that registers the template
        _tasks[key] = create_task(ref.name, ref.args, ref.target)
    return _tasks[key]


def _instantiate(task: Task, index: int) -> tuple[Any, list[Any]]:
    try:
        return task.instantiate(index)
    except InstantiationError as err:
        raise StageFailure(MeasureErrorNo.INSTANTIATION_ERROR, f"invalid config: {err}") from None
    except Exception as err:  # noqa: BLE001 - a template bug is a property of this config
        raise StageFailure(MeasureErrorNo.INSTANTIATION_ERROR,
                           f"{type(err).__name__}: {err}") from None


@dataclass(frozen=True)
class BuildResult:
    """A config that compiled: its lowered-IR hash, build seconds and (optional) features."""

    ir_hash: str
    seconds: float
    features: np.ndarray | None = None


@job
def build_job(payload: tuple[TaskRef, int, str | None], stage: Callable[..., None]) -> BuildResult:
    """Instantiate, lower and compile one config (in a build worker)."""
    import tensorlang as tl

    from .features import extract

    ref, index, feature_kind = payload
    start = time.perf_counter()
    task = _task(ref)
    s, args = _instantiate(task, index)
    try:
        func = tl.lower(s, args, name="kernel").main
        digest = hashlib.sha1(str(func).encode()).hexdigest()
        tl.build(func, target=task.target)
    except Exception as err:  # noqa: BLE001 - reported as a compile error of this config
        raise StageFailure(MeasureErrorNo.COMPILE_ERROR, f"{type(err).__name__}: {err}") from None
    features = extract(feature_kind, func) if feature_kind in ("itervar", "curve") else None
    return BuildResult(digest, time.perf_counter() - start, features)


def _static_shape(tensor: Any) -> tuple[int, ...]:
    from tensorlang.arith import const_value

    shape = tuple(const_value(d) for d in tensor.shape)
    if any(d is None for d in shape):
        raise StageFailure(MeasureErrorNo.INSTANTIATION_ERROR,
                           f"tensor {tensor.name} has a symbolic shape; tasks need static shapes")
    return shape  # type: ignore[return-value]


def _is_output(tensor: Any) -> bool:
    from tensorlang.tensor import PlaceholderOp

    return not isinstance(tensor.op, PlaceholderOp)


def _random_arrays(args: Sequence[Any], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for t in args:
        shape, dtype = _static_shape(t), np.dtype(t.dtype)
        if _is_output(t):
            arrays.append(np.zeros(shape, dtype))
        elif dtype.kind == "f":
            arrays.append(rng.uniform(-1.0, 1.0, size=shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.integers(0, 2, size=shape).astype(dtype))
        else:
            arrays.append(rng.integers(0, 8, size=shape).astype(dtype))
    return arrays


_inputs_by_task: dict[tuple[Any, str], list[np.ndarray]] = {}


def _cached_random_arrays(task: Task, args: Sequence[Any]) -> list[np.ndarray]:
    """The task's random inputs, made once per worker: at large sizes making them costs as much
    as timing a fast kernel."""
    key = (task.key, task.target)
    if key not in _inputs_by_task:
        _inputs_by_task.clear()  # one task at a time: keep memory bounded
        _inputs_by_task[key] = _random_arrays(args, seed=0)
    return _inputs_by_task[key]


def _reference(task: Task) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Inputs and outputs of the task's compute under the default schedule (config 0)."""
    import tensorlang as tl

    key = (task.key, task.target)
    if key not in _references:
        _, args = _instantiate(task, 0)
        outputs = [t for t in args if _is_output(t)]
        module = tl.build(tl.create_schedule([t.op for t in outputs]), args, target=task.target)
        arrays = _random_arrays(args, seed=0)
        module(*arrays)
        _references[key] = (arrays, [a for a, t in zip(arrays, args) if _is_output(t)])
    return _references[key]


@dataclass(frozen=True)
class RunSettings:
    number: int
    repeat: int
    min_repeat_ms: float
    build_timeout: float
    run_timeout: float
    flush_cache: bool
    check_correctness: bool
    max_seconds: float
    best_seconds: float | None = None
    relative_cutoff: float = 3.0


def _flush_cpu_cache(scratch: np.ndarray) -> None:
    scratch += 1.0  # touching more memory than the last-level cache evicts the kernel's data


@job
def run_job(payload: tuple[TaskRef, int, RunSettings], stage: Callable[..., None]) -> list[float]:
    """Rebuild one config and time it (in the runner worker); returns seconds per repeat."""
    import tensorlang as tl

    ref, index, settings = payload
    task = _task(ref)
    if settings.check_correctness:
        # The reference may be a slow naive loop nest: give it its own, generous stage.
        stage(max(60.0, 6 * settings.build_timeout), MeasureErrorNo.RUN_TIMEOUT,
              MeasureErrorNo.RUNTIME_ERROR)
        ref_inputs, ref_outputs = _reference(task)
        stage(settings.build_timeout, MeasureErrorNo.BUILD_TIMEOUT, MeasureErrorNo.COMPILE_ERROR)
    hooks: list[Callable[[], None]] = []
    token = _in_worker_job.set(hooks)
    try:
        s, args = _instantiate(task, index)
    finally:
        _in_worker_job.reset(token)
    try:
        module = tl.build(s, args, target=task.target)
    except Exception as err:  # noqa: BLE001
        raise StageFailure(MeasureErrorNo.COMPILE_ERROR, f"{type(err).__name__}: {err}") from None
    stage(settings.run_timeout, MeasureErrorNo.RUN_TIMEOUT, MeasureErrorNo.RUNTIME_ERROR)
    arrays = ([a.copy() for a in ref_inputs] if settings.check_correctness
              else _cached_random_arrays(task, args))
    for hook in hooks:
        hook()
    try:
        start = time.perf_counter()
        module(*arrays)  # warms caches and the thread pool, and gives a first estimate
        first = time.perf_counter() - start
        if settings.check_correctness:
            got = [a for a, t in zip(arrays, args) if _is_output(t)]
            for k, (g, want) in enumerate(zip(got, ref_outputs)):
                if not np.allclose(g, want, rtol=1e-3, atol=1e-3 * max(1.0, float(
                        np.abs(want).max(initial=0.0)))):
                    raise StageFailure(MeasureErrorNo.WRONG_ANSWER,
                                       f"output {k} differs from the reference schedule's "
                                       f"(max abs error {float(np.abs(g - want).max()):.3g})")
        if first * settings.number * settings.repeat > settings.max_seconds:
            return [first]  # a slow config: one call tells enough, repeats would waste time
        if settings.best_seconds is not None:
            start = time.perf_counter()
            module(*arrays)  # a warm call decides whether this config can compete at all
            warm = time.perf_counter() - start
            if warm > settings.relative_cutoff * settings.best_seconds:
                return [warm]
        timer = module.time_evaluator(settings.number, 1 if settings.flush_cache else
                                      settings.repeat, settings.min_repeat_ms)
        if not settings.flush_cache:
            return list(timer(*arrays).results)
        scratch = np.zeros(64 * 1024 * 1024 // 8)
        costs = []
        for _ in range(settings.repeat):
            _flush_cpu_cache(scratch)
            costs.extend(timer(*arrays).results)
        return costs
    except StageFailure:
        raise
    except Exception as err:  # noqa: BLE001
        raise StageFailure(MeasureErrorNo.RUNTIME_ERROR, f"{type(err).__name__}: {err}") from None


# -- the parent side -------------------------------------------------------------------------------


def _error(outcome: Outcome) -> MeasureResult:
    return MeasureResult((), outcome.error_no, outcome.error_msg, outcome.seconds)


class LocalBuilder:
    """Compiles configs in parallel worker processes.

    Args:
        timeout: seconds allowed per config; past it the config is a BUILD_TIMEOUT.
        n_parallel: worker processes (default: the number of CPUs).
    """

    def __init__(self, timeout: float = 10, n_parallel: int | None = None):
        if timeout <= 0:
            raise ValueError(f"LocalBuilder timeout must be > 0, got {timeout}")
        self.timeout = float(timeout)
        self.n_parallel = n_parallel or os.cpu_count() or 1
        self._pool: WorkerPool | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    def build(self, inputs: Sequence[MeasureInput],
              feature_kind: str | None = None) -> list[BuildResult | MeasureResult]:
        """Build each input: a BuildResult, or a MeasureResult carrying the error."""
        if self._pool is None:
            self._pool = WorkerPool(self.n_parallel)
        jobs = [
            Job(build_job, (TaskRef.of(i.task), i.config.index, feature_kind), self.timeout,
                MeasureErrorNo.BUILD_TIMEOUT, MeasureErrorNo.COMPILE_ERROR)
            for i in inputs
        ]
        return [o.value if o.error_no is MeasureErrorNo.NO_ERROR else _error(o)
                for o in self._pool.run(jobs)]

    def submit(self, inputs: Sequence[MeasureInput], feature_kind: str | None = None
               ) -> concurrent.futures.Future[list[BuildResult | MeasureResult]]:
        """Start building in the background (while the runner measures another batch)."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1)
        return self._executor.submit(self.build, list(inputs), feature_kind)

    def close(self) -> None:
        """Stop the worker processes."""
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None


class LocalRunner:
    """Times configs one at a time, each in an isolated worker process.

    Args:
        number: kernel calls per repeat (the mean of them is one cost).
        repeat: costs recorded per config.
        min_repeat_ms: raise `number` until one repeat lasts this long.
        timeout: seconds allowed for running one config; past it: RUN_TIMEOUT.
        cooldown_interval: seconds to sleep between configs (lets clocks settle).
        enable_cpu_cache_flush: evict the caches before each repeat (cold-cache timings).
        check_correctness: compare each config's output with the default schedule's on the same
            random inputs; mismatches are WRONG_ANSWER.
        max_measure_seconds: when `number * repeat` calls would take longer than this (judged
            from a first call), the first call's time is the only cost recorded: slow configs
            are losers anyway, and timing them fully would dominate the tuning time.
        relative_cutoff: a config whose second (warm) call is this many times slower than the
            best cost measured so far in the tuning run is timed by that call alone.
    """

    def __init__(self, number: int = 4, repeat: int = 3, min_repeat_ms: float = 0,
                 timeout: float = 10, cooldown_interval: float = 0.0,
                 enable_cpu_cache_flush: bool = False, check_correctness: bool = False,
                 max_measure_seconds: float = 1.0, relative_cutoff: float = 3.0):
        if number < 1 or repeat < 1:
            raise ValueError(f"LocalRunner needs number >= 1 and repeat >= 1, got {number}, "
                             f"{repeat}")
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
        self._pool: WorkerPool | None = None

    def run(self, inputs: Sequence[MeasureInput], build_timeout: float = 10.0,
            best_seconds: float | None = None) -> list[MeasureResult]:
        """Time each input (already known to build); one MeasureResult per input.

        `best_seconds`, the best cost measured so far for this task, enables the relative cutoff.
        """
        if self._pool is None:
            self._pool = WorkerPool(1)
        settings = RunSettings(self.number, self.repeat, self.min_repeat_ms, build_timeout,
                               self._run_timeout(best_seconds), self.enable_cpu_cache_flush,
                               self.check_correctness, self.max_measure_seconds, best_seconds,
                               self.relative_cutoff)
        results = []
        for k, inp in enumerate(inputs):
            if k and self.cooldown_interval > 0:
                time.sleep(self.cooldown_interval)
            first = Job(run_job, (TaskRef.of(inp.task), inp.config.index, settings),
                        build_timeout, MeasureErrorNo.BUILD_TIMEOUT, MeasureErrorNo.COMPILE_ERROR)
            (outcome,) = self._pool.run([first])
            if outcome.error_no is MeasureErrorNo.NO_ERROR:
                results.append(MeasureResult(tuple(outcome.value), MeasureErrorNo.NO_ERROR, "",
                                             outcome.seconds))
            else:
                results.append(_error(outcome))
        return results

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
        """Stop the worker process."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None


@dataclass
class MeasureOption:
    """A builder and a runner; `overlap` builds the next batch while this one is timed (by
    default only with 4 or more CPUs, because builds disturb timings on small machines)."""

    builder: LocalBuilder
    runner: LocalRunner
    overlap: bool | None = None

    @property
    def overlapping(self) -> bool:
        if self.overlap is not None:
            return self.overlap
        return (os.cpu_count() or 1) >= 4

    def close(self) -> None:
        self.builder.close()
        self.runner.close()


def measure_option(builder: LocalBuilder | None = None, runner: LocalRunner | None = None,
                   overlap: bool | None = None) -> MeasureOption:
    """Bundle a builder and a runner for `tune` (defaults: LocalBuilder(), LocalRunner())."""
    if builder is not None and not isinstance(builder, LocalBuilder):
        raise TypeError(f"builder must be a LocalBuilder, got {type(builder).__name__}")
    if runner is not None and not isinstance(runner, LocalRunner):
        raise TypeError(f"runner must be a LocalRunner, got {type(runner).__name__}")
    return MeasureOption(builder or LocalBuilder(), runner or LocalRunner(), overlap)


class Measurer:
    """Measures batches of one task: build, skip configs whose code was already timed, run.

    Attributes:
        features: index -> feature vector, for configs whose features the builders returned.
        build_seconds, run_seconds: totals, for throughput reports.
    """

    def __init__(self, option: MeasureOption, feature_kind: str | None = None):
        self.option = option
        self.feature_kind = feature_kind
        self.features: dict[int, np.ndarray] = {}
        self._by_hash: dict[str, MeasureResult] = {}
        self.build_seconds = 0.0
        self.run_seconds = 0.0

    def submit_builds(self, inputs: Sequence[MeasureInput]
                      ) -> concurrent.futures.Future[list[BuildResult | MeasureResult]]:
        return self.option.builder.submit(inputs, self.feature_kind)

    def run(self, inputs: Sequence[MeasureInput],
            builds: Sequence[BuildResult | MeasureResult]) -> list[MeasureResult]:
        """Time the inputs whose builds succeeded; duplicates of timed code reuse the result."""
        results: list[MeasureResult | None] = [None] * len(inputs)
        to_run: list[int] = []
        first_of_hash: dict[str, int] = {}
        for k, (inp, b) in enumerate(zip(inputs, builds)):
            if isinstance(b, MeasureResult):
                results[k] = b
                continue
            self.build_seconds += b.seconds
            if b.features is not None:
                self.features[inp.config.index] = b.features
            if b.ir_hash in self._by_hash:
                results[k] = self._by_hash[b.ir_hash]
            elif b.ir_hash not in first_of_hash:
                first_of_hash[b.ir_hash] = k
                to_run.append(k)
        start = time.perf_counter()
        best = min((r.mean for r in self._by_hash.values() if r.ok), default=None)
        measured = self.option.runner.run([inputs[k] for k in to_run], self.option.builder.timeout,
                                          best)
        self.run_seconds += time.perf_counter() - start
        for k, res in zip(to_run, measured):
            results[k] = res
            self._by_hash[builds[k].ir_hash] = res  # type: ignore[union-attr]
        for k, (inp, b) in enumerate(zip(inputs, builds)):
            if results[k] is None:
                results[k] = self._by_hash[b.ir_hash]  # type: ignore[union-attr]
        return [r for r in results if r is not None]

    def measure(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        """Build and run `inputs` now."""
        return self.run(inputs, self.submit_builds(inputs).result())
