"""Config spaces: the knobs a template defines and the integers that name their combinations.

The first stage of tuning. A template declares named knobs (`define_split`, `define_reorder`,
`define_annotate`, `define_knob`); each knob is a finite list of entities, and the space is their
product. A config is one integer in mixed radix over the knobs (the first knob varies slowest),
so random walks, de-duplication and exclusion are integer operations and a config serialises to
one number. The same `ConfigSpace` object is what a template receives while the space is being
defined; it answers `cfg[name]` with the knob's first entity so that the template runs through.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tensorlang.arith import const_value
from tensorlang.expr import IterVar

# Above this many raw configs a `multi_filter` is checked per config instead of being enumerated.
_ENUMERATE_LIMIT = 2_000_000


class InstantiationError(ValueError):
    """A config that a template rejects (`cfg.raise_error`): it is recorded, never measured."""


def _extent_of(axis_or_extent: IterVar | int, name: str) -> int:
    """The constant extent of an axis (or the int itself), for sizing a knob."""
    if isinstance(axis_or_extent, bool):
        raise TypeError(f"knob {name!r}: expected an axis or an int extent, got a bool")
    if isinstance(axis_or_extent, int):
        extent = axis_or_extent
    elif isinstance(axis_or_extent, IterVar):
        dom = axis_or_extent.dom
        value = const_value(dom.extent) if dom is not None else None
        if value is None:
            raise ValueError(
                f"knob {name!r}: axis {axis_or_extent.name} has no constant extent; tunable "
                "templates need concrete shapes"
            )
        extent = value
    else:
        raise TypeError(
            f"knob {name!r}: expected an axis or an int extent, got {type(axis_or_extent).__name__}"
        )
    if extent < 1:
        raise ValueError(f"knob {name!r}: extent must be >= 1, got {extent}")
    return extent


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _powers_of_two(n: int) -> list[int]:
    return [1 << k for k in range(n.bit_length()) if (1 << k) <= n]


# -- entities: one value of one knob -------------------------------------------------------------


class SplitEntity:
    """How to split one axis: `size` lists the extents of the parts, outermost first.

    `size[0]` is -1: the outermost part takes whatever the inner parts leave (ceil division).
    """

    def __init__(self, size: Sequence[int]):
        self.size = [int(x) for x in size]

    def apply(self, s: Any, op: Any, axis: IterVar) -> list[IterVar]:
        """Split `axis` of `s[op]` into `len(size)` loops and return them, outermost first."""
        stage = s[op]
        inners: list[IterVar] = []
        for factor in reversed(self.size[1:]):
            axis, inner = stage.split(axis, factor=factor)
            inners.append(inner)
        return [axis, *reversed(inners)]

    def to_json(self) -> list[int]:
        return list(self.size)

    def __repr__(self) -> str:
        return f"sp{self.size}"


class ReorderEntity:
    """A permutation of a knob's axes: the loop that goes to position k is `axes[perm[k]]`."""

    def __init__(self, perm: Sequence[int]):
        self.perm = [int(x) for x in perm]

    def apply(self, s: Any, op: Any, axes: Sequence[IterVar]) -> list[IterVar]:
        """Reorder `axes` of `s[op]` by the permutation and return them in their new order."""
        ordered = [axes[i] for i in self.perm]
        s[op].reorder(*ordered)
        return ordered

    def to_json(self) -> list[int]:
        return list(self.perm)

    def __repr__(self) -> str:
        return f"re{self.perm}"


class AnnotateEntity:
    """One annotation per axis: "none", "unroll", "vec" or "parallel"."""

    def __init__(self, anns: Sequence[str]):
        self.anns = list(anns)

    def apply(self, s: Any, op: Any, axes: Sequence[IterVar]) -> None:
        """Mark each axis of `s[op]` as its annotation says."""
        stage = s[op]
        actions = {"unroll": stage.unroll, "vec": stage.vectorize, "parallel": stage.parallel}
        for axis, ann in zip(axes, self.anns):
            if ann != "none":
                actions[ann](axis)

    def to_json(self) -> list[str]:
        return list(self.anns)

    def __repr__(self) -> str:
        return f"an{self.anns}"


