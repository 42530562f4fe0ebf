"""ONNX nodes of custom domains as custom ops: the converters of `from_onnx(custom_ops=...)`.

Each (domain, op_type) maps to a `custom_op` or a plain function of placeholders (which becomes
a CustomOp named "<domain>::<op_type>", kept per function so a model imported twice reuses its
graph op and kernels). A node's attributes reach the function as keyword arguments.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .api import RegisteredOp
from .graph_op import apply
from .op import CustomOp, make_op

Converter = Callable[[Any, list, Any], list]

_PLAIN: dict[tuple[int, str, str], tuple[Callable[..., Any], CustomOp]] = {}


def as_custom_op(domain: str, op_type: str, fn: Any) -> CustomOp:
    """The CustomOp that `fn` (a `custom_op` or a plain function) maps (domain, op_type) to."""
    if isinstance(fn, RegisteredOp):
        return fn.op
    key = (id(fn), domain, op_type)
    found = _PLAIN.get(key)
    if found is None:
        namespace, name = re.sub(r"\W", "_", domain) or "onnx", re.sub(r"\W", "_", op_type)
        found = _PLAIN[key] = fn, make_op(f"{namespace}::{name}", fn)
    return found[1]


def converters(custom_ops: Mapping[tuple[str, str], Any]) -> dict[str, Converter]:
    """The converters of `custom_ops`, keyed as the ONNX frontend keys ops ("domain:OpType", or
    the op type in the default domain).

    Raises:
        TypeError: a key that is not a (domain, op_type) pair of strings, or a value that is not
            a function.
    """
    if not isinstance(custom_ops, Mapping):
        raise TypeError(f"from_onnx: custom_ops must map (domain, op_type) to a function, got "
                        f"{type(custom_ops).__name__}")
    table: dict[str, Converter] = {}
    for key, fn in custom_ops.items():
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)):
            raise TypeError(f"from_onnx: custom_ops keys must be (domain, op_type) pairs of "
                            f"strings, got {key!r}")
        domain, op_type = key
        op = as_custom_op(domain, op_type, fn)
        table[op_type if domain in ("", "ai.onnx") else f"{domain}:{op_type}"] = _converter(op)
    return table


def _converter(op: CustomOp) -> Converter:
    def convert(importer: Any, inputs: list, attrs: Any) -> list:
        values = {a.name: attrs.get(a.name) for a in importer.node.attribute}
        return apply(importer, op, inputs, values)

    return convert
