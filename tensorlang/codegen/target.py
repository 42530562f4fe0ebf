"""Compilation targets: parse `"llvm -mcpu=NAME -mattr=+avx2,..."` and describe the CPU.

The one place that knows the CPU: the codegen reads the vector width from here, the JIT asks for
the LLVM TargetMachine, and schedules read vector lanes, the vector register count, FMA and cache
sizes of the *current* target (`with tl.Target(...):`, `Target.current()`; the host when no scope
is entered) instead of holding constants. Without `-mcpu` the host CPU is detected, because
LLVM's default (generic x86-64) emits SSE code at a quarter of the speed of AVX-512.
`-mtriple=aarch64-linux-gnu` or `riscv64-linux-gnu` names another architecture (codegen/isa.py
describes those): code for it is compiled here and runs on such a machine.
"""

from __future__ import annotations

import contextvars
import functools
from typing import Literal, overload

import llvmlite.binding as llvm

from ..dtype import DType, as_dtype
from . import isa
from .cpuinfo import CacheSizes, caches_for_cpu, host_caches

# CPUs that LLVM knows with AVX-512 / AVX2, for a `-mcpu` given without `-mattr`.
_AVX512_CPUS = frozenset(
    "knl knm skylake-avx512 skx cascadelake cooperlake cannonlake icelake-client icelake-server "
    "tigerlake rocketlake sapphirerapids emeraldrapids graniterapids graniterapids-d "
    "diamondrapids znver4 znver5 x86-64-v4".split()
)
_AVX2_CPUS = frozenset(
    "haswell broadwell skylake alderlake raptorlake meteorlake arrowlake lunarlake gracemont "
    "znver1 znver2 znver3 bdver4 x86-64-v3".split()
)

# The targets entered with `with Target(...)`, innermost last. A context variable, so every
# thread (and asyncio task) has its own scope: a thread started without one sees the host.
_scope: contextvars.ContextVar[tuple[Target, ...]] = contextvars.ContextVar(
    "tensorlang_target_scope", default=()
)


