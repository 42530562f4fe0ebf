"""Compilation targets: parse `"llvm -mcpu=NAME -mattr=+avx2,..."` and describe the CPU.

The codegen reads the vector width from here and the JIT asks for the LLVM TargetMachine. Without
`-mcpu` the host CPU is detected, because LLVM's default (generic x86-64) emits SSE code at a
quarter of the speed of AVX-512.
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm

from ..dtype import DType

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


class Target:
    """A code generation target, e.g. `Target("llvm")` (this host) or
    `Target("llvm -mcpu=skylake-avx512 -mattr=+avx512f")`.

    Attributes:
        mcpu: the LLVM CPU name (the host's when not given).
        mattr: the feature flags given with `-mattr` (e.g. `("+avx2", "-avx512f")`).
        features: the LLVM feature string the machine code is generated for.
    """

    __slots__ = ("mcpu", "mattr", "features", "_explicit_cpu", "_text")

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
        for word in words[1:]:
            key, eq, value = word.partition("=")
            if key == "-mcpu" and eq and value:
                mcpu = value
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
                    "supported: -mcpu=NAME, -mattr=+feat,-feat"
                )
        self._explicit_cpu = mcpu is not None and mcpu != "native"
        self.mcpu = mcpu if self._explicit_cpu else llvm.get_host_cpu_name()
        self.mattr = mattr
        base = "" if self._explicit_cpu else llvm.get_host_cpu_features().flatten()
        self.features = ",".join(x for x in (base, ",".join(mattr)) if x)
        parts = ["llvm"]
        if self._explicit_cpu:
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

    def _has(self, feature: str) -> bool | None:
        """Whether `feature` is on in the effective feature string (None when it is not named)."""
        state = None
        for flag in self.features.split(","):
            if flag[1:] == feature:
                state = flag[0] == "+"
        return state

    @property
    def vector_bits(self) -> int:
        """The widest SIMD register in bits: 512 with AVX-512F, 256 with AVX2/AVX, else 128."""
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

    def vector_lanes(self, dtype: DType) -> int:
        """How many elements of `dtype` fill one SIMD register."""
        return max(1, self.vector_bits // (dtype.itemsize * 8))

    def function_attributes(self) -> str:
        """The LLVM function attributes that make the generated code use this CPU fully."""
        attrs = [f'"target-cpu"="{self.mcpu}"']
        if self.features:
            attrs.append(f'"target-features"="{self.features}"')
        width = self.vector_bits
        # Without these LLVM prefers (and may split to) 256-bit vectors on AVX-512 CPUs.
        attrs.append(f'"prefer-vector-width"="{width}"')
        attrs.append(f'"min-legal-vector-width"="{width}"')
        return " ".join(attrs)

    def target_machine(self, pic: bool = False) -> llvm.TargetMachine:
        """The cached LLVM TargetMachine (opt level 3); `pic` for code in a shared library."""
        return _target_machine(self.mcpu, self.features, pic)


@functools.cache
def _target_machine(cpu: str, features: str, pic: bool) -> llvm.TargetMachine:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=cpu,
        features=features,
        opt=3,
        reloc="pic" if pic else "default",
        codemodel="jitdefault" if not pic else "default",
    )


def as_target(value: Target | str | None) -> Target:
    """A Target from a Target, a target string, or None (this host)."""
    if value is None:
        return Target("llvm")
    if isinstance(value, Target):
        return value
    if isinstance(value, str):
        return Target(value)
    raise TypeError(f"target must be a string like 'llvm' or a Target, got {type(value).__name__}")
