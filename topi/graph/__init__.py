"""topi.graph: whole models as graphs of topi ops (shared/API.md, "Models").

frontends (`from_onnx`, `from_torch`) or a hand-built `Graph` -> passes (each Graph -> Graph,
printable) -> `extract_tasks` / `tune` -> `build` -> a `Module` called with numpy inputs by name.
The op registry (`ops.register_op`) is where every graph op meets its topi compute and schedule.
"""

from . import passes
from .build import build
from .custom import custom_op
from .export import LoadedModule, load_module
from .frontends import from_onnx, from_torch
from .graph import Graph, Node, NodeKind
from .llm import from_gguf, generate, quantize_weights
from .module import Module
from .ops import OpDef, OpPattern, get_op, register_op, registered_ops
from .passes import optimize
from .quantize import quantize
from .tasks import extract_tasks
from .tune import TuneResult, tune

__all__ = [
    "Graph", "LoadedModule", "Module", "Node", "NodeKind", "OpDef", "OpPattern", "TuneResult",
    "build", "custom_op", "extract_tasks", "from_gguf", "from_onnx", "from_torch", "generate",
    "get_op", "load_module", "optimize", "passes", "quantize", "quantize_weights", "register_op",
    "registered_ops", "tune",
]
