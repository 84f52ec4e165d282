"""stats/robust.py: the signed-rank interval's ranks, its coverage with outliers, and the
coverage the block engine's stopping rule leaves it (simulated, 2,000 comparisons each)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tritonlab.decisions.adaptive import TARGET_HALF_WIDTH_PCT
from tritonlab.stats.robust import (
    MIN_BLOCKS,
    critical_rank,
    half_width_pct,
    hodges_lehmann_interval,
)
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import MIN_EFFECT_PCT, compare

SIMULATIONS = 2000


def test_critical_ranks_match_the_published_table() -> None:
    # Two-sided 0.05 critical values of T (reject when T <= value): n=6: 0, 8: 3, 10: 8,
    # 12: 13, 15: 25, 20: 52 (Wilcoxon signed-rank tables); k is that value + 1.
    for n, value in {6: 0, 8: 3, 10: 8, 12: 13, 15: 25, 20: 52}.items():
        assert critical_rank(n, 0.95) == value + 1
    assert critical_rank(5, 0.95) == 0  # no 95% interval exists with 5 pairs


def test_below_min_blocks_falls_back_to_the_t_interval() -> None:
    assert hodges_lehmann_interval([0.1, 0.2, 0.15, 0.12, 0.11], 0.95) is None
    ref = Summary.of([100.0] * 3)
    verdict = compare("throughput", ref, Summary.of([110.0, 112.0, 111.0]))
    assert "t-interval" in verdict.method
    many = compare(
        "throughput", Summary.of([100.0] * 12), Summary.of([110.0 + i for i in range(12)])
    )
    assert "signed-rank" in many.method and many.pairs == 12 and many.word.value == "higher"


def _blocks(rng: np.random.Generator, n: int, truth: float, sd: float) -> np.ndarray:
    """Per-block log-ratios: normal noise, and 15% of the blocks disturbed by 0.3-1.0 in log
    units on either side (a random block order makes a disturbance as likely to hit the
    reference's cell as the variant's)."""
    values = truth + rng.normal(0.0, sd, n)
    hit = rng.random(n) < 0.15
    values[hit] += rng.choice([-1.0, 1.0], hit.sum()) * rng.uniform(0.3, 1.0, hit.sum())
    return values


def _interval(values: np.ndarray) -> tuple[float, float]:
    interval = hodges_lehmann_interval(values.tolist(), 0.95)
    assert interval is not None
    return interval.low, interval.high


@pytest.mark.parametrize("truth", [0.0, 0.2])
def test_coverage_with_outliers_is_near_95_percent(truth: float) -> None:
    rng = np.random.default_rng(19)
    covered = 0
    t_widths, hl_widths = [], []
    for _ in range(SIMULATIONS):
        values = _blocks(rng, 20, truth, 0.1)
        low, high = _interval(values)
        covered += low <= truth <= high
        hl_widths.append(high - low)
        t_widths.append(2 * 2.093 * values.std(ddof=1) / math.sqrt(20))
    assert 0.93 <= covered / SIMULATIONS <= 0.97
    # The point of it: narrower than the t-interval when blocks are disturbed.
    assert float(np.median(hl_widths)) < 0.8 * float(np.median(t_widths))


def _sequential(
    rng: np.random.Generator, truth: float, sd: float, decided_too: bool = False
) -> tuple[float, float, int]:
    """The block engine's rule: 10 blocks, then one at a time while the throughput interval is
    wider than its target, up to 40 blocks (``decided_too``: also while it is undecided, the
    rule not taken, for contrast)."""
    values = _blocks(rng, 40, truth, sd)
    for n in range(10, 41):
        low, high = _interval(values[:n])
        low_pct, high_pct = 100 * math.expm1(low), 100 * math.expm1(high)
        decided = low > 0 or high < 0 or (low_pct >= -MIN_EFFECT_PCT and high_pct <= MIN_EFFECT_PCT)
        if half_width_pct(low_pct, high_pct) <= TARGET_HALF_WIDTH_PCT and (
            decided or not decided_too
        ):
            break
    return low, high, n


@pytest.mark.parametrize("truth", [0.0, 0.1])
def test_the_stopping_rule_keeps_coverage_near_95_percent(truth: float) -> None:
    rng = np.random.default_rng(20)
    covered = 0
    stops = []
    for _ in range(SIMULATIONS):
        low, high, n = _sequential(rng, truth, 0.08)
        covered += low <= truth <= high
        stops.append(n)
    assert 0.93 <= covered / SIMULATIONS <= 0.97
    assert min(stops) < 20 and max(stops) == 40  # it stopped early and ran to the limit


def test_half_width_is_symmetric_in_log_units() -> None:
    assert half_width_pct(-5.0, 5.0) == pytest.approx(100 * math.expm1(math.log(1.05 / 0.95) / 2))
    assert half_width_pct(0.0, 21.0) == pytest.approx(10.0)
    assert MIN_BLOCKS == 6


def test_waiting_for_a_decided_verdict_would_inflate_errors() -> None:
    """Why the rule is on width alone: also waiting for "decided" loses coverage at no change."""
    rng = np.random.default_rng(21)
    covered = sum(
        low <= 0.0 <= high
        for low, high, _ in (_sequential(rng, 0.0, 0.08, decided_too=True) for _ in range(500))
    )
    assert covered / 500 < 0.93
