"""The instruction mix of a kernel's hottest inner loop, read from its assembly, on x86-64,
aarch64 (NEON, SVE) and riscv64 (RVV).

What register blocking buys shows in the inner loop before any device runs it: how many vector
FMAs each loaded byte feeds (a 6 x 4 block of 128-bit accumulators fed by 4 vector loads and 6
broadcasts), and whether accumulators were spilled to the stack or kept there (a register
block left in a stack buffer). `inner_loops(asm, target)` finds the innermost loops (a label and
the last branch back to it, with no loop inside and no other loop's label: LLVM may place an
outer loop's latch before its body, then the branch back to it spans the latch of its inner loop
and none of that loop's body) and counts each one's instructions; `inner_loop_mix` takes the one
with the most vector FMAs.

A stack reference is a fixed slot of the stack (a constant offset, no index register, which
RVV's gathers and strided loads name in an operand of their own: where spills, reloads and a
block of accumulators kept in memory live) addressed from the stack pointer, from the frame
pointer in a function that sets one up (`%rbp`, `x29`, `s0`; elsewhere that register is one
more general register and the addresses based on it are data), or from a register that holds
only stack addresses (set from the stack pointer, stepped by constants) and that the loop does
not step; and, in a loop of FMAs, a store into an array on the stack (a block of accumulators
that a loop over blocks keeps in memory). A loop reading an array that lives on the stack (a
packed operand of a kernel run on the calling thread) reads data there, as it would from the
heap: no stack reference.
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
#: per architecture: the stack pointer, the frame pointer and the instruction setting it up, a
#: fixed slot addressed from a base register (`{reg}`), and any address based on it
_STACK = {
    "x86_64": ("%rsp", "%rbp", re.compile(r"^movq?\s+%rsp,\s*%rbp$"),
               r"(?:^|[\s,])-?\d*\({reg}\)", r"\({reg}[,)]"),
    "aarch64": ("sp", "x29", re.compile(r"^(mov\s+x29,\s*sp|add\s+x29,\s*sp\b)"),
                r"\[{reg}(?:,\s*#-?\d+(?:,\s*mul vl)?)?\]", r"\[{reg}\b"),
    "riscv64": ("sp", "s0", re.compile(r"^addi\s+(s0|fp),\s*sp\b"), r"-?\d*\({reg}\)",
                r"\({reg}\)"),
}
#: the line comment of each architecture's assembly (`#` starts an immediate on aarch64)
_COMMENT = {"x86_64": "#", "aarch64": "//", "riscv64": "#"}
_LABEL = re.compile(r"^([.\w$]+):")
#: RVV's indexed (gathers, scatters) and strided vector loads and stores
_INDEXED_RVV = re.compile(r"^v[ls](?:[ou]xei|se)\d+\.v$")
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
    label: str = ""
    function: str = ""

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


def _instructions(asm: str, arch: str) -> list[str]:
    lines = []
    for raw in asm.splitlines():
        line = raw.split(_COMMENT[arch])[0].strip()
        if line and (not line.startswith(".") or _LABEL.match(line)):
            lines.append(line)
    return lines


def _function_starts(lines: list[str]) -> list[tuple[int, str]]:
    """(line, name) of each function's entry label: labels other than local ones (`.L...`)."""
    return [(i, m.group(1)) for i, line in enumerate(lines)
            if (m := _LABEL.match(line)) and not m.group(1).startswith(".L")]


#: per architecture: an instruction that sets a register (group 1 or 2) from the stack pointer,
#: and one that steps a register by a constant
_FROM_STACK = {
    "x86_64": (re.compile(r"^(?:leaq\s+-?\d*\(%rsp\)|movq\s+%rsp),\s*(%\w+)$"),
               re.compile(r"^(?:addq|subq|incq|decq)\s+(?:\$-?\d+,\s*)?(%\w+)$")),
    "aarch64": (re.compile(r"^(?:add|sub)\s+(x\d+),\s*sp\b|^mov\s+(x\d+),\s*sp$"),
                re.compile(r"^(?:add|sub)\s+(x\d+),\s*\1,\s*#\d+$")),
    "riscv64": (re.compile(r"^(?:addi\s+(\w+),\s*sp,|mv\s+(\w+),\s*sp$)"),
                re.compile(r"^addi\s+(\w+),\s*\1,\s*-?\d+$")),
}


def _written(line: str, arch: str) -> str | None:
    """The register an instruction writes (its destination operand), roughly: the last operand
    on x86 (AT&T), the first elsewhere unless the instruction stores."""
    op, _, operands = line.replace("\t", " ").partition(" ")
    parts = [p.strip() for p in re.split(r",(?![^(\[]*[)\]])", operands) if p.strip()]
    if not parts:
        return None
    if arch == "x86_64":
        return parts[-1] if parts[-1].startswith("%") else None
    if re.match(r"^(st|sw|sd|sh|sb|fs[wd]|vs)", op):
        return None
    return parts[0]


