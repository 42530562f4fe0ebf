"""Features of a config for the cost model: fixed-length, named, versioned vectors.

Between lowering and the cost model. Loop-IR features are read from
`tensorlang.lower.lower_structure`: the loop
nest as scheduled, with loops marked vectorize or unroll still loops of that kind, about half the
cost of lowering to the end (a tuner lowers every config it scores). Three kinds:
- "itervar": per loop of that `PrimFunc` (pre-order, padded/truncated to `MAX_LOOPS`):
  extent, nesting depth, trip counts above and below, loop kind, arithmetic in its body, and per
  buffer slot the stride of the accesses w.r.t. the loop variable, touch count, reuse and lanes.
- "curve": a shorter summary of the same walk that does not depend on the loop count, so it
  transfers between shapes of a template.
- "knob": the config's knob indices (and log2 of split sizes); no lowering needed.
Counts are on a log2(1 + x) scale. `FEATURE_VERSION` goes into logs: bump it whenever the meaning
of a vector changes, so that saved data is not silently mixed.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tensorlang.lower import lower_structure
from tensorlang.expr import Binary, BinaryOp, Call, Cast, Compare, Const, Select, Var
from tensorlang.ir import (
    Allocate,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    PrimFunc,
    Ramp,
)
from tensorlang.visitor import children

from .space import InstantiationError

logger = logging.getLogger(__name__)

FEATURE_VERSION = 2
FEATURE_TYPES = ("itervar", "curve", "knob")
MAX_LOOPS = 16
MAX_PARAM_SLOTS = 5

_OP_NAMES = ("fadd", "fmul", "fdiv", "fother", "iops", "cmp")
_LOOP_NAMES = ("extent", "depth", "topdown", "bottomup", "serial", "parallel", "vectorized",
               "unrolled", "lanes", *_OP_NAMES)
_BUFFER_NAMES = ("stride", "count", "reuse", "store", "lanes")
_KIND_INDEX = {ForKind.SERIAL: 4, ForKind.PARALLEL: 5, ForKind.VECTORIZED: 6, ForKind.UNROLLED: 7}


def _log(x: float) -> float:
    return math.log2(1.0 + abs(x))


def _const_int(e: object) -> int | None:
    return int(e.value) if isinstance(e, Const) else None


# -- linear coefficient of a loop variable in a flat index -------------------------------------


def _coefficient(e: object, v: Var, memo: dict[int, float | None]) -> float | None:
    """d(index)/d(v) for affine indices; None when `v` enters non-linearly."""
    key = id(e)
    if key in memo:
        return memo[key]
    out: float | None
    if isinstance(e, Var):
        out = 1.0 if e is v else 0.0
    elif isinstance(e, Const):
        out = 0.0
    elif isinstance(e, Ramp):
        out = _coefficient(e.base, v, memo)
    elif isinstance(e, (Broadcast, Cast)):
        out = _coefficient(e.value, v, memo)
    elif isinstance(e, Binary) and e.op in (BinaryOp.ADD, BinaryOp.SUB):
        a, b = _coefficient(e.a, v, memo), _coefficient(e.b, v, memo)
        out = None if a is None or b is None else (a + b if e.op is BinaryOp.ADD else a - b)
    elif isinstance(e, Binary) and e.op is BinaryOp.MUL:
        a, b = _coefficient(e.a, v, memo), _coefficient(e.b, v, memo)
        ca, cb = _const_int(e.b), _const_int(e.a)
        if a == 0.0 and b == 0.0:
            out = 0.0
        elif a is not None and b == 0.0 and ca is not None:
            out = a * ca
        elif b is not None and a == 0.0 and cb is not None:
            out = b * cb
        else:
            out = None
    else:
        parts = [_coefficient(c, v, memo) for c in children(e)]
        out = 0.0 if all(p == 0.0 for p in parts) else None
    memo[key] = out
    return out


# -- one walk over the loop nest ------------------------------------------------------------------


@dataclass
class _Access:
    slot: int
    index: object
    weight: float  # executions per entry into the enclosing loop being summarised
    store: bool
    lanes: int


@dataclass
class _Summary:
    """What a subtree does per execution: weighted op counts and buffer accesses."""

    ops: np.ndarray = field(default_factory=lambda: np.zeros(len(_OP_NAMES)))
    accesses: list[_Access] = field(default_factory=list)
    lanes: int = 1
    trips: float = 1.0  # iterations of the innermost statements per execution

    def scaled(self, factor: float) -> _Summary:
        return _Summary(
            self.ops * factor,
            [_Access(a.slot, a.index, a.weight * factor, a.store, a.lanes) for a in self.accesses],
            self.lanes,
            self.trips * factor,
        )

    def add(self, other: _Summary) -> None:
        self.ops += other.ops
        self.accesses.extend(other.accesses)
        self.lanes = max(self.lanes, other.lanes)
        self.trips = max(self.trips, other.trips)


@dataclass
class _Loop:
    loop: For
    depth: int
    topdown: float
    summary: _Summary


class _Walker:
    """Collects a summary per statement and a record per loop in pre-order."""

    def __init__(self, func: PrimFunc):
        self.slots: dict[int, int] = {}
        n_params = min(len(func.params), MAX_PARAM_SLOTS)
        for k, buf in enumerate(func.params):
            self.slots[id(buf)] = min(k, n_params - 1) if n_params else 0
        self.local_slot = n_params
        self.loops: list[_Loop] = []

    def slot(self, buf: object) -> int:
        return self.slots.get(id(buf), self.local_slot)

    def stmt(self, node: object, depth: int, topdown: float) -> _Summary:
        if isinstance(node, For):
            extent = _const_int(node.extent) or 1
            record = _Loop(node, depth, topdown * extent, _Summary())
            self.loops.append(record)
            body = self.stmt(node.body, depth + 1, topdown * extent)
            record.summary = body.scaled(extent)
            return record.summary
        summary = _Summary()
        if isinstance(node, BufferStore):
            lanes = node.value.dtype.lanes
            summary.accesses.append(_Access(self.slot(node.buffer), node.index, 1.0, True, lanes))
            summary.lanes = lanes
            self.expr(node.value, summary)
            self.expr(node.index, summary, index=True)
            return summary
        for child in children(node):
            if isinstance(child, Buffer):
                continue
            if isinstance(child, Allocate) or not hasattr(child, "dtype"):
                summary.add(self.stmt(child, depth, topdown))
            else:
                self.expr(child, summary, index=True)
        return summary

    def expr(self, e: object, summary: _Summary, index: bool = False) -> None:
        if isinstance(e, BufferLoad):
            lanes = e.dtype.lanes
            summary.accesses.append(_Access(self.slot(e.buffer), e.index, 1.0, False, lanes))
            summary.lanes = max(summary.lanes, lanes)
            self.expr(e.index, summary, index=True)
            return
        dtype = getattr(e, "dtype", None)
        if dtype is not None and not index:
            summary.lanes = max(summary.lanes, dtype.lanes)
        if isinstance(e, Binary):
            if dtype.is_float:
                column = {BinaryOp.ADD: 0, BinaryOp.SUB: 0, BinaryOp.MUL: 1, BinaryOp.DIV: 2}
                summary.ops[column.get(e.op, 3)] += dtype.lanes
            else:
                summary.ops[4] += dtype.lanes
        elif isinstance(e, (Compare, Select)):
            summary.ops[5] += dtype.lanes
        elif isinstance(e, Call):
            summary.ops[3] += dtype.lanes
        for c in children(e):
            self.expr(c, summary, index)


def _walk(func: PrimFunc) -> tuple[_Walker, _Summary]:
    walker = _Walker(func)
    total = walker.stmt(func.body, 0, 1.0)
    return walker, total


def _buffer_features(loop: For | None, summary: _Summary, n_slots: int) -> np.ndarray:
    out = np.zeros((n_slots, len(_BUFFER_NAMES)))
    extent = (_const_int(loop.extent) or 1) if loop is not None else 1
    memo: dict[int, float | None] = {}
    strides: dict[int, float] = {}
    for a in summary.accesses:
        row = out[a.slot]
        if loop is not None:
            coef = _coefficient(a.index, loop.var, memo)
            stride = abs(coef) if coef is not None else 1e6  # non-affine: treat as scattered
            strides[a.slot] = min(strides.get(a.slot, stride), stride)
        row[1] += a.weight
        row[3] = max(row[3], float(a.store))
        row[4] = max(row[4], a.lanes)
    for slot in range(n_slots):
        stride = strides.get(slot, 0.0)
        out[slot, 0] = _log(stride)
        out[slot, 1] = _log(out[slot, 1])
        out[slot, 2] = _log(extent if stride == 0.0 and out[slot, 1] > 0 else 1)
        out[slot, 4] = _log(out[slot, 4])
    return out.ravel()


def _n_slots(func: PrimFunc) -> int:
    return min(len(func.params), MAX_PARAM_SLOTS) + 1


def itervar_features(func: PrimFunc) -> np.ndarray:
    """Per-loop features of a lowered function (`MAX_LOOPS` slots; see the module docstring)."""
    walker, _ = _walk(func)
    n_slots = _n_slots(func)
    width = len(_LOOP_NAMES) + n_slots * len(_BUFFER_NAMES)
    out = np.zeros((MAX_LOOPS, width))
    for row, rec in zip(out, walker.loops[:MAX_LOOPS]):
        extent = _const_int(rec.loop.extent) or 1
        row[0] = _log(extent)
        row[1] = rec.depth
        row[2] = _log(rec.topdown)
        row[3] = _log(rec.summary.trips)
        row[_KIND_INDEX[rec.loop.kind]] = 1.0
        row[8] = _log(rec.summary.lanes)
        row[9:9 + len(_OP_NAMES)] = [_log(x) for x in rec.summary.ops]
        row[len(_LOOP_NAMES):] = _buffer_features(rec.loop, rec.summary, n_slots)
    return out.ravel()


def curve_features(func: PrimFunc) -> np.ndarray:
    """A summary that does not depend on the number of loops: loop counts by kind, total and
    innermost trip counts, op totals, lanes, and per buffer slot the innermost-loop access
    pattern and total touches."""
    walker, total = _walk(func)
    n_slots = _n_slots(func)
    kinds = np.zeros(4)
    for rec in walker.loops:
        kinds[_KIND_INDEX[rec.loop.kind] - 4] += 1
    innermost = [rec for rec in walker.loops if not any(
        isinstance(c, For) for c in _stmt_children(rec.loop.body))]
    inner = innermost[-1] if innermost else None
    inner_extent = (_const_int(inner.loop.extent) or 1) if inner else 1
    head = [
        len(walker.loops),
        max((rec.depth for rec in walker.loops), default=0),
        _log(total.trips),
        _log(inner_extent),
        _log(total.lanes),
        *kinds,
        *[_log(x) for x in total.ops],
    ]
    inner_summary = inner.summary if inner else total
    return np.concatenate([
        np.asarray(head, dtype=float),
        _buffer_features(inner.loop if inner else None, inner_summary, n_slots),
        _buffer_features(None, total, n_slots),
    ])


def _stmt_children(stmt: object) -> list[object]:
    out: list[object] = []
    stack = [stmt]
    while stack:
        node = stack.pop()
        for c in children(node):
            if not hasattr(c, "dtype"):
                out.append(c)
                if not isinstance(c, For):
                    stack.append(c)
    return out


def knob_features(space: object, indices: Sequence[int]) -> np.ndarray:
    """(n, n_features) array: each knob's entity index, then log2 of each split's inner sizes."""
    digits = space.points2knobs(np.asarray(indices, dtype=np.int64))
    extra = []
    for k, knob in enumerate(space.knobs.values()):
        if knob.kind == "split":
            sizes = np.asarray([[_log(x) for x in e.size[1:]] for e in knob.entities])
            if sizes.size:
                extra.append(sizes[digits[:, k]])
    return np.concatenate([digits.astype(float), *extra], axis=1) if extra else digits.astype(
        float)


def feature_names(kind: str, n_params: int, space: object | None = None) -> list[str]:
    """Names of the entries of a feature vector of `kind` for a function with `n_params`
    parameters (or, for "knob", of `space`)."""
    n_slots = min(n_params, MAX_PARAM_SLOTS) + 1
    slot_names = [f"buf{s}" if s < n_slots - 1 else "local" for s in range(n_slots)]
    buffer_names = [f"{b}.{f}" for b in slot_names for f in _BUFFER_NAMES]
    if kind == "itervar":
        return [f"loop{k}.{f}" for k in range(MAX_LOOPS) for f in (*_LOOP_NAMES, *buffer_names)]
    if kind == "curve":
        head = ["n_loops", "max_depth", "trips", "inner_extent", "lanes",
                "n_serial", "n_parallel", "n_vectorized", "n_unrolled", *_OP_NAMES]
        return head + [f"inner.{n}" for n in buffer_names] + [f"total.{n}" for n in buffer_names]
    if kind == "knob":
        if space is None:
            raise ValueError("knob feature names need the config space")
        names = [f"{name}.index" for name in space.knobs]
        for name, knob in space.knobs.items():
            if knob.kind == "split":
                names += [f"{name}.size{p}" for p in range(1, knob.num_outputs)]
        return names
    raise ValueError(f"unknown feature type {kind!r} (use one of {FEATURE_TYPES})")


def extract(kind: str, func: PrimFunc) -> np.ndarray:
    """The `kind` ("itervar" or "curve") features of a lowered function."""
    if kind == "itervar":
        return itervar_features(func)
    if kind == "curve":
        return curve_features(func)
    raise ValueError(f"feature type {kind!r} is not computed from loop IR "
                     f"(use one of {FEATURE_TYPES})")



#: Feature rows by (template, workload key, target, kind), then config index, shared by every
#: extractor in the process: a tuner that learns from other tasks' records (transfer) reads
#: the features their own tuners already computed instead of lowering every record again.
_SHARED_ROWS: dict[tuple, dict[int, np.ndarray]] = {}


class FeatureExtractor:
    """Features of a task's configs by index, computed once each (lowering is the costly part).

    Configs that fail to instantiate or lower get a row of NaN, which callers treat as invalid
    (the tuner scores them lowest). Such a failure is never silent: `failures` counts each reason
    and the first config failing for a reason is logged as a warning, except a template's own
    rejection of a config (`InstantiationError`), which is expected and logged at debug level.

    `budget`, when set, is how many more new configs `get` may take; past it, configs this
    extractor has not seen get NaN rows too (and stay unseen), so that a search which scores
    thousands of candidates can be held to what a round of measurements is worth. A config
    counts as new whether or not another extractor of the task has computed it, so a seeded
    search goes the same way in a fresh process as in one that has tuned the task before.
    """

    def __init__(self, task: object, kind: str = "itervar"):
        if kind not in FEATURE_TYPES:
            raise ValueError(f"unknown feature type {kind!r} (use one of {FEATURE_TYPES})")
        self.task = task
        self.kind = kind
        key = (getattr(task, "template", None), getattr(task, "key", None),
               getattr(task, "target", None), kind)
        self._cache = _SHARED_ROWS.setdefault(key, {}) if key[1] is not None else {}
        self._width = next((row.shape[0] for row in self._cache.values()), None)
        self._failed: set[int] = set()
        self._known: set[int] = set()  # asked for or put here: what the budget no longer counts
        self.budget: int | None = None
        self.failures: Counter[str] = Counter()
        """How many configs failed to instantiate or lower, by reason ("ErrorType: message")."""

    @property
    def failure_count(self) -> int:
        """How many configs had no features because they failed to instantiate or lower."""
        return sum(self.failures.values())

    def _one(self, index: int) -> np.ndarray | None:
        try:
            s, args = self.task.instantiate(index)
            with getattr(self.task, "compile_target", contextlib.nullcontext()):
                func = lower_structure(s, args, name="features")
        except Exception as exc:  # noqa: BLE001 - a failure makes the config invalid, not the tuner
            reason = f"{type(exc).__name__}: {exc}"
            if not self.failures[reason]:
                level = logging.DEBUG if isinstance(exc, InstantiationError) else logging.WARNING
                logger.log(level, "config %d of task %s has no features and is scored as "
                           "invalid: %s", index, getattr(self.task, "name", self.task), reason)
            self.failures[reason] += 1
            return None
        return extract(self.kind, func)

    def get(self, indices: Sequence[int]) -> np.ndarray:
        """(len(indices), width) features; NaN rows for configs that do not lower (or that
        the budget leaves out)."""
        indices = [int(i) for i in indices]
        if self.kind == "knob":
            return knob_features(self.task.config_space, indices)
        rows: list[np.ndarray | None] = []
        for i in indices:
            if i not in self._known:
                if self.budget is not None:
                    if self.budget <= 0:
                        rows.append(None)
                        continue
                    self.budget -= 1
                self._known.add(i)
                row = self._cache.get(i)
                if row is None:
                    row = self._one(i)
                if row is None:
                    self._failed.add(i)
                else:
                    self.put(i, row)
            rows.append(None if i in self._failed else self._cache.get(i))
        width = self._width or 1
        out = np.full((len(rows), width), np.nan)
        for k, row in enumerate(rows):
            if row is not None and row.shape[0] == width:
                out[k] = row
        return out

    def put(self, index: int, row: np.ndarray) -> None:
        """Store features computed elsewhere (e.g. by a build worker)."""
        if self._width is None:
            self._width = row.shape[0]
        self._cache[int(index)] = row
        self._known.add(int(index))
