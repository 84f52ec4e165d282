"""Whether a fitted straight line is evidence for what is read off it.

A cause read off the in-process line ``fixed_us + per_sample_us x batch`` (an engine's fixed or
per-sample cost, what batching can share) is stated only when the line misses none of its own
points by as much as the effect, which a larger miss could produce from its own error;
otherwise the log quotes the measured points and names no cause.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

# The saving (share of compute per inference) the batching rules call little; a bound read off
# a fit's fixed part ("that is all batching can save") is stated only when the line misses
# none of its points by this much, since a larger miss could hide a saving the rules call real.
LITTLE_GAIN_SHARE = 0.10


@dataclass(frozen=True)
class FitCheck:
    """How far a fitted line misses the measured points (batch, µs per execution) it summarises."""

    points: tuple[tuple[int, float], ...]
    worst_batch: int
    worst_miss_share: float  # (fitted - measured) / measured at ``worst_batch``, signed

    def supports(self, effect_share: float) -> bool:
        """True when no point is missed by as much as ``effect_share`` (a share, sign ignored):
        then the effect the line attributes is larger than its own error."""
        return abs(self.worst_miss_share) < abs(effect_share)

    def supports_bound(self, fixed_share: float) -> bool:
        """True when the line's bound on what batching can save (its fixed share of a batch-1
        execution, counted as at least ``LITTLE_GAIN_SHARE``) is larger than its worst miss."""
        return self.supports(max(fixed_share, LITTLE_GAIN_SHARE))

    def bound_phrase(self, fixed_share: float) -> str:
        """Why a bound is not read off the line: its worst miss against the bound it would set."""
        return (
            f"{self.miss_phrase()}, not less than the larger of its fixed share of a batch-1 "
            f"execution ({fixed_share:.0%}) and the {LITTLE_GAIN_SHARE:.0%} saving the batching "
            "rules call little"
        )

    def miss_phrase(self) -> str:
        """'misses batch 1 by +12.7%': the worst point and by how much the line misses it."""
        return f"misses batch {self.worst_batch} by {100 * self.worst_miss_share:+.1f}%"


def check_fit(
    fixed_us: float, per_sample_us: float, us_per_execution: dict[int, float]
) -> FitCheck | None:
    """The line ``fixed_us + per_sample_us x batch`` against the points it was fitted to;
    None without a point above zero (nothing measured to check it against)."""
    points = tuple(sorted((b, t) for b, t in us_per_execution.items() if t > 0))
    if not points:
        return None
    misses = [((fixed_us + per_sample_us * b - t) / t, b) for b, t in points]
    share, batch = max(misses, key=lambda m: abs(m[0]))
    return FitCheck(points, batch, share)


def points_around(us_per_execution: dict[int, float], batch: float) -> list[tuple[int, float]]:
    """The measured points (batch, µs per execution) at ``batch``, or the nearest on either
    side of it (one where it lies beyond the measured batches)."""
    points = sorted(us_per_execution.items())
    sizes = [b for b, _ in points]
    at = bisect.bisect_left(sizes, batch)
    if at < len(sizes) and sizes[at] == batch:
        return [points[at]]
    return points[max(0, at - 1) : at + 1]


def per_sample_text(points: list[tuple[int, float]]) -> str:
    """Measured points per sample: '82,843 µs per sample at batch 1, 83,299 at batch 4'."""
    parts = [f"{us_figure(t / b)} at batch {b}" for b, t in points]
    if parts:
        parts[0] = parts[0].replace(" at ", " µs per sample at ", 1)
    return ", ".join(parts)


def us_figure(value: float) -> str:
    """Microseconds to a whole number from 100 up, to one decimal below."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"