class OtherOptionEntity:
    """One candidate of `define_knob`; the template reads it as `.val`."""

    def __init__(self, val: Any):
        self.val = val

    def to_json(self) -> Any:
        plain = isinstance(self.val, (bool, int, float, str, type(None)))
        return self.val if plain else repr(self.val)

    def __repr__(self) -> str:
        return repr(self.val)


Entity = SplitEntity | ReorderEntity | AnnotateEntity | OtherOptionEntity


# -- knobs: the finite list of a knob's entities -------------------------------------------------


class Knob:
    """A named, finite list of entities; `kind` says which `define_*` made it."""

    kind = "knob"

    def __init__(self, name: str, entities: list[Entity]):
        if not entities:
            raise ValueError(f"knob {name!r} has no candidates (check its policy and filter)")
        self.name = name
        self.entities = entities

    def __len__(self) -> int:
        return len(self.entities)

    def __getitem__(self, index: int) -> Entity:
        return self.entities[index]

    def __repr__(self) -> str:
        preview = ", ".join(repr(e) for e in self.entities[:4])
        more = ", ..." if len(self.entities) > 4 else ""
        return f"{self.kind}({self.name!r}, {len(self)} candidates: [{preview}{more}])"


class SplitKnob(Knob):
    """The ways to split an axis of `extent` into `num_outputs` nested loops."""

    kind = "split"

    def __init__(
        self,
        name: str,
        extent: int,
        num_outputs: int,
        policy: str,
        max_factor: int | None,
        candidate: Sequence[Sequence[int]] | None,
        filter: Callable[[SplitEntity], bool] | None,
    ):
        if num_outputs < 1:
            raise ValueError(f"define_split {name!r}: num_outputs must be >= 1, got {num_outputs}")
        self.extent = extent
        self.num_outputs = num_outputs
        self.policy = policy
        if policy == "candidate":
            if not candidate:
                raise ValueError(f"define_split {name!r}: policy 'candidate' needs candidate=[...]")
            sizes = [list(c) for c in candidate]
            bad = [c for c in sizes if len(c) != num_outputs]
            if bad:
                raise ValueError(f"define_split {name!r}: candidates {bad} do not have "
                                 f"{num_outputs} parts")
            entities = [SplitEntity([-1, *c[1:]]) for c in sizes]
        else:
            entities = [SplitEntity(size) for size in self._enumerate(name, extent, policy,
                                                                       max_factor)]
        if filter is not None:
            entities = [e for e in entities if filter(e)]
        super().__init__(name, entities)

    def _enumerate(
        self, name: str, extent: int, policy: str, max_factor: int | None
    ) -> list[list[int]]:
        # "factors" splits exactly (inner product divides the extent); the others allow a tail.
        if policy == "factors":
            choices, exact = _divisors(extent), True
        elif policy == "power2":
            choices, exact = _powers_of_two(extent), False
        elif policy == "verbose":
            choices, exact = sorted(set(_divisors(extent)) | set(_powers_of_two(extent))), False
        else:
            raise ValueError(
                f"define_split {name!r}: unknown policy {policy!r} "
                "(use 'factors', 'power2', 'verbose' or 'candidate')"
            )
        if max_factor is not None:
            choices = [c for c in choices if c <= max_factor]
        out: list[list[int]] = []

        def grow(prefix: list[int], product: int) -> None:
            if len(prefix) == self.num_outputs - 1:
                if not exact or extent % product == 0:
                    out.append([-1, *reversed(prefix)])
                return
            for c in choices:
                if product * c <= extent and (not exact or extent % (product * c) == 0):
                    grow(prefix + [c], product * c)

        grow([], 1)
        return out


