"""Artifacts: a config compiled once into machine code, plus what identifies it and runs it.

The stage between building and timing. A build job (in an isolated worker, on this machine or on
a farm) instantiates, lowers and compiles one config into an `Artifact`: the object code, the
task it belongs to, its config index and target, the hash of its lowered IR (configs with
identical code are timed once) and optionally its features. A run job links the object code and
times it, so a config is compiled once, wherever it is timed.

The task travels as a `TaskSpec`: template name, arguments, target, and the template itself, by
module name when importing that module registers it, by value (cloudpickle) otherwise, so that a
worker never imports the user's `__main__` (a notebook, a script read from stdin, a script
without a main guard).
"""

from __future__ import annotations

import contextvars
import hashlib
import importlib
import sys
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import cloudpickle
import numpy as np

import tensorlang as tl
from tensorlang.arith import const_value
from tensorlang.ir import PrimFunc
from tensorlang.lower import finish_lowering, lower_structure
from tensorlang.runtime import ObjectCode, build_object, load_object
from tensorlang.tensor import PlaceholderOp

from .hostcpu import resolve_target
from .result import MeasureErrorNo
from .space import InstantiationError
from .task import Task, Template, get_template
from .workers import StageFailure

#: Seconds allowed to compute a reference output (the default schedule may be a slow loop nest).
REFERENCE_SECONDS = 60.0

_before_run_hooks: contextvars.ContextVar[list[Callable[[], None]] | None] = (
    contextvars.ContextVar("autotune_run_hooks", default=None))


def before_run(hook: Callable[[], None]) -> None:
    """Call `hook` in the runner process right before the kernel of this config is run.

    For templates that need per-run setup (and for tests that provoke crashes). Called while a
    config is built, it ships `hook` (by value) with the config's artifact; elsewhere it does
    nothing.
    """
    hooks = _before_run_hooks.get()
    if hooks is not None:
        hooks.append(hook)


# -- tasks that travel -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSpec:
    """What a worker needs to recreate a task.

    Attributes:
        name: the template name.
        args: the template arguments (JSON values).
        target: the task's target with its CPU spelled out (see `resolve_target`).
        module: the module whose import registers the template, or None when it travels by value.
        template: the cloudpickled template function when it travels by value.
    """

    name: str
    args: list[Any]
    target: str
    module: str | None
    template: bytes | None = field(default=None, repr=False)

    @staticmethod
    def of(task: Task) -> TaskSpec:
        """The spec of `task` (made once per task).

        Raises:
            TypeError: the template cannot be pickled (it refers to something unpicklable).
        """
        spec = _specs.get(task)
        if spec is None:
            spec = _specs[task] = _make_spec(task)
        return spec

    @property
    def key(self) -> str:
        """Identifies the task and template version, for per-process caches."""
        digest = hashlib.sha1(self.template or b"").hexdigest()
        return f"{self.name}|{self.args!r}|{self.target}|{self.module}|{digest}"

    def task(self) -> Task:
        """The task, recreated in this process (once)."""
        key = self.key
        if key not in _tasks:
            try:
                _tasks[key] = Task(self.name, self.args, self.target, template=self._template())
            except Exception as err:  # noqa: BLE001 - reported with the config that needed it
                raise StageFailure(MeasureErrorNo.INSTANTIATION_ERROR,
                                   f"cannot recreate the task of template {self.name!r} in the "
                                   f"worker: {type(err).__name__}: {err}") from None
        return _tasks[key]

    def _template(self) -> Template:
        if self.template is not None:
            return Template(self.name, cloudpickle.loads(self.template))
        assert self.module is not None
        importlib.import_module(self.module)
        return get_template(self.name)


_specs: weakref.WeakKeyDictionary[Task, TaskSpec] = weakref.WeakKeyDictionary()
_tasks: dict[str, Task] = {}


def _importable(task: Task) -> bool:
    """Whether importing the template's module by name registers this very template."""
    func = task.template.func
    module = sys.modules.get(func.__module__)
    return (func.__module__ not in ("__main__", "__mp_main__") and module is not None
            and getattr(module, func.__name__, None) is task.template)


def _make_spec(task: Task) -> TaskSpec:
    target = resolve_target(task.target)
    if _importable(task):
        return TaskSpec(task.name, task.workload[1], target, task.template.func.__module__)
    try:
        by_value = cloudpickle.dumps(task.template.func)
    except Exception as err:  # noqa: BLE001 - any pickling failure means the same to the user
        raise TypeError(f"template {task.name!r} cannot be sent to the measurement workers: "
                        f"{type(err).__name__}: {err}") from None
    return TaskSpec(task.name, task.workload[1], target, None, by_value)


# -- building --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArgSpec:
    """Shape, dtype and direction of one kernel argument (runners make arrays from these)."""

    shape: tuple[int, ...]
    dtype: str
    is_output: bool


