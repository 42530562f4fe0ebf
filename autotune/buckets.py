"""Tasks by size bucket: a workload with a symbolic dim tuned at a few sizes, applied to all.

`create_task(name, args, buckets={"n": [16, 32, 64]})`, where a dim of `args` is the `tl.var`
"n", gives a `BucketedTask`: one static task per bucket (the variable replaced by the bucket's
size; with several variables, one per combination). Their log records carry the bucket
(`Record.bucket`: the variables' values and the args' pattern, a variable written
`{"$var": name}`), and `apply_history_best` applies to a static workload that has no record of
its own the record of the bucket its size falls in: the smallest bucket >= the size in every
variable (the largest bucket above them all). `autotune.tune` spreads one budget over the
buckets.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from tensorlang.codegen.target import Target
from tensorlang.expr import Const, Expr, Var

from . import task as static
from .task import Task, workload_key

#: The key of a pattern entry that stands for a variable.
VAR = "$var"


def check_buckets(buckets: Mapping[str, Sequence[int]], names: Sequence[str],
                  where: str) -> dict[str, list[int]]:
    """`buckets` as var -> sorted distinct positive sizes, naming only variables of `names`.

    Raises:
        ValueError: an unknown variable, an empty list or a size below 1.
    """
    out: dict[str, list[int]] = {}
    for var, sizes in buckets.items():
        if var not in names:
            raise ValueError(f"{where}: buckets name {var!r}, which is no shape variable here "
                             f"(there are {list(names)})")
        sizes = sorted({int(v) for v in sizes})
        if not sizes or sizes[0] < 1:
            raise ValueError(f"{where}: the buckets of {var!r} must be sizes >= 1, got "
                             f"{list(buckets[var])!r}")
        out[var] = sizes
    return out


def assignments(buckets: Mapping[str, Sequence[int]]) -> Iterator[dict[str, int]]:
    """Every combination of one bucket per variable."""
    names = list(buckets)
    for sizes in itertools.product(*(buckets[v] for v in names)):
        yield dict(zip(names, sizes))


def pick(entries: Sequence[tuple[Mapping[str, int], Any]], actual: Mapping[str, int]) -> Any:
    """Of (bucket values, item) pairs, the item of the smallest bucket >= `actual` in every
    variable (the largest bucket when none is), or None when `entries` is empty."""
    if not entries:
        return None
    order = sorted(entries, key=lambda e: tuple(sorted(e[0].items())))
    for values, item in order:
        if all(values[v] >= actual.get(v, 0) for v in values):
            return item
    return max(order, key=lambda e: sum(e[0].values()))[1]


def pattern_json(args: Any) -> Any:
    """`args` as JSON with each `tl.var` dim written `{"$var": name}`.

    Raises:
        ValueError: a symbolic dim other than a plain variable.
    """
    if isinstance(args, Var):
        return {VAR: args.name}
    if isinstance(args, Const):
        return args.value
    if isinstance(args, Expr):
        raise ValueError(f"a bucketed task's dims must be ints or tl.vars, got {args}")
    if isinstance(args, (tuple, list)):
        return [pattern_json(a) for a in args]
    return args


def substitute(pattern: Any, values: Mapping[str, int]) -> Any:
    """The pattern with its variables replaced by `values` (lists as tuples)."""
    if isinstance(pattern, dict) and VAR in pattern:
        return values[pattern[VAR]]
    if isinstance(pattern, list):
        return tuple(substitute(p, values) for p in pattern)
    return pattern


def unify(pattern: Any, static: Any, values: dict[str, int]) -> bool:
    """Whether static args fit the pattern; fills `values` with its variables' sizes."""
    if isinstance(pattern, dict) and VAR in pattern:
        if not isinstance(static, int) or values.setdefault(pattern[VAR], static) != static:
            return False
        return True
    if isinstance(pattern, list):
        return (isinstance(static, list) and len(static) == len(pattern)
                and all(unify(p, s, values) for p, s in zip(pattern, static)))
    return pattern == static


def variables(pattern: Any) -> list[str]:
    """The variables of a pattern, in first-seen order."""
    if isinstance(pattern, dict) and VAR in pattern:
        return [pattern[VAR]]
    if isinstance(pattern, list):
        return list(dict.fromkeys(v for p in pattern for v in variables(p)))
    return []


class BucketedTask:
    """One task per size bucket of a workload with symbolic dims (`create_task(...,
    buckets=...)`); iterating gives the tasks, each with its `bucket` (values and pattern)."""

    def __init__(self, name: str, args: Sequence[Any], target: str | Target,
                 buckets: Mapping[str, Sequence[int]]):
        self.name = name
        self.pattern = pattern_json(list(args))
        names = variables(self.pattern)
        self.buckets = check_buckets(buckets, names, f"create_task {name!r}")
        missing = [v for v in names if v not in self.buckets]
        if missing:
            raise ValueError(f"create_task {name!r}: the symbolic dims {missing} need buckets")
        self.tasks: list[Task] = []
        for values in assignments(self.buckets):
            task = static.create_task(name, substitute(self.pattern, values), target)
            task.bucket = {"values": values, "pattern": [name, self.pattern]}  # type: ignore
            self.tasks.append(task)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        return f"BucketedTask({self.name}, {self.pattern}, buckets={self.buckets})"


def has_vars(args: Any) -> bool:
    """Whether some dim of `args` is symbolic."""
    if isinstance(args, Expr):
        return not isinstance(args, Const)
    if isinstance(args, (tuple, list)):
        return any(has_vars(a) for a in args)
    return False


def bucket_index(records: Sequence[Any]) -> dict[tuple[str, str, str], list[tuple[dict, Any]]]:
    """(template, pattern key, cpu) -> [(bucket values, record)] of the records made by bucketed
    tasks (`records`: the best record per workload and target)."""
    index: dict[tuple[str, str, str], list[tuple[dict, Any]]] = {}
    for rec in records:
        bucket = getattr(rec, "bucket", None)
        if not bucket or "pattern" not in bucket:
            continue
        key = (rec.template_name, workload_key(bucket["pattern"]), rec.cpu_signature)
        index.setdefault(key, []).append((dict(bucket["values"]), rec))
    return index


def bucket_record(index: Mapping[tuple[str, str, str], list[tuple[dict, Any]]], key: str,
                  cpu: str) -> Any:
    """The record of the bucket that the static workload `key` falls in, or None."""
    if not index:
        return None
    name, args = json.loads(key)
    for (template, pattern, rec_cpu), entries in index.items():
        if template != name or rec_cpu != cpu:
            continue
        values: dict[str, int] = {}
        if unify(json.loads(pattern)[1], args, values):
            return pick(entries, values)
    return None


def create_task(name: str | Callable[..., Any], args: Sequence[Any],
                target: str | Target = "llvm",
                buckets: Mapping[str, Sequence[int]] | None = None) -> Task | BucketedTask:
    """`autotune.create_task`: the task of template or workload `name` on `args` for `target`
    (`autotune.task.create_task`); with `tl.var` dims in `args`, `buckets` gives each variable's
    sizes ({"n": [16, 32, 64]}) and the result is a `BucketedTask`, one task per bucket."""
    if buckets is not None or has_vars(args):
        if buckets is None or not isinstance(name, str):
            raise ValueError(f"create_task {name!r}: args with symbolic dims need buckets= "
                             "(each variable's sizes) and a template name")
        return BucketedTask(name, args, target, buckets)
    return static.create_task(name, args, target)
