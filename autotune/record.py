"""Tuning logs: one JSON object per line per measurement, and picking the best from them.

The last stage of tuning and the first of deployment. A line holds the format version, the workload,
the target (as given, and the CPU signature it resolved to: name, vector width, FMA), the config
(index and readable knob values), the result and the feature version. A record is applied only on a
target with the same CPU signature: a config tuned for AVX-512 is not what an AVX2 machine should
run. At the end of a run the tuner re-measures its best configs and the fallback side by side and
logs them as re-measured records (`Record.rounds`, one marked `chosen`): such a verdict, not a
lucky one-shot trial, is what every reader of the log takes as a workload's best. Lines are
flushed as they are written so an interrupted run loses at most the line it was writing; a reader
skips such a broken line with a warning. Never pickle: logs are read by later
versions and by people.
"""

from __future__ import annotations

import functools
import json
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from tensorlang.codegen.target import Target

from .buckets import bucket_index, bucket_record
from .features import FEATURE_VERSION
from .result import MeasureErrorNo, MeasureInput, MeasureResult
from .task import dispatch_context, workload_key

LOG_FORMAT_VERSION = 1


@dataclass(frozen=True)
class Record:
    """One decoded log line.

    Attributes:
        workload: `[template name, [args...]]`.
        target: the target string.
        config_index: the config's index in the workload's space.
        knobs: readable knob values, name -> value.
        result: the measurement.
        feature_version: the feature version of the run that wrote it.
        cpu: the CPU signature of the target (`tl.Target.cpu_signature`, e.g.
            "haswell avx2-256 fma"); empty in logs written before it was recorded.
        rounds: for a re-measured record (the verdict at the end of a run), the cost of each
            round, and `result.costs` holds their median; empty for a tuning trial.
        chosen: whether this re-measured record won its verdict.
        trace: for an auto-scheduled task, the schedule as a replayable trace of primitives
            (JSON steps, see `autotune.auto_schedule.Trace`); None for template tasks.
        bucket: for a task of a size bucket (`autotune.buckets`), the variables' values and
            the args' symbolic pattern; None else.
    """

    workload: list[Any]
    target: str
    config_index: int
    knobs: dict[str, Any]
    result: MeasureResult
    feature_version: int = FEATURE_VERSION
    cpu: str = ""
    rounds: tuple[float, ...] = ()
    chosen: bool = False
    trace: list[Any] | None = None
    bucket: dict[str, Any] | None = None

    @property
    def remeasured(self) -> bool:
        """Whether this is a re-measurement of a verdict rather than a tuning trial (so it
        counts neither as a trial nor as a training point)."""
        return bool(self.rounds)

    @property
    def cpu_signature(self) -> str:
        """The CPU the record was measured for; for an old record without one, what its
        target string means on this machine."""
        return self.cpu or target_signature(self.target)

    @property
    def key(self) -> str:
        """The canonical workload string."""
        return workload_key(self.workload)

    @property
    def template_name(self) -> str:
        """The name of the template that was measured (the workload's first entry)."""
        return str(self.workload[0])

    @property
    def machine(self) -> str:
        """The machine that measured it, "hostname (cpu)" ("" in logs from before farms)."""
        return self.result.machine


def encode(inp: MeasureInput, result: MeasureResult, rounds: Sequence[float] = (),
           chosen: bool = False) -> str:
    """The JSON line (without newline) for one measurement; `rounds` and `chosen` for a
    re-measured record (see `Record`)."""
    obj: dict[str, Any] = {
        "version": LOG_FORMAT_VERSION,
        "workload": inp.task.workload,
        "target": inp.task.target,
        "cpu": inp.task.compile_target.cpu_signature,
        "config": inp.config.to_json(),
        "result": {
            "costs": list(result.costs),
            "error_no": int(result.error_no),
            "error": result.error_no.name,
            "error_msg": result.error_msg[:500],
            "all_cost": result.all_cost,
            "timestamp": result.timestamp,
            "machine": result.machine,
        },
        "feature_version": FEATURE_VERSION,
    }
    if result.slow:
        obj["result"]["slow"] = True
    if rounds:
        obj["remeasured"] = {"rounds": [float(c) for c in rounds], "chosen": bool(chosen)}
    trace_of = getattr(inp.task, "trace_json", None)  # auto-scheduled tasks log their trace
    if trace_of is not None and result.ok:
        trace = trace_of(inp.config)
        if trace is not None:
            obj["trace"] = trace
    bucket = getattr(inp.task, "bucket", None)
    if bucket:
        obj["bucket"] = bucket
    return json.dumps(obj, separators=(",", ":"))


