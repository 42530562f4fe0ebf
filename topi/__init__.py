"""topi: the operator inventory on top of tensorlang.

`topi.nn` holds target-independent compute definitions (TVM's conventions), `topi.x86` their x86
schedules and tunable templates, `topi.testing` numpy references. See shared/API.md.
"""

from . import nn, testing, x86
from .nn import argmax, argmin
from .nn.reduction import max, mean, min, sum

__all__ = ["argmax", "argmin", "max", "mean", "min", "nn", "sum", "testing", "x86"]