@dataclass(frozen=True)
class Artifact:
    """A config compiled once, ready to be timed in any process on a CPU its target names.

    Attributes:
        spec: the task.
        config_index: the config.
        code: the machine code, for `spec.target`.
        arg_specs: the kernel's arguments, in call order.
        ir_hash: hash of the lowered IR (equal code, equal hash).
        build_seconds: time spent instantiating, lowering and compiling.
        hooks: cloudpickled `before_run` hooks (empty when none).
        features: the config's features, when the builder was asked for them.
    """

    spec: TaskSpec
    config_index: int
    code: ObjectCode
    arg_specs: tuple[ArgSpec, ...]
    ir_hash: str
    build_seconds: float
    hooks: bytes = b""
    features: np.ndarray | None = field(default=None, repr=False)

    @property
    def target(self) -> str:
        """The target the code was compiled for, its CPU spelled out."""
        return self.spec.target


def instantiate(task: Task, index: int) -> tuple[Any, list[Any]]:
    """The schedule and tensors of config `index`; a failure is the config's
    INSTANTIATION_ERROR."""
    try:
        return task.instantiate(index)
    except InstantiationError as err:
        raise StageFailure(MeasureErrorNo.INSTANTIATION_ERROR, f"invalid config: {err}") from None
    except Exception as err:  # noqa: BLE001 - a template bug is a property of this config
        raise StageFailure(MeasureErrorNo.INSTANTIATION_ERROR,
                           f"{type(err).__name__}: {err}") from None


def _arg_specs(args: Sequence[Any]) -> tuple[ArgSpec, ...]:
    specs = []
    for t in args:
        shape = tuple(const_value(d) for d in t.shape)
        if any(d is None for d in shape):
            raise StageFailure(MeasureErrorNo.INSTANTIATION_ERROR,
                               f"tensor {t.name} has a symbolic shape; tasks need static shapes")
        specs.append(ArgSpec(shape, str(t.dtype), not isinstance(t.op, PlaceholderOp)))
    return tuple(specs)


def lower_config(task: Task, s: Any, args: Sequence[Any]) -> tuple[Any, PrimFunc]:
    """The loop structure and the lowered kernel of a config's schedule, as every build of it
    lowers them: under the task's target, which lowering reads too (e.g. vector chunk widths)."""
    with task.compile_target:
        structure = lower_structure(s, args, name="kernel")
        return structure, finish_lowering(structure).main


def build_job(payload: tuple[TaskSpec, int, str | None], stage: Callable[..., None]) -> Artifact:
    """Instantiate, lower and compile one config (in a build worker)."""
    from .features import extract

    spec, index, feature_kind = payload
    start = time.perf_counter()
    task = spec.task()
    hooks: list[Callable[[], None]] = []
    token = _before_run_hooks.set(hooks)
    try:
        s, args = instantiate(task, index)
    finally:
        _before_run_hooks.reset(token)
    arg_specs = _arg_specs(args)
    try:
        structure, func = lower_config(task, s, args)
        digest = hashlib.sha1(str(func).encode()).hexdigest()
        code = build_object(func, task.target)
    except Exception as err:  # noqa: BLE001 - reported as a compile error of this config
        raise StageFailure(MeasureErrorNo.COMPILE_ERROR, f"{type(err).__name__}: {err}") from None
    features = (extract(feature_kind, structure) if feature_kind in ("itervar", "curve")
                else None)
    return Artifact(spec, index, code, arg_specs, digest, time.perf_counter() - start,
                    cloudpickle.dumps(hooks) if hooks else b"", features)


# -- running ---------------------------------------------------------------------------------------

#: What a first (cold) call may cost beyond a warm one: page faults, starting threads.
COLD_CALL_SECONDS = 1e-3
#: What a stage's deadline allows beyond its work for the worker to report back.
REPORT_SECONDS = 0.1
#: The same for a run in a forked child, which reports to its worker over a pipe.
FORKED_REPORT_SECONDS = 0.01
#: Adaptive repeats stop at `min_repeat` for a config every repeat of which is this fraction
#: slower than the best: it cannot be the best, and the mean of its repeats ranks it well enough
#: for the cost model (a third repeat was a third of a competitive config's timing).
CONTENDER_MARGIN = 0.1


@dataclass(frozen=True)
class RunSettings:
    """How a runner times an artifact (see LocalRunner for the meaning of each)."""

    number: int
    repeat: int
    min_repeat_ms: float
    run_timeout: float
    flush_cache: bool
    check_correctness: bool
    max_seconds: float
    best_seconds: float | None = None
    relative_cutoff: float = 2.0
    ci_target: float = 0.0
    min_repeat: int = 2
    cold_factor: float = 2.0
    probe_seconds: float = 0.0
    forked: bool = False