def decode(line: str) -> Record:
    """Parse one log line.

    Raises:
        ValueError: the line is not a valid record (truncated, or another format).
    """
    try:
        obj = json.loads(line)
        if obj.get("version") != LOG_FORMAT_VERSION:
            raise ValueError(f"log format version {obj.get('version')!r} is not "
                             f"{LOG_FORMAT_VERSION}")
        res = obj["result"]
        remeasured = obj.get("remeasured", {})
        result = MeasureResult(
            costs=tuple(float(c) for c in res["costs"]),
            error_no=MeasureErrorNo(int(res["error_no"])),
            error_msg=str(res.get("error_msg", "")),
            all_cost=float(res.get("all_cost", 0.0)),
            timestamp=float(res.get("timestamp", 0.0)),
            machine=str(res.get("machine", "")),
            slow=bool(res.get("slow", False)),
        )
        return Record(
            workload=list(obj["workload"]),
            target=str(obj["target"]),
            config_index=int(obj["config"]["index"]),
            knobs=dict(obj["config"].get("knobs", {})),
            result=result,
            feature_version=int(obj.get("feature_version", FEATURE_VERSION)),
            cpu=str(obj.get("cpu", "")),
            rounds=tuple(float(c) for c in remeasured.get("rounds", ())),
            chosen=bool(remeasured.get("chosen", False)),
            trace=obj.get("trace"),
            bucket=obj.get("bucket"),
        )
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"not a tuning record: {err}") from None


def load_records(path: str | os.PathLike[str]) -> list[Record]:
    """All records of a log file, in order; broken lines are skipped with a warning."""
    records: list[Record] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                records.append(decode(line))
            except ValueError as err:
                warnings.warn(f"{path}:{number}: skipping a broken log line ({err})", stacklevel=2)
    return records