def _stack_bases(lines: list[str], arch: str) -> set[str]:
    """The registers that address the stack in the function made of `lines`."""
    pointer, frame, frame_setup = _STACK[arch][:3]
    set_from_stack, stepped = _FROM_STACK[arch]
    body = [line.replace("\t", " ") for line in lines]
    derived = {next(g for g in m.groups() if g) for line in body
               if (m := set_from_stack.match(line))}
    for line in body:  # a register also written otherwise may hold any address
        reg = _written(line, arch)
        if reg in derived and not set_from_stack.match(line) and not stepped.match(line):
            derived.discard(reg)
    if any(frame_setup.match(line) for line in body):
        derived.add(frame)
    return derived | {pointer}


def _stack_patterns(arch: str, bases: set[str], loop: list[str]) -> tuple[re.Pattern,
                                                                           re.Pattern]:
    """(fixed stack slots, any stack address) addressed from `bases`; a register that `loop`
    steps walks an array and addresses no fixed slot."""
    stepped = _FROM_STACK[arch][1]
    walking = {m.group(1) for line in loop if (m := stepped.match(line.replace("\t", " ")))}
    slot, anywhere = _STACK[arch][3:]
    return (re.compile("|".join(slot.format(reg=re.escape(r)) for r in sorted(bases - walking))),
            re.compile("|".join(anywhere.format(reg=re.escape(r)) for r in sorted(bases))))


def _indexed(arch: str, op: str) -> bool:
    """Whether a vector access adds an index or stride register to its base (RVV names them in
    operands of their own: `vluxei64.v v8, (a4), v16`, `vlse32.v v8, (a4), a5`): an array's
    elements, not a fixed slot."""
    return arch == "riscv64" and _INDEXED_RVV.match(op) is not None


def _stores(arch: str, op: str, operands: str) -> bool:
    """Whether an instruction writes memory (its memory operand is the destination)."""
    if arch == "x86_64":
        return "(" in re.split(r",(?![^(]*\))", operands)[-1]
    if arch == "aarch64":
        return op.startswith("st")
    return re.match(r"^(s[bhwd]|fs[hwd]|vs)", op) is not None


def inner_loops(asm: str, target: Target) -> list[LoopMix]:
    """The mix of every innermost loop in `asm`, in the order of the assembly."""
    arch, lines = target.arch, _instructions(asm, target.arch)
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := _LABEL.match(line))}
    loops = []
    for end, line in enumerate(lines):
        m = _BRANCH[arch].match(line)
        if m and labels.get(m.group(1), end + 1) <= end:
            loops.append((labels[m.group(1)], end))
    innermost = [(a, b) for a, b in loops
                 if not any((a <= c and d <= b or a < c <= b) and (c, d) != (a, b)
                            for c, d in loops)]
    starts = _function_starts(lines) + [(len(lines), "")]
    found = []
    for start, end in innermost:
        k = max((k for k, (at, _) in enumerate(starts[:-1]) if at <= start), default=None)
        begin, name = starts[k] if k is not None else (0, "")
        stop = starts[k + 1][0] if k is not None else len(lines)
        body = lines[start + 1:end + 1]
        stack = _stack_patterns(arch, _stack_bases(lines[begin:stop], arch), body)
        mix = _count(body, arch, target.vector_bits // 8, stack)
        found.append(LoopMix(mix.instructions, mix.fmas, mix.loaded_bytes, mix.loads,
                             mix.stack_refs, lines[start].rstrip(":"), name))
    return found


def inner_loop_mix(asm: str, target: Target) -> LoopMix | None:
    """The mix of the innermost loop with the most vector FMAs in `asm` (None without loops)."""
    best = None
    for mix in inner_loops(asm, target):
        if best is None or mix.fmas > best.fmas:
            best = mix
    return best


def _count(body: list[str], arch: str, vector_bytes: int,
           stack: tuple[re.Pattern, re.Pattern]) -> LoopMix:
    """The mix of a loop's `body`. Its stack references: the fixed slots it reads or writes and,
    in a loop of FMAs, its stores into an array on the stack (a block of accumulators that a
    loop over blocks keeps in memory)."""
    fixed, anywhere = stack
    fmas = loads = loaded = stack_refs = instructions = array_stores = 0
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
        if fixed.search(operands) and not _indexed(arch, op):
            stack_refs += 1
        elif anywhere.search(operands) and _stores(arch, op, operands):
            array_stores += 1
    return LoopMix(instructions, fmas, loaded, loads, stack_refs + array_stores * (fmas > 0))


def spills(asm: str, target: Target) -> int:
    """Stack references in the whole kernel: register spills and reloads (and frame setup)."""
    arch, lines = target.arch, _instructions(asm, target.arch)
    starts = [at for at, _ in _function_starts(lines)] or [0]
    total = 0
    for begin, end in zip([0, *starts[1:]], [*starts[1:], len(lines)]):
        stack, _ = _stack_patterns(arch, _stack_bases(lines[begin:end], arch), [])
        for line in lines[begin:end]:
            op, _, operands = line.replace("\t", " ").partition(" ")
            total += bool(stack.search(operands)) and not _indexed(arch, op)
    return total


def stack_loops(asm: str, target: Target) -> list[LoopMix]:
    """The innermost loops of `asm` that read or write the stack: spilled registers, or a
    buffer (a register block) that stayed in memory."""
    return [mix for mix in inner_loops(asm, target) if mix.stack_refs]
