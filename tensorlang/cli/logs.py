"""Reading tuning logs for people: the best record per workload, and the tuning curve.

A log holds one JSON line per measurement, in the order they were made, possibly of several
workloads and targets (`autotune.record`), and after each run the re-measured verdict on the best
configs: the best record of a workload is its latest verdict's winner, and re-measured records
are not trials (neither counted nor drawn on the curve). GFLOP/s need the workload's flop count, which the log
does not store: it is recomputed by creating the task, so the template must be registered (topi's
always are; user templates come from `--import`).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import autotune
from autotune import Record
from autotune.space import ConfigEntity


class LogError(ValueError):
    """A log that cannot be read or holds no usable records."""


def read_log(path: str | Path) -> list[Record]:
    """The records of a log file; a LogError when it is missing, unreadable or empty."""
    try:
        records = autotune.load_records(path)
    except OSError as err:
        raise LogError(f"cannot read log {path}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise LogError(f"{path} is not a text file of tuning records") from None
    if not records:
        raise LogError(f"{path} holds no tuning records")
    return records


def import_templates(modules: Iterable[str]) -> None:
    """Import the modules (names or .py paths) that register user templates."""
    for name in modules:
        if name.endswith(".py"):
            path = Path(name).resolve()
            sys.path.insert(0, str(path.parent))
            name = path.stem
        try:
            importlib.import_module(name)
        except ImportError as err:
            raise LogError(f"cannot import {name}: {err}") from None


def workload_flop(record: Record, cache: dict[tuple[str, str], float | None]) -> float | None:
    """Flop of one run of the record's workload, or None when its template is not registered."""
    key = (record.key, record.target)
    if key not in cache:
        import topi  # noqa: F401 - registers the x86 templates

        try:
            task = autotune.create_task(record.template_name, record.workload[1], record.target)
            cache[key] = float(task.flop) or None
        except ValueError:
            cache[key] = None
    return cache[key]


def logged_best(task: autotune.Task, path: str | Path) -> ConfigEntity | None:
    """The best config of `task` (same workload and target) in the log, if any still valid."""
    best = autotune.best_records(read_log(path)).get((task.key, task.target))
    if best is None or best.config_index >= task.config_space.range_length:
        return None
    config = task.config_space.get(best.config_index)
    return config if config.matches(best.knobs) else None


@dataclass(frozen=True)
class Best:
    """The best record of one workload and target, and how many were measured."""

    record: Record
    trials: int
    gflops: float | None


def best_per_workload(records: Sequence[Record]) -> list[Best]:
    """One Best per (workload, target) that has a valid measurement, in order of appearance."""
    counts: dict[tuple[str, str], int] = {}
    for r in records:
        counts[(r.key, r.target)] = counts.get((r.key, r.target), 0) + (not r.remeasured)
    flops: dict[tuple[str, str], float | None] = {}
    rows = []
    for key, rec in autotune.best_records(records).items():
        flop = workload_flop(rec, flops)
        rows.append(Best(rec, counts[key], flop / rec.result.mean / 1e9 if flop else None))
    order = list(counts)
    return sorted(rows, key=lambda b: order.index((b.record.key, b.record.target)))


@dataclass(frozen=True)
class Curve:
    """Best GFLOP/s so far after each trial of one workload in one log."""

    label: str
    workload: str
    trial_gflops: list[float]  # each trial's own GFLOP/s (0 for a failed one)

    @property
    def best_so_far(self) -> list[float]:
        """The running maximum: the tuning curve."""
        out, best = [], 0.0
        for g in self.trial_gflops:
            best = max(best, g)
            out.append(best)
        return out


def curves(path: str | Path) -> list[Curve]:
    """The tuning curve of every workload and target in a log (one per pair, labelled with the
    file name, and the workload when there are several).

    Raises:
        LogError: unreadable, or a workload whose template is not registered.
    """
    records = read_log(path)
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        if not r.remeasured:
            groups.setdefault((r.key, r.target), []).append(r)
    flops: dict[tuple[str, str], float | None] = {}
    out = []
    for (key, target), group in groups.items():
        flop = workload_flop(group[0], flops)
        if flop is None:
            raise LogError(f"{path}: template {group[0].template_name!r} is not registered "
                           "(give its module with --import)")
        label = Path(path).name
        if len(groups) > 1:
            label += f": {key}" + (f" {target}" if target != "llvm" else "")
        out.append(Curve(label, key, [flop / r.result.mean / 1e9 if r.result.ok else 0.0
                                      for r in group]))
    return out


def plot_curves(all_curves: Sequence[Curve], out: str | Path, title: str | None = None) -> None:
    """Draw best GFLOP/s against trials, one line per curve, each trial as a faint dot (a
    cross at 0 for a trial that failed). The title defaults to the workload when there is one.

    Raises:
        LogError: matplotlib is not installed (the `plot` extra).
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise LogError("plotting needs matplotlib: pip install 'tensorlang[plot]'") from None
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for curve in all_curves:
        trials = range(1, len(curve.trial_gflops) + 1)
        (line,) = ax.plot(trials, curve.best_so_far, label=curve.label, linewidth=2,
                          drawstyle="steps-post")
        ok = [(t, g) for t, g in zip(trials, curve.trial_gflops) if g > 0]
        failed = [t for t, g in zip(trials, curve.trial_gflops) if g <= 0]
        ax.scatter([t for t, _ in ok], [g for _, g in ok], s=10, alpha=0.35,
                   color=line.get_color())
        ax.scatter(failed, [0] * len(failed), s=20, marker="x", color=line.get_color(),
                   clip_on=False, zorder=3)
    ax.set_xlabel("trials")
    ax.set_ylabel("best GFLOP/s so far (dots: each trial, x: failed)")
    workloads = {c.workload for c in all_curves}
    ax.set_title(title or (workloads.pop() if len(workloads) == 1 else "tuning curves"),
                 fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fig.savefig(out)
        except (OSError, ValueError) as err:
            raise LogError(f"cannot write {out}: {err}") from None
