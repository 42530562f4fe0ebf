"""What a device says of its CPU, as a tuning log records it.

The native runner's `--describe` prints the device's uname, its hardware capabilities, aarch64's
MIDR and the lines of /proc/cpuinfo that name the CPU. `DeviceCPU.parse` reads them into the
machine a log names beside each timing ("hostname (cpu)", as `hostcpu` names this machine).
Under qemu's user mode the program sees the emulated CPU's MIDR and capabilities but this
machine's /proc/cpuinfo: the description then says that the device is emulated, and on what.
"""

from __future__ import annotations

from dataclasses import dataclass

#: aarch64 CPUs by MIDR implementer and part number, named as LLVM's -mcpu names them.
_AARCH64_PARTS = {
    (0x41, 0xD03): "cortex-a53", (0x41, 0xD04): "cortex-a35", (0x41, 0xD05): "cortex-a55",
    (0x41, 0xD07): "cortex-a57", (0x41, 0xD08): "cortex-a72", (0x41, 0xD09): "cortex-a73",
    (0x41, 0xD0A): "cortex-a75", (0x41, 0xD0B): "cortex-a76", (0x41, 0xD0C): "neoverse-n1",
    (0x41, 0xD0D): "cortex-a77", (0x41, 0xD40): "neoverse-v1", (0x41, 0xD41): "cortex-a78",
    (0x41, 0xD44): "cortex-x1", (0x41, 0xD46): "cortex-a510", (0x41, 0xD47): "cortex-a710",
    (0x41, 0xD48): "cortex-x2", (0x41, 0xD49): "neoverse-n2", (0x41, 0xD4D): "cortex-a715",
    (0x41, 0xD4E): "cortex-x3", (0x41, 0xD4F): "neoverse-v2", (0x41, 0xD80): "cortex-a520",
    (0x41, 0xD81): "cortex-a720", (0x41, 0xD82): "cortex-x4", (0x41, 0xD84): "neoverse-v3",
    (0x41, 0xD8E): "neoverse-n3", (0x46, 0x001): "a64fx", (0x48, 0xD01): "tsv110",
    (0xC0, 0xAC3): "ampere1", (0xC0, 0xAC4): "ampere1a",
    # Implementer 0 is reserved for software; qemu's "max" CPU takes part 'Q'.
    (0x00, 0x051): "qemu-max",
}
_IMPLEMENTERS = {0x41: "arm", 0x61: "apple", 0x51: "qualcomm", 0x4E: "nvidia", 0xC0: "ampere"}
#: riscv64's single-letter extensions in the order an ISA string spells them.
_RISCV_ORDER = "imafdqcbv"


@dataclass(frozen=True)
class DeviceCPU:
    """A device as its runner describes it.

    Attributes:
        hostname: the device's network name.
        arch: its architecture, as uname says ("aarch64", "riscv64", ...).
        cpu: its CPU: LLVM's name of an aarch64 core (several for big.LITTLE, "+"-joined),
            riscv64's uarch and ISA string, or the model name; empty when it says none.
        cpus: CPUs online.
        emulated_on: the CPU that really runs the code when the device is an emulator (qemu
            user mode on this machine), else empty.
        raw: every `key: value` line of the description (hwcap, midr, ...).
    """

    hostname: str
    arch: str
    cpu: str
    cpus: int
    emulated_on: str = ""
    raw: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """The device as logs name it: "hostname (arch cpu)", with what emulates it."""
        what = " ".join(x for x in (self.arch, self.cpu) if x)
        on = f", emulated on {self.emulated_on}" if self.emulated_on else ""
        return f"{self.hostname} ({what}{on})"

    @staticmethod
    def parse(text: str) -> DeviceCPU:
        """Read the output of `runner --describe`.

        Raises:
            ValueError: it names no architecture (not a runner's description).
        """
        raw = tuple((k.strip(), v.strip()) for k, _, v in
                    (line.partition(":") for line in text.splitlines() if ":" in line))
        fields = dict(raw)
        arch = fields.get("machine", "")
        if not arch:
            raise ValueError(f"not a device description (no 'machine:' line): {text[:200]!r}")
        cpuinfo = [tuple(p.strip() for p in v.partition(":")[::2])
                   for k, v in raw if k == "cpuinfo"]
        # x86's cpuinfo keys on a machine of another architecture: qemu's user mode shows this
        # machine's /proc/cpuinfo to the emulated program.
        models = [v for k, v in cpuinfo if k == "model name"]
        foreign = arch != "x86_64" and any(k == "vendor_id" for k, _ in cpuinfo)
        emulated_on = f"x86_64 {models[0]}" if foreign and models else (
            "x86_64" if foreign else "")
        own = [] if foreign else cpuinfo
        return DeviceCPU(fields.get("hostname", "device"), arch,
                         _cpu_name(arch, own, fields), int(fields.get("cpus", "0") or 0),
                         emulated_on, raw)


def _cpu_name(arch: str, cpuinfo: list[tuple[str, ...]], fields: dict[str, str]) -> str:
    """The CPU's name from the device's own cpuinfo lines, its MIDR or its capabilities."""
    if arch == "aarch64":
        implementers = [int(v, 0) for k, v in cpuinfo if k == "CPU implementer"]
        parts = [int(v, 0) for k, v in cpuinfo if k == "CPU part"]
        cores = list(dict.fromkeys(zip(implementers, parts)))
        if not cores and "midr" in fields:
            midr = int(fields["midr"], 0)
            cores = [(midr >> 24 & 0xFF, midr >> 4 & 0xFFF)]
        return "+".join(_aarch64_core(*c) for c in cores)
    if arch == "riscv64":
        uarch = next((v for k, v in cpuinfo if k == "uarch"), "")
        isa = next((v for k, v in cpuinfo if k == "isa"), "") or _riscv_isa(fields)
        return " ".join(x for x in (uarch, isa) if x)
    return next((v for k, v in cpuinfo if k == "model name"), "")


def _aarch64_core(implementer: int, part: int) -> str:
    name = _AARCH64_PARTS.get((implementer, part))
    if name:
        return name
    vendor = _IMPLEMENTERS.get(implementer, f"implementer 0x{implementer:02x}")
    return f"{vendor} part 0x{part:03x}"


def _riscv_isa(fields: dict[str, str]) -> str:
    """riscv64's ISA string from AT_HWCAP, one bit per extension letter ('a' is bit 0)."""
    if "hwcap" not in fields:
        return ""
    bits = int(fields["hwcap"], 0)
    letters = [chr(ord("a") + b) for b in range(26) if bits >> b & 1]
    ordered = sorted(letters, key=lambda c: _RISCV_ORDER.find(c) if c in _RISCV_ORDER
                     else 100 + ord(c))
    return "rv64" + "".join(ordered)