class ReorderKnob(Knob):
    """Orders of a list of axes: all permutations, those of one interval, or given ones."""

    kind = "reorder"

    def __init__(
        self,
        name: str,
        n_axes: int,
        policy: str,
        candidate: Sequence[Sequence[int]] | None,
        interval: tuple[int, int] | None,
    ):
        if policy == "all":
            perms = [list(p) for p in itertools.permutations(range(n_axes))]
        elif policy == "interval":
            lo, hi = interval if interval is not None else (0, n_axes)
            if not 0 <= lo <= hi <= n_axes:
                raise ValueError(f"define_reorder {name!r}: bad interval {interval} for "
                                 f"{n_axes} axes")
            perms = [
                list(range(lo)) + list(p) + list(range(hi, n_axes))
                for p in itertools.permutations(range(lo, hi))
            ]
        elif policy == "candidate":
            if not candidate:
                raise ValueError(f"define_reorder {name!r}: policy 'candidate' needs candidate=")
            perms = [list(c) for c in candidate]
            for p in perms:
                if sorted(p) != list(range(n_axes)):
                    raise ValueError(f"define_reorder {name!r}: {p} is not a permutation of "
                                     f"{n_axes} axes")
        else:
            raise ValueError(f"define_reorder {name!r}: unknown policy {policy!r} "
                             "(use 'all', 'interval' or 'candidate')")
        super().__init__(name, [ReorderEntity(p) for p in perms])


class AnnotateKnob(Knob):
    """Per-axis annotations; vectorization is only offered on the innermost (last) axis."""

    kind = "annotate"

    def __init__(self, name: str, n_axes: int, policy: str):
        choices = {
            "try_unroll": (["none", "unroll"], ["none", "unroll"]),
            "try_vec": (["none"], ["none", "vec"]),
            "try_unroll_vec": (["none", "unroll"], ["none", "unroll", "vec"]),
        }
        if policy not in choices:
            raise ValueError(f"define_annotate {name!r}: unknown policy {policy!r} "
                             "(use 'try_unroll', 'try_vec' or 'try_unroll_vec')")
        outer, last = choices[policy]
        per_axis = [outer] * (n_axes - 1) + [last] if n_axes else []
        combos = itertools.product(*per_axis)
        super().__init__(name, [AnnotateEntity(list(c)) for c in combos])


class OtherOptionKnob(Knob):
    kind = "knob"

    def __init__(self, name: str, candidates: Sequence[Any]):
        super().__init__(name, [OtherOptionEntity(c) for c in candidates])


# -- the space and its configs --------------------------------------------------------------------


