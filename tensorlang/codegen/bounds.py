"""Codegen of the bound checks that `lower/bound_check.py` puts on data-dependent indices.

A kernel with checks returns an `i32` status: 0, or `site + 1` of an access whose index fell
outside its buffer. The status lives in a stack slot of the kernel; parallel task bodies get its
address in their closure and write it with atomic stores, since several tasks may fail at once
(any of their sites is a right answer). The failing test is a cold branch, so a gather that stays
in range pays one unsigned compare per lane and one predicted branch per access.
"""

from __future__ import annotations

from ..dtype import HANDLE
from ..expr import Var
from ..lower.bound_check import CheckedIndex
from .emitter import Emitter
from .irtext import Val, const, lanes_of, vector_of

STATUS_VAR = Var("tl_status", HANDLE)
"""The key of the status slot's address among the values a parallel loop captures."""


def open_status(cg: Emitter) -> Val:
    """Allocate the kernel's status slot, holding 0 (no error) until a check fails."""
    slot = cg.fw.alloca("i32, align 4")
    cg.fw.emit(f"store i32 0, ptr {slot.ref}, align 4")
    return slot


def emit_bound_check(cg: Emitter, offsets: Val, check: CheckedIndex, mask: Val | None) -> Val:
    """Test `offsets` (i64, scalar or vector) against the buffer's extent.

    Records the failure of an active lane (one where `mask`, if any, holds) in the status slot
    and returns the mask under which the access may touch memory: `mask` and in-range.
    """
    if cg.status is None:
        raise ValueError(
            f"{cg.func.name}: an index is bound-checked, but the function's attrs list no "
            "index checks (run check_data_dependent_indices on the whole function)"
        )
    fw = cg.fw
    lanes = lanes_of(offsets.ty)
    extent = cg.splat(cg.index(check.extent), lanes)
    # Unsigned: a negative index is a huge one, so one compare tests both ends.
    in_range = fw.op(vector_of("i1", lanes), f"icmp ult {offsets}, {extent.ref}")
    bad = fw.op(in_range.ty, f"xor {in_range}, {const(in_range.ty, 1).ref}")
    if mask is not None:
        if lanes_of(mask.ty) != lanes and lanes == 1:
            active = cg.intrinsic("llvm.vector.reduce.or", [mask.ty], "i1", [mask])
        else:
            active = mask
        bad, active = cg.match(bad, active)
        bad = fw.op(bad.ty, f"and {bad}, {active.ref}")
    if lanes_of(bad.ty) > 1:
        bad = cg.intrinsic("llvm.vector.reduce.or", [bad.ty], "i1", [bad])
    bad = cg.intrinsic("llvm.expect", ["i1"], "i1", [bad, const("i1", 0)])
    fail_l, ok_l = fw.label("oob"), fw.label("inb")
    fw.cond_br(bad, fail_l, ok_l)
    fw.start_block(fail_l)
    code = const("i32", check.site + 1)
    atomic = "atomic " if cg.in_parallel else ""
    order = " monotonic" if cg.in_parallel else ""
    fw.emit(f"store {atomic}{code}, ptr {cg.status.ref}{order}, align 4")
    fw.br(ok_l)
    fw.start_block(ok_l)
    if mask is None:
        return in_range
    mask, in_range = cg.match(mask, in_range)
    return fw.op(mask.ty, f"and {mask}, {in_range.ref}")
