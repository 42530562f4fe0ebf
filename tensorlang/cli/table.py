"""Plain-text tables for the terminal: text columns aligned left, numbers right."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> str:
    """Rows of cells under headers; `align` has one letter per column, "l" or "r"."""
    if len(align) != len(headers):
        raise ValueError(f"align {align!r} must have one letter per column ({len(headers)})")
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) if a == "l" else str(c).rjust(w)
                         for c, w, a in zip(cells, widths, align)).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])
