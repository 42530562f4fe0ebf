"""The instruction mix of a kernel's hottest inner loop, read from its assembly, on x86-64,
aarch64 (NEON, SVE) and riscv64 (RVV).

What register blocking buys shows in the inner loop before any device runs it: how many vector
FMAs each loaded byte feeds (a 6 x 4 block of 128-bit accumulators fed by 4 vector loads and 6
broadcasts), and whether accumulators were spilled to the stack. `inner_loop_mix(asm, target)`
finds the innermost loops (a label and the last branch back to it, with no loop inside), takes
the one with the most vector FMAs and counts its instructions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .target import Target

#: per architecture: vector FMA, stack references (spills and reloads)
_FMA = {
    "x86_64": re.compile(r"^v?fn?m(add|sub)\d+[ps][sd]\b.*%[xyz]mm"),
    "aarch64": re.compile(r"^fml[as]\s+([vz]\d+\.(\d*s|h|d|\d*[hd]))"),
    "riscv64": re.compile(r"^vf(n?macc|n?madd|n?msac|n?msub)\.v[vf]"),
}
_STACK = {
    "x86_64": re.compile(r"\((%rsp|%rbp)\)|\b(%rsp|%rbp)\)"),
    "aarch64": re.compile(r"\[sp\b"),
    "riscv64": re.compile(r"\(sp\)|\(s0\)"),
}
_LABEL = re.compile(r"^([.\w$]+):")
_BRANCH = {
    "x86_64": re.compile(r"^j\w+\s+([.\w$]+)"),
    "aarch64": re.compile(r"^(?:b(?:\.\w+)?|cbn?z|tbn?z)\s+(?:\w+,\s*)*(?:#\d+,\s*)?([.\w$]+)$"),
    "riscv64": re.compile(r"^(?:j|b\w+)\s+(?:\w+,\s*)*([.\w$]+)$"),
}


@dataclass(frozen=True)
class LoopMix:
    """Counts of one inner loop's instructions (per iteration of the loop)."""

    instructions: int
    fmas: int
    loaded_bytes: int
    loads: int
    stack_refs: int

    @property
    def fmas_per_byte(self) -> float:
        """Vector FMAs per byte loaded from memory: the reuse a register block achieves."""
        return self.fmas / self.loaded_bytes if self.loaded_bytes else float("inf")


def _load_bytes(arch: str, op: str, operands: str, vector_bytes: int) -> int:
    """Bytes an instruction loads (0 for one that loads nothing)."""
    if arch == "aarch64":
        if op in ("ld1r", "ld1rw", "ld1rqw") or op.startswith("ld1r"):
            return 4
        if op in ("ldr", "ldur", "ldp", "ldnp", "ld1", "ld1w", "ld1b", "ld1d"):
            pair = 2 if op in ("ldp", "ldnp") else 1
            reg = operands.split(",")[0].strip("{} ")
            width = {"q": 16, "d": 8, "s": 4, "h": 2, "b": 1, "x": 8, "w": 4}.get(reg[:1], 0)
            if reg.startswith(("z", "v")):
                width = vector_bytes
            return pair * width
        return 0
    if arch == "riscv64":
        if re.match(r"^vl(s?e|e\d+ff)\d+\.v$|^vle\d+\.v$|^vl\dre\d+\.v$", op):
            return vector_bytes
        return {"flw": 4, "fld": 8, "lw": 4, "ld": 8}.get(op, 0)
    # x86-64 (AT&T): a memory source operand is read; the destination is the last operand.
    parts = [p.strip() for p in re.split(r",(?![^(]*\))", operands)]
    if len(parts) < 2 or not any("(" in p for p in parts[:-1]) or op.startswith("lea"):
        return 0
    if "1to" in operands or "broadcast" in op:
        return 4
    return {"z": 64, "y": 32, "x": 16}.get(parts[-1].lstrip("%")[:1], 8)


def _instructions(asm: str) -> list[str]:
    lines = []
    for raw in asm.splitlines():
        line = raw.split("//")[0].split("#")[0].strip() if not raw.lstrip().startswith("#") \
            else ""
        if line and (not line.startswith(".") or _LABEL.match(line)):
            lines.append(line)
    return lines


def inner_loop_mix(asm: str, target: Target) -> LoopMix | None:
    """The mix of the innermost loop with the most vector FMAs in `asm` (None without loops)."""
    arch, lines = target.arch, _instructions(asm)
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := _LABEL.match(line))}
    loops = []
    for end, line in enumerate(lines):
        m = _BRANCH[arch].match(line)
        if m and labels.get(m.group(1), end + 1) <= end:
            loops.append((labels[m.group(1)], end))
    innermost = [(a, b) for a, b in loops
                 if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in loops)]
    best = None
    for start, end in innermost:
        mix = _count(lines[start + 1:end + 1], arch, target.vector_bits // 8)
        if best is None or mix.fmas > best.fmas:
            best = mix
    return best


def _count(body: list[str], arch: str, vector_bytes: int) -> LoopMix:
    fmas = loads = loaded = stack = instructions = 0
    for line in body:
        if _LABEL.match(line):
            continue
        instructions += 1
        op, _, operands = line.replace("\t", " ").partition(" ")
        operands = operands.strip()
        fmas += bool(_FMA[arch].match(line))
        nbytes = _load_bytes(arch, op, operands, vector_bytes)
        loads += nbytes > 0
        loaded += nbytes
        stack += bool(_STACK[arch].search(operands))
    return LoopMix(instructions, fmas, loaded, loads, stack)


def spills(asm: str, target: Target) -> int:
    """Stack references in the whole kernel: register spills and reloads (and frame setup)."""
    return sum(bool(_STACK[target.arch].search(line.replace("\t", " ").partition(" ")[2]))
               for line in _instructions(asm))
