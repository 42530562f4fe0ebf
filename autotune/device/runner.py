"""`DeviceRunner`: times configs on a device elsewhere with the native runner, behind the
`Runner` protocol, so that a tuner tunes for an aarch64 or riscv64 board from this machine.

For each artifact it exports the config here as a shared library for the task's target (in
isolated worker processes, in parallel), gets the library, the task's inputs and the native
runner (runtime/runner.c, built once per architecture with the cross compiler) onto the device
(`DeviceLink`), runs `runner LIB.so NAME=IN.npy ... --out OUT.npy ... --repeat R --number N`
there and reads one cost per round from what it prints; with `check_correctness` it compares the
outputs with the task's default schedule computed on this machine. Every failure is a typed
result: an export that fails (COMPILE_ERROR) or hangs (BUILD_TIMEOUT), a device that cannot be
reached, a runner that crashes (RUNTIME_ERROR, naming the signal), one that hangs (RUN_TIMEOUT,
its process group killed), outputs that differ (WRONG_ANSWER). Each result names the device as
the device describes itself (`DeviceCPU`), so the log records the CPU that timed it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tensorlang as tl
from tensorlang.runtime.toolchain import build_runner, emulator_command

from ..artifact import REFERENCE_SECONDS, Artifact, TaskSpec, check_outputs, random_arrays
from ..result import MeasureErrorNo, MeasureResult
from ..workers import Job, StageFailure, WorkerPool
from .cpu import DeviceCPU
from .jobs import export_job, reference_job
from .link import DeviceLink, Transfer, check_command

#: Exported libraries kept for configs timed again (the end-of-run re-measurement): at most
#: this many (more while one batch needs them), in numbered slots, so that a device that files
#: are copied to holds a bounded number of them.
KEEP_LIBRARIES = 32
_COST_LINE = re.compile(r"^([0-9.]+) ms per call \((\d+) calls\)[ \t\r]*$", re.MULTILINE)


@dataclass
class _Library:
    """A config exported for the device: its slot, local file and export time."""

    slot: int
    path: Path
    seconds: float
    pushed: bool = False


@dataclass(frozen=True)
class _TaskFiles:
    """A task's inputs on the device (`NAME=PATH` arguments), where its outputs go, and the
    reference outputs when results are checked."""

    inputs: tuple[str, ...]
    outputs: tuple[tuple[Path, str], ...]
    reference: tuple[np.ndarray, ...] | None


class DeviceRunner:
    """Times configs for another architecture on a device, through the native runner.

    Args:
        command: the prefix that runs a program on the device: `["ssh", "board"]`,
            `["adb", "shell"]`, or an emulator; None: qemu user mode on this machine, with the
            vector length of each task's target (`toolchain.emulator_command`; timings under
            an emulator say nothing about speed, but everything else is exercised).
        number: kernel calls per round (the mean of them is one cost).
        repeat: rounds, i.e. costs recorded per config.
        timeout: seconds allowed for one run of the runner on the device (starting it
            included); past it the config is a RUN_TIMEOUT and the command's process group is
            killed.
        check_correctness: compare each config's outputs with the task's default schedule's,
            computed on this machine from the same inputs; mismatches are WRONG_ANSWER.
        push: how a file reaches the device: a command with `{local}` and `{remote}`
            (`["scp", "-q", "{local}", "board:{remote}"]`) or a function (local, remote); None
            when the device sees the staging directory (qemu here, or a shared mount).
        pull: how an output file comes back, the same way (needed with `push` and
            `check_correctness`).
        remote_dir: the directory the device sees the files in: where `push` copies them (it
            must exist there), or where the device mounts the staging directory; None: the
            staging directory's own path.
        staging_dir: the local directory for the runner, libraries and inputs (default: a
            temporary one, removed by `close`).
        n_parallel: worker processes that export libraries (default: the number of CPUs).
        build_timeout: seconds allowed to export one config.
        copy_timeout: seconds allowed for one file copy.

    `before_run` hooks of a template run in Python, so they do not run on a device. With
    `ssh`, a run stopped by the timeout ends the local ssh; `ssh -tt` makes the remote runner
    end with it.
    """

    def __init__(self, command: Sequence[str] | None = None, number: int = 4, repeat: int = 3,
                 timeout: float = 30.0, check_correctness: bool = False,
                 push: Transfer | None = None, pull: Transfer | None = None,
                 remote_dir: str | None = None, staging_dir: str | os.PathLike[str] | None = None,
                 n_parallel: int | None = None, build_timeout: float = 60.0,
                 copy_timeout: float = 60.0):
        if number < 1 or repeat < 1:
            raise ValueError(f"DeviceRunner needs number and repeat >= 1, got {number}, {repeat}")
        if min(timeout, build_timeout, copy_timeout) <= 0:
            raise ValueError(f"DeviceRunner timeouts must be > 0, got timeout={timeout}, "
                             f"build_timeout={build_timeout}, copy_timeout={copy_timeout}")
        if check_correctness and push is not None and pull is None:
            raise ValueError("check_correctness on a device that files are pushed to needs "
                             "pull: how its outputs come back (e.g. ['scp', '-q', "
                             "'board:{remote}', '{local}'])")
        self.command = None if command is None else check_command(command)
        DeviceLink([], push, pull, remote_dir)  # checks the transfers now, not at the first run
        self.number = number
        self.repeat = repeat
        self.timeout = float(timeout)
        self.check_correctness = check_correctness
        self.push = push
        self.pull = pull
        self.remote_dir = remote_dir
        self.staging_dir = staging_dir
        self.n_parallel = n_parallel or os.cpu_count() or 1
        self.build_timeout = float(build_timeout)
        self.copy_timeout = float(copy_timeout)
        self._reset()

    def _reset(self) -> None:
        self._pool: WorkerPool | None = None
        self._temporary: tempfile.TemporaryDirectory[str] | None = None
        self._staging: Path | None = None
        self._devices: dict[tuple[str, ...], DeviceCPU] = {}
        self._built: set[str] = set()  # architectures whose runner this session built
        self._runners: dict[tuple[str, tuple[str, ...]], str] = {}  # arch, command -> remote
        self._tasks: dict[str, _TaskFiles] = {}
        self._libraries: OrderedDict[str, _Library] = OrderedDict()  # ir_hash -> library
        self._free_slots: list[int] = []
        self._next_slot = 0

    # -- the Runner protocol ---------------------------------------------------------------------

    def run(self, artifacts: Sequence[Artifact],
            best_seconds: float | None = None) -> list[MeasureResult]:
        """Time each artifact on the device; one MeasureResult per artifact, in order.
        `best_seconds` is not used: every config is timed fully (a run on a device costs
        little beside copying its library there).

        Raises:
            ValueError: an artifact's target runs on this machine (use LocalRunner), or no
                command was given and qemu for the target is not installed.
        """
        if not artifacts:
            return []
        for target in dict.fromkeys(a.target for a in artifacts):
            self._link(tl.Target(target))  # a bad set-up is an error now, not one per config
        libraries = self._export(artifacts)
        return [library if isinstance(library, MeasureResult) else self._time(a, library)
                for a, library in zip(artifacts, libraries)]

    def close(self) -> None:
        """Stop the export workers and remove the temporary staging directory; the runner may
        be used again (it starts afresh)."""
        if self._pool is not None:
            self._pool.close()
        if self._temporary is not None:
            self._temporary.cleanup()
        self._reset()

    # -- set-up ----------------------------------------------------------------------------------

    def _link(self, target: tl.Target) -> DeviceLink:
        if target.runs_here:
            raise ValueError(
                f"DeviceRunner times code for another architecture, and {str(target)!r} runs on "
                "this machine: time it with LocalRunner (or DaskRunner with a worker on the "
                "machine it is for)")
        command = self.command
        if command is None:
            command = emulator_command(target)
            if command is None:
                raise ValueError(
                    f"DeviceRunner has no command for the device and qemu-{target.arch} is not "
                    "installed to emulate one: pass command=['ssh', 'board'] (or install "
                    "qemu-user)")
        return DeviceLink(command, self.push, self.pull, self.remote_dir)

    def _staging_path(self) -> Path:
        if self._staging is None:
            if self.staging_dir is not None:
                self._staging = Path(self.staging_dir)
                self._staging.mkdir(parents=True, exist_ok=True)
            else:
                self._temporary = tempfile.TemporaryDirectory(prefix="tl-device-")
                self._staging = Path(self._temporary.name)
        return self._staging

    def _workers(self) -> WorkerPool:
        if self._pool is None:
            self._pool = WorkerPool(self.n_parallel, ("autotune.device.jobs",))
        return self._pool

    def _put(self, link: DeviceLink, local: Path) -> str:
        """Get a staged file onto the device; where the device sees it.

        Raises:
            StageFailure: the copy failed or hung.
        """
        remote = link.remote(local, self._staging_path())
        try:
            link.push(local, remote, self.copy_timeout)
        except subprocess.TimeoutExpired:
            raise StageFailure(MeasureErrorNo.RUN_TIMEOUT, f"copying {local.name} to the device "
                               f"took over {self.copy_timeout:.0f} s") from None
        except Exception as err:  # noqa: BLE001 - a user's copy function may raise anything
            raise StageFailure(MeasureErrorNo.RUNTIME_ERROR,
                               f"{type(err).__name__}: {err}") from None
        return remote

    def _runner(self, target: tl.Target, link: DeviceLink) -> str:
        """The native runner for the target's architecture on the device (built and copied
        once)."""
        key = (target.arch, tuple(link.command))
        if key not in self._runners:
            local = self._staging_path() / f"tl-runner-{target.arch}"
            if target.arch not in self._built:  # a staging directory may hold an older one
                try:
                    build_runner(target, local)
                except RuntimeError as err:
                    raise StageFailure(MeasureErrorNo.RUNTIME_ERROR, str(err)) from None
                self._built.add(target.arch)
            self._runners[key] = self._put(link, local)
        return self._runners[key]

    def _device(self, target: tl.Target, link: DeviceLink) -> DeviceCPU:
        """The device as it describes itself (asked once), checked to run the target's code.

        Raises:
            StageFailure: it cannot be reached, or it is of another architecture.
        """
        key = tuple(link.command)
        if key not in self._devices:
            runner = self._runner(target, link)
            try:
                proc = link.call([runner, "--describe"], self.timeout)
            except subprocess.TimeoutExpired:
                raise StageFailure(MeasureErrorNo.RUN_TIMEOUT,
                                   f"the device did not answer within {self.timeout:.0f} s "
                                   f"({' '.join(link.command)})") from None
            if proc.returncode != 0:
                raise StageFailure(MeasureErrorNo.RUNTIME_ERROR,
                                   f"the device did not describe itself "
                                   f"({' '.join([*link.command, runner, '--describe'])}: "
                                   f"{_exit_reason(proc.returncode, target)}): "
                                   f"{_tail(proc.stderr or proc.stdout)}")
            try:
                self._devices[key] = DeviceCPU.parse(proc.stdout)
            except ValueError as err:
                raise StageFailure(MeasureErrorNo.RUNTIME_ERROR, str(err)) from None
        device = self._devices[key]
        if device.arch != target.arch:
            raise StageFailure(MeasureErrorNo.RUNTIME_ERROR,
                               f"the device {device.describe()} cannot run {target.arch} code "
                               f"(target {target})")
        return device

    def _task_files(self, artifact: Artifact, link: DeviceLink) -> _TaskFiles:
        """The task's inputs on the device (made and copied once per task), and the reference
        outputs when results are checked."""
        key = f"{artifact.spec.key}|{' '.join(link.command)}"
        if key in self._tasks:
            return self._tasks[key]
        reference = None
        if self.check_correctness:
            arrays, outputs = self._reference(artifact.spec)
            reference = tuple(outputs)
        else:
            arrays = random_arrays(artifact.arg_specs, seed=0)
        digest = hashlib.sha1(artifact.spec.key.encode()).hexdigest()[:12]
        staging = self._staging_path()
        params = json.loads(artifact.code.signature)["params"]
        inputs, outs = [], []
        for k, (param, array) in enumerate(zip(params, arrays)):
            local = staging / f"{'out' if param['is_output'] else 'in'}-{digest}-{k}.npy"
            if param["is_output"]:
                outs.append((local, link.remote(local, staging)))
            else:
                np.save(local, array)
                inputs.append(f"{param['name']}={self._put(link, local)}")
        self._tasks[key] = _TaskFiles(tuple(inputs), tuple(outs), reference)
        return self._tasks[key]

    def _reference(self, spec: TaskSpec) -> tuple[list[np.ndarray], list[np.ndarray]]:
        (outcome,) = self._workers().run([Job(reference_job, spec, REFERENCE_SECONDS,
                                              MeasureErrorNo.RUN_TIMEOUT,
                                              MeasureErrorNo.RUNTIME_ERROR)])
        if outcome.error_no is not MeasureErrorNo.NO_ERROR:
            raise StageFailure(outcome.error_no,
                               f"the reference outputs failed: {outcome.error_msg}")
        return outcome.value

    # -- exporting -------------------------------------------------------------------------------

    def _export(self, artifacts: Sequence[Artifact]) -> list[_Library | MeasureResult]:
        """A library per artifact (configs with equal code share one, and one exported for an
        earlier batch is reused), or the result saying why it could not be exported."""
        wanted = {a.ir_hash for a in artifacts}
        for digest in wanted & self._libraries.keys():
            self._libraries.move_to_end(digest)
        firsts: dict[str, Artifact] = {}
        for a in artifacts:
            if a.ir_hash not in self._libraries:
                firsts.setdefault(a.ir_hash, a)
        todo = list(firsts.values())
        slots = [self._free_slot(wanted) for _ in todo]
        staging = self._staging_path()
        paths = [staging / f"kernel-{slot}.so" for slot in slots]
        jobs = [Job(export_job, (a.spec, a.config_index, str(path)), self.build_timeout,
                    MeasureErrorNo.BUILD_TIMEOUT, MeasureErrorNo.COMPILE_ERROR)
                for a, path in zip(todo, paths)]
        failed: dict[str, MeasureResult] = {}
        for a, slot, path, outcome in zip(todo, slots, paths,
                                          self._workers().run(jobs) if jobs else []):
            if outcome.error_no is MeasureErrorNo.NO_ERROR:
                self._libraries[a.ir_hash] = _Library(slot, path, outcome.seconds)
            else:
                self._free_slots.append(slot)
                failed[a.ir_hash] = MeasureResult((), outcome.error_no, outcome.error_msg,
                                                  outcome.seconds)
        return [failed.get(a.ir_hash) or self._libraries[a.ir_hash] for a in artifacts]

    def _free_slot(self, keep: set[str]) -> int:
        """A slot for a new library: a free one, or the least recently used library's when
        `KEEP_LIBRARIES` are kept (never one that this batch needs)."""
        if len(self._libraries) >= KEEP_LIBRARIES:
            evictable = next((d for d in self._libraries if d not in keep), None)
            if evictable is not None:
                self._free_slots.append(self._libraries.pop(evictable).slot)
        if self._free_slots:
            return self._free_slots.pop()
        self._next_slot += 1
        return self._next_slot - 1

    # -- timing ----------------------------------------------------------------------------------

    def _time(self, artifact: Artifact, library: _Library) -> MeasureResult:
        start = time.perf_counter()
        target = tl.Target(artifact.target)
        link = self._link(target)
        machine = ""

        def result(error_no: MeasureErrorNo, message: str,
                   costs: tuple[float, ...] = ()) -> MeasureResult:
            seconds = library.seconds + time.perf_counter() - start
            return MeasureResult(costs, error_no, message, seconds, machine=machine)

        try:
            device = self._device(target, link)
            machine = device.describe()
            runner = self._runner(target, link)
            files = self._task_files(artifact, link)
            remote = link.remote(library.path, self._staging_path())
            if not library.pushed:
                remote = self._put(link, library.path)
                library.pushed = True
        except StageFailure as err:
            return result(err.error_no, str(err))
        args = [runner, remote, *files.inputs]
        for _, out in files.outputs:
            args += ["--out", out]
        args += ["--repeat", str(self.repeat), "--number", str(self.number)]
        try:
            proc = link.call(args, self.timeout)
        except subprocess.TimeoutExpired:
            return result(MeasureErrorNo.RUN_TIMEOUT,
                          f"the runner on {machine} ran past {self.timeout:.0f} s")
        if proc.returncode != 0:
            why = _exit_reason(proc.returncode, target)
            return result(MeasureErrorNo.RUNTIME_ERROR, f"the runner on {machine} failed "
                          f"({why}): {_tail(proc.stderr or proc.stdout)}")
        costs = tuple(float(ms) / 1e3 for ms, _ in _COST_LINE.findall(proc.stdout))
        if len(costs) != self.repeat:
            return result(MeasureErrorNo.RUNTIME_ERROR,
                          f"the runner on {machine} printed {len(costs)} timings for "
                          f"{self.repeat} rounds: {_tail(proc.stdout)}")
        if files.reference is not None:
            try:
                check_outputs(self._fetch_outputs(link, files), files.reference)
            except StageFailure as err:
                return result(err.error_no, str(err))
        return result(MeasureErrorNo.NO_ERROR, "", costs)

    def _fetch_outputs(self, link: DeviceLink, files: _TaskFiles) -> list[np.ndarray]:
        """The outputs the runner wrote, copied back from the device where it has its own
        files."""
        arrays = []
        for local, remote in files.outputs:
            try:
                link.pull(remote, local, self.copy_timeout)
                arrays.append(np.load(local))
            except Exception as err:  # noqa: BLE001 - a copy or a file gone wrong alike
                raise StageFailure(MeasureErrorNo.RUNTIME_ERROR, f"reading the output "
                                   f"{remote}: {type(err).__name__}: {err}") from None
        return arrays


def _exit_reason(returncode: int, target: tl.Target) -> str:
    """How a program on the device ended, naming the signal that killed it (negative: killed
    here, as qemu dies of its guest's signal; 128 + n: as a shell or ssh reports it)."""
    number = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"exit status {returncode}"
    if number == signal.SIGILL:
        return (f"killed by {name}: an instruction that the device's CPU lacks; is "
                f"{str(target)!r} right for it?")
    return f"killed by {name}"


def _tail(text: str, limit: int = 400) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]
