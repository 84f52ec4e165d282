"""A paired interval that one bad block cannot blow up: Hodges-Lehmann with the signed-rank CI.

The verdicts pair two configurations by block and work on the per-block log-ratios. With many
short blocks (the block engine measures tens of them), a Student-t interval over their mean lets
one disturbed block widen it and move it; the distribution-free alternative used here is the
Hodges-Lehmann estimate (the median of the Walsh averages ``(x_i + x_j) / 2, i <= j``) with the
exact Wilcoxon signed-rank confidence interval: the Walsh averages of ranks ``k`` and ``M-k+1``,
``M = n(n+1)/2``, where ``k`` is the largest count whose lower tail under the signed-rank null
distribution is at most ``alpha/2`` (Hollander & Wolfe, *Nonparametric Statistical Methods*,
section 3.3). Its coverage is at least the nominal level for any distribution of the log-ratios
that is symmetric about the true change, which is what a randomised block order gives a
disturbance (it is as likely to hit the reference's cell as the variant's); the test suite checks
that coverage on simulated comparisons with outliers.

Below ``MIN_BLOCKS`` blocks no signed-rank interval at 95% exists (with 5 blocks the smallest
two-sided p-value is 1/16), so callers fall back to the t-interval and say so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import accumulate

MIN_BLOCKS = 6


@cache
def _signed_rank_counts(n: int) -> tuple[int, ...]:
    """How many of the 2**n sign patterns give each signed-rank sum T+ = 0 .. n(n+1)/2."""
    counts = [1]
    for rank in range(1, n + 1):
        grown = [0] * (len(counts) + rank)
        for total, ways in enumerate(counts):
            grown[total] += ways
            grown[total + rank] += ways
        counts = grown
    return tuple(counts)


def critical_rank(n: int, confidence: float) -> int:
    """The largest ``k`` with P(T+ <= k - 1) <= (1 - confidence) / 2 under the null, n blocks;
    0 when no interval at that level exists."""
    alpha_half = (1.0 - confidence) / 2.0  # the tail grows with k: count the sums within it
    return sum(1 for tail in accumulate(_signed_rank_counts(n)) if tail / 2.0**n <= alpha_half)


@dataclass(frozen=True)
class CentreInterval:
    """The centre of log values (log-ratios of paired rounds, or one figure's log repeats) and
    its two-sided interval, in log units."""

    estimate: float
    low: float
    high: float
    n: int
    robust: bool  # Hodges-Lehmann with the signed-rank interval; False: mean, t-interval
    p_value: float | None = None  # two-sided, for a centre of 0 (None when not asked for)


def hodges_lehmann_interval(values: Sequence[float], confidence: float) -> CentreInterval | None:
    """Hodges-Lehmann estimate with the exact signed-rank interval; None below MIN_BLOCKS or
    where no interval at ``confidence`` exists."""
    n = len(values)
    if n < MIN_BLOCKS:
        return None
    k = critical_rank(n, confidence)
    if k == 0:
        return None
    # the Walsh averages: every pairwise mean (i <= j), sorted
    walsh = sorted((values[i] + values[j]) / 2.0 for i in range(n) for j in range(i, n))
    return CentreInterval(statistics.median(walsh), walsh[k - 1], walsh[-k], n, robust=True)


def signed_rank_p_value(values: Sequence[float]) -> float | None:
    """Two-sided exact p-value of "no change" (zeros dropped, ties by mid-rank approximated by
    scipy's normal approximation); None when every value is zero."""
    nonzero = [v for v in values if v != 0.0]
    if not nonzero:
        return None
    from scipy import stats

    return float(stats.wilcoxon(nonzero).pvalue)


# What a quoted half-width is, for the pages that quote one (issue 36 audit: "±2.7%" for an
# interval of +125.0% to +137.2%, read as points of change, which are ±6.1 there).
HALF_WIDTH_MEANING = (
    "a half-width is half the 95% interval's width on the log-ratio scale, stated as a "
    "percentage (exp(h) - 1), not in percentage points of the change: an interval of a large "
    "change spans more points than twice its half-width"
)


def half_width_pct(low_pct: float, high_pct: float) -> float:
    """The half-width h of a log-ratio interval given in percent, stated as exp(h) - 1."""
    h = (math.log1p(high_pct / 100.0) - math.log1p(low_pct / 100.0)) / 2.0
    return 100.0 * math.expm1(h)
