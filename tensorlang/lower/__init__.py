"""Lowering: Schedule -> loop IR, as a list of named steps (one pass per file).

Each step is a pure function PrimFunc -> PrimFunc. With TL_DEBUG=1 the time of each step is
printed, with TL_DEBUG>=2 the IR after each step too (to stderr).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence

from ..ir import IRModule, PrimFunc
from ..schedule import Schedule
from ..tensor import Tensor
from .bound_check import check_data_dependent_indices
from .flatten import flatten_buffers
from .loop_nest import build_loop_nest
from .masks import fold_masks
from .partition import partition_loops
from .simplify import simplify_func
from .unroll import unroll_loops
from .vectorize import vectorize_loops
from .verify import VerifyError, verify

Pass = Callable[[PrimFunc], PrimFunc]

#: The steps up to the loop structure a schedule asks for: index arithmetic folded, split tails
#: partitioned, buffers flat, and loops marked vectorize or unroll still loops. A cost model reads
#: its features here (`lower_structure`), at about half the cost of the whole pipeline.
STRUCTURE_STEPS: list[tuple[str, Pass]] = [
    ("simplify", simplify_func),  # fold the index arithmetic the loop nest produced
    ("partition_loops", partition_loops),  # move non-dividing-split guards out of the main loops
    ("simplify", simplify_func),  # drop the guards the partition proved true
    ("flatten_buffers", flatten_buffers),  # one flat row-major index per access
    ("check_indices", check_data_dependent_indices),  # indices read from data cannot escape
    ("simplify", simplify_func),  # fold the flattened indices
]

#: The steps from that structure to the code codegen takes.
CODE_STEPS: list[tuple[str, Pass]] = [
    ("unroll_loops", unroll_loops),  # copy out loops marked unroll
    ("vectorize_loops", vectorize_loops),  # loops marked vectorize become vector operations
    ("simplify", simplify_func),  # fold constants exposed by unrolling and vectorization
    ("fold_masks", fold_masks),  # vector tails: decided masks folded, stack buffers unmasked
    ("verify", verify),  # check the invariants codegen relies on
]

PIPELINE: list[tuple[str, Pass]] = STRUCTURE_STEPS + CODE_STEPS


def debug_level() -> int:
    """The TL_DEBUG level: 1 timings, 2 IR after each pass, 3 LLVM IR, 4 assembly."""
    try:
        return int(os.environ.get("TL_DEBUG", "0"))
    except ValueError:
        return 0


def lower(schedule: Schedule, args: Sequence[Tensor], name: str = "main") -> IRModule:
    """Lower `schedule` to loop IR with `args` (tensors, in call order) as parameters.

    Returns:
        An IRModule holding one PrimFunc called `name`; `str()` of it is Python-like code.
    """
    return finish_lowering(lower_structure(schedule, args, name))


def lower_structure(schedule: Schedule, args: Sequence[Tensor], name: str = "main") -> PrimFunc:
    """The loop nest of `schedule` after `STRUCTURE_STEPS`: what `lower` builds before it
    unrolls and vectorizes (`finish_lowering` goes on from here)."""
    if not isinstance(schedule, Schedule):
        raise TypeError(f"lower expects a Schedule (tl.create_schedule), got {type(schedule).__name__}")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"function name must be an identifier, got {name!r}")
    level = debug_level()
    start = time.perf_counter()
    func = build_loop_nest(schedule, args, name)
    if level >= 1:
        _report("build_loop_nest", start, func, level)
    return _run(STRUCTURE_STEPS, func, level)


def finish_lowering(func: PrimFunc) -> IRModule:
    """`CODE_STEPS` on the result of `lower_structure`: the IRModule that `lower` returns."""
    return IRModule({func.name: _run(CODE_STEPS, func, debug_level())})


def _run(steps: list[tuple[str, Pass]], func: PrimFunc, level: int) -> PrimFunc:
    for step_name, step in steps:
        start = time.perf_counter()
        func = step(func)
        if level >= 1:
            _report(step_name, start, func, level)
    return func


def _report(step: str, start: float, func: PrimFunc, level: int) -> None:
    print(f"[tensorlang] {step}: {(time.perf_counter() - start) * 1e3:.2f} ms", file=sys.stderr)
    if level >= 2:
        print(func, file=sys.stderr)


__all__ = ["CODE_STEPS", "PIPELINE", "STRUCTURE_STEPS", "VerifyError", "debug_level",
           "finish_lowering", "lower", "lower_structure"]
