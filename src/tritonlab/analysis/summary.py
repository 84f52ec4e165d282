"""A figure measured several times: its values, median, and a 95% interval.

The interval is Student's t interval for the mean (``mean ± t(0.975, n-1) · s/√n``, its lower
end clamped at 0 since every figure here is non-negative): with the three repeats tritonlab
takes by default it is wide, on purpose. It says how far a single
number could move on this machine. A figure measured once has no interval.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

# Two-sided 95% Student t quantiles by degrees of freedom.
_T_975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}


def t_quantile_975(df: int) -> float:
    """The 97.5% Student t quantile; between table rows the next smaller df is used."""
    if df >= 30:
        return 1.96 if df > 120 else _T_975[30]
    return _T_975[max(k for k in _T_975 if k <= df)]


@dataclass(frozen=True)
class Summary:
    """Repeated measurements of one figure."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: list[float | None]) -> Summary:
        return cls(tuple(float(v) for v in values if v is not None and math.isfinite(v)))

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def interval95(self) -> tuple[float, float] | None:
        if self.n < 2:
            return None
        mean = statistics.fmean(self.values)
        half = t_quantile_975(self.n - 1) * statistics.stdev(self.values) / math.sqrt(self.n)
        # Every figure tritonlab summarises (rates, times, batch sizes) is non-negative.
        return (max(0.0, mean - half), mean + half)

    @property
    def spread_pct(self) -> float | None:
        """(max - min) / median, in percent: the plain-language noise figure."""
        if self.n < 2 or not self.median:
            return None
        return 100.0 * (max(self.values) - min(self.values)) / self.median

    def text(
        self, digits: int = 0, unit: str = "", interval_label: str = "", brackets: str = "()"
    ) -> str:
        """The median with its interval, e.g. ``2,133 (1,834–2,431)``; "n/a" when unmeasured."""
        if self.median is None:
            return "n/a"
        text = f"{self.median:,.{digits}f}" + (f" {unit}" if unit else "")
        interval = self.interval95
        if interval:
            low, high = interval
            opening, closing = brackets[0], brackets[1]
            text += f" {opening}{interval_label}{low:,.{digits}f}–{high:,.{digits}f}{closing}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "values": list(self.values),
            "median": self.median,
            "mean": self.mean,
            "interval95": list(self.interval95) if self.interval95 else None,
            "spread_pct": self.spread_pct,
        }
