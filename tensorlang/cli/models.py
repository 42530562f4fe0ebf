"""ONNX models for `tensorlang model ...`: loading with one-line errors, onnxruntime as the
reference, and checksums of outputs.

topi.graph does the work (import, tune, build); this module only turns what a user can get wrong
(a missing or corrupt file, an op topi.graph does not translate, a broken log) into `ModelError`
and finds onnxruntime when it is installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import topi.graph as tg
from topi.graph.importer import UnsupportedError

from .logs import read_log


class ModelError(ValueError):
    """A model or log the command line cannot use; the message names the file."""


@dataclass(frozen=True)
class OnnxModel:
    """An imported model and its outputs' names in the ONNX file (the Graph may rename them)."""

    graph: tg.Graph
    output_names: list[str]


def load_graph(path: str, shapes: Mapping[str, Sequence[int]] | None = None) -> OnnxModel:
    """The ONNX model at `path` as a Graph, with the input shapes of `shapes` (input name ->
    shape, from `--shape`) in place of the declared ones (which may be symbolic)."""
    shapes = dict(shapes or {})
    try:
        import onnx
        from google.protobuf.message import DecodeError
    except ImportError:
        raise ModelError("the model commands need onnx: pip install -e .[onnx]") from None
    if not os.path.isfile(path):
        raise ModelError(f"cannot read model {path}: no such file")
    try:
        proto = onnx.load(path)
    except OSError as err:
        raise ModelError(f"cannot read model {path}: {err.strerror or err}") from None
    except (DecodeError, ValueError) as err:  # not an ONNX file
        raise ModelError(f"{path} is not a valid ONNX model ({type(err).__name__}: {err})") \
            from None
    _check_shapes(path, proto, shapes)
    try:
        return OnnxModel(tg.from_onnx(proto, shapes), [o.name for o in proto.graph.output])
    except UnsupportedError as err:
        raise ModelError(f"{path}: unsupported: {err}") from None
    except (ValueError, TypeError) as err:
        raise ModelError(f"{path}: {type(err).__name__}: {err}") from None


def _check_shapes(path: str, proto: Any, shapes: Mapping[str, Sequence[int]]) -> None:
    """A ModelError naming the culprit when `shapes` names no input of the model, or when an
    input left symbolic gets no shape: what `--shape` should say then."""
    initializers = {init.name for init in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in initializers]
    names = [i.name for i in inputs]
    for name in shapes:
        if name not in names:
            raise ModelError(f"{path}: --shape names {name!r}, which is not an input of the model "
                             f"(its inputs: {', '.join(names)})")
    for inp in inputs:
        dims = inp.type.tensor_type.shape.dim
        if inp.name not in shapes and any(not d.HasField("dim_value") for d in dims):
            declared = ",".join(d.dim_param or (str(d.dim_value) if d.HasField("dim_value")
                                                else "?") for d in dims)
            raise ModelError(f"{path}: input {inp.name!r} has the symbolic shape [{declared}]; "
                             f"fix it with --shape {inp.name}=" +
                             ",".join(str(d.dim_value) if d.HasField("dim_value") else "N"
                                      for d in dims))


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """`NAME=D1,D2,...` (one `--shape`) as (NAME, dims).

    Raises:
        ValueError: no `=`, an empty name, or a dimension that is not a positive integer.
    """
    name, sep, dims = text.rpartition("=")
    if not sep or not name:
        raise ValueError(f"{text!r} is not NAME=D1,D2,... (e.g. data=1,3,224,224)")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        raise ValueError(f"{text!r}: the dimensions {dims!r} are not comma-separated "
                         f"integers") from None
    if any(d < 1 for d in shape):
        raise ValueError(f"{text!r}: dimensions must be >= 1")
    return name, shape


def check_log(log: str | None) -> None:
    """A LogError unless `log` is None or a readable log holding records."""
    if log is not None:
        read_log(log)


def onnxruntime_runner(path: str) -> Callable[[Mapping[str, np.ndarray]], list[np.ndarray]] | None:
    """A function running the model with onnxruntime on the CPU, or None when onnxruntime is not
    installed. Its idle threads do not spin, so that timing it alternately with ours is fair."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(Path(path).read_bytes(), options,
                                   providers=["CPUExecutionProvider"])
    return lambda inputs: session.run(None, dict(inputs))


def checksum(array: np.ndarray) -> float:
    """A number that changes when the output does: the sum of its values, in float64."""
    return float(np.sum(array, dtype="float64"))


def max_error(ours: np.ndarray, reference: np.ndarray) -> float:
    """The largest absolute difference."""
    return float(np.max(np.abs(ours.astype("float64") - reference), initial=0.0))


__all__ = ["ModelError", "OnnxModel", "check_log", "checksum", "load_graph", "max_error",
           "onnxruntime_runner", "parse_shape"]
