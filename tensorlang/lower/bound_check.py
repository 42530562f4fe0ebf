"""Bound checks for indices that depend on memory: an out-of-range gather never touches memory.

The loop-nest builder guards affine indices by construction, but an index read from data at run
time (`W[Idx[i]]`, `A[B[i] % 7]`) can point anywhere. This pass wraps every such flat index in
`checked_index(index, extent, site)`; codegen turns it into a range test: an access whose index is
outside [0, extent) loads 0 / stores nothing, and the kernel returns `site + 1` as its status
(`tensorlang.runtime.Module` raises IndexError naming the buffer and the stage). A vector index
(a gather) is checked lane by lane, and only the out-of-range lanes are masked.

The index stays an ordinary `Call`, so simplification, unrolling and vectorization carry it like
any other expression; `func.attrs["index_checks"]` lists the sites. Indices that read no memory
get no check, so kernels without data-dependent indices are unchanged.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..expr import BinaryOp, Call, Const, Expr, binary, const
from ..ir import Broadcast, BufferLoad, BufferStore, PrimFunc, Stmt
from ..visitor import Mutator, contains, post_order_visit

CHECKS_ATTR = "index_checks"
"""The PrimFunc attribute holding the `CheckSite`s, in the order of their site numbers."""


class SafetyIntrinsic(enum.Enum):
    """Intrinsics of the bound check; a `Call` on one of these is only ever an access's index."""

    CHECKED_INDEX = "checked_index"


@dataclass(frozen=True)
class CheckSite:
    """One checked access: which buffer, in which stage, read or written."""

    buffer: str
    stage: str
    is_store: bool

    def describe(self) -> str:
        """The access in words, for the IndexError of the runtime."""
        verb = "writing" if self.is_store else "reading"
        return f"{verb} {self.buffer} in stage {self.stage}"


@dataclass(frozen=True)
class CheckedIndex:
    """The parts of a `checked_index` call (vector parts unwrapped where they are broadcast)."""

    index: Expr
    extent: Expr
    site: int


def unpack_checked_index(e: Expr) -> CheckedIndex | None:
    """The parts of `e` if it is a `checked_index` call, else None."""
    if not (isinstance(e, Call) and e.func is SafetyIntrinsic.CHECKED_INDEX):
        return None
    index, extent, site = e.args
    extent = extent.value if isinstance(extent, Broadcast) else extent
    site = site.value if isinstance(site, Broadcast) else site
    assert isinstance(site, Const)
    return CheckedIndex(index, extent, int(site.value))


def checks_of(func: PrimFunc) -> tuple[CheckSite, ...]:
    """The check sites of a function lowered with this pass (empty when it has none)."""
    return dict(func.attrs).get(CHECKS_ATTR, ())


def _first_store(s: Stmt) -> str | None:
    names: list[str] = []
    post_order_visit(
        s, lambda n: names.append(n.buffer.name) if isinstance(n, BufferStore) else None
    )
    return names[0] if names else None


class _Guard(Mutator):
    def __init__(self, func: PrimFunc) -> None:
        self.func_name = func.name
        self.first_site = len(checks_of(func))  # sites of an earlier run keep their numbers
        self.sites: list[CheckSite] = []
        self.stage: str | None = None

    def _checked(self, node: BufferLoad | BufferStore, index: Expr) -> Expr:
        if not contains(index, BufferLoad) or unpack_checked_index(index) is not None:
            return index
        extent: Expr = const(1, index.dtype.element)
        for dim in node.buffer.shape:
            extent = binary(BinaryOp.MUL, extent, dim)
        site = self.first_site + len(self.sites)
        stage = self.stage or self.func_name
        self.sites.append(CheckSite(node.buffer.name, stage, isinstance(node, BufferStore)))
        args = (index, extent, Const(site, index.dtype.element))
        return Call(SafetyIntrinsic.CHECKED_INDEX, args, index.dtype)  # type: ignore[arg-type]

    def visit_BufferLoad(self, node: BufferLoad) -> Expr:
        node = self.generic_visit(node)  # inner loads first: A[B[C[i]]]
        index = self._checked(node, node.index)
        if index is node.index:
            return node
        return BufferLoad(node.buffer, index, node.dtype, node.mask)

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        outer, self.stage = self.stage, node.buffer.name
        try:
            node = self.generic_visit(node)
            index = self._checked(node, node.index)
        finally:
            self.stage = outer
        if index is node.index:
            return node
        return BufferStore(node.buffer, index, node.value, node.mask)

    def _owned(self, node: Stmt) -> Stmt:
        """Loads in a loop bound, branch condition or let value count for the stage below."""
        if self.stage is not None:
            return self.generic_visit(node)
        self.stage = _first_store(node)
        try:
            return self.generic_visit(node)
        finally:
            self.stage = None

    visit_For = visit_IfThenElse = visit_LetStmt = _owned


def check_data_dependent_indices(func: PrimFunc) -> PrimFunc:
    """Guard every access whose flat index reads memory (see the module docstring).

    Args:
        func: a function whose buffers are flat (after `flatten_buffers`).

    Returns:
        `func` itself when no index reads memory; otherwise a copy whose data-dependent indices
        are `checked_index` calls and whose attrs list the check sites under "index_checks".
    """
    guard = _Guard(func)
    body = guard.visit(func.body)
    if not guard.sites:
        return func
    attrs = tuple((k, v) for k, v in func.attrs if k != CHECKS_ATTR)
    sites = checks_of(func) + tuple(guard.sites)
    return PrimFunc(func.name, func.params, func.shape_vars, body, (*attrs, (CHECKS_ATTR, sites)))