class _KnobDefiner:
    """The `define_*` methods and flop counter shared by spaces, configs and fallbacks."""

    def __init__(self) -> None:
        self.flop = 0
        self.errors: list[str] = []

    def add_flop(self, flop: float) -> None:
        """Add to the floating-point operation count of the task (for GFLOP/s)."""
        self.flop += flop

    def raise_error(self, msg: str) -> None:
        """Declare the current config invalid (e.g. it would need too many registers)."""
        self.errors.append(msg)

    def define_split(
        self,
        name: str,
        axis: IterVar | int,
        num_outputs: int = 2,
        policy: str = "factors",
        max_factor: int | None = None,
        filter: Callable[[SplitEntity], bool] | None = None,
        candidate: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Define a knob that splits `axis` (or an int extent) into `num_outputs` loops.

        Args:
            name: knob name, read back with `cfg[name]`.
            axis: an IterVar with a constant extent, or the extent itself.
            num_outputs: number of loops the axis becomes.
            policy: "factors" (exact divisors), "power2" (powers of two, tails allowed),
                "verbose" (both) or "candidate" (the sizes in `candidate`).
            max_factor: upper bound on every inner factor.
            filter: keep only the SplitEntity values for which it returns True.
            candidate: explicit size lists (policy "candidate").
        """
        extent = _extent_of(axis, name)
        self._define(SplitKnob(name, extent, num_outputs, policy, max_factor, candidate, filter))

    def define_reorder(
        self,
        name: str,
        axes: Sequence[IterVar],
        policy: str = "all",
        candidate: Sequence[Sequence[Any]] | None = None,
        interval: tuple[int, int] | None = None,
    ) -> None:
        """Define a knob that reorders `axes`.

        Args:
            name: knob name.
            axes: the axes, in their current order.
            policy: "all" (every permutation), "interval" (permutations of axes[lo:hi] given by
                `interval`, the whole list by default) or "candidate".
            candidate: orders, each a list of the axes themselves or of their positions.
            interval: (lo, hi) for policy "interval".
        """
        axes = list(axes)
        perms = None
        if candidate is not None:
            perms = [[self._position(axes, a, name) for a in order] for order in candidate]
        self._define(ReorderKnob(name, len(axes), policy, perms, interval))

    @staticmethod
    def _position(axes: list[IterVar], item: Any, name: str) -> int:
        if isinstance(item, int) and not isinstance(item, bool):
            return item
        for k, a in enumerate(axes):
            if a is item:
                return k
        raise ValueError(f"define_reorder {name!r}: candidate axis {item!r} is not in axes")

    def define_annotate(self, name: str, axes: Sequence[IterVar], policy: str) -> None:
        """Define a knob that annotates each of `axes`: "try_unroll" (unroll or not),
        "try_vec" (vectorize the last axis or not), "try_unroll_vec" (both)."""
        self._define(AnnotateKnob(name, len(list(axes)), policy))

    def define_knob(self, name: str, candidates: Sequence[Any]) -> None:
        """Define a knob whose value (`cfg[name].val`) is one of `candidates`."""
        if isinstance(candidates, (str, bytes)) or not isinstance(candidates, Sequence):
            raise TypeError(f"define_knob {name!r}: candidates must be a list, got {candidates!r}")
        self._define(OtherOptionKnob(name, list(candidates)))

    def _define(self, knob: Knob) -> None:
        raise NotImplementedError


class ConfigSpace(_KnobDefiner):
    """The product of a template's knobs. Passed to the template while its space is defined.

    Attributes:
        knobs: the knobs in definition order (the first one is the most significant digit).
        flop: the flop count the template declared with `add_flop`.
    """

    is_fallback = False

    def __init__(self) -> None:
        super().__init__()
        self.knobs: dict[str, Knob] = {}
        self._filters: list[Callable[[ConfigEntity], bool]] = []
        self._valid: np.ndarray | None = None

    # -- definition -------------------------------------------------------------------------

    def _define(self, knob: Knob) -> None:
        if knob.name in self.knobs:
            raise ValueError(f"knob {knob.name!r} is defined twice in one template")
        self.knobs[knob.name] = knob
        self._valid = None

    def multi_filter(self, filter: Callable[[ConfigEntity], bool]) -> None:
        """Keep only configs for which `filter(config)` is True (a constraint across knobs)."""
        self._filters.append(filter)
        self._valid = None

    def __getitem__(self, name: str) -> Entity:
        # While the space is being defined the template runs on each knob's first entity.
        return self.knobs[name][0]

    # -- the integer view --------------------------------------------------------------------

    @property
    def dims(self) -> list[int]:
        """The number of entities of each knob, in definition order."""
        return [len(k) for k in self.knobs.values()]

    @property
    def range_length(self) -> int:
        """The number of raw configs (the range of indices), before any `multi_filter`."""
        return math.prod(self.dims)

    def __len__(self) -> int:
        if not self._filters:
            return self.range_length
        return len(self.valid_indices())

    def point2knob(self, index: int) -> list[int]:
        """The entity index of each knob for config `index`."""
        self._check_index(index)
        digits = []
        for d in reversed(self.dims):
            index, r = divmod(index, d)
            digits.append(r)
        return digits[::-1]

    def knob2point(self, knob_indices: Sequence[int]) -> int:
        """The config index of one entity index per knob (inverse of `point2knob`)."""
        dims = self.dims
        if len(knob_indices) != len(dims):
            raise ValueError(f"expected {len(dims)} knob indices, got {len(knob_indices)}")
        index = 0
        for digit, d in zip(knob_indices, dims):
            if not 0 <= digit < d:
                raise ValueError(f"knob index {digit} out of range [0, {d})")
            index = index * d + int(digit)
        return index

    def points2knobs(self, indices: np.ndarray) -> np.ndarray:
        """Vectorised `point2knob`: an (n,) int64 array -> an (n, n_knobs) digit array."""
        rest = np.asarray(indices, dtype=np.int64).copy()
        dims = self.dims
        out = np.empty((rest.shape[0], len(dims)), dtype=np.int64)
        for k in range(len(dims) - 1, -1, -1):
            rest, out[:, k] = np.divmod(rest, dims[k])
        return out

    def knobs2points(self, digits: np.ndarray) -> np.ndarray:
        """Vectorised `knob2point`: an (n, n_knobs) digit array -> (n,) int64 indices."""
        index = np.zeros(digits.shape[0], dtype=np.int64)
        for k, d in enumerate(self.dims):
            index = index * d + digits[:, k]
        return index

    def _check_index(self, index: int) -> None:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"a config index is an int, got {type(index).__name__}")
        if not 0 <= index < self.range_length:
            raise IndexError(f"config index {index} out of range [0, {self.range_length})")

    def get(self, index: int) -> ConfigEntity:
        """The config with this index."""
        self._check_index(index)
        digits = self.point2knob(int(index))
        entities = {name: knob[d] for (name, knob), d in zip(self.knobs.items(), digits)}
        return ConfigEntity(self, int(index), entities)

    # -- validity (multi_filter) ----------------------------------------------------------------

    def is_valid(self, index: int) -> bool:
        """Whether config `index` passes every `multi_filter`."""
        if not self._filters:
            return True
        if self._valid is not None or self.range_length <= _ENUMERATE_LIMIT:
            valid = self.valid_indices()
            k = int(np.searchsorted(valid, index))
            return k < len(valid) and int(valid[k]) == index
        config = self.get(index)
        return all(f(config) for f in self._filters)

    def valid_indices(self) -> np.ndarray:
        """All indices that pass the filters (enumerates the space; cached)."""
        if self._valid is None:
            if not self._filters:
                self._valid = np.arange(self.range_length, dtype=np.int64)
            else:
                if self.range_length > _ENUMERATE_LIMIT:
                    raise ValueError(f"the space has {self.range_length} raw configs, too many to "
                                     "enumerate for multi_filter")
                ok = [i for i in range(self.range_length)
                      if all(f(self.get(i)) for f in self._filters)]
                self._valid = np.asarray(ok, dtype=np.int64)
        return self._valid

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` random valid indices (with replacement)."""
        if self._filters and (self._valid is not None or self.range_length <= _ENUMERATE_LIMIT):
            valid = self.valid_indices()
            return valid[rng.integers(0, len(valid), size=n)]
        out = rng.integers(0, self.range_length, size=n, dtype=np.int64)
        if self._filters:
            for k in range(n):
                while not self.is_valid(int(out[k])):
                    out[k] = rng.integers(0, self.range_length)
        return out

    def find(self, knobs: Mapping[str, Any]) -> ConfigEntity | None:
        """The valid config whose knobs take these readable values (as in logs: name -> JSON
        value), or None when a knob is missing, a value is not a candidate or the config is
        filtered out."""
        digits = []
        for name, knob in self.knobs.items():
            if name not in knobs:
                return None
            wanted = json.dumps(knobs[name])
            digit = next((d for d, e in enumerate(knob.entities)
                          if json.dumps(e.to_json()) == wanted), None)
            if digit is None:
                return None
            digits.append(digit)
        index = self.knob2point(digits)
        return self.get(index) if self.is_valid(index) else None

    def __iter__(self) -> Iterator[ConfigEntity]:
        for i in self.valid_indices():
            yield self.get(int(i))

    def __repr__(self) -> str:
        lines = [f"ConfigSpace ({len(self)} configs)"]
        lines += [f"  {k}: {knob!r}" for k, knob in enumerate(self.knobs.values())]
        return "\n".join(lines)

    __str__ = __repr__


class ConfigEntity(_KnobDefiner):
    """One point of a space: what a template instantiated for measurement or deployment sees.

    Its `define_*` calls check nothing and change nothing (the space is fixed already); a
    `raise_error` raises `InstantiationError` so the config is recorded as invalid.
    """

    is_fallback = False

    def __init__(self, space: ConfigSpace, index: int, entities: dict[str, Entity]):
        super().__init__()
        self.space = space
        self.index = index
        self._entities = entities

    def _define(self, knob: Knob) -> None:
        if knob.name not in self._entities:
            raise ValueError(f"knob {knob.name!r} is not in this config's space; the template "
                             "defines a different space than when the task was created")

    def multi_filter(self, filter: Callable[[ConfigEntity], bool]) -> None:
        """Nothing to do: a concrete config was already filtered when it was picked."""

    def raise_error(self, msg: str) -> None:
        """Reject this config: raises InstantiationError."""
        super().raise_error(msg)
        raise InstantiationError(msg)

    def __getitem__(self, name: str) -> Entity:
        try:
            return self._entities[name]
        except KeyError:
            raise KeyError(f"no knob named {name!r} (knobs: {list(self._entities)})") from None

    @property
    def knob_indices(self) -> list[int]:
        """The entity index of each knob (the mixed-radix digits of `index`)."""
        return self.space.point2knob(self.index)

    def to_json(self) -> dict[str, Any]:
        """{"index": ..., "knobs": {name: readable value}} for logs."""
        return {"index": self.index, "knobs": {k: e.to_json() for k, e in self._entities.items()}}

    def matches(self, knobs: Mapping[str, Any]) -> bool:
        """Whether readable knob values from a log describe this config. A log of an older
        version of the template can give an index that means another config today; a log
        without knob values is trusted."""
        if not knobs:
            return True
        own = self.to_json()["knobs"]
        return json.loads(json.dumps(own)) == json.loads(json.dumps(dict(knobs)))

    def __repr__(self) -> str:
        knobs = ", ".join(f"{k}={e!r}" for k, e in self._entities.items())
        return f"Config#{self.index}({knobs})"

    __str__ = __repr__


class FallbackConfig(ConfigSpace):
    """The config used when no tuned record matches: each knob takes a reasonable default.

    Splits put the largest factor <= 16 innermost (1 in the middle parts), reorders keep the
    order, annotations are off and knobs take their first candidate. A template may override a
    default after defining it (`cfg.fallback_split(name, sizes)`, `cfg.fallback_knob`).
    """

    is_fallback = True

    def __init__(self) -> None:
        super().__init__()
        self._chosen: dict[str, Entity] = {}

    def _define(self, knob: Knob) -> None:
        self.knobs[knob.name] = knob  # redefinition is harmless: the template ran again
        if knob.name not in self._chosen:
            self._chosen[knob.name] = self._default(knob)

    @staticmethod
    def _default(knob: Knob) -> Entity:
        if isinstance(knob, SplitKnob):
            inner = max((f for f in _divisors(knob.extent) if f <= 16), default=1)
            if knob.num_outputs == 1:
                return SplitEntity([-1])
            return SplitEntity([-1] + [1] * (knob.num_outputs - 2) + [inner])
        return knob[0]

    def __getitem__(self, name: str) -> Entity:
        return self._chosen[name]

    def knob_values(self) -> dict[str, Any]:
        """The readable value each knob takes, name -> JSON value (as `ConfigEntity.to_json`
        gives them), for finding this config in a space."""
        return {name: e.to_json() for name, e in self._chosen.items()}

    def raise_error(self, msg: str) -> None:
        """Ignored: the fallback must always produce a schedule."""

    def fallback_split(self, name: str, sizes: Sequence[int]) -> None:
        """Use `sizes` (outermost first; -1 allowed first) for split knob `name`."""
        knob = self.knobs.get(name)
        if not isinstance(knob, SplitKnob):
            raise ValueError(f"fallback_split: {name!r} is not a split knob defined so far")
        if len(sizes) != knob.num_outputs:
            raise ValueError(f"fallback_split {name!r}: expected {knob.num_outputs} sizes")
        self._chosen[name] = SplitEntity([-1, *sizes[1:]])

    def fallback_knob(self, name: str, value: Any) -> None:
        """Use `value` for knob `name` (any candidate of a `define_knob`)."""
        knob = self.knobs.get(name)
        if not isinstance(knob, OtherOptionKnob):
            raise ValueError(f"fallback_knob: {name!r} is not a define_knob knob defined so far")
        self._chosen[name] = OtherOptionEntity(value)

    def __repr__(self) -> str:
        knobs = ", ".join(f"{k}={e!r}" for k, e in self._chosen.items())
        return f"FallbackConfig({knobs})"

    __str__ = __repr__
