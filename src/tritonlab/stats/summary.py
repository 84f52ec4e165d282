"""A figure measured several times: its values, the round each came from, median and range.

The spread shown next to a figure is the range of its repeats (min–max): what the data
supports with three to five repeats, never negative and never clamped. Intervals for a
*difference* between two configurations live in ``verdicts.py``, which pairs repeats by the
round they were measured in. A figure measured once has no spread.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from tritonlab.records import NOT_STORED, Record


@dataclass(frozen=True)
class Summary(Record):
    """Repeated measurements of one figure; ``rounds[i]`` is the round of ``values[i]`` (on a
    cluster, ``"node#round"``: cells pair only within a node). Stored with its median, min, max
    and spread (%)."""

    DERIVED = ("median", ("min", "low"), ("max", "high"), "spread_pct")

    values: tuple[float, ...]
    rounds: tuple[int | str, ...] = ()
    # The spread of the configuration's own server process (log units, ``process_term.py``):
    # nonzero when every value came from one process that lived the whole run (co-loaded).
    process_sd_log: Annotated[float, NOT_STORED] = 0.0
    # Which process that was (a configuration of one run): two figures of one process (one
    # configuration at two loads) share its speed, and their verdict holds no term.
    process: Annotated[str, NOT_STORED] = ""

    @classmethod
    def of(
        cls,
        values: Sequence[float | None],
        rounds: Sequence[int | str] | None = None,
        process_sd_log: float = 0.0,
        process: str = "",
    ) -> Summary:
        """The finite values of ``values`` with their rounds (numbered from 1 when not given);
        None, NaN and infinities are dropped."""
        numbered = rounds if rounds is not None else range(1, len(values) + 1)
        keep = [
            (float(v), r)
            for v, r in zip(values, numbered, strict=True)
            if v is not None and math.isfinite(v)
        ]
        return cls(tuple(v for v, _ in keep), tuple(r for _, r in keep), process_sd_log, process)

    @property
    def n(self) -> int:
        """How many repeats have a value."""
        return len(self.values)

    @property
    def median(self) -> float | None:
        """The median of the repeats (the figure's unit); None without values."""
        return statistics.median(self.values) if self.values else None

    @property
    def low(self) -> float | None:
        """The lowest repeat (the figure's unit); None without values."""
        return min(self.values) if self.values else None

    @property
    def high(self) -> float | None:
        """The highest repeat (the figure's unit); None without values."""
        return max(self.values) if self.values else None

    @property
    def range(self) -> tuple[float, float] | None:
        """(min, max) of the repeats; None below two repeats."""
        return (min(self.values), max(self.values)) if self.n >= 2 else None

    @property
    def spread_pct(self) -> float | None:
        """(max - min) / median, in percent: the plain-language noise figure."""
        spread, median = self.range, self.median
        return 100.0 * (spread[1] - spread[0]) / median if spread and median else None

    def by_round(self) -> dict[int | str, float]:
        """Round -> value, for pairing repeats measured in the same round."""
        return dict(zip(self.rounds, self.values, strict=False))

    def over(self, rounds: frozenset[int | str]) -> Summary:
        """The repeats measured in ``rounds`` only (a ranking over the blocks every compared
        figure has: issue 36 audit, medians over 28 blocks set beside medians over 10)."""
        keep = [(v, r) for v, r in zip(self.values, self.rounds, strict=False) if r in rounds]
        return Summary(
            tuple(v for v, _ in keep), tuple(r for _, r in keep), self.process_sd_log, self.process
        )

    def text(self, digits: int = 0, unit: str = "") -> str:
        """The median with the range of the repeats, e.g. ``2,133 (1,834–2,431)``; with up to
        two more digits where ``digits`` would show a range that varied as one number
        (``25.6 (25.4–25.9)``, not ``26 (26–26)``)."""
        if self.median is None:
            return "n/a"
        return span_text(self.median, self.range, digits, unit)


# Two figures that differ by at least this share are never printed as one number (a median
# that rounds to its range's end, a range that rounds to one value).
SHOWN_GAP = 0.001


def span_digits(spread: tuple[float, float] | None, digits: int = 0, *medians: float) -> int:
    """``digits``, or up to two more where fewer would print ``spread`` (low, high), or two
    ``medians`` quoted side by side, as one number although they differ (issue 36 audit:
    ``26 (26–26)`` for 25.7–26.5; a pick's ``34`` beside its runner-up's ``34.21``)."""
    values = [*(spread or ()), *medians]
    pairs = [
        (a, b)
        for i, a in enumerate(values)
        for b in values[i + 1 :]
        if abs(a - b) >= SHOWN_GAP * max(abs(a), abs(b))  # a smaller gap may read as equal
    ]
    for _ in range(2):
        if all(f"{a:,.{digits}f}" != f"{b:,.{digits}f}" for a, b in pairs):
            break
        digits += 1
    return digits


def span_text(
    median: float, spread: tuple[float, float] | None, digits: int = 0, unit: str = ""
) -> str:
    """``median`` with ``spread`` (low, high) as ``2,133 (1,834–2,431)``, with the digits
    ``span_digits`` gives."""
    digits = span_digits(spread, digits, median)
    text = f"{median:,.{digits}f}" + (f" {unit}" if unit else "")
    if spread:
        text += f" ({spread[0]:,.{digits}f}–{spread[1]:,.{digits}f})"
    return text


def column_digits(summaries: Sequence[Summary], digits: int = 0) -> int:
    """The digits one table column (or a sentence setting figures side by side) prints every
    summary with: each one's range shown and the medians told apart (issue 36 audit: a
    baseline "26" beside "26.6", a change of +2.3% to the eye where the pair read +1.4%, and
    "26 (25–27)" beside "26.2 (25.7–26.5)" for equal medians)."""
    medians = [m for x in summaries if (m := x.median) is not None]
    return max((span_digits(x.range, digits, *medians) for x in summaries), default=digits)
