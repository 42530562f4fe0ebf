"""Templates and tasks: a schedule template plus concrete arguments is a tunable task.

The second stage of tuning. `@template(name)` registers a function of shapes that builds a
compute and a schedule driven by a config; `create_task` runs it once in space-defining mode to
collect its `ConfigSpace` and flop count; `Task.instantiate(config)` runs it again on one config.
The config reaches the template through `get_config()` (a context variable, so concurrent
instantiations in threads do not see each other's config) or as an explicit first `cfg` argument.
Every instantiation of a task runs inside its target's scope (`with tl.Target(task.target)`), so
the schedules it builds, and the builds and measurements of the tuner, see that CPU's vector
width, registers and caches.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import json
import math
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from tensorlang.arith import const_value
from tensorlang.codegen.target import Target
from tensorlang.expr import Binary, BinaryOp, Call, Reduce, TensorRead
from tensorlang.schedule import Schedule
from tensorlang.tensor import ComputeOp, Tensor
from tensorlang.visitor import children

from .space import ConfigEntity, ConfigSpace, FallbackConfig

Config = ConfigSpace | ConfigEntity | FallbackConfig

_current_config: contextvars.ContextVar[Config | None] = contextvars.ContextVar(
    "autotune_config", default=None
)


class DispatchContext(Protocol):
    """Where directly called templates look for a tuned config (see `apply_history_best`)."""

    def query(self, workload_key: str, target: Target) -> tuple[int, dict[str, Any]] | None:
        """The best config recorded for this workload and target, as (index, readable knob
        values), or None."""


_dispatch: contextvars.ContextVar[DispatchContext | None] = contextvars.ContextVar(
    "autotune_dispatch", default=None
)


def get_config() -> Config:
    """The config of the template instantiation running in this thread/context.

    Raises:
        RuntimeError: called outside a template instantiation.
    """
    cfg = _current_config.get()
    if cfg is None:
        raise RuntimeError(
            "autotune.get_config() is only valid inside a template: call the template function "
            "(decorated with @autotune.template) or instantiate a task"
        )
    return cfg


def current_target() -> str:
    """The current target as a string: the task's while a template is instantiated for a task,
    else `tl.Target.current()` ("llvm", the host, outside any scope)."""
    return str(Target.current())


@contextlib.contextmanager
def _use_config(cfg: Config, target: str | Target | None) -> Iterator[None]:
    """`cfg` as the config and `target` (None: keep the current one) as the current target."""
    token = _current_config.set(cfg)
    try:
        if target is None:
            yield
        else:
            with target if isinstance(target, Target) else Target(target):
                yield
    finally:
        _current_config.reset(token)


# -- workloads: JSON keys of (template, arguments) -----------------------------------------------


def _to_json_value(value: Any, where: str) -> Any:
    if isinstance(value, (bool, str, type(None))):
        return value
    if isinstance(value, (int, float)):
        return value
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()  # numpy scalars
    if isinstance(value, (tuple, list)):
        return [_to_json_value(v, where) for v in value]
    raise TypeError(
        f"{where}: template arguments must be ints, floats, strings, None or tuples of them "
        f"(JSON-serialisable), got {type(value).__name__} {value!r}"
    )


def _from_json_value(value: Any) -> Any:
    # JSON has no tuples; templates receive shapes as tuples, as they were written.
    if isinstance(value, list):
        return tuple(_from_json_value(v) for v in value)
    return value


def make_workload(name: str, args: Sequence[Any]) -> list[Any]:
    """The JSON-serialisable key `[name, [args...]]` of a template applied to `args`."""
    return [name, _to_json_value(list(args), f"template {name!r}")]


def workload_key(workload: Sequence[Any]) -> str:
    """A canonical string for a workload, for dictionaries."""
    return json.dumps(list(workload), separators=(",", ":"))


# -- the registry ----------------------------------------------------------------------------------


class Template:
    """A registered template: the function, its name, and whether it takes `cfg` explicitly.

    Calling it with shapes builds a schedule with the tuned config of the current
    `apply_history_best` context, or with the fallback config (warning once per workload).
    """

    def __init__(self, name: str, func: Callable[..., Any]):
        self.name = name
        self.func = func
        params = list(inspect.signature(func).parameters)
        self.takes_cfg = bool(params) and params[0] == "cfg"
        self._spaces: dict[str, ConfigSpace] = {}
        self._lock = threading.Lock()
        functools.update_wrapper(self, func)

    def run(self, cfg: Config, args: Sequence[Any], target: str | Target | None = None) -> Any:
        """Run the template function on `args` with `cfg` as its config, inside the scope of
        `target` (None: the current target)."""
        with _use_config(cfg, target):
            if self.takes_cfg:
                return self.func(cfg, *args)
            return self.func(*args)

    def space_for(self, args: Sequence[Any], target: Target) -> ConfigSpace:
        """The config space of this template on `args` for `target` (computed once per workload
        and target: knob ranges depend on the vector width and register count)."""
        key = workload_key(make_workload(self.name, args)) + "@" + str(target)
        with self._lock:
            space = self._spaces.get(key)
        if space is None:
            space = ConfigSpace()
            self.run(space, args, target)
            with self._lock:
                self._spaces[key] = space
        return space

    def __call__(self, *args: Any) -> Any:
        config = query_config(self.name, args)
        return self.run(config, args)

    def __repr__(self) -> str:
        return f"<autotune template {self.name!r}>"


_REGISTRY: dict[str, Template] = {}
_warned_fallback: set[tuple[str, str]] = set()


def template(name: str) -> Callable[[Callable[..., Any]], Template]:
    """Register a tunable template under `name`.

    The function takes shapes (and other JSON-serialisable arguments), reads its config with
    `autotune.get_config()` (or takes `cfg` as its first parameter), and returns
    `(schedule, [tensors])`.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"template name must be a non-empty string, got {name!r}")

    def register(func: Callable[..., Any]) -> Template:
        t = Template(name, func)
        _REGISTRY[name] = t
        return t

    return register