class Target:
    """A code generation target, e.g. `Target("llvm")` (this host),
    `Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f")` or, for another architecture,
    `Target("llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod")`.

    `with Target("llvm -mcpu=haswell"):` makes it the current target (`Target.current()`) for
    the block: topi schedules and templates size their vectors and register blocks from it, and
    `tl.build` without a target compiles for it. Scopes nest and are per thread.

    Attributes:
        mcpu: the LLVM CPU name (the host's when not given).
        mattr: the feature flags given with `-mattr` (e.g. `("+avx2", "-avx512f")`).
        features: the LLVM feature string the machine code is generated for.
        triple: the LLVM target triple (this process's unless `-mtriple` names one).
        arch: the triple's architecture: "x86_64", "aarch64" or "riscv64".
    """

    __slots__ = ("mcpu", "mattr", "features", "triple", "arch", "_explicit_cpu", "_text")

    def __init__(self, spec: str = "llvm") -> None:
        if isinstance(spec, Target):
            spec = str(spec)
        if not isinstance(spec, str):
            raise TypeError(f"a target is a string like 'llvm -mcpu=NAME', got {spec!r}")
        words = spec.split()
        if not words or words[0] != "llvm":
            raise ValueError(f"unknown target {spec!r}: targets start with 'llvm'")
        mcpu: str | None = None
        mattr: tuple[str, ...] = ()
        triple: str | None = None
        for word in words[1:]:
            key, eq, value = word.partition("=")
            if key == "-mcpu" and eq and value:
                mcpu = value
            elif key == "-mtriple" and eq and value:
                triple = value
            elif key == "-mattr" and eq and value:
                mattr = tuple(a.strip() for a in value.split(",") if a.strip())
                bad = [a for a in mattr if a[0] not in "+-" or len(a) < 2]
                if bad:
                    raise ValueError(
                        f"bad -mattr entries {bad} in target {spec!r}: use +name/-name"
                    )
            else:
                raise ValueError(
                    f"unknown or malformed option {word!r} in target {spec!r}; "
                    "supported: -mtriple=TRIPLE, -mcpu=NAME, -mattr=+feat,-feat"
                )
        self.triple = triple or _host_triple()
        self.arch = isa.arch_of(self.triple)
        if self.arch not in isa.ARCHES:
            raise ValueError(f"unsupported architecture {self.arch!r} in target {spec!r}: "
                             f"use one of {', '.join(isa.ARCHES)}")
        foreign = self.arch != isa.arch_of(_host_triple())
        if foreign and mcpu == "native":
            raise ValueError(f"-mcpu=native names this machine's CPU, not a {self.arch} one: "
                             f"{spec!r}")
        self._explicit_cpu = foreign or (mcpu is not None and mcpu != "native")
        host_cpu, host_features = _host_cpu()
        if foreign:
            self.mcpu = mcpu or isa.default_cpu(self.arch)
        else:
            self.mcpu = mcpu if self._explicit_cpu else host_cpu
        self.mattr = mattr
        base = "" if self._explicit_cpu else host_features
        self.features = ",".join(x for x in (base, ",".join(mattr)) if x)
        parts = ["llvm"]
        if triple is not None:
            parts.append(f"-mtriple={triple}")
        if self._explicit_cpu and mcpu is not None:
            parts.append(f"-mcpu={self.mcpu}")
        if mattr:
            parts.append("-mattr=" + ",".join(mattr))
        self._text = " ".join(parts)

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Target({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)

    # -- the current-target scope ------------------------------------------------------------

    @overload
    @staticmethod
    def current(allow_none: Literal[False] = False) -> Target: ...

    @overload
    @staticmethod
    def current(allow_none: bool) -> Target | None: ...

    @staticmethod
    def current(allow_none: bool = False) -> Target | None:
        """The innermost target entered with `with Target(...)` in this thread; outside any
        scope the host (or None when `allow_none`, as TVM's `Target.current(allow_none=True)`)."""
        stack = _scope.get()
        if stack:
            return stack[-1]
        return None if allow_none else host_target()

    def __enter__(self) -> Target:
        _scope.set((*_scope.get(), self))
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _scope.get()
        if not stack or stack[-1] is not self:
            raise RuntimeError(f"target scope of {self} exited out of order")
        _scope.set(stack[:-1])

    # -- what schedules need to know ----------------------------------------------------------

    def _has(self, feature: str) -> bool | None:
        """Whether `feature` is on in the effective feature string (None when it is not named)."""
        return self._flags().get(feature)

    def _flags(self) -> dict[str, bool]:
        """Each feature named in the effective feature string: on or off (the last one wins)."""
        return {flag[1:]: flag[0] == "+" for flag in self.features.split(",") if flag}

    @property
    def runs_here(self) -> bool:
        """Whether this machine's architecture runs the target's code (`tl.build` for another
        gives a module to export and run there)."""
        return self.arch == isa.arch_of(_host_triple())

    @property
    def vector_bits(self) -> int:
        """The widest SIMD register in bits: 512 with AVX-512F, 256 with AVX2/AVX, else 128 on
        x86; NEON 128, SVE per CPU and RVV's fixed VLEN elsewhere (codegen/isa.py)."""
        if self.arch != "x86_64":
            return isa.vector_bits(self.arch, self.mcpu, self._flags())
        for feature, bits in (("avx512f", 512), ("avx2", 256), ("avx", 256)):
            state = self._has(feature)
            if state:
                return bits
            if state is None and self._explicit_cpu:
                if bits == 512 and self.mcpu in _AVX512_CPUS:
                    return 512
                if bits == 256 and (self.mcpu in _AVX2_CPUS or self.mcpu in _AVX512_CPUS):
                    return 256
        return 128

    def vector_lanes(self, dtype: DType | str = "float32") -> int:
        """How many elements of `dtype` fill one SIMD register (16 float32 with AVX-512, 8 with
        AVX2, 4 with SSE)."""
        return max(1, self.vector_bits // (as_dtype(dtype).itemsize * 8))

    @property
    def vector_registers(self) -> int:
        """Architectural SIMD registers: 32 with AVX-512 (zmm0-31), 16 with AVX/AVX2 or SSE on
        x86-64; 32 on aarch64 and RVV. A register block of accumulators must leave a few for
        operands."""
        if self.arch != "x86_64":
            return isa.VECTOR_REGISTERS
        return 32 if self.vector_bits == 512 else 16

    def operand_registers(self, loaded_vectors: int) -> int:
        """Vector registers the inner loop of a register block needs beyond its accumulators
        when each step loads `loaded_vectors` vectors and broadcasts scalars to multiply them
        with: those vectors, one register for the broadcast scalar and one of slack for the
        next step's loads (without it LLVM spills accumulators of an unrolled block), and where
        the FMA reads no memory (`isa.fma_reads_memory`) and the scalars it is fed are loaded
        into vector registers (`isa.scalars_in_vector_registers`: aarch64), registers for the
        broadcast operands in flight (`isa.LOAD_STORE_OPERANDS`)."""
        in_vectors = (not isa.fma_reads_memory(self.arch)
                      and isa.scalars_in_vector_registers(self.arch))
        return loaded_vectors + 2 + (isa.LOAD_STORE_OPERANDS if in_vectors else 0)

    @property
    def has_fma(self) -> bool:
        """Whether fused multiply-add instructions exist (every AVX2 and AVX-512 CPU that LLVM
        names; an explicit `-mattr=-fma` turns it off; every aarch64, riscv64 with V, F or D)."""
        if self.arch != "x86_64":
            return isa.has_fma(self.arch, self._flags())
        state = self._has("fma")
        if state is not None:
            return state
        return self._explicit_cpu and (self.mcpu in _AVX2_CPUS or self.mcpu in _AVX512_CPUS)

    @property
    def caches(self) -> CacheSizes:
        """L1d / L2 / L3 sizes in bytes: read from the OS for the host, the typical sizes of the
        family for a CPU named with `-mcpu` (tensorlang.codegen.cpuinfo.CACHE_DEFAULTS)."""
        if self._explicit_cpu:
            return caches_for_cpu(self.mcpu)
        return host_caches(self.mcpu)

    @property
    def cpu_signature(self) -> str:
        """What tuned configs depend on, as text: CPU name, vector width and FMA (e.g.
        "haswell avx2-256 fma"). Logs store it; a record applies where the signature matches."""
        if self.arch != "x86_64":
            name = isa.isa_name(self.arch, self.vector_bits, self._flags())
        else:
            name = {512: "avx512", 256: "avx2"}.get(self.vector_bits, "sse")
        return f"{self.mcpu} {name}-{self.vector_bits}{' fma' if self.has_fma else ''}"

    def function_attributes(self) -> str:
        """The LLVM function attributes that make the generated code use this CPU fully."""
        attrs = [f'"target-cpu"="{self.mcpu}"']
        if self.features:
            attrs.append(f'"target-features"="{self.features}"')
        width = self.vector_bits
        if self.arch != "x86_64":
            return " ".join([*attrs, *isa.function_attributes(self.arch, width)])
        # Without these LLVM prefers (and may split to) 256-bit vectors on AVX-512 CPUs.
        attrs.append(f'"prefer-vector-width"="{width}"')
        attrs.append(f'"min-legal-vector-width"="{width}"')
        return " ".join(attrs)

    def target_machine(self, pic: bool = False) -> llvm.TargetMachine:
        """The cached LLVM TargetMachine (opt level 3); `pic` for code in a shared library."""
        return _target_machine(self.mcpu, self.features, pic, self.triple)

    def module_header(self) -> tuple[str, str]:
        """The data layout and the triple that an LLVM module for this target declares."""
        return _module_header(self.mcpu, self.features, self.triple)


@functools.cache
def _host_cpu() -> tuple[str, str]:
    """This machine's LLVM CPU name and feature string, asked of LLVM once: every LLVM call waits
    for llvmlite's global lock, which a kernel compiling on another thread holds for up to
    a whole optimisation pipeline (topi.graph builds lower one kernel while LLVM compiles the
    last)."""
    return llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


@functools.cache
def _host_triple() -> str:
    """This process's LLVM triple (asked once, for the reason `_host_cpu` gives)."""
    return llvm.get_process_triple()


@functools.cache
def _module_header(cpu: str, features: str, triple: str) -> tuple[str, str]:
    """See `Target.module_header` (cached for the reason `_host_cpu` gives)."""
    return str(_target_machine(cpu, features, False, triple).target_data), triple


@functools.cache
def _target_machine(cpu: str, features: str, pic: bool,
                    triple: str | None = None) -> llvm.TargetMachine:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    if triple is None or triple == _host_triple():
        target = llvm.Target.from_default_triple()
    else:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        target = llvm.Target.from_triple(triple)
    return target.create_target_machine(
        cpu=cpu,
        features=features,
        opt=3,
        reloc="pic" if pic else "default",
        codemodel="jitdefault" if not pic else "default",
    )


@functools.cache
def host_target() -> Target:
    """`Target("llvm")`: this machine's CPU and features (detected once)."""
    return Target("llvm")


def as_target(value: Target | str | None) -> Target:
    """A Target from a Target, a target string, or None (the current target)."""
    if value is None:
        return Target.current()
    if isinstance(value, Target):
        return value
    if isinstance(value, str):
        return Target(value)
    raise TypeError(f"target must be a string like 'llvm' or a Target, got {type(value).__name__}")
