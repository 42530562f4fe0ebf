"""Measurement farmed out through dask.distributed, behind the same Builder / Runner protocols.

`DaskBuilder` compiles configs on the workers of a Dask cluster. `DaskRunner` times them only on
workers that declare a measurement resource (`dask worker ADDRESS --resources "measure=1"`, one
such worker per machine, so that timings never overlap) and whose CPU, as the worker reports it,
is the one the code was compiled for. On each worker the jobs run in the isolated processes of
`LocalBuilder` / `LocalRunner`, so a kernel that crashes or hangs costs one typed result there.

Workers come and go. Dask moves the jobs of a worker that leaves to the others (a job that has
killed `distributed.scheduler.allowed-failures` workers comes back as a RUNTIME_ERROR); a worker
that stops answering while it runs a job costs that job one RUN_TIMEOUT and gets no more runs;
workers that join are used from the next batch on; with no measuring worker left, the runner
waits for one to join. See docs/tuning_farm.md. Needs the `distributed` extra.
"""

from __future__ import annotations

import contextlib
import fcntl
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


def _build_on_worker(spec: TaskSpec, index: int, feature_kind: str | None,
                     timeout: float) -> Artifact | MeasureResult:
    builder = getattr(_worker_state, "builder", None)
    if builder is None or builder.timeout != timeout:
        builder = _worker_state.builder = LocalBuilder(timeout, n_parallel=1)
    (result,) = builder.build_specs([(spec, index)], feature_kind)
    return result