def get_template(name: str) -> Template:
    """The registered template called `name`.

    Raises:
        ValueError: no template has that name.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise ValueError(f"no autotune template named {name!r} (registered: {known})") from None


def query_config(name: str, args: Sequence[Any]) -> ConfigEntity | FallbackConfig:
    """The config a direct call of template `name` on `args` uses: the best one of the current
    `apply_history_best` context for the current target, else a fallback config (with a
    one-time warning)."""
    workload = make_workload(name, args)
    key = workload_key(workload)
    target = Target.current()
    context = _dispatch.get()
    found = context.query(key, target) if context is not None else None
    if found is not None:
        index, knobs = found
        space = get_template(name).space_for(args, target)
        config = space.get(index) if index < space.range_length else None
        if config is None or not config.matches(knobs):
            # Another target's space, or another version of the template: same knobs?
            config = space.find(knobs) if knobs else None
        if config is not None:
            return config
        # The template changed since the log was written: its index means another config now.
        reason = "the logged config does not exist in the current template's space"
    else:
        explain = getattr(context, "miss_reason", None)
        reason = (explain(key, target) if explain is not None else None) or "no tuned config"
    if (key, reason) not in _warned_fallback:
        _warned_fallback.add((key, reason))
        warnings.warn(
            f"workload {key}: {reason}; using the fallback config (tune it and use "
            "autotune.apply_history_best for speed)",
            stacklevel=3,
        )
    return FallbackConfig()


@contextlib.contextmanager
def dispatch_context(context: DispatchContext) -> Iterator[DispatchContext]:
    """Make directly called templates take their configs from `context` inside the block."""
    token = _dispatch.set(context)
    try:
        yield context
    finally:
        _dispatch.reset(token)


# -- flop counting -------------------------------------------------------------------------------

_COUNTED = (BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL, BinaryOp.DIV, BinaryOp.MIN, BinaryOp.MAX)


def _expr_flop(expr: Any) -> int:
    """Arithmetic operations in one evaluation of `expr` (index arithmetic excluded)."""
    if isinstance(expr, TensorRead):
        return 0
    arithmetic = isinstance(expr, Binary) and expr.op in _COUNTED and expr.dtype.is_float
    own = 1 if arithmetic or isinstance(expr, Call) else 0
    return own + sum(_expr_flop(c) for c in children(expr))


def _extent(iv: Any) -> int:
    extent = const_value(iv.dom.extent)
    if extent is None:
        raise ValueError(f"cannot count flops: axis {iv.name} has a symbolic extent")
    return extent


def count_flop(tensors: Sequence[Any]) -> int:
    """Floating-point operations of the computes that produce `tensors`: per output point, the
    arithmetic in the body (for a reduction: its source and combiner per reduction point), times
    the number of points."""
    total = 0
    seen: set[int] = set()
    stack = [t.op for t in tensors if isinstance(t, Tensor)]
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if not isinstance(op, ComputeOp):
            continue
        points = math.prod(_extent(iv) for iv in op.axis)
        for body in op.body:
            if isinstance(body, Reduce):
                per_point = sum(_expr_flop(s) for s in body.source)
                per_point += sum(_expr_flop(r) for r in body.combiner.result)
                total += points * math.prod(_extent(iv) for iv in body.axis) * per_point
            else:
                total += points * _expr_flop(body)
        stack.extend(t.op for t in op.input_tensors)
    return total


# -- tasks -----------------------------------------------------------------------------------------


class Task:
    """A template applied to concrete arguments for one target: the unit that gets tuned.

    Attributes:
        name: the template name.
        args: the template arguments (tuples where the template was given tuples).
        target: the target string, e.g. "llvm" (this host) or "llvm -mcpu=haswell".
        compile_target: the parsed `tl.Target`, whose scope every instantiation enters.
        config_space: the `ConfigSpace` of this workload.
        flop: floating-point operations of one run (declared with add_flop, else counted).
        workload: `[name, [args...]]`, JSON-serialisable.

    `template` is the registered template of that name unless given (measurement workers
    recreate tasks from templates that travel by value and are not registered there).
    """

    def __init__(self, name: str, args: Sequence[Any], target: str | Target = "llvm",
                 template: Template | None = None):
        self.template = template if template is not None else get_template(name)
        self.name = name
        self.workload = make_workload(name, args)
        self.args = tuple(_from_json_value(a) for a in self.workload[1])
        self.compile_target = Target(target)
        self.target = str(self.compile_target)
        self.config_space = ConfigSpace()
        out = self.template.run(self.config_space, self.args, self.compile_target)
        _, tensors = _check_template_output(name, out)
        self.flop = self.config_space.flop or count_flop(tensors)

    @property
    def key(self) -> str:
        """The canonical string of the workload."""
        return workload_key(self.workload)

    def instantiate(self, config: ConfigEntity | int) -> tuple[Any, list[Any]]:
        """Build the schedule and argument tensors of `config` (a ConfigEntity or an index).

        Raises:
            InstantiationError: the template rejected the config with `cfg.raise_error`.
        """
        if not isinstance(config, ConfigEntity):
            config = self.config_space.get(config)
        return _check_template_output(
            self.name, self.template.run(config, self.args, self.compile_target))

    def fallback_config(self) -> ConfigEntity | None:
        """The config of this task's space that the template's fallback picks (what a direct
        call without tuned records builds), or None when the fallback lies outside the space.
        Tuners measure it first, so tuning never ends below the untuned schedule."""
        fallback = FallbackConfig()
        self.template.run(fallback, self.args, self.compile_target)
        return self.config_space.find(fallback.knob_values())

    def __repr__(self) -> str:
        return (f"Task({self.name}, args={self.workload[1]}, target={self.target!r}, "
                f"{len(self.config_space)} configs, {self.flop} flop)")


def _check_template_output(name: str, out: Any) -> tuple[Any, list[Any]]:
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"template {name!r} must return (schedule, [tensors]), got {out!r}")
    s, tensors = out
    if not isinstance(s, Schedule):
        raise TypeError(f"template {name!r} returned {type(s).__name__} instead of a schedule")
    return s, list(tensors)


#: Makers of tasks for what is not a registered template name, tried in order: each returns a
#: Task, or None when `name` is not of its kind. `autotune.auto_schedule` adds the maker of
#: auto-scheduled tasks (workload functions and registered workload names) when imported.
TASK_MAKERS: list[Callable[[Any, Sequence[Any], str | Target], Task | None]] = []


def create_task(name: str | Callable[..., Any], args: Sequence[Any],
                target: str | Target = "llvm") -> Task:
    """A task of template `name` on `args` (a tuple of JSON-serialisable values) for `target`.

    `name` may also be a workload with no template: a function of `args` returning its tensors
    (inputs first, outputs last), or the name it was registered under with
    `@autotune.workload`; the task is then auto-scheduled (`autotune.auto_schedule`).

    `autotune.create_task` (`autotune.buckets.create_task`) also takes workloads with symbolic
    dims and their size buckets; this one makes the task of one static workload.
    """
    if not (isinstance(name, str) and name in _REGISTRY):
        for make in TASK_MAKERS:
            task = make(name, args, target)
            if task is not None:
                return task
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"create_task {name!r}: args must be a tuple, got {type(args).__name__}")
    return Task(name, args, target)
