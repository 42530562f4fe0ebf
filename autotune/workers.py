"""Isolated worker processes with per-stage timeouts, recycled when they crash or hang.

The measurement stage runs untrusted generated code: a kernel may loop forever or segfault. Each
job therefore runs in a worker process that talks over a socket. A job may announce its stages
(`stage(seconds, timeout_error, crash_error)`): the parent then allows that many seconds for the
stage and, if the worker dies or overruns, reports that stage's error code, kills the process and
starts a fresh one for the next job.

A worker is a fresh interpreter (`python -c`), never a fork (the parent's threads, xgboost and
JIT state stay out) and never a multiprocessing child: multiprocessing re-imports the user's
`__main__` in every child, which fails for a template typed into a notebook or read from stdin
and re-runs a script without a main guard. A job is a module-level function, pickled by
reference; whatever it needs from the user's code travels in its payload, by value. Workers
ignore SIGINT: an interrupted parent stops them (`WorkerPool.close`, or end of input).

A job may also run forked (`Job.fork`): the worker prepares what every job shares (`Job.prepare`,
e.g. a task's inputs), forks, and runs the job in the child under the stage deadlines itself. An
overrun or a crash then costs a child, a millisecond, instead of the worker and a fresh
interpreter's imports (a second of CPU), so a runner can stop a hopeless config as soon as it
is hopeless. The parent's deadlines stay as a safety net, `FORK_GRACE` later.
"""

from __future__ import annotations

import importlib
import multiprocessing
import multiprocessing.connection
import os
import pickle
import resource
import signal
import subprocess
import sys
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .result import MeasureErrorNo

#: Seconds a new worker may take to import its modules before its first job's clock starts.
STARTUP_SECONDS = 120.0
#: Niceness of a standby worker while it waits (relative to the parent's).
SPARE_NICE = 19
#: Seconds the parent allows a worker beyond a forked job's deadline to stop the job itself.
FORK_GRACE = 1.0

# Ctrl-C in a terminal signals the whole process group: the parent handles it and stops its
# workers. They run in a session of their own so that it never reaches them (a worker still in
# the interpreter's startup, as a low-priority standby often is, would die there printing a
# traceback), and ignore SIGINT from their first line for a signal sent to them directly.
_BOOT = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); import sys; "
         "from autotune.workers import serve; serve(int(sys.argv[1]), sys.argv[2:])")


@dataclass(frozen=True)
class Job:
    """A job for a worker: a module-level function `func(payload, stage)`, its payload, and the
    first stage's budget and error codes. With `fork`, `func` runs in a forked child of the
    worker, after `prepare(payload, stage)` (a module-level function or None) ran in the worker
    itself: what it caches there, every later child inherits."""

    func: Callable[..., Any]
    payload: Any
    timeout: float
    timeout_error: MeasureErrorNo
    crash_error: MeasureErrorNo
    fork: bool = False
    prepare: Callable[..., Any] | None = None


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


def _attempt(func: Callable[..., Any], payload: Any, stage: Callable[..., None]) -> tuple:
    """Run one job: the message that reports its outcome."""
    try:
        return ("done", func(payload, stage))
    except StageFailure as err:
        return ("error", int(err.error_no), str(err))
    except BaseException as err:  # noqa: BLE001 - every failure becomes a typed result
        return ("exception", _tail(err))


def _tail(err: BaseException) -> str:
    return traceback.format_exception_only(type(err), err)[-1].strip()


def serve(fd: int, preload: Sequence[str]) -> None:
    """The worker's main loop: run jobs received on the socket `fd` until told to stop."""
    conn = multiprocessing.connection.Connection(fd)
    for name in preload:  # import the heavy modules before saying ready: then jobs start warm
        importlib.import_module(name)
    conn.send(("ready",))

    def stage(seconds: float, error_no: MeasureErrorNo, crash_error: MeasureErrorNo) -> None:
        conn.send(("stage", seconds, int(error_no), int(crash_error)))

    while True:
        try:
            data = conn.recv_bytes()
        except EOFError:
            return
        try:
            message = pickle.loads(data)
        except BaseException as err:  # noqa: BLE001 - e.g. a job's module fails to import
            conn.send(("exception", _tail(err)))
            continue
        if message is None:
            return
        func, payload, fork = message
        if fork is None:
            conn.send(_attempt(func, payload, stage))
            continue
        prepare, budget = fork

        def graced(seconds: float, error_no: MeasureErrorNo, crash: MeasureErrorNo) -> None:
            stage(seconds + FORK_GRACE, error_no, crash)  # the parent allows a forked job more

        prepared = _attempt(prepare, payload, graced) if prepare is not None else ("done", None)
        conn.send(_forked(func, payload, budget, graced) if prepared[0] == "done" else prepared)


