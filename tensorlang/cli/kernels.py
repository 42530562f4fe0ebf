"""Kernels of a task built from one config (tuned or fallback), checked and timed side by side.

What `tensorlang tune` does after tuning: build the best config and the fallback, run both on
the same random inputs, check them against each other and against the op's numpy reference, then
time the tuned kernel alternately with the fallback and with each library (numpy, PyTorch). Only
ratios measured side by side in one process are comparable on a noisy machine
(`tensorlang.benchmark.compare`).

Our kernels are timed through their C timing loop (`Module.time_evaluator`, as during tuning),
a batch of runs per Python call, so that the argument checks of a Python call (tens of
microseconds) do not hide a small kernel; the libraries are called from Python as a user would,
where their overhead is a microsecond or two.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

import tensorlang as tl
from autotune import FallbackConfig, Task
from autotune.space import ConfigEntity
from tensorlang.arith import const_value
from tensorlang.benchmark import compare

from .ops import Workload


class WrongResult(ValueError):
    """A kernel's output disagrees with the reference it was checked against."""


def instantiate(task: Task, config: ConfigEntity | None) -> tuple[tl.Schedule, list[tl.Tensor]]:
    """The schedule and tensors of `config`, or of the template's fallback config when None."""
    if config is not None:
        return task.instantiate(config)
    s, tensors = task.template.run(FallbackConfig(), task.args, task.target)
    return s, list(tensors)


def _static_shape(t: tl.Tensor) -> tuple[int, ...]:
    shape = tuple(const_value(d) for d in t.shape)
    if None in shape:
        raise ValueError(f"tensor {t.name} has a symbolic shape {t.shape}: give sizes")
    return shape  # type: ignore[return-value]


def random_inputs(tensors: Sequence[tl.Tensor], seed: int = 0) -> list[np.ndarray]:
    """Random arrays for the placeholders among `tensors` (floats in [-1, 1), small ints)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for t in tensors:
        if not isinstance(t.op, tl.PlaceholderOp):
            continue
        shape, dtype = _static_shape(t), np.dtype(str(t.dtype))
        if dtype.kind == "f":
            arrays.append(rng.uniform(-1, 1, shape).astype(dtype))
        else:
            arrays.append(rng.integers(0, 4, shape).astype(dtype))
    return arrays


@dataclass
class Kernel:
    """A compiled config with output buffers for one set of inputs; `call()` runs it once."""

    module: tl.Module
    arrays: list[np.ndarray]  # inputs then outputs, in the template's argument order

    @classmethod
    def build(cls, task: Task, config: ConfigEntity | None, inputs: list[np.ndarray]) -> Kernel:
        s, tensors = instantiate(task, config)
        module = tl.build(s, tensors, target=task.target)
        given = iter(inputs)
        arrays = [next(given) if isinstance(t.op, tl.PlaceholderOp)
                  else np.zeros(_static_shape(t), str(t.dtype)) for t in tensors]
        return cls(module, arrays)

    def call(self) -> None:
        """Run the kernel once on its arrays."""
        self.module(*self.arrays)

    def batch(self, seconds: float = 2e-3, least: int = 20) -> tuple[Callable[[], object], int]:
        """A call running the kernel in C for about `seconds` (at least `least` runs), and the
        number of runs it makes."""
        probe = self.module.time_evaluator(number=1, repeat=1, min_repeat_ms=seconds * 1e3)
        runs = max(least, round(seconds / probe(*self.arrays).mean))
        timer = self.module.time_evaluator(number=runs, repeat=1)
        return (lambda: timer(*self.arrays)), runs + 1  # the evaluator warms up with one run

    @property
    def output(self) -> np.ndarray:
        """The last argument: the templates' output."""
        return self.arrays[-1]


def check_close(ours: np.ndarray, reference: np.ndarray, what: str) -> None:
    """Raise WrongResult unless `ours` matches `reference` (exactly for integers)."""
    reference = np.asarray(reference)
    if ours.shape != reference.shape:
        raise WrongResult(f"{what}: output shape {ours.shape} != reference {reference.shape}")
    if ours.dtype.kind != "f":
        if not np.array_equal(ours, reference):
            raise WrongResult(f"{what}: integer output differs from the reference")
        return
    scale = max(1.0, float(np.max(np.abs(reference), initial=0.0)))
    error = float(np.max(np.abs(ours.astype("float64") - reference), initial=0.0))
    if not error <= 1e-3 * scale:  # also catches NaN
        raise WrongResult(f"{what}: max abs error {error:.3g} against the reference "
                          f"(values up to {scale:.3g})")


@dataclass(frozen=True)
class Row:
    """One line of the result table: a kernel or library, its GFLOP/s, tuned time / its time."""

    name: str
    gflops: float
    tuned_speedup: float | None  # its time / the tuned kernel's time (None for the tuned row)


def judge(task: Task, workload: Workload, tuned: ConfigEntity, trials: int,
          rounds: int = 5) -> list[Row]:
    """Check the tuned kernel and time it side by side with the fallback and the libraries.

    Raises:
        WrongResult: the tuned kernel disagrees with the fallback or the numpy reference.
    """
    probe = instantiate(task, tuned)[1]
    inputs = random_inputs(probe)
    best = Kernel.build(task, tuned, inputs)
    fallback = Kernel.build(task, None, inputs)
    best.call()
    fallback.call()
    check_close(best.output, fallback.output, "tuned kernel against the fallback")
    libraries = {name: make(inputs) for name, make in workload.libraries.items()}
    if workload.check is not None:
        expected = workload.check(inputs)
        check_close(best.output, expected, "tuned kernel against numpy")
        for name, call in libraries.items():  # the timed calls compute the same thing
            check_close(np.asarray(call()), expected, f"{name} against numpy")
    ours, our_runs = best.batch()
    others = {"fallback": fallback.batch()}
    others.update({name: (call, 1) for name, call in libraries.items()})
    rows, our_times = [], []
    for name, (call, runs) in others.items():
        side = compare(ours, call, repeat=rounds)
        our_times.append(side.ours / our_runs)
        rows.append(Row(name, task.flop * runs / side.reference / 1e9,
                        side.speedup * our_runs / runs))
    tuned_row = Row(f"tuned (best of {trials})", task.flop / statistics.median(our_times) / 1e9,
                    None)
    return [tuned_row, *rows]
