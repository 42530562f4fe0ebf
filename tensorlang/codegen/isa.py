"""What aarch64 and riscv64 CPUs offer: vector width, vector registers, FMA, LLVM attributes.

The non-x86 half of `Target`'s description (x86 stays in target.py, where AVX-512/AVX2 CPUs are
named). Vectors are fixed-length LLVM vectors throughout, so one schedule source serves every
architecture:
- aarch64: NEON's 128-bit q registers; on CPUs with SVE wider than 128 bits (`SVE_BITS`, e.g.
  neoverse-v1's 256) the functions get `vscale_range(min, 16)`, from which LLVM lowers the fixed
  vectors with SVE z registers and predicates (code runs on any vector length >= that width);
- riscv64: RVV with `-mattr=+v` at a fixed VLEN of 128 bits (`zvl128b`, the minimum `+v`
  guarantees), or the width of an explicit `+zvl256b`, `+zvl512b`, ... .
"""

from __future__ import annotations

#: LLVM CPU names whose SVE registers are wider than NEON's, with their width in bits.
#: (neoverse-n2/v2, cortex-x2/a510/a710 have 128-bit SVE2: NEON-width vectors serve them.)
SVE_BITS = {"neoverse-v1": 256, "a64fx": 512}

#: aarch64 CPUs with the int8 dot product (`sdot`/`udot`) without `-mattr=+dotprod`.
DOTPROD_CPUS = frozenset(
    "cortex-a55 cortex-a65 cortex-a75 cortex-a76 cortex-a77 cortex-a78 cortex-a710 cortex-x1 "
    "cortex-x2 cortex-x3 neoverse-n1 neoverse-n2 neoverse-v1 neoverse-v2 neoverse-e1 a64fx "
    "apple-a12 apple-a13 apple-a14 apple-a15 apple-a16 apple-m1 apple-m2 apple-m3".split()
)

#: aarch64 CPUs with the mixed-sign dot product `usdot` (FEAT_I8MM) without `-mattr=+i8mm`.
I8MM_CPUS = frozenset("neoverse-v1 neoverse-n2 neoverse-v2 cortex-a710 cortex-x2 cortex-x3 "
                      "apple-m2 apple-m3".split())

VECTOR_REGISTERS = 32
"""Architectural vector registers on aarch64 (v0-v31, z0-z31) and RVV (v0-v31)."""

#: Broadcast operands a register block's inner loop holds in vector registers on aarch64, beyond
#: those of x86: `fmla` cannot read its scalar operand from memory, so each one is loaded (`ldr s`
#: for `fmla` by element, `ld1r`) into a register of its own, which is a vector register (s0-s31
#: are the low lanes of v0-v31), and the next step's loads overlap the current step's FMAs.
#: Without them the NEON 3x3 conv's block of 2 x 14 accumulators spilled in its inner loop (2
#: stack references); 2 x 13 spills nothing.
LOAD_STORE_OPERANDS = 2

ARCHES = ("x86_64", "aarch64", "riscv64")
"""The architectures a target triple may name (its first component)."""


def arch_of(triple: str) -> str:
    """The architecture of an LLVM triple ("x86_64", "aarch64", "riscv64")."""
    arch = triple.split("-", 1)[0]
    return {"arm64": "aarch64", "amd64": "x86_64"}.get(arch, arch)


def default_cpu(arch: str) -> str:
    """The LLVM CPU name used for a foreign triple given without `-mcpu`."""
    return "generic-rv64" if arch == "riscv64" else "generic"


def _zvl_bits(flags: dict[str, bool]) -> int:
    widths = [int(name[3:-1]) for name, on in flags.items()
              if on and name.startswith("zvl") and name.endswith("b") and name[3:-1].isdigit()]
    return max(widths, default=128)


def vector_bits(arch: str, mcpu: str, flags: dict[str, bool]) -> int:
    """The vector width (bits) that schedules and codegen use on `arch`: NEON 128, SVE per CPU,
    RVV the fixed VLEN (a riscv64 target without V still gets 128: LLVM splits those vectors
    into scalar code)."""
    if arch == "aarch64":
        if flags.get("sve") is False:
            return 128
        return SVE_BITS.get(mcpu, 128)
    return _zvl_bits(flags) if flags.get("v") else 128


def has_fma(arch: str, flags: dict[str, bool]) -> bool:
    """aarch64 always has `fmla`; riscv64 has `vfmacc` with V and `fmadd` with F or D."""
    if arch == "aarch64":
        return True
    return any(flags.get(f) for f in ("v", "f", "d"))


def fma_reads_memory(arch: str) -> bool:
    """Whether a vector FMA can take an operand straight from memory: x86's `vfmadd231ps` folds
    a load or a `{1toN}` broadcast; aarch64 (`fmla`) and RISC-V (`vfmacc`) are load/store ISAs,
    whose operands must first be loaded into registers."""
    return arch == "x86_64"


def scalars_in_vector_registers(arch: str) -> bool:
    """Whether a float scalar loaded for a vector FMA occupies a vector register: on aarch64 the
    scalar registers are lanes of the vector ones; RISC-V's f0-f31 are a file of their own, from
    which `vfmacc.vf` reads its scalar (its 2 x 14 conv block spills nothing)."""
    return arch == "aarch64"


def has_int8_dot(arch: str, mcpu: str, flags: dict[str, bool]) -> bool:
    """Whether an aarch64 target has `sdot`/`udot` (+dotprod, or a CPU that carries it)."""
    return _aarch64_feature(arch, mcpu, flags, "dotprod", DOTPROD_CPUS)


def has_i8mm(arch: str, mcpu: str, flags: dict[str, bool]) -> bool:
    """Whether an aarch64 target has `usdot` (+i8mm, or a CPU that carries it)."""
    return _aarch64_feature(arch, mcpu, flags, "i8mm", I8MM_CPUS)


def _aarch64_feature(arch: str, mcpu: str, flags: dict[str, bool], feature: str,
                     cpus: frozenset[str]) -> bool:
    if arch != "aarch64":
        return False
    state = flags.get(feature)
    return state if state is not None else mcpu in cpus


def isa_name(arch: str, bits: int, flags: dict[str, bool]) -> str:
    """The vector instruction set in a CPU signature: "neon", "sve" or "rvv" (or "scalar")."""
    if arch == "aarch64":
        return "sve" if bits > 128 else "neon"
    return "rvv" if flags.get("v") else "scalar"


def function_attributes(arch: str, bits: int) -> list[str]:
    """LLVM function attributes beyond CPU and features: `vscale_range` where SVE registers are
    wider than NEON's, which makes LLVM lower fixed-length vectors with SVE."""
    if arch == "aarch64" and bits > 128:
        return [f"vscale_range({bits // 128},16)"]
    return []
