"""The error rates a block-engine log states: the smallest change the run's noise lets a verdict
find (checked against simulated verdicts), and the calibration benchmark's packaged summary."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from tritonlab.report.engine_section import measured_rates_line
from tritonlab.stats.error_rates import (
    DETECTABLE_FACTOR,
    MeasuredRates,
    PlantedPower,
    detectable_change_pct,
    measured_rates,
)
from tritonlab.stats.process_term import ProcessTerm
from tritonlab.stats.verdicts import centre_interval


def test_the_detectable_change_is_about_1_65_half_widths_in_log_units() -> None:
    assert pytest.approx(1.654, abs=1e-3) == DETECTABLE_FACTOR
    assert detectable_change_pct(0.0) == 0.0
    assert detectable_change_pct(5.0) == pytest.approx(
        100 * math.expm1(DETECTABLE_FACTOR * math.log(1.05))
    )


def test_a_change_of_the_detectable_size_is_found_about_9_times_in_10() -> None:
    """Simulated paired blocks (normal log-ratios, 40 blocks): a true change of the size the
    log states, from the median half-width of A/A intervals at that noise, is called "lower"
    in about 90% of runs (the signed-rank interval is a little wider than the normal one, so
    a little less)."""
    rng = random.Random(90)
    sd, blocks = 0.19, 40

    def interval(change: float) -> tuple[float, float]:
        ci = centre_interval([rng.gauss(change, sd) for _ in range(blocks)], p_value=False)
        assert ci is not None
        return ci.low, ci.high

    widths = sorted(100 * math.expm1((hi - lo) / 2) for lo, hi in map(interval, [0.0] * 200))
    detectable = detectable_change_pct(widths[len(widths) // 2])
    found = sum(hi < 0 for _, hi in (interval(-math.log1p(detectable / 100)) for _ in range(400)))
    assert 0.82 <= found / 400 <= 0.96


def test_the_packaged_summary_reads_and_is_quoted_as_that_machines_rates() -> None:
    rates = measured_rates()
    if rates is not None:  # the benchmark's summary, when this tritonlab carries one
        assert rates.aa_comparisons >= rates.false_alarms >= 0
        assert rates.intervals >= rates.covered >= 0
    made_up = MeasuredRates(
        "2026-12-06 06:00",
        "a CPU",
        2,
        "abc1234",
        10,
        40,
        30,
        1,
        60,
        57,
        (PlantedPower(-4.6, 10, 4),),
    )
    line = measured_rates_line(made_up)
    assert "1 of 30 comparisons" in line and "57 of 60" in line
    assert "a planted drop of 4.6% was found in 4 of 10 runs" in line
    assert "another machine, load or placement has its own" in line
    assert "process term" not in line  # no term packaged, none stated
    assert "varied by" not in line  # no noise stored, none stated
    noisy = measured_rates_line(replace(made_up, block_spread_pct=4.7))
    assert "runs (there one block's throughput varied by ±4.7% between identical copies" in noisy


@pytest.mark.parametrize(
    ("held_sd_log", "said"),
    [
        (0.005, "the rates above were measured with that same term."),
        (0.01, "the rates above were measured while verdicts held ±2.8%."),
        (0.0, "the rates above were measured before verdicts held it."),
    ],
)
def test_the_line_says_which_term_the_rates_were_measured_with(
    held_sd_log: float, said: str
) -> None:
    term = ProcessTerm(0.005, 0.0, 240, 40)
    rates = MeasuredRates("2026-12-06 06:00", "a CPU", 2, "abc1234", 20, 33, 120, 5, 180, 173, ())
    line = measured_rates_line(
        replace(rates, process_term=term, process_term_held_sd_log=held_sd_log)
    )
    assert f"±{term.pair_half_width_pct():.1f}% on a throughput interval" in line
    assert line.endswith(said)
