"""Which CPU a process runs on, and whether code compiled for a target may be timed there.

Measurement happens wherever a runner lives: this machine, or any machine of a tuning farm. A
timing only means something on the CPU the code was compiled for, so every build is for a target
with its CPU spelled out, and runners compare that target with the CPU they report.
"""

from __future__ import annotations

import functools
import socket
from dataclasses import dataclass

import tensorlang as tl


@dataclass(frozen=True)
class HostCPU:
    """A machine as a runner reports it.

    Attributes:
        hostname: the machine's network name.
        cpu: LLVM's name of its CPU (e.g. "rocketlake").
        features: the CPU features LLVM detects as present (e.g. "avx512f").
    """

    hostname: str
    cpu: str
    features: frozenset[str]

    def describe(self) -> str:
        """The machine as logs name it: "hostname (cpu)"."""
        return f"{self.hostname} ({self.cpu})"

    def can_time(self, target: str) -> bool:
        """Whether code built for `target` (a target with an explicit CPU, see `resolve_target`)
        runs on this machine's CPU and times as it would on the target's."""
        t = tl.Target(target)
        needed = {f[1:] for f in t.features.split(",") if f.startswith("+")}
        return t.mcpu == self.cpu and needed <= self.features


@functools.cache
def this_host() -> HostCPU:
    """The machine this process runs on."""
    host = tl.Target("llvm")
    features = frozenset(f[1:] for f in host.features.split(",") if f.startswith("+"))
    return HostCPU(socket.gethostname(), host.mcpu, features)


def resolve_target(target: str) -> str:
    """`target` with its CPU spelled out: "llvm" means the CPU of the machine that runs the
    tuning, and code built for it on another machine must still be for that CPU. A target of
    another architecture is explicit as it is (its CPU defaults to LLVM's generic one)."""
    t = tl.Target(target)
    if "-mcpu=" in str(t) or not t.runs_here:
        return str(t)
    return f"llvm -mcpu={t.mcpu}" + (f" -mattr={t.features}" if t.features else "")
