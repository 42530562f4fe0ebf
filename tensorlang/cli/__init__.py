"""The `tensorlang` command line: an application on top of tensorlang, autotune and topi.

    tensorlang tune matmul --shape 512,512,512 --trials 200 --log matmul.jsonl
    tensorlang best matmul.jsonl
    tensorlang plot matmul.jsonl -o curve.png
    tensorlang lower matmul --shape 512,512,512 --log matmul.jsonl
    tensorlang merge farm.jsonl laptop.jsonl -o best.jsonl

Not part of the `tensorlang` library: nothing in the library imports it (tests/test_layering.py).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import warnings
from collections.abc import Sequence

import click

from .commands import cli


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str,
                      lineno: int, line: str | None = None) -> str:
    return f"tensorlang: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on `argv` (default: sys.argv) and return the exit code.

    Errors a user can cause (bad arguments, unknown ops, unreadable logs, a kernel that
    disagrees with numpy) print one line on stderr and give a non-zero code: 2 for usage errors,
    1 for the others.
    """
    formatwarning, warnings.formatwarning = warnings.formatwarning, _one_line_warning
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _interrupt) if in_main_thread else None
    try:
        code = cli.main(args=list(argv) if argv is not None else None, prog_name="tensorlang",
                        standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as err:
        err.show()
        return err.exit_code
    except click.UsageError as err:
        hint = f" (see '{err.ctx.command_path} --help')" if err.ctx is not None else ""
        click.echo(f"tensorlang: error: {err.format_message()}{hint}", err=True)
        return err.exit_code
    except click.ClickException as err:
        click.echo(f"tensorlang: error: {err.format_message()}", err=True)
        return err.exit_code
    except click.Abort:
        click.echo("tensorlang: interrupted", err=True)
        return 130
    finally:
        warnings.formatwarning = formatwarning
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return code if isinstance(code, int) else 0


#: Seconds a Ctrl-C leaves the command to unwind (stop its workers, close its log) before it
#: leaves anyway.
INTERRUPT_GRACE = 10.0


def _interrupt(signum: int, frame: object) -> None:
    """Ctrl-C: a KeyboardInterrupt, as Python raises it, whose unwinding stops the measurement
    workers and ends with "tensorlang: interrupted" and code 130. The unwinding may wait on a
    worker (a build in flight, which runs in a session of its own and got no signal) or on a
    lock the interrupt left taken: past `INTERRUPT_GRACE` seconds the workers are killed and
    the process leaves with the same line and code."""
    timer = threading.Timer(INTERRUPT_GRACE, _leave_now)
    timer.daemon = True
    timer.start()
    raise KeyboardInterrupt


def _leave_now() -> None:
    from autotune.workers import kill_all_workers

    kill_all_workers()
    sys.stderr.write("tensorlang: interrupted\n")
    sys.stderr.flush()
    os._exit(130)


__all__ = ["cli", "main"]
