"""The `tensorlang` command line: an application on top of tensorlang, autotune and topi.

    tensorlang tune matmul --shape 512,512,512 --trials 200 --log matmul.jsonl
    tensorlang best matmul.jsonl
    tensorlang plot matmul.jsonl -o curve.png
    tensorlang lower matmul --shape 512,512,512 --log matmul.jsonl
    tensorlang merge farm.jsonl laptop.jsonl -o best.jsonl

Not part of the `tensorlang` library: nothing in the library imports it (tests/test_layering.py).
"""

from __future__ import annotations

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
    return code if isinstance(code, int) else 0


__all__ = ["cli", "main"]
