"""How the report's text writes a figure (shared by the experiment log and the HTML report)."""

from __future__ import annotations


def num(value: float | None, digits: int = 0) -> str:
    """A figure with thousands separators and ``digits`` decimals, or 'n/a' for None."""
    return "n/a" if value is None else f"{value:,.{digits}f}"
