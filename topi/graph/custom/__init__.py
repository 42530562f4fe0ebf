"""Kernels written in the DSL as PyTorch (`torch.library`) and ONNX ops: `custom_op`."""

from .api import RegisteredOp, custom_op
from .op import CustomOp

__all__ = ["CustomOp", "RegisteredOp", "custom_op"]
