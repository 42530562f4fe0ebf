"""topi: the operator inventory on top of tensorlang.

`topi.nn` holds target-independent compute definitions (TVM's conventions), `topi.x86` their x86
schedules and tunable templates, `topi.testing` numpy references. See shared/API.md.
"""

from . import nn, testing, x86
from .nn import argmax, argmin

__all__ = ["nn", "testing", "x86"]
__all__ += ["argmax", "argmin"]