class _LogWriter:
    """A tuner callback that appends each measurement to a file and flushes it; its
    `remeasured` hook appends the verdict of the end-of-run re-measurement."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        self._file: TextIO | None = None

    def __call__(self, tuner: Any, inputs: Sequence[MeasureInput],
                 results: Sequence[MeasureResult]) -> None:
        self._write(encode(inp, res) for inp, res in zip(inputs, results))

    def remeasured(self, tuner: Any, verdict: Any) -> None:
        """Append one re-measured record per candidate of `verdict` (a `tuner.base.Verdict`)."""
        self._write(encode(inp, res, rounds, k == verdict.chosen)
                    for k, (inp, res, rounds) in enumerate(zip(verdict.inputs, verdict.results,
                                                               verdict.rounds)))

    def _write(self, lines: Iterable[str]) -> None:
        if self._file is None:
            self._file = _open_for_append(self.path)
        for line in lines:
            self._file.write(line + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __del__(self) -> None:
        self.close()


def _open_for_append(path: str) -> TextIO:
    # A log cut off mid-line would glue the next record onto the broken one: start a new line.
    needs_newline = False
    if os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            needs_newline = f.read(1) != b"\n"
    f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by _LogWriter.close
    if needs_newline:
        f.write("\n")
    return f


def log_to_file(path: str | os.PathLike[str]) -> Callable[..., None]:
    """A tuner callback that appends every measurement to the JSON-lines file `path`."""
    return _LogWriter(path)


def is_better(new: Record, old: Record) -> bool:
    """Whether `new` should replace `old` as the best record of their workload.

    A verdict's chosen record (re-measured side by side with its rivals and the fallback) beats
    every one-shot trial, however fast: one timing on a busy machine can be lucky. A later
    verdict beats an earlier one, since it re-measured the earlier winner along with the
    newer configs. Between trials, the faster wins. Callers offer only `candidate`s.
    """
    if new.chosen != old.chosen:
        return new.chosen
    if new.chosen:
        return new.result.timestamp >= old.result.timestamp
    return new.result.mean < old.result.mean


def candidate(record: Record) -> bool:
    """Whether a record may be a workload's best: a valid trial or a verdict's winner (the
    verdict's losers never are)."""
    return record.result.ok and (record.chosen or not record.remeasured)


def best_records(records: Iterable[Record]) -> dict[tuple[str, str], Record]:
    """The best record per (workload key, target): its latest verdict's winner when it was
    re-measured (see `is_better`), else its fastest valid trial."""
    best: dict[tuple[str, str], Record] = {}
    for r in records:
        key = (r.key, r.target)
        if candidate(r) and (key not in best or is_better(r, best[key])):
            best[key] = r
    return best


def _as_records(path_or_records: str | os.PathLike[str] | Iterable[Record]) -> list[Record]:
    if isinstance(path_or_records, (str, os.PathLike)):
        return load_records(path_or_records)
    records = list(path_or_records)
    bad = [r for r in records if not isinstance(r, Record)]
    if bad:
        raise TypeError(f"expected a log path or Record objects, got {type(bad[0]).__name__}")
    return records


@functools.cache
def target_signature(target: str) -> str:
    """The CPU signature of a target string on this machine ("llvm" means the host)."""
    return Target(target).cpu_signature


class ApplyHistoryBest:
    """Inside this context, templates called directly use the best logged config of their
    workload for the current target's CPU signature (`tl.Target.current()`); others use the
    fallback. A record tuned for another CPU (say AVX-512, while building for
    `-mcpu=haswell`) is not applied, and the fallback warning names both targets, unless
    `allow_other_targets=True`: then the best record of any target applies, with one warning
    per pair of targets."""

    def __init__(self, path_or_records: str | os.PathLike[str] | Iterable[Record],
                 allow_other_targets: bool = False):
        self.allow_other_targets = allow_other_targets
        self.best: dict[tuple[str, str], Record] = {}
        self._any_target: dict[str, Record] = {}
        for rec in best_records(_as_records(path_or_records)).values():
            for table, key in ((self.best, (rec.key, rec.cpu_signature)),
                               (self._any_target, rec.key)):
                if key not in table or is_better(rec, table[key]):
                    table[key] = rec
        self._buckets = bucket_index(list(self.best.values()))
        self._warned: set[tuple[str, str]] = set()
        self._context: Iterator[Any] | None = None

    def query(self, workload_key: str, target: Target) -> tuple[int, dict[str, Any]] | None:
        """The best config for this workload on `target`'s CPU as (index, readable knobs), or
        None (also when only records of other targets exist and they are not allowed)."""
        rec = self.best.get((workload_key, target.cpu_signature))
        if rec is None:  # a size bucket's record, for a workload tuned by bucket
            rec = bucket_record(self._buckets, workload_key, target.cpu_signature)
        if rec is None and self.allow_other_targets:
            rec = self._any_target.get(workload_key)
            if rec is not None and (rec.cpu_signature, str(target)) not in self._warned:
                self._warned.add((rec.cpu_signature, str(target)))
                warnings.warn(f"applying a config tuned for {_describe(rec)} to target "
                              f"'{target}' ({target.cpu_signature})", stacklevel=4)
        return (rec.config_index, rec.knobs) if rec is not None else None

    def miss_reason(self, workload_key: str, target: Target) -> str | None:
        """Why `query` found nothing although the log has the workload, or None."""
        rec = self._any_target.get(workload_key)
        if rec is None or self.query(workload_key, target) is not None:
            return None
        return (f"the log's config was tuned for {_describe(rec)}, not for target '{target}' "
                f"({target.cpu_signature}); apply_history_best(..., allow_other_targets=True) "
                "applies it anyway")

    def __enter__(self) -> ApplyHistoryBest:
        self._context = dispatch_context(self)
        self._context.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._context is not None
        self._context.__exit__(*exc)
        self._context = None


def _describe(rec: Record) -> str:
    return f"target '{rec.target}' ({rec.cpu_signature})"


def apply_history_best(
    path_or_records: str | os.PathLike[str] | Iterable[Record],
    allow_other_targets: bool = False,
) -> ApplyHistoryBest:
    """A context manager in which templates instantiate with the best config of a log for the
    current target.

    Args:
        path_or_records: a JSON-lines log file or a list of `Record`s.
        allow_other_targets: also apply records tuned for another CPU signature (vector width,
            FMA, CPU name) when the current target has none, with a warning naming both.
    """
    return ApplyHistoryBest(path_or_records, allow_other_targets)


@dataclass(frozen=True)
class MergeSummary:
    """What `merge` did: lines read, broken lines skipped, records written."""

    lines: int
    broken: int
    written: int


def merge(paths: Iterable[str | os.PathLike[str]],
          out_path: str | os.PathLike[str]) -> MergeSummary:
    """Merge logs (e.g. from several machines) into one holding the best record per workload
    and target: the latest verdict's winner where one was re-measured (`is_better`), so that
    the merged log, merged again or resumed, keeps the verdict.

    Lines are copied as they are; broken or foreign lines are skipped and counted (one warning
    says how many). `out_path` may be one of `paths`: it is replaced only when all are read.

    Raises:
        OSError: an input cannot be read or the output cannot be written.
        ValueError: an input is not a text file (e.g. a plot given by mistake).
    """
    lines = broken = 0
    best: dict[tuple[str, str, str], tuple[Record, str]] = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            try:
                for line in f:
                    if not line.strip():
                        continue
                    lines += 1
                    try:
                        rec = decode(line)
                    except ValueError:
                        broken += 1
                        continue
                    key = (rec.key, rec.target, rec.cpu_signature)
                    if candidate(rec) and (key not in best or is_better(rec, best[key][0])):
                        best[key] = (rec, line.strip())
            except UnicodeDecodeError:
                raise ValueError(f"{os.fspath(path)} is not a text file of tuning records") \
                    from None
    if broken:
        warnings.warn(f"merge skipped {broken} broken log line(s) of {lines}", stacklevel=2)
    tmp = f"{os.fspath(out_path)}.merging"
    with open(tmp, "w", encoding="utf-8") as out:
        for key in sorted(best):
            out.write(best[key][1] + "\n")
    os.replace(tmp, out_path)
    return MergeSummary(lines, broken, len(best))