def random_arrays(specs: Sequence[ArgSpec], seed: int) -> list[np.ndarray]:
    """Arrays for a kernel's arguments: uniform random inputs (the same for the same seed),
    zeroed outputs."""
    rng = np.random.default_rng(seed)
    arrays = []
    for a in specs:
        dtype = np.dtype(a.dtype)
        if a.is_output:
            arrays.append(np.zeros(a.shape, dtype))
        elif dtype.kind == "f":
            arrays.append(rng.uniform(-1.0, 1.0, size=a.shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.integers(0, 2, size=a.shape).astype(dtype))
        else:
            arrays.append(rng.integers(0, 8, size=a.shape).astype(dtype))
    return arrays


_inputs_by_task: dict[str, list[np.ndarray]] = {}
_linked: dict[ObjectCode, tl.Module] = {}
_references: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}


def _cached_random_arrays(artifact: Artifact) -> list[np.ndarray]:
    """The task's random inputs, made once per worker: at large sizes making them costs as much
    as timing a fast kernel."""
    key = artifact.spec.key
    if key not in _inputs_by_task:
        _inputs_by_task.clear()  # one task at a time: keep memory bounded
        _inputs_by_task[key] = random_arrays(artifact.arg_specs, seed=0)
    return _inputs_by_task[key]


def _link(code: ObjectCode) -> tl.Module:
    """The module of `code`, linked once: by `prepare_run` in the runner worker, so that the
    forked child that times it inherits it (a child that links pays LLVM's first-use costs
    again, 4-10 ms, on every config)."""
    if code not in _linked:
        _linked.clear()  # one config at a time: keep memory bounded
        _linked[code] = load_object(code)
    return _linked[code]


