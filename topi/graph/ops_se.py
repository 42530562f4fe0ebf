"""Graph ops of the squeeze-and-excitation kernels that `passes.squeeze_excitation` puts in:
`se_gate` (pool, two mat-vecs and the gate of an SE block in one kernel) and
`se_scaled_weight` (the same, multiplied into the input channels of the convolution that reads
the scaled block). Opaque: the schedule is written for these stages alone."""

from __future__ import annotations

from ..nn import squeeze_excitation as se
from ..testing import squeeze_excitation as se_ref
from ..x86.squeeze_excitation import schedule_squeeze_excitation
from .ops import OpPattern, register_op

register_op("se_gate", se.se_gate, schedule_squeeze_excitation, OpPattern.OPAQUE,
            reference=se_ref.se_gate_python)
register_op("se_scaled_weight", se.se_scaled_weight, schedule_squeeze_excitation,
            OpPattern.OPAQUE, reference=se_ref.se_scaled_weight_python)