def _forked(func: Callable[..., Any], payload: Any, budget: tuple[float, int, int],
            report: Callable[..., None]) -> tuple:
    """Run one job in a forked child under its stage deadlines (`budget`: the first stage's
    seconds and error codes), reporting each stage to the parent; the message that reports
    its outcome."""
    seconds, timeout_error, crash_error = budget
    receive, send = multiprocessing.Pipe(duplex=False)
    pid = os.fork()
    if pid == 0:  # the child: run the job, report, and leave without any cleanup of the parent's
        try:
            receive.close()

            def stage(s: float, error_no: MeasureErrorNo, crash: MeasureErrorNo) -> None:
                send.send(("stage", s, int(error_no), int(crash)))

            send.send(_attempt(func, payload, stage))
        finally:
            os._exit(0)
    send.close()
    started = time.monotonic()
    deadline = started + seconds
    report(seconds, MeasureErrorNo(timeout_error), MeasureErrorNo(crash_error))  # after prepare
    try:
        while True:
            if not receive.poll(max(0.0, deadline - time.monotonic())):
                return ("error", timeout_error,
                        f"timed out after {time.monotonic() - started:.2f} s")
            try:
                message = receive.recv()
            except (EOFError, OSError):
                return ("error", crash_error, "the worker process crashed")
            if message[0] != "stage":
                return message
            _, seconds, timeout_error, crash_error = message
            deadline = time.monotonic() + seconds
            report(seconds, MeasureErrorNo(timeout_error), MeasureErrorNo(crash_error))
    finally:
        receive.close()
        try:
            os.kill(pid, signal.SIGKILL)  # done or overdue: either way it ends here
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


def _child_environment() -> dict[str, str]:
    # The worker imports exactly what this process imports (a source tree, the tests' folder).
    path = os.pathsep.join(p for p in sys.path if p)
    return {**os.environ, "PYTHONPATH": path}


class _Worker:
    """One worker process and the state of the job it runs."""

    def __init__(self, preload: Sequence[str], standby: bool = False) -> None:
        self.preload = list(preload)
        self.nice = 0
        self.standby = standby
        self._spare: tuple[subprocess.Popen[bytes], multiprocessing.connection.Connection] | None
        self._spare = None
        self.process: subprocess.Popen[bytes] | None = None
        self.conn: multiprocessing.connection.Connection | None = None
        self.ready = False
        self.slot = -1
        self.deadline = 0.0
        self.started = 0.0
        self.job_timeout = 0.0
        self.timeout_error = MeasureErrorNo.RUN_TIMEOUT
        self.crash_error = MeasureErrorNo.RUNTIME_ERROR
        self.job_timeout_error = MeasureErrorNo.RUN_TIMEOUT

    def _spawn(self) -> tuple[subprocess.Popen[bytes], multiprocessing.connection.Connection]:
        parent, child = multiprocessing.Pipe()
        try:
            process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(child.fileno()), *self.preload],
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
                env=_child_environment(), start_new_session=True,
            )
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        return process, parent

    def ensure_started(self) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        self.kill()
        spare, self._spare = self._spare, None
        if spare is not None and spare[0].poll() is None and _set_nice(spare[0].pid, 0):
            self.process, self.conn = spare  # started long ago: its "ready" is waiting
        else:
            _stop(spare)
            self.process, self.conn = self._spawn()
        self.ready = False
        if self.nice:
            self.renice(self.nice)
        if self.standby:  # the next replacement imports now, not after the next kill
            self._spare = self._spawn()
            if _can_raise_priority():
                # Idle-priority imports take only the time the timings leave (1-3 s of CPU
                # beside the next config's timing otherwise); raised when swapped in.
                _set_nice(self._spare[0].pid, SPARE_NICE)

    def renice(self, nice: int) -> None:
        """Run at this niceness relative to the parent's (from now on, and after restarts)."""
        self.nice = nice
        if self.process is not None and self.process.poll() is None:
            _set_nice(self.process.pid, nice)

    def start_job(self, slot: int, job: Job) -> None:
        self.ensure_started()
        assert self.conn is not None
        fork = ((job.prepare, (job.timeout, int(job.timeout_error), int(job.crash_error)))
                if job.fork else None)
        self.conn.send_bytes(pickle.dumps((job.func, job.payload, fork)))
        self.slot = slot
        self.started = time.monotonic()
        self.job_timeout = job.timeout + (FORK_GRACE if job.fork else 0.0)
        # The job's clock starts when the worker is ready; a worker that never gets there has
        # crashed, as far as this job is concerned.
        self.deadline = self.started + (self.job_timeout if self.ready else STARTUP_SECONDS)
        self.timeout_error = job.timeout_error if self.ready else job.crash_error
        self.crash_error = job.crash_error
        self.job_timeout_error = job.timeout_error

    def became_ready(self) -> None:
        self.ready = True
        self.started = time.monotonic()
        self.deadline = self.started + self.job_timeout
        self.timeout_error = self.job_timeout_error

    def kill(self) -> None:
        if self.process is not None:
            _kill_group(self.process)
        if self.conn is not None:
            self.conn.close()
        self.process, self.conn, self.ready = None, None, False

    def close(self) -> None:
        if self.conn is not None and self.process is not None and self.process.poll() is None:
            try:
                self.conn.send_bytes(pickle.dumps(None))
                self.process.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        _stop(self._spare)
        self._spare = None


