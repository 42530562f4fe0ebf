"""tensorlang: tensor computations and loop schedules in Python, compiled through LLVM.

Write what to compute (`placeholder`, `compute`, reducers), say how to loop over it
(`create_schedule` and the stage primitives), then `lower` it to loop IR or `build` it into a
callable on numpy arrays. See shared/API.md for the contract this package implements.
"""

from .build import build
from .calls import TensorRegion, call_extern, call_llvm_intrin, reinterpret
from .codegen.target import Target
from .dtype import DType
from .expr import Expr, IterVar, Var, cast, const, maximum, minimum, select
from .intrin import (
    abs,
    ceil,
    cos,
    erf,
    exp,
    floor,
    fma,
    if_then_else,
    log,
    power,
    rsqrt,
    sigmoid,
    sin,
    sqrt,
    tanh,
)
from .ir import IRModule, PrimFunc
from . import printer as _printer  # noqa: F401  (gives IR nodes their str())
from .lower import lower
from .runtime import Module, get_num_threads, load_module, set_num_threads
from .schedule import Schedule, ScheduleError, Stage, create_schedule
from .tensor_intrin import TensorIntrin, decl_tensor_intrin, extern
from .tensor import (
    ComputeOp,
    Operation,
    PlaceholderOp,
    Tensor,
    comm_reducer,
    compute,
    get_const_tuple,
    max,
    min,
    placeholder,
    reduce_axis,
    sum,
    var,
)

__version__ = "0.1.0"

__all__ = [
    "ComputeOp", "DType", "Expr", "IRModule", "IterVar", "Module", "Operation", "PlaceholderOp",
    "PrimFunc", "Schedule", "ScheduleError", "Stage", "Target", "Tensor", "Var", "abs", "build",
    "cast", "ceil", "comm_reducer", "compute", "const", "create_schedule", "erf", "exp", "floor",
    "fma", "get_num_threads", "if_then_else", "load_module", "log", "lower", "max", "maximum",
    "min", "minimum", "placeholder", "power", "reduce_axis", "rsqrt", "select", "set_num_threads",
    "sigmoid", "sqrt", "sum", "tanh", "var",
]
__all__ += ["get_const_tuple"]
__all__ += ["TensorIntrin", "TensorRegion", "call_extern", "call_llvm_intrin", "decl_tensor_intrin",
            "extern", "reinterpret"]
__all__ += ["cos", "sin"]
