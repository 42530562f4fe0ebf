"""The C toolchain of a target: the compiler that links its shared libraries and runners, and
the emulator that runs them on this machine.

For this machine's architecture the system compiler (`$CC`, else `cc`/`gcc`); for another one the
GNU cross compiler `<arch>-linux-gnu-gcc` (`$TL_CC_AARCH64`, `$TL_CC_RISCV64` override it), as
Debian's `gcc-aarch64-linux-gnu` / `gcc-riscv64-linux-gnu` install it. Libraries and runners for
another architecture run on such a device, or here under qemu user mode (`emulator_command`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ..codegen.target import Target

#: Debian packages that give the cross compiler and the target's C library, per architecture.
CROSS_PACKAGES = {
    "aarch64": "gcc-aarch64-linux-gnu libc6-dev-arm64-cross",
    "riscv64": "gcc-riscv64-linux-gnu libc6-dev-riscv64-cross",
}

#: Flags for the runtime's C code: riscv64 links the hard-float ABI, as LLVM's code uses.
_ARCH_FLAGS = {"riscv64": ("-march=rv64gc", "-mabi=lp64d")}


def c_compiler(target: Target) -> str:
    """The C compiler that builds code for `target`.

    Raises:
        RuntimeError: none is installed (the message names what to install).
    """
    if target.runs_here:
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise RuntimeError("building a library needs a C compiler (cc) on PATH")
        return cc
    name = os.environ.get(f"TL_CC_{target.arch.upper()}") or f"{target.arch}-linux-gnu-gcc"
    cc = shutil.which(name)
    if cc is None:
        raise RuntimeError(
            f"building for {target} needs the cross compiler {name} "
            f"(apt-get install {CROSS_PACKAGES[target.arch]}, or set TL_CC_{target.arch.upper()})")
    return cc


def link_shared(target: Target, sources: Sequence[Path], out: Path,
                libs: Sequence[str] = ()) -> None:
    """Compile and link C sources, assembly and object files into the shared library `out`.

    Raises:
        RuntimeError: no compiler, or it failed (its output is in the message).
    """
    run_compiler(target, ["-shared", "-fPIC", "-O2", "-Wl,-Bsymbolic", "-o", str(out),
                          *map(str, sources), "-lpthread", "-lm", *libs])


def run_compiler(target: Target, args: Sequence[str]) -> None:
    """Run the target's C compiler with `args` (and the target's ABI flags).

    Raises:
        RuntimeError: no compiler, or it failed (its output is in the message).
    """
    cmd = [c_compiler(target), *_ARCH_FLAGS.get(target.arch, ()), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr}")


def require_native(what: str, target: Target) -> None:
    """Raise a RuntimeError unless this machine runs `target`'s code (`what`: "kernel NAME",
    "this model") naming what to do instead."""
    if not target.runs_here:
        raise RuntimeError(
            f"{what} is compiled for {target.arch} ({target}) and this machine cannot run it: "
            f"export_library(path) and run the library on a {target.arch} device "
            "(`tensorlang runner --target ...` writes a runner)")


def sysroot(target: Target) -> Path:
    """Where the cross C library of `target` lies (qemu's `-L`): /usr/<arch>-linux-gnu."""
    return Path(f"/usr/{target.arch}-linux-gnu")


def emulator_command(target: Target) -> list[str] | None:
    """The qemu user-mode command that runs `target`'s programs on this machine with the
    target's vector width (SVE length, RVV VLEN), or None when qemu for it is not installed."""
    if target.runs_here:
        return []
    qemu = shutil.which(f"qemu-{target.arch}")
    if qemu is None:
        return None
    bits = target.vector_bits
    if target.arch == "aarch64":
        cpu = f"max,sve-max-vq={bits // 128}" if bits > 128 else "max"
    else:
        cpu = f"rv64,v=true,vlen={bits},elen=64,vext_spec=v1.0"
    return [qemu, "-cpu", cpu, "-L", str(sysroot(target))]


RUNNER_SOURCE = Path(__file__).with_name("runner.c")
"""The native runner's C source: it runs an exported library's `tlg_run` on .npy files."""


def build_runner(target: Target, path: str | os.PathLike[str]) -> Path:
    """Compile the native runner for `target` into the program `path` (see runner.c).

    Raises:
        RuntimeError: no compiler for the target, or it failed.
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    run_compiler(target, ["-O2", "-std=c11", "-o", str(out), str(RUNNER_SOURCE), "-ldl"])
    return out
