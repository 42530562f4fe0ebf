"""Measurement farmed out through dask.distributed, behind the same Builder / Runner protocols.

`DaskBuilder` compiles configs on the workers of a Dask cluster. `DaskRunner` times them only on
workers that declare a measurement resource (`dask worker ADDRESS --resources "measure=1"`, one
such worker per machine, so that timings never overlap) and whose CPU, as the worker reports it,
is the one the code was compiled for. On each worker the jobs run in the isolated processes of
`LocalBuilder` / `LocalRunner`, so a kernel that crashes or hangs costs one typed result there.
A batch travels as a few Dask tasks per worker, each a list of configs, so that the engine
costs a few messages per batch rather than per config.

Workers come and go. Dask moves the jobs of a worker that leaves to the others (a job that has
killed `distributed.scheduler.allowed-failures` workers comes back as a RUNTIME_ERROR); a worker
that stops answering while it runs a job costs that job one RUN_TIMEOUT and gets no more runs;
workers that join are used from the next batch on; with no measuring worker left, the runner
waits for one to join. See docs/tuning_farm.md. Needs the `distributed` extra.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from . import hostcpu
from .artifact import REFERENCE_SECONDS, Artifact, TaskSpec
from .hostcpu import HostCPU
from .measure import LocalBuilder, LocalRunner
from .result import MeasureErrorNo, MeasureInput, MeasureResult


class _Connection:
    """A Dask client given by the user (never closed here) or opened from an address (closed
    by `close()`, reopened on the next use)."""

    def __init__(self, client_or_address: Any):
        try:
            import distributed
        except ImportError as err:
            raise ImportError("DaskBuilder and DaskRunner need dask.distributed: "
                              "pip install -e .[distributed]") from err
        if isinstance(client_or_address, distributed.Client):
            self._client: Any = client_or_address
            self.address: str | None = None
        elif isinstance(client_or_address, str):
            self._client, self.address = None, client_or_address
        else:
            raise TypeError("expected a distributed.Client or a scheduler address such as "
                            f"'tcp://host:8786', got {type(client_or_address).__name__}")

    @property
    def client(self) -> Any:
        if self._client is None:
            import distributed

            self._client = distributed.Client(self.address)
        return self._client

    def close(self) -> None:
        if self.address is not None and self._client is not None:
            self._client.close()
            self._client = None


# -- what runs on the Dask workers -----------------------------------------------------------------

_worker_state = threading.local()  # one LocalBuilder per worker thread: one build process each
_runners: dict[tuple[tuple[str, Any], ...], LocalRunner] = {}
_run_lock = threading.Lock()  # guards _runners; the machine lock orders the timings
_RUN_EVENTS = "autotune-run-started"


def _build_on_worker(configs: list[tuple[TaskSpec, int]], feature_kind: str | None,
                     timeout: float) -> list[Artifact | MeasureResult]:
    builder = getattr(_worker_state, "builder", None)
    if builder is None or builder.timeout != timeout:
        builder = _worker_state.builder = LocalBuilder(timeout, n_parallel=1)
    return builder.build_specs(configs, feature_kind)


@contextlib.contextmanager
def _machine_lock() -> Iterator[None]:
    """One timing at a time on this machine, whatever the resources say and however many
    measuring workers it runs (an exclusive lock on a file every worker here opens)."""
    import fcntl  # POSIX, as the measurement workers are

    with open(os.path.join(tempfile.gettempdir(), "autotune-measure.lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        yield


def _run_on_worker(settings: dict[str, Any], artifacts: list[Artifact],
                   best_seconds: float | None) -> list[MeasureResult]:
    key = tuple(sorted(settings.items()))
    with _run_lock:
        runner = _runners.get(key)
        if runner is None:
            runner = _runners[key] = LocalRunner(**settings)
    results = []
    for position, artifact in enumerate(artifacts):
        with _machine_lock():
            if runner.cooldown_interval > 0:
                time.sleep(runner.cooldown_interval)
            _announce_start(position)
            results += runner.run([artifact], best_seconds)
    return results


def _announce_start(position: int) -> None:
    """Tell the scheduler which run this worker starts (the `position`-th of its task), so that
    if the worker hangs the tuner knows in which run."""
    import distributed

    worker = distributed.get_worker()
    worker.log_event(_RUN_EVENTS, {"worker": worker.address, "position": position,
                                   "key": str(worker.get_current_task())})


def _describe_host() -> HostCPU:
    return hostcpu.this_host()


# -- the tuner's side ------------------------------------------------------------------------------


class DaskBuilder:
    """Compiles configs on the workers of a Dask cluster.

    Args:
        client_or_address: a `distributed.Client`, or the scheduler's address.
        timeout: seconds allowed per config; past it the config is a BUILD_TIMEOUT.
        resource: when given, builds go only to workers that declare this resource (to keep
            them off the measuring machines, say); by default any worker builds.
        hang_seconds: when no task of builds has finished for as long as one may take (its
            configs times `timeout`) plus `hang_seconds`, the workers building the rest count
            as hung: those configs are BUILD_TIMEOUTs.
    """

    def __init__(self, client_or_address: Any, timeout: float = 10,
                 resource: str | None = None, hang_seconds: float = 60.0):
        if timeout <= 0:
            raise ValueError(f"DaskBuilder timeout must be > 0, got {timeout}")
        self._connection = _Connection(client_or_address)
        self.timeout = float(timeout)
        self.resource = resource
        self.hang_seconds = hang_seconds

    def build(self, inputs: Sequence[MeasureInput],
              feature_kind: str | None = None) -> list[Artifact | MeasureResult]:
        """Build each input on some worker: an Artifact, or a MeasureResult with the error."""
        import distributed

        client = self._connection.client
        resources = {self.resource: 1} if self.resource else None
        configs = [(TaskSpec.of(i.task), i.config.index) for i in inputs]
        if not configs:
            return []
        # Two tasks per build thread: few messages per config, and the threads stay busy.
        size = math.ceil(len(configs) / (2 * self._build_threads()))
        chunks = [configs[i:i + size] for i in range(0, len(configs), size)]
        futures = [client.submit(_build_on_worker, chunk, feature_kind, self.timeout,
                                 resources=resources, pure=False) for chunk in chunks]
        pending = set(futures)
        stalled = size * self.timeout + self.hang_seconds
        while pending:
            try:
                pending = distributed.wait(list(pending), timeout=stalled,
                                           return_when="FIRST_COMPLETED").not_done
            except TimeoutError:
                break  # the workers building the rest hung
        client.cancel(list(pending))
        hung = MeasureResult((), MeasureErrorNo.BUILD_TIMEOUT, f"no build of the batch finished "
                             f"for {stalled:.0f} s, or its worker hung", stalled)
        results: list[Artifact | MeasureResult] = []
        for future, chunk in zip(futures, chunks):
            got = None if future in pending else _result_of(
                future, "the build", MeasureErrorNo.COMPILE_ERROR, self.hang_seconds)
            results += got if isinstance(got, list) else [got or hung] * len(chunk)
        return results

    def _build_threads(self) -> int:
        """Threads of the workers that may build (at least 1)."""
        workers = self._connection.client.scheduler_info()["workers"].values()
        return max(1, sum(w.get("nthreads", 1) for w in workers
                          if self.resource is None or w.get("resources", {}).get(self.resource)))

    def close(self) -> None:
        """Close the client if this builder opened it."""
        self._connection.close()


class DaskRunner:
    """Times artifacts on the measuring workers of a Dask cluster whose CPU matches their target.

    Args:
        client_or_address: a `distributed.Client`, or the scheduler's address.
        resource: the resource measuring workers declare; each task of runs holds one unit
            of it (and a lock file keeps timings on one machine apart in any case).
        number, repeat, min_repeat_ms, timeout, cooldown_interval, enable_cpu_cache_flush,
            check_correctness, max_measure_seconds, relative_cutoff, ci_target, min_repeat:
            as for `LocalRunner`, applied on the workers.
        wait_for_workers: seconds to wait for a suitable measuring worker to join when none is
            connected; then RuntimeError.
        hang_seconds: seconds past a run's own limits after which a worker that has finished
            nothing counts as hung (they also cover starting its runner process).
    """

    poll_seconds = 0.5

    def __init__(self, client_or_address: Any, resource: str = "measure", number: int = 4,
                 repeat: int = 3, min_repeat_ms: float = 0, timeout: float = 10,
                 cooldown_interval: float = 0.0, enable_cpu_cache_flush: bool = False,
                 check_correctness: bool = False, max_measure_seconds: float = 1.0,
                 relative_cutoff: float = 2.0, ci_target: float = 0.05, min_repeat: int = 2,
                 wait_for_workers: float = 300.0, hang_seconds: float = 60.0):
        self.settings = dict(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                             timeout=timeout, cooldown_interval=cooldown_interval,
                             enable_cpu_cache_flush=enable_cpu_cache_flush,
                             check_correctness=check_correctness,
                             max_measure_seconds=max_measure_seconds,
                             relative_cutoff=relative_cutoff, ci_target=ci_target,
                             min_repeat=min_repeat)
        self._limits = LocalRunner(**self.settings)  # checks the settings; never starts a worker
        self._connection = _Connection(client_or_address)
        self.resource = resource
        self.wait_for_workers = wait_for_workers
        self.hang_seconds = hang_seconds
        self._hosts: dict[str, HostCPU] = {}
        self._hung: set[str] = set()
        self._matched_targets: set[str] = set()

    # -- workers ---------------------------------------------------------------------------------

    def measuring_hosts(self) -> dict[str, HostCPU]:
        """The connected measuring workers (address -> CPU), asking new ones for their CPU."""
        client = self._connection.client
        workers = client.scheduler_info()["workers"]
        addresses = [a for a, w in workers.items()
                     if w.get("resources", {}).get(self.resource, 0) >= 1 and a not in self._hung]
        new = [a for a in addresses if a not in self._hosts]
        if new:
            self._hosts.update(client.run(_describe_host, workers=new, on_error="ignore"))
        return {a: self._hosts[a] for a in addresses if a in self._hosts}

    def _workers_for(self, target: str) -> list[str]:
        """Measuring workers that can time code for `target`, waiting for one if none is here.

        Raises:
            RuntimeError: measuring workers are connected but none has the target's CPU (and
                none ever had in this run), or none joined within `wait_for_workers` seconds.
        """
        give_up = time.monotonic() + self.wait_for_workers
        while True:
            hosts = self.measuring_hosts()
            matching = [a for a, h in hosts.items() if h.can_time(target)]
            if matching:
                self._matched_targets.add(target)
                return matching
            if hosts and target not in self._matched_targets:
                cpus = ", ".join(sorted({h.describe() for h in hosts.values()}))
                raise RuntimeError(
                    f"no measuring worker can time code built for {target!r}: the workers "
                    f"with resource {self.resource!r} are {cpus}. Tune with a target naming "
                    "their CPU (e.g. 'llvm -mcpu=NAME') or add a worker with this CPU.")
            if time.monotonic() > give_up:
                raise RuntimeError(f"no worker with resource {self.resource!r} that can time "
                                   f"{target!r} joined within {self.wait_for_workers:.0f} s")
            time.sleep(self.poll_seconds)

    def _run_budget(self, best_seconds: float | None) -> float:
        """Seconds a worker may take to answer for one run before it counts as hung."""
        limit = self._limits.settings(best_seconds).run_timeout + self.hang_seconds
        return limit + (REFERENCE_SECONDS if self._limits.check_correctness else 0.0)

    # -- running ---------------------------------------------------------------------------------

    def run(self, artifacts: Sequence[Artifact],
            best_seconds: float | None = None) -> list[MeasureResult]:
        """Time each artifact on a matching measuring worker; one MeasureResult per artifact."""
        import distributed

        client = self._connection.client
        results: list[MeasureResult | None] = [None] * len(artifacts)
        pending: dict[Any, list[int]] = {}  # a task -> the artifacts it times, in order
        allowed: dict[Any, list[str]] = {}
        workers_for: dict[str, list[str]] = {}  # target -> measuring workers, once per batch

        def submit(chunk: list[int], refresh: bool = False) -> None:
            target = artifacts[chunk[0]].target
            if refresh or target not in workers_for:
                workers_for[target] = self._workers_for(target)
            workers = workers_for[target]
            future = client.submit(_run_on_worker, self.settings,
                                   [artifacts[k] for k in chunk], best_seconds,
                                   workers=workers, allow_other_workers=False,
                                   resources={self.resource: 1}, pure=False)
            pending[future], allowed[future] = chunk, workers

        if not artifacts:
            return []
        chunks: list[list[int]] = []
        for target in dict.fromkeys(a.target for a in artifacts):
            indices = [k for k, a in enumerate(artifacts) if a.target == target]
            workers_for[target] = self._workers_for(target)
            # Two tasks per worker: the second waits on the worker, so that runs follow each
            # other without a round trip to the tuner, and few messages are sent per run.
            size = math.ceil(len(indices) / (2 * len(workers_for[target])))
            chunks += [indices[i:i + size] for i in range(0, len(indices), size)]
        for chunk in chunks:
            submit(chunk)
        progress: dict[str, tuple[frozenset[str], float]] = {}
        stalled = self._run_budget(best_seconds) * max(len(c) for c in chunks)
        while pending:
            try:
                done, _ = distributed.wait(list(pending), timeout=self.poll_seconds,
                                           return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            for future in done:
                chunk = pending.pop(future)
                got = _result_of(future, "the run", MeasureErrorNo.RUNTIME_ERROR,
                                 self.hang_seconds)
                if got is None:  # timed, but its worker hung before handing the results over
                    self._hung.update(client.who_has([future]).get(str(future.key), ()))
                    submit(chunk, refresh=True)
                elif isinstance(got, list):
                    for k, result in zip(chunk, got):
                        results[k] = result
                elif len(chunk) > 1:  # the task failed: run each alone to learn which failed
                    for k in chunk:
                        submit([k])
                else:
                    results[chunk[0]] = got
            if not pending:
                break
            for worker in self._newly_hung(progress, stalled):
                rest = self._time_out_the_run_on(worker, pending, results, stalled)
                if rest:
                    submit(rest, refresh=True)
            busy = {key for worker, (keys, _) in progress.items() if worker not in self._hung
                    for key in keys}
            alive = set(self.measuring_hosts())
            for future in list(pending):
                stranded = self._hung.intersection(allowed[future]) and str(future.key) not in busy
                if stranded or not alive.intersection(allowed[future]):
                    chunk = pending.pop(future)  # its workers left or hung: move it to others
                    future.cancel()
                    submit(chunk, refresh=True)
        return [r for r in results if r is not None]

    def _newly_hung(self, progress: dict[str, tuple[frozenset[str], float]],
                    budget: float) -> list[str]:
        """Workers that have finished none of their runs for `budget` seconds (they get no
        more). `progress` (worker -> its runs, and when one of them last finished) is kept
        up to date here."""
        now = time.monotonic()
        hung = []
        for worker, keys in self._connection.client.processing().items():
            runs = frozenset(str(k) for k in keys)
            seen = progress.get(worker)
            if not runs:
                progress.pop(worker, None)
            elif seen is None or seen[0] - runs:  # one of its runs finished (or moved)
                progress[worker] = (runs, now)
            else:
                progress[worker] = (runs, seen[1])
                if now - seen[1] > budget and worker not in self._hung:
                    hung.append(worker)
                    self._hung.add(worker)
        return hung

    def _time_out_the_run_on(self, worker: str, pending: dict[Any, list[int]],
                             results: list[MeasureResult | None], stalled: float) -> list[int]:
        """Record RUN_TIMEOUT for the run a hung worker last started (it said which, see
        `_announce_start`) and cancel its task; the other runs of that task are returned, to
        move to other workers (as its other tasks move)."""
        by_key = {str(f.key): f for f in pending}
        started = [(e["key"], e["position"])
                   for _, e in self._connection.client.get_events(_RUN_EVENTS)
                   if e["worker"] == worker and e["key"] in by_key]
        if not started:
            return []  # it hung before starting a run of this batch
        key, position = started[-1]
        chunk = pending.pop(by_key[key])
        by_key[key].cancel()
        results[chunk[position]] = MeasureResult(
            (), MeasureErrorNo.RUN_TIMEOUT,
            f"measuring worker {worker} finished nothing for {stalled:.0f} s while it timed "
            "this config; it gets no more runs", stalled)
        return chunk[:position] + chunk[position + 1:]

    def close(self) -> None:
        """Close the client if this runner opened it."""
        self._connection.close()


def _result_of(future: Any, job: str, error_no: MeasureErrorNo, timeout: float) -> Any:
    """The result a finished future carries, `error_no` saying how its job failed, or None when
    the worker holding the result does not hand it over within `timeout` seconds (hung)."""
    if future.status == "finished":
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            return None
    err = future.exception()
    why = (f"{job} killed every worker that took it" if type(err).__name__ == "KilledWorker"
           else f"{job} failed")
    return MeasureResult((), error_no, f"{why}: {type(err).__name__}: {err}")
