"""What the target CPU offers beyond its instruction set: cache sizes.

For schedules that size cache tiles (`Target.caches`). The host's come from the operating system
(`/sys/devices/system/cpu/cpu0/cache` on Linux); a CPU named with `-mcpu` gets the typical sizes
of its family from `CACHE_DEFAULTS`, since the machine that will run the code is not this one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

_KIB = 1024


@dataclass(frozen=True)
class CacheSizes:
    """Data cache sizes in bytes: L1d and L2 of one core, L3 as the OS or the family reports it
    (shared by the cores of a socket, so a schedule should count on a fraction of it)."""

    l1d: int
    l2: int
    l3: int


def _kib(l1d: int, l2: int, l3: int) -> CacheSizes:
    return CacheSizes(l1d * _KIB, l2 * _KIB, l3 * _KIB)


#: Typical per-core L1d / L2 and per-socket L3 of each family (KiB), for targets named with
#: `-mcpu`. Parts differ in L3, rarely in L1d/L2, and schedules tile for L1d/L2.
CACHE_DEFAULTS: dict[str, CacheSizes] = {
    **dict.fromkeys(("haswell", "broadwell", "skylake", "x86-64-v3"), _kib(32, 256, 8192)),
    **dict.fromkeys(("skylake-avx512", "skx", "cascadelake", "cooperlake", "x86-64-v4"),
                    _kib(32, 1024, 16384)),
    **dict.fromkeys(("icelake-client", "tigerlake", "rocketlake"), _kib(48, 512, 12288)),
    "icelake-server": _kib(48, 1280, 24576),
    **dict.fromkeys(("alderlake", "raptorlake", "meteorlake", "arrowlake", "lunarlake"),
                    _kib(48, 1280, 24576)),
    **dict.fromkeys(("sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d",
                     "diamondrapids"), _kib(48, 2048, 65536)),
    **dict.fromkeys(("znver1", "znver2"), _kib(32, 512, 16384)),
    "znver3": _kib(32, 512, 32768),
    "znver4": _kib(32, 1024, 32768),
    "znver5": _kib(48, 1024, 32768),
    # aarch64: Graviton2 / Graviton3, a phone big core, Apple's performance cores (L2 shared by
    # a cluster, no L3: the L2 stands in for it).
    "neoverse-n1": _kib(64, 1024, 32768),
    "neoverse-v1": _kib(64, 1024, 32768),
    **dict.fromkeys(("neoverse-n2", "neoverse-v2"), _kib(64, 1024, 32768)),
    **dict.fromkeys(("cortex-a76", "cortex-a77", "cortex-a78"), _kib(64, 512, 4096)),
    **dict.fromkeys(("apple-m1", "apple-m2"), _kib(128, 12288, 12288)),
}

#: Any other CPU (x86-64, x86-64-v2, older or unknown names): a conservative Haswell-class guess.
GENERIC_CACHES = _kib(32, 256, 8192)


def caches_for_cpu(mcpu: str) -> CacheSizes:
    """The typical cache sizes of the CPU family `mcpu` (an LLVM CPU name)."""
    return CACHE_DEFAULTS.get(mcpu, GENERIC_CACHES)


def _parse_size(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": _KIB, "M": _KIB * _KIB, "G": _KIB ** 3}.get(text[-1:], 1)
    digits = text.rstrip("KMG")
    return int(digits) * scale if digits.isdigit() else None


def read_sysfs_caches(root: Path) -> CacheSizes | None:
    """The data caches listed under `root` (a Linux `.../cpu0/cache` directory), or None when
    the directory is missing or lists no L1 data cache."""
    found: dict[int, int] = {}
    try:
        for index in sorted(root.glob("index*")):
            kind = (index / "type").read_text().strip()
            if kind not in ("Data", "Unified"):
                continue
            level = int((index / "level").read_text())
            size = _parse_size((index / "size").read_text())
            if size:
                found[level] = size
    except (OSError, ValueError):
        return None
    if 1 not in found:
        return None
    l2 = found.get(2, GENERIC_CACHES.l2)
    return CacheSizes(found[1], l2, found.get(3, l2))


@functools.cache
def host_caches(host_cpu: str) -> CacheSizes:
    """This machine's cache sizes from the OS, else the typical ones of its CPU family."""
    return read_sysfs_caches(Path("/sys/devices/system/cpu/cpu0/cache")) or caches_for_cpu(host_cpu)
