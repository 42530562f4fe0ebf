"""How this machine reaches a device: a command that runs a program there, and how files get
there and back.

Three set-ups share one interface. qemu on this machine (or a device that mounts this machine's
staging directory at the same path) sees the staged files where they lie. A device that mounts
it elsewhere names that place (`remote_dir`). A device that mounts nothing gets each file copied
by `push` (and outputs copied back by `pull`): a command with `{local}` and `{remote}` in it,
such as `["scp", "-q", "{local}", "board:{remote}"]` or `["adb", "push", "{local}",
"{remote}"]`, or a Python function `(local_path, remote_path) -> None`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

#: A way to copy one file: a command template with `{local}` and `{remote}`, or a function.
Transfer = Sequence[str] | Callable[[Path, str], None]


def _check_transfer(name: str, transfer: Transfer | None) -> None:
    if transfer is None or callable(transfer):
        return
    if isinstance(transfer, str) or not all(isinstance(a, str) for a in transfer):
        raise TypeError(f"{name} is a list of strings (a command with {{local}} and {{remote}}) "
                        f"or a function (local, remote), got {transfer!r}")
    words = " ".join(transfer)
    if "{local}" not in words or "{remote}" not in words:
        raise ValueError(f"the {name} command must name the file's two places as {{local}} and "
                         f"{{remote}}, e.g. ['scp', '-q', '{{local}}', 'board:{{remote}}'], "
                         f"got {list(transfer)}")


class DeviceLink:
    """Runs programs on the device and moves files between the staging directory and it.

    Args:
        command: the prefix that runs a program on the device (["ssh", "board"], or qemu's
            command); empty: run the program here as it is.
        push: how a staged file reaches the device (see the module docstring); None: the device
            sees the staging directory itself, at `remote_dir` or at its own path.
        pull: how an output comes back from the device; None: the device wrote it into the
            staging directory.
        remote_dir: the directory the device sees the files in (it must exist there).
    """

    def __init__(self, command: Sequence[str], push: Transfer | None = None,
                 pull: Transfer | None = None, remote_dir: str | None = None):
        _check_transfer("push", push)
        _check_transfer("pull", pull)
        if push is not None and not remote_dir:
            raise ValueError("a device that files are pushed to needs remote_dir: the directory "
                             "they go to there (e.g. '/tmp/tl-tune', made once by hand)")
        self.command = list(command)
        self.push_with = push
        self.pull_with = pull
        self.remote_dir = remote_dir

    def remote(self, local: Path, staging: Path) -> str:
        """Where the device sees the staged file `local` (inside `staging`)."""
        if self.remote_dir is None:
            return str(local)
        return str(PurePosixPath(self.remote_dir) / local.relative_to(staging).as_posix())

    def push(self, local: Path, remote: str, timeout: float) -> None:
        """Copy `local` to `remote` on the device (nothing to do where it sees the file)."""
        if self.push_with is not None:
            _transfer(self.push_with, local, remote, timeout, "copying a file to the device")

    def pull(self, remote: str, local: Path, timeout: float) -> None:
        """Copy `remote` from the device to `local` (nothing to do where it wrote the file)."""
        if self.pull_with is not None:
            _transfer(self.pull_with, local, remote, timeout, "copying a file from the device")

    def call(self, args: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """Run `command + args`; the whole process group is killed past `timeout`.

        Raises:
            subprocess.TimeoutExpired: it ran longer than `timeout` seconds.
            OSError: the command cannot be started.
        """
        return run_bounded([*self.command, *args], timeout)


def _transfer(how: Transfer, local: Path, remote: str, timeout: float, what: str) -> None:
    if callable(how):
        how(local, remote)
        return
    argv = [a.replace("{local}", str(local)).replace("{remote}", remote) for a in how]
    proc = run_bounded(argv, timeout)
    if proc.returncode != 0:
        raise OSError(f"{what} failed ({' '.join(argv)}: exit status {proc.returncode}): "
                      f"{proc.stderr.strip()[-500:]}")


def run_bounded(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `argv` in a session of its own and kill the session past `timeout` seconds (a
    subprocess's own timeout kills the direct child only: an emulator's or ssh's children
    would live on).

    Raises:
        subprocess.TimeoutExpired: it ran longer than `timeout` seconds.
        OSError: it cannot be started.
    """
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def check_command(command: Sequence[str]) -> list[str]:
    """`command` as a list, checked: strings, and a first word that names a program.

    Raises:
        TypeError: not a list of strings.
        ValueError: its program is not found.
    """
    if isinstance(command, str) or not all(isinstance(a, str) for a in command):
        raise TypeError(f"the device command is a list of strings such as ['ssh', 'board'], "
                        f"got {command!r}")
    if command and shutil.which(command[0]) is None:
        raise ValueError(f"the device command's program {command[0]!r} is not found (on PATH "
                         "or as a path)")
    return list(command)
