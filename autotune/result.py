"""What measuring one config produces: the typed inputs, results and error codes.

Shared by the measurement workers, the tuners and the logs, so it has no dependencies beyond the
task itself.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

from .space import ConfigEntity
from .task import Task


class MeasureErrorNo(enum.IntEnum):
    """Why a measurement has no valid cost (NO_ERROR when it has one)."""

    NO_ERROR = 0
    INSTANTIATION_ERROR = 1
    COMPILE_ERROR = 2
    RUNTIME_ERROR = 3
    WRONG_ANSWER = 4
    BUILD_TIMEOUT = 5
    RUN_TIMEOUT = 6


@dataclass(frozen=True)
class MeasureInput:
    """One config of one task, to be built and measured."""

    task: Task
    config: ConfigEntity


@dataclass(frozen=True)
class MeasureResult:
    """The outcome of one measurement.

    Attributes:
        costs: seconds per run, one entry per repeat (empty on error).
        error_no: NO_ERROR or the failure kind.
        error_msg: a short description of the failure.
        all_cost: wall-clock seconds spent on this config (build + run).
        timestamp: when the measurement finished (seconds since the epoch).
        machine: the machine that timed it, "hostname (cpu)" (empty when not timed).
        slow: measured slow: the runner cut the config short as far slower than the best so
            far, so `costs` are the few calls timed before it stopped (or a lower bound).
    """

    costs: tuple[float, ...]
    error_no: MeasureErrorNo
    error_msg: str = ""
    all_cost: float = 0.0
    timestamp: float = field(default_factory=time.time)
    machine: str = ""
    slow: bool = False

    @property
    def ok(self) -> bool:
        """Whether the config ran successfully and has timings."""
        return self.error_no is MeasureErrorNo.NO_ERROR and bool(self.costs)

    @property
    def mean(self) -> float:
        """Mean cost in seconds (inf on error)."""
        return sum(self.costs) / len(self.costs) if self.ok else float("inf")


def gflops(flop: float, result: MeasureResult) -> float:
    """Throughput of a result in GFLOP/s (0 on error)."""
    return flop / result.mean / 1e9 if result.ok and result.mean > 0 else 0.0
