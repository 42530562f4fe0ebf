"""The importers' entry points, importable without their optional dependencies: `onnx` and
`torch` are loaded on the first call (the `onnx` and `torch` extras)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from . import import_ops  # noqa: F401  (the ops the importers emit, for Graph.apply too)
from .graph import Graph


def from_onnx(model: str | os.PathLike | Any,
              shapes: Mapping[str, Sequence[int]] | None = None,
              custom_ops: Mapping[tuple[str, str], Any] | None = None) -> Graph:
    """An ONNX model (a path or an `onnx.ModelProto`, opset 13 to 21) as a Graph, its custom
    ops' nodes computed by the kernels `custom_ops` maps them to; see
    `topi.graph.onnx.from_onnx`."""
    from . import onnx_qnn  # noqa: F401  (the converters of quantized models)
    from .onnx import from_onnx as convert

    return convert(model, shapes, custom_ops)


def from_torch(module: Any, example_inputs: Sequence[Any], dynamic_shapes: Any = None) -> Graph:
    """A PyTorch `nn.Module`, `torch.fx.GraphModule` or `torch.export.ExportedProgram` (captured
    with `torch.export` on `example_inputs`) as a Graph; see `topi.graph.torch.from_torch`."""
    from .torch import from_torch as convert

    return convert(module, example_inputs, dynamic_shapes)
