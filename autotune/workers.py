"""Isolated worker processes with per-stage timeouts, recycled when they crash or hang.

The measurement stage runs untrusted generated code: a kernel may loop forever or segfault. Each
job therefore runs in a spawned (or forkserver) process that talks over a pipe. A job may announce
its stages (`("stage", seconds, error_no)`): the parent then allows that many seconds for the
stage and, if the worker dies or overruns, reports that stage's error code, kills the process and
starts a fresh one for the next job. Spawning (never plain fork) keeps the parent's threads,
xgboost and JIT state out of the children.
"""

from __future__ import annotations

import importlib
import multiprocessing
import multiprocessing.connection
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .result import MeasureErrorNo

_JOBS: dict[str, Callable[..., Any]] = {}


def job(func: Callable[..., Any]) -> Callable[..., Any]:
    """Register a module-level function `func(payload, stage)` as a worker job."""
    _JOBS[f"{func.__module__}:{func.__qualname__}"] = func
    return func


@dataclass(frozen=True)
class Job:
    """A job for a worker: the registered function, its payload, the first stage's budget."""

    func: Callable[..., Any]
    payload: Any
    timeout: float
    timeout_error: MeasureErrorNo
    crash_error: MeasureErrorNo


@dataclass(frozen=True)
class Outcome:
    """What came back: a value, or an error code and message."""

    value: Any = None
    error_no: MeasureErrorNo = MeasureErrorNo.NO_ERROR
    error_msg: str = ""
    seconds: float = 0.0


class StageFailure(Exception):
    """Raised inside a job to report a typed error (e.g. a wrong answer)."""

    def __init__(self, error_no: MeasureErrorNo, msg: str):
        super().__init__(msg)
        self.error_no = error_no


def _worker_main(conn: multiprocessing.connection.Connection, sys_path: list[str]) -> None:
    sys.path[:] = sys_path
    import autotune.measure  # noqa: F401 - registers the standard jobs

    def stage(seconds: float, error_no: MeasureErrorNo, crash_error: MeasureErrorNo) -> None:
        conn.send(("stage", seconds, int(error_no), int(crash_error)))

    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        name, payload = message
        try:
            module_name = name.partition(":")[0]
            if name not in _JOBS:
                importlib.import_module(module_name)
            result = _JOBS[name](payload, stage)
            conn.send(("done", result))
        except StageFailure as err:
            conn.send(("error", int(err.error_no), str(err)))
        except BaseException as err:  # noqa: BLE001 - every failure becomes a typed result
            tail = traceback.format_exception_only(type(err), err)[-1].strip()
            conn.send(("exception", tail))


def _context() -> multiprocessing.context.BaseContext:
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    # A replacement worker (after a crash or a cut-off run) then starts in milliseconds instead
    # of importing numpy, llvmlite and tensorlang again.
    ctx.set_forkserver_preload(["autotune.measure"])
    return ctx


class _Worker:
    """One worker process and the state of the job it runs."""

    def __init__(self) -> None:
        self.process: multiprocessing.process.BaseProcess | None = None
        self.conn: multiprocessing.connection.Connection | None = None
        self.slot = -1
        self.deadline = 0.0
        self.started = 0.0
        self.timeout_error = MeasureErrorNo.RUN_TIMEOUT
        self.crash_error = MeasureErrorNo.RUNTIME_ERROR

    def ensure_started(self) -> None:
        if self.process is not None and self.process.is_alive():
            return
        ctx = _context()
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_worker_main, args=(child, list(sys.path)), daemon=True)
        try:
            process.start()  # fails e.g. in a script that starts tuning without a main guard
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self.process, self.conn = process, parent

    def start_job(self, slot: int, job: Job) -> None:
        self.ensure_started()
        assert self.conn is not None
        name = f"{job.func.__module__}:{job.func.__qualname__}"
        self.conn.send((name, job.payload))
        self.slot = slot
        self.started = time.monotonic()
        self.deadline = self.started + job.timeout
        self.timeout_error = job.timeout_error
        self.crash_error = job.crash_error

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join(timeout=5)
        if self.conn is not None:
            self.conn.close()
        self.process, self.conn = None, None

    def close(self) -> None:
        if self.conn is not None and self.process is not None and self.process.is_alive():
            try:
                self.conn.send(None)
                self.process.join(timeout=1)
            except (OSError, BrokenPipeError):
                pass
        self.kill()


class WorkerPool:
    """`n` worker processes that run lists of jobs, each job isolated with its own timeouts."""

    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {n}")
        self.workers = [_Worker() for _ in range(n)]

    def run(self, jobs: Sequence[Job]) -> list[Outcome]:
        """Run every job; the outcomes are in the order of `jobs`."""
        outcomes: list[Outcome | None] = [None] * len(jobs)
        queue = list(range(len(jobs)))[::-1]
        busy: dict[int, _Worker] = {}
        while queue or busy:
            for w in self.workers:
                if queue and w.slot < 0:
                    slot = queue.pop()
                    w.start_job(slot, jobs[slot])
                    busy[id(w.conn)] = w
            now = time.monotonic()
            wait_for = max(0.0, min(w.deadline for w in busy.values()) - now)
            ready = multiprocessing.connection.wait([w.conn for w in busy.values()], wait_for)
            for conn in ready:
                w = busy[id(conn)]
                outcome = self._receive(w)
                if outcome is not None:
                    outcomes[w.slot] = outcome
                    del busy[id(conn)]
                    w.slot = -1
            now = time.monotonic()
            for key, w in list(busy.items()):
                if now >= w.deadline:
                    outcomes[w.slot] = Outcome(
                        error_no=w.timeout_error,
                        error_msg=f"timed out after {now - w.started:.2f} s",
                        seconds=now - w.started,
                    )
                    w.kill()
                    w.slot = -1
                    del busy[key]
        return [o if o is not None else Outcome(error_no=MeasureErrorNo.RUNTIME_ERROR)
                for o in outcomes]

    @staticmethod
    def _receive(w: _Worker) -> Outcome | None:
        """Handle one message; an Outcome when the job is over, None when it moved a stage."""
        assert w.conn is not None
        elapsed = time.monotonic() - w.started
        try:
            message = w.conn.recv()
        except (EOFError, OSError):
            w.kill()
            return Outcome(error_no=w.crash_error, error_msg="the worker process crashed",
                           seconds=elapsed)
        kind = message[0]
        if kind == "stage":
            _, seconds, timeout_error, crash_error = message
            w.deadline = time.monotonic() + seconds
            w.timeout_error = MeasureErrorNo(timeout_error)
            w.crash_error = MeasureErrorNo(crash_error)
            return None
        if kind == "done":
            return Outcome(value=message[1], seconds=elapsed)
        if kind == "error":
            return Outcome(error_no=MeasureErrorNo(message[1]), error_msg=message[2],
                           seconds=elapsed)
        return Outcome(error_no=w.crash_error, error_msg=message[1], seconds=elapsed)

    def close(self) -> None:
        """Stop every worker."""
        for w in self.workers:
            w.close()

    def __del__(self) -> None:
        self.close()
