"""The calibration benchmark's statistics (``stats/calibration.py``): the three readings, the
leave-one-out reference, the tallies, and the coverage of the block verdicts on simulated runs
with a planted effect judged against references left out of each run."""

from __future__ import annotations

import math
import random

import pytest

from tritonlab.stats.calibration import (
    STABILITY_BAND_PCT,
    Reading,
    Tally,
    block_reading,
    independent_runs_reading,
    leave_one_out,
    one_window_reading,
    pooled_change_pct,
    run_means,
    wilson_interval,
)


def _noisy_blocks(rng: random.Random, blocks: int, change: float, sd: float = 0.14):
    """Two configurations' throughput by block: a slow drift both share, independent noise on
    each cell (log-normal, with an occasional disturbed cell of either sign), and a true
    change of ``change`` (log units) on the variant."""
    reference, variant = {}, {}
    drift = 0.0
    for block in range(1, blocks + 1):
        drift = 0.8 * drift + rng.gauss(0.0, 0.05)
        noise = [rng.gauss(0.0, sd) for _ in range(2)]
        if rng.random() < 0.05:  # a disturbed cell, as likely on either side
            noise[rng.randrange(2)] -= 0.5
        reference[block] = 3000.0 * math.exp(drift + noise[0])
        variant[block] = 3000.0 * math.exp(drift + noise[1] + change)
    return reference, variant


def test_a_reading_calls_covers_and_detects_by_its_word_and_interval() -> None:
    lower = Reading("lower", -6.0, -9.0, -2.0)
    assert lower.calls_difference and lower.detects(-5.0) and not lower.detects(5.0)
    assert lower.covers(-5.0) and not lower.covers(0.0)
    unclear = Reading("no clear difference", -1.0, -4.0, 3.0)
    assert not unclear.calls_difference and not unclear.detects(-5.0) and unclear.covers(0.0)
    assert Reading("higher", 12.0).covers(0.0) is None  # no interval


def test_one_window_calls_a_difference_only_beyond_the_stability_band() -> None:
    inside = 1.0 + (STABILITY_BAND_PCT - 1.0) / 100.0
    assert not one_window_reading(1000.0, 1000.0 * inside).calls_difference
    assert one_window_reading(1000.0, 850.0).word == "lower"
    assert one_window_reading(1000.0, 1150.0).word == "higher"
    assert one_window_reading(1000.0, 850.0).change_pct == pytest.approx(-15.0)


def test_runs_are_consecutive_groups_and_the_remainder_is_left_out() -> None:
    values = [math.e] * 5 + [math.e**2] * 5 + [99.0]
    assert run_means(values, 2) == pytest.approx([1.0, 2.0])
    with pytest.raises(ValueError):
        run_means([1.0, 2.0], 5)


def test_independent_runs_see_a_large_effect_and_rarely_call_identical_copies() -> None:
    rng = random.Random(3)
    calls = 0
    for _ in range(200):
        ref, var = _noisy_blocks(rng, 30, 0.0)
        calls += independent_runs_reading(list(ref.values()), list(var.values())).calls_difference
    # two 95% intervals that must not overlap: a stricter test than the interval of the change
    assert calls <= 10
    ref, var = _noisy_blocks(rng, 30, math.log(0.5))
    reading = independent_runs_reading(list(ref.values()), list(var.values()))
    assert reading.word == "lower" and reading.covers(-50.0)


def test_leave_one_out_is_the_mean_of_the_others() -> None:
    assert leave_one_out([1.0, 2.0, 6.0]) == pytest.approx([4.0, 3.5, 1.5])
    with pytest.raises(ValueError):
        leave_one_out([1.0])
    estimate, low, high = pooled_change_pct([math.log(0.95)] * 3)
    assert (estimate, low, high) == pytest.approx((-5.0, -5.0, -5.0))


def test_tally_counts_calls_coverage_and_detections() -> None:
    tally = Tally()
    tally = tally.add(Reading("lower", -6.0, -9.0, -2.0), -5.0)
    tally = tally.add(Reading("no clear difference", -1.0, -4.0, 3.0), -5.0)
    tally = tally.add(Reading("lower", -20.0), -5.0)
    assert (tally.comparisons, tally.calls, tally.intervals, tally.covered, tally.detected) == (
        3,
        2,
        2,
        1,
        2,
    )


def test_wilson_interval_matches_known_values() -> None:
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-3)
    low, high = wilson_interval(5, 100)
    assert low == pytest.approx(0.0215, abs=1e-3) and high == pytest.approx(0.1118, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_block_intervals_cover_planted_effects_against_left_out_references() -> None:
    """The benchmark's whole chain on simulated runs: each run's block verdict on a planted -5%
    effect, judged against the mean of the other runs' estimates. Coverage near 95% (the
    signed-rank interval is slightly conservative; a reference with its own error makes the
    target a little harder to hit), and the A/A copies called different about 5% of the time."""
    rng = random.Random(34)
    runs, planted = 300, math.log(0.95)
    readings = [block_reading(*_noisy_blocks(rng, 30, planted)) for _ in range(runs)]
    truths = leave_one_out([math.log1p(r.change_pct / 100.0) for r in readings])
    tally = Tally()
    for reading, truth in zip(readings, truths, strict=True):
        tally = tally.add(reading, 100.0 * math.expm1(truth))
    assert 0.91 <= tally.covered / tally.intervals <= 0.99
    aa = Tally()
    for _ in range(runs):
        aa = aa.add(block_reading(*_noisy_blocks(rng, 30, 0.0)), 0.0)
    assert aa.calls / aa.comparisons <= 0.09