@contextlib.contextmanager
def _machine_lock() -> Iterator[None]:
    """One timing at a time on this machine, whatever the resources say and however many
    measuring workers it runs (an exclusive lock on a file every worker here opens)."""
    with open(os.path.join(tempfile.gettempdir(), "autotune-measure.lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        yield


def _run_on_worker(settings: dict[str, Any], artifact: Artifact,
                   best_seconds: float | None) -> MeasureResult:
    key = tuple(sorted(settings.items()))
    with _run_lock:
        runner = _runners.get(key)
        if runner is None:
            runner = _runners[key] = LocalRunner(**settings)
    with _machine_lock():
        if runner.cooldown_interval > 0:
            time.sleep(runner.cooldown_interval)
        (result,) = runner.run([artifact], best_seconds)
    return result


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
    """

    def __init__(self, client_or_address: Any, timeout: float = 10,
                 resource: str | None = None):
        if timeout <= 0:
            raise ValueError(f"DaskBuilder timeout must be > 0, got {timeout}")
        self._connection = _Connection(client_or_address)
        self.timeout = float(timeout)
        self.resource = resource

    def build(self, inputs: Sequence[MeasureInput],
              feature_kind: str | None = None) -> list[Artifact | MeasureResult]:
        """Build each input on some worker: an Artifact, or a MeasureResult with the error."""
        import distributed

        client = self._connection.client
        resources = {self.resource: 1} if self.resource else None
        futures = [client.submit(_build_on_worker, TaskSpec.of(i.task), i.config.index,
                                 feature_kind, self.timeout, resources=resources, pure=False)
                   for i in inputs]
        distributed.wait(futures)
        return [f.result() if f.status == "finished" else
                MeasureResult((), MeasureErrorNo.COMPILE_ERROR, f"the build was lost: "
                              f"{type(f.exception()).__name__}: {f.exception()}")
                for f in futures]

    def close(self) -> None:
        """Close the client if this builder opened it."""
        self._connection.close()


class DaskRunner:
    """Times artifacts on the measuring workers of a Dask cluster whose CPU matches their target.

    Args:
        client_or_address: a `distributed.Client`, or the scheduler's address.
        resource: the resource measuring workers declare; each run holds one unit of it.
        number, repeat, min_repeat_ms, timeout, cooldown_interval, enable_cpu_cache_flush,
            check_correctness, max_measure_seconds, relative_cutoff: as for `LocalRunner`,
            applied on the workers.
        wait_for_workers: seconds to wait for a suitable measuring worker to join when none is
            connected; then RuntimeError.
        hang_seconds: seconds past a run's own limits after which a worker that has not
            answered counts as hung (they also cover starting its runner process).
    """

    poll_seconds = 0.5

    def __init__(self, client_or_address: Any, resource: str = "measure", number: int = 4,
                 repeat: int = 3, min_repeat_ms: float = 0, timeout: float = 10,
                 cooldown_interval: float = 0.0, enable_cpu_cache_flush: bool = False,
                 check_correctness: bool = False, max_measure_seconds: float = 1.0,
                 relative_cutoff: float = 3.0, wait_for_workers: float = 300.0,
                 hang_seconds: float = 60.0):
        self.settings = dict(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                             timeout=timeout, cooldown_interval=cooldown_interval,
                             enable_cpu_cache_flush=enable_cpu_cache_flush,
                             check_correctness=check_correctness,
                             max_measure_seconds=max_measure_seconds,
                             relative_cutoff=relative_cutoff)
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
        pending: dict[Any, int] = {}
        allowed: dict[Any, list[str]] = {}

        workers_for: dict[str, list[str]] = {}  # target -> measuring workers, once per batch

        def submit(k: int, refresh: bool = False) -> None:
            target = artifacts[k].target
            if refresh or target not in workers_for:
                workers_for[target] = self._workers_for(target)
            workers = workers_for[target]
            future = client.submit(_run_on_worker, self.settings, artifacts[k], best_seconds,
                                   workers=workers, allow_other_workers=False,
                                   resources={self.resource: 1}, pure=False)
            pending[future], allowed[future] = k, workers

        for k in range(len(artifacts)):
            submit(k)
        running: dict[str, tuple[tuple[str, ...], float]] = {}
        budget = self._run_budget(best_seconds)
        while pending:
            try:
                done, _ = distributed.wait(list(pending), timeout=self.poll_seconds,
                                           return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            for future in done:
                results[pending.pop(future)] = _result_of(future)
            if not pending:
                break
            hung = self._hung_workers(running, budget)
            alive = set(self.measuring_hosts())
            for future in list(pending):
                worker = next((w for w, keys in hung.items() if str(future.key) in keys), None)
                if worker is not None:
                    results[pending.pop(future)] = MeasureResult(
                        (), MeasureErrorNo.RUN_TIMEOUT,
                        f"measuring worker {worker} did not answer within {budget:.0f} s; it "
                        "gets no more runs", budget)
                    future.cancel()
                elif not alive.intersection(allowed[future]):  # its workers left: move it
                    k = pending.pop(future)
                    future.cancel()
                    submit(k, refresh=True)
        return [r for r in results if r is not None]

    def _hung_workers(self, running: dict[str, tuple[tuple[str, ...], float]],
                      budget: float) -> dict[str, tuple[str, ...]]:
        """Workers that have run the same tasks for longer than `budget` seconds, with those
        tasks' keys; they get no more runs. `running` (worker -> the keys it runs and when they
        were first seen running) is kept up to date here."""
        now = time.monotonic()
        hung = {}
        for worker, keys in self._connection.client.processing().items():
            keys = tuple(sorted(str(k) for k in keys))
            if not keys:
                running.pop(worker, None)
            elif worker not in running or running[worker][0] != keys:
                running[worker] = (keys, now)
            elif now - running[worker][1] > budget:
                hung[worker] = keys
                self._hung.add(worker)
        return hung

    def close(self) -> None:
        """Close the client if this runner opened it."""
        self._connection.close()


def _result_of(future: Any) -> MeasureResult:
    if future.status == "finished":
        return future.result()
    err = future.exception()
    killed = type(err).__name__ == "KilledWorker"
    what = ("the job killed every measuring worker that took it" if killed
            else "the measuring job failed")
    return MeasureResult((), MeasureErrorNo.RUNTIME_ERROR, f"{what}: {type(err).__name__}: {err}")