def reference_outputs(spec: TaskSpec, target: str | None = None
                      ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Inputs and outputs of the task's compute under the default schedule (config 0), built
    for `target` (default: the task's; code for another architecture is checked against a
    reference computed on this machine)."""
    key = f"{spec.key}|{target}"
    if key not in _references:
        task = spec.task()
        _, args = instantiate(task, 0)
        specs = _arg_specs(args)
        outputs = [t for t, a in zip(args, specs) if a.is_output]
        module = tl.build(tl.create_schedule([t.op for t in outputs]), args,
                          target=target or task.target)
        arrays = random_arrays(specs, seed=0)
        module(*arrays)
        _references[key] = (arrays, [x for x, a in zip(arrays, specs) if a.is_output])
    return _references[key]


def _flush_cpu_cache(scratch: np.ndarray) -> None:
    scratch += 1.0  # touching more memory than the last-level cache evicts the kernel's data


def prepare_run(payload: tuple[Artifact, RunSettings], stage: Callable[..., None]) -> None:
    """Make the task's inputs (and reference outputs) in the runner worker and link the
    config's code, before `run_job` runs in a forked child of it: the child inherits them. The
    reference kernel runs on one thread, so that the worker never starts the thread pool whose
    threads a forked child would not have."""
    artifact, settings = payload
    _link(artifact.code)
    if settings.check_correctness:
        stage(REFERENCE_SECONDS, MeasureErrorNo.RUN_TIMEOUT, MeasureErrorNo.RUNTIME_ERROR)
        threads = tl.runtime.get_num_threads()
        tl.runtime.set_num_threads(1)
        try:
            reference_outputs(artifact.spec)
        finally:
            tl.runtime.set_num_threads(threads)
        stage(settings.run_timeout, MeasureErrorNo.RUN_TIMEOUT, MeasureErrorNo.RUNTIME_ERROR)
    else:
        _cached_random_arrays(artifact)


def run_job(payload: tuple[Artifact, RunSettings],
            stage: Callable[..., None]) -> tuple[list[float], bool]:
    """Link one artifact and time it (in the runner worker).

    Returns:
        The seconds per repeat, and whether the config was cut short as a loser ("measured
        slow"): then the costs are the few calls timed before it was stopped.
    """
    artifact, settings = payload
    if settings.check_correctness:
        # The reference may be a slow naive loop nest: give it its own, generous stage.
        stage(REFERENCE_SECONDS, MeasureErrorNo.RUN_TIMEOUT, MeasureErrorNo.RUNTIME_ERROR)
        ref_inputs, ref_outputs = reference_outputs(artifact.spec)
        stage(settings.run_timeout, MeasureErrorNo.RUN_TIMEOUT, MeasureErrorNo.RUNTIME_ERROR)
    try:
        module = _link(artifact.code)
        hooks = cloudpickle.loads(artifact.hooks) if artifact.hooks else []
        arrays = ([a.copy() for a in ref_inputs] if settings.check_correctness
                  else _cached_random_arrays(artifact))
        for hook in hooks:
            hook()
        if settings.best_seconds is not None:  # a first call past this cannot compete: stopped
            report = FORKED_REPORT_SECONDS if settings.forked else REPORT_SECONDS
            stage(first_call_limit(settings) + report, MeasureErrorNo.RUN_TIMEOUT,
                  MeasureErrorNo.RUNTIME_ERROR)
        start = time.perf_counter()
        module(*arrays)  # warms caches and the thread pool, and gives a first estimate
        first = time.perf_counter() - start
        if settings.best_seconds is not None:
            stage(settings.run_timeout, MeasureErrorNo.RUN_TIMEOUT, MeasureErrorNo.RUNTIME_ERROR)
        if settings.check_correctness:
            got = [x for x, a in zip(arrays, artifact.arg_specs) if a.is_output]
            check_outputs(got, ref_outputs)
        if first * settings.number * settings.repeat > settings.max_seconds:
            return [first], True  # a slow config: one call tells enough, repeats would waste time
        cutoff = None
        if settings.best_seconds is not None:
            cutoff = settings.relative_cutoff * settings.best_seconds
            if first > slow_first_call(settings):
                return [first], True
            start = time.perf_counter()
            module(*arrays)  # a warm call decides whether this config can compete at all
            warm = time.perf_counter() - start
            if warm > cutoff:
                return [warm], True
        return _time(module, arrays, settings, cutoff)
    except StageFailure:
        raise
    except Exception as err:  # noqa: BLE001
        raise StageFailure(MeasureErrorNo.RUNTIME_ERROR, f"{type(err).__name__}: {err}") from None


def slow_first_call(settings: RunSettings) -> float:
    """Seconds beyond which a first (cold) call shows a config cannot compete, once a best
    cost is known: `cold_factor` times the cutoff (a cold call is not much slower than a warm
    one: the inputs are made and the code loaded before it)."""
    assert settings.best_seconds is not None
    cutoff = settings.relative_cutoff * settings.best_seconds
    return settings.cold_factor * cutoff + COLD_CALL_SECONDS


def first_call_limit(settings: RunSettings) -> float:
    """Seconds a first call may run before the runner kills the worker: past
    `slow_first_call`, but not before `probe_seconds` (what a kill and a fresh worker cost),
    so that a call that ends sooner than a restart would is waited for, not killed."""
    return max(slow_first_call(settings), settings.probe_seconds)


def check_outputs(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> None:
    for k, (g, w) in enumerate(zip(got, want)):
        scale = max(1.0, float(np.abs(w).max(initial=0.0)))
        if not np.allclose(g, w, rtol=1e-3, atol=1e-3 * scale):
            raise StageFailure(MeasureErrorNo.WRONG_ANSWER,
                               f"output {k} differs from the reference schedule's "
                               f"(max abs error {float(np.abs(g - w).max()):.3g})")


def _time(module: tl.Module, arrays: Sequence[np.ndarray], settings: RunSettings,
          cutoff: float | None = None) -> tuple[list[float], bool]:
    """`settings.repeat` costs, or with a `ci_target` as few as make the confidence interval of
    their mean tight (at least `min_repeat`) or show that the config is no contender (every
    cost so far over `CONTENDER_MARGIN` above the best); stops early, as slow, once every cost
    so far is above `cutoff`."""
    if settings.flush_cache:
        scratch = np.zeros(64 * 1024 * 1024 // 8)
        timer = module.time_evaluator(settings.number, 1, settings.min_repeat_ms)

        def timed(count: int) -> list[float]:
            costs = []
            for _ in range(count):
                _flush_cpu_cache(scratch)
                costs.extend(timer(*arrays).results)
            return costs
    else:
        def timed(count: int) -> list[float]:
            timer = module.time_evaluator(settings.number, count, settings.min_repeat_ms)
            return list(timer(*arrays).results)

    if settings.ci_target <= 0:
        return timed(settings.repeat), False
    costs = timed(min(settings.min_repeat, settings.repeat))
    while True:
        if cutoff is not None and min(costs) > cutoff:
            return costs, True
        if len(costs) >= settings.repeat or ci_half_width(costs) <= settings.ci_target:
            return costs, False
        if settings.best_seconds is not None and (
                min(costs) > (1 + CONTENDER_MARGIN) * settings.best_seconds):
            return costs, False
        costs += timed(1)


#: Student's t at 97.5% for 1..10 degrees of freedom (a two-sided 95% interval).
_T975 = (12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def ci_half_width(costs: Sequence[float]) -> float:
    """The half-width of the 95% confidence interval of the mean of `costs`, relative to the
    mean (inf for fewer than two costs)."""
    n = len(costs)
    if n < 2:
        return float("inf")
    mean = sum(costs) / n
    std = float(np.std(costs, ddof=1))
    t = _T975[n - 2] if n - 2 < len(_T975) else 1.96
    return t * std / np.sqrt(n) / mean if mean > 0 else float("inf")