def _set_nice(pid: int, nice: int) -> bool:
    """Give process `pid` this niceness relative to this process's; False where the system
    does not allow it (raising a priority needs privileges), the process keeping its own."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, 0) + nice)
    except OSError:
        return False
    return True


def _can_raise_priority() -> bool:
    """Whether a child niced by SPARE_NICE may be raised back to this process's priority:
    as root, or within RLIMIT_NICE (else the spare starts at full priority)."""
    if os.geteuid() == 0:
        return True
    limit = resource.getrlimit(resource.RLIMIT_NICE)[0]
    if limit == resource.RLIM_INFINITY:
        return True
    return 20 - limit <= os.getpriority(os.PRIO_PROCESS, 0)  # the lowest niceness allowed


def _stop(spawned: tuple[subprocess.Popen[bytes], multiprocessing.connection.Connection] | None
          ) -> None:
    """Stop a worker process that never got a job."""
    if spawned is not None:
        _kill_group(spawned[0])
        spawned[1].close()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill a worker and the child it may have forked (a worker leads a session of its own)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait(timeout=5)


class WorkerPool:
    """`n` worker processes that run lists of jobs, each job isolated with its own timeouts.

    Args:
        n: worker processes.
        preload: modules each worker imports before its first job (so that the first job's
            timeout does not pay for them).
        standby: keep a started spare process per worker, which replaces it at once when it
            is killed (a runner stops hopeless configs by a timeout: the next config then
            waits for no interpreter to start and import).
    """

    def __init__(self, n: int, preload: Sequence[str] = (), standby: bool = False):
        if n < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {n}")
        self.workers = [_Worker(preload, standby) for _ in range(n)]
        _POOLS.add(self)

    def renice(self, nice: int) -> None:
        """Set the workers' niceness relative to this process's, from now on (a worker that
        the system does not allow to change keeps its priority)."""
        for w in self.workers:
            w.renice(nice)

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
        if kind == "ready":
            w.became_ready()
            return None
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

    def kill(self) -> None:
        """Kill every worker (and its spare) at once, asking nothing of it."""
        for w in self.workers:
            w.kill()
            _stop(w._spare)
            w._spare = None

    def __del__(self) -> None:
        self.close()


#: The pools of this process that may have workers running (workers run in sessions of their
#: own, so a Ctrl-C at the terminal reaches none of them: `kill_all_workers` does).
_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


def kill_all_workers() -> None:
    """Kill the workers of every pool of this process: for a process that must leave now."""
    for pool in list(_POOLS):
        pool.kill()
