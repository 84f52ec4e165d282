"""stats/summary.py, verdicts.py and aggregate.py: repeats, ranges, verdicts, grouping."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tritonlab.experiments.store import CellResult
from tritonlab.stats.aggregate import (
    FELL_BEHIND,
    LITTLE_TOLERANCE,
    VariantSummary,
    compare_figure,
    summarise,
    why_not_comparable,
)
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import (
    CONFIDENCE,
    HIGHER,
    LOWER,
    MIN_EFFECT_PCT,
    NO_CLEAR,
    NO_VERDICT,
    NOT_COMPARABLE,
    Verdict,
    Word,
    compare,
    paired_log_ratios,
)
from tritonlab.stats.workload import same_offered_load

FELL_BEHIND_WARNING = "Perf Analyzer was not able to keep up the desired request rate."


def _pct(log_ratio: float) -> float:
    return 100.0 * (math.exp(log_ratio) - 1.0)


# --- Summary ---------------------------------------------------------------------------------


def test_summary_median_range_by_hand() -> None:
    s = Summary.of([14.0, 10.0, 12.0])
    assert s.n == 3
    assert s.median == 12.0
    assert s.low == 10.0
    assert s.high == 14.0
    assert s.range == (10.0, 14.0)
    assert s.spread_pct == pytest.approx(100.0 * 4.0 / 12.0)
    assert s.rounds == (1, 2, 3)  # without rounds, the values' positions stand in for them


def test_summary_range_is_the_repeats_never_extrapolated() -> None:
    # A t interval of these would reach below zero; the range is just min and max.
    s = Summary.of([1.0, 2.0, 3.0, 10.0])
    assert s.median == 2.5
    assert s.range == (1.0, 10.0)
    assert s.low == min(s.values) and s.high == max(s.values)


def test_summary_text_is_median_with_range() -> None:
    s = Summary.of([2133.0, 1834.0, 2431.0])
    assert s.text() == "2,133 (1,834–2,431)"
    assert s.text(unit="infer/s") == "2,133 infer/s (1,834–2,431)"
    assert Summary.of([1.25, 1.5, 1.75]).text(digits=2, unit="µs") == "1.50 µs (1.25–1.75)"
    assert Summary.of([5.0]).text() == "5"  # one repeat: no range
    # a range that varied is never shown as one number (issue 36 audit: "26 (26–26)")
    assert Summary.of([25.6, 25.8, 26.2]).text() == "25.8 (25.6–26.2)"
    assert Summary.of([26.01, 26.02, 26.04]).text() == "26.02 (26.01–26.04)"
    assert Summary.of([26.0, 26.0]).text() == "26 (26–26)"  # identical repeats: as they were
    # nor a median that rounds to its range's end ("29 (27–29)" for 28.69, 26.75–28.98)
    assert Summary.of([26.75, 28.69, 28.98]).text() == "28.7 (26.8–29.0)"
    assert Summary.of([7600.1, 7665.6, 7666.2]).text() == "7,666 (7,600–7,666)"  # under 0.1%
    assert Summary.of([]).text() == "n/a"
    assert "CI" not in s.text() and "95%" not in s.text()


def test_summary_single_value_has_no_range() -> None:
    s = Summary.of([5.0], [4])
    assert s.median == 5.0
    assert s.range is None
    assert s.spread_pct is None
    assert s.low == s.high == 5.0
    assert s.to_dict() == {
        "values": [5.0],
        "rounds": [4],
        "median": 5.0,
        "min": 5.0,
        "max": 5.0,
        "spread_pct": None,
    }


def test_summary_keeps_rounds_and_drops_missing_values_with_their_round() -> None:
    s = Summary.of([None, 1.0, math.nan, math.inf, 3.0], [1, 2, 3, 4, 5])
    assert s.values == (1.0, 3.0)
    assert s.rounds == (2, 5)
    assert s.by_round() == {2: 1.0, 5: 3.0}
    # Without explicit rounds the positions (from 1) are the rounds, dropped the same way.
    assert Summary.of([None, 7.0, 8.0]).rounds == (2, 3)
    empty = Summary.of([None], [1])
    assert empty.n == 0
    assert empty.rounds == ()
    assert empty.median is None
    assert empty.range is None
    assert empty.to_dict()["min"] is None


def test_variant_summary_passes_rounds(by_name: dict[str, VariantSummary]) -> None:
    s = by_name["batch_0ms_x1"]
    assert s.rounds == [1, 2, 3]
    for figure in (s.throughput, s.latency_p99, s.queue_us, s.mean_batch, s.server_cores):
        assert figure.rounds == (1, 2, 3)
        assert figure.by_round() == dict(zip(figure.rounds, figure.values, strict=True))
    assert s.throughput.by_round()[2] == s.cells[1].perf.measurement.throughput_infer_per_s  # type: ignore[union-attr]


# --- verdicts: paired by round ---------------------------------------------------------------


def test_paired_consistent_30pct_is_higher_with_the_scipy_t_interval() -> None:
    reference = Summary.of([100.0, 120.0, 90.0], [1, 2, 3])
    factors = [1.28, 1.31, 1.32]
    variant = Summary.of([r * f for r, f in zip(reference.values, factors, strict=True)], [1, 2, 3])
    v = compare("throughput", reference, variant)
    # By hand: the mean of the log-ratios, sample sd, t(0.975, df = 2) = 4.3027.
    logs = [math.log(f) for f in factors]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    t = stats.t.ppf(0.975, 2)
    assert t == pytest.approx(4.3027, abs=1e-4)
    half = t * sd / math.sqrt(3)
    assert v.word == HIGHER
    assert v.clear and v.decided and v.comparable
    assert v.pairs == 3
    assert v.change_pct == pytest.approx(_pct(mean))
    assert v.change_pct == pytest.approx(30.3, abs=0.1)
    assert v.low_pct == pytest.approx(_pct(mean - half))
    assert v.high_pct == pytest.approx(_pct(mean + half))
    assert v.low_pct is not None and v.low_pct > 0  # the interval excludes no change
    assert v.p_value == pytest.approx(stats.ttest_1samp(logs, 0.0).pvalue)
    assert v.p_value is not None and v.p_value < 1 - CONFIDENCE
    assert v.reference_median == 100.0
    assert v.variant_median == pytest.approx(100.0 * 1.28)
    assert "paired by round (3 rounds)" in v.method
    assert v.phrase() == (
        f"higher ({v.change_pct:+.0f}%, CI {v.low_pct:+.0f}% to {v.high_pct:+.0f}%)"
    )
    assert v.phrase().startswith("higher (+30%, CI +")


def test_paired_consistent_drop_is_lower() -> None:
    reference = Summary.of([1000.0, 1100.0, 1050.0])
    variant = Summary.of([800.0, 870.0, 845.0])
    v = compare("p99", reference, variant)
    assert v.word == LOWER
    assert v.high_pct is not None and v.high_pct < 0
    assert v.phrase().startswith("lower (-2")


def test_paired_pairing_cancels_a_shared_slow_round() -> None:
    # Round 2 was slow for both: unpaired the ranges overlap, paired the ratio is steady.
    reference = Summary.of([100.0, 60.0, 102.0])
    variant = Summary.of([110.0, 66.5, 112.0])
    assert reference.high is not None and variant.low is not None
    assert variant.low < reference.high
    v = compare("throughput", reference, variant)
    assert v.word == HIGHER
    assert v.pairs == 3


def test_inconsistent_ratios_are_no_clear_difference() -> None:
    reference = Summary.of([100.0, 100.0, 100.0])
    variant = Summary.of([150.0, 80.0, 120.0])
    v = compare("throughput", reference, variant)
    assert v.word == NO_CLEAR
    assert not v.clear
    assert v.has_interval
    assert v.low_pct is not None and v.high_pct is not None
    assert v.low_pct < 0 < v.high_pct
    assert not v.decided  # wide and straddling: more rounds would be needed
    assert v.phrase().startswith("no clear difference (+")
    assert "CI -" in v.phrase()


def test_pairs_only_on_common_rounds() -> None:
    reference = Summary.of([100.0, 200.0, 110.0], [1, 2, 3])
    variant = Summary.of([130.0, 143.0, 999.0], [2, 3, 4])  # rounds 2 and 3 in common
    assert paired_log_ratios(reference, variant) == pytest.approx(
        [math.log(130.0 / 200.0), math.log(143.0 / 110.0)]
    )
    v = compare("throughput", reference, variant)
    assert v.pairs == 2
    assert "paired by round (2 rounds)" in v.method
    logs = [math.log(130.0 / 200.0), math.log(143.0 / 110.0)]
    assert v.change_pct == pytest.approx(_pct(statistics.fmean(logs)))
    half = stats.t.ppf(0.975, 1) * statistics.stdev(logs) / math.sqrt(2)
    assert v.low_pct == pytest.approx(_pct(statistics.fmean(logs) - half))
    # Medians still describe every repeat.
    assert v.reference_median == 110.0
    assert v.variant_median == 143.0


def test_a_missing_value_drops_its_round_from_the_pairs() -> None:
    reference = Summary.of([100.0, None, 110.0], [1, 2, 3])
    variant = Summary.of([130.0, 500.0, 143.0], [1, 2, 3])
    v = compare("throughput", reference, variant)
    assert v.pairs == 2  # round 2 is not paired with anything
    assert v.change_pct == pytest.approx(30.0)
    assert v.word == HIGHER  # 1.3 both times: no spread at all


def test_constant_ratio_has_a_point_interval() -> None:
    v = compare("q", Summary.of([100.0, 200.0]), Summary.of([110.0, 220.0]))
    assert v.word == HIGHER
    assert v.low_pct == pytest.approx(10.0)
    assert v.high_pct == pytest.approx(10.0)
    assert v.p_value == 0.0
    same = compare("q", Summary.of([100.0, 200.0]), Summary.of([100.0, 200.0]))
    assert same.word == NO_CLEAR
    assert same.p_value == 1.0
    assert same.decided  # exactly no change: within ±5%


# --- verdicts: unpaired and undecidable -------------------------------------------------------


def _welch_by_hand(ref: list[float], var: list[float]) -> tuple[float, float, float]:
    a, b = [math.log(x) for x in var], [math.log(x) for x in ref]
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    diff = statistics.fmean(a) - statistics.fmean(b)
    half = stats.t.ppf(0.975, df) * se
    return diff, diff - half, diff + half


def test_welch_fallback_without_common_rounds() -> None:
    ref_values, var_values = [100.0, 104.0, 98.0], [130.0, 128.0, 135.0, 131.0]
    reference = Summary.of(list[float | None](ref_values), [1, 2, 3])
    variant = Summary.of(list[float | None](var_values), [4, 5, 6, 7])
    v = compare("throughput", reference, variant)
    diff, low, high = _welch_by_hand(ref_values, var_values)
    assert v.pairs == 0
    assert "unpaired (4 vs 3 repeats" in v.method
    assert "Welch" in v.method
    assert v.change_pct == pytest.approx(_pct(diff))
    assert v.low_pct == pytest.approx(_pct(low))
    assert v.high_pct == pytest.approx(_pct(high))
    assert v.word == HIGHER
    assert v.p_value is not None and v.p_value < 0.05


def test_one_common_round_is_not_enough_to_pair() -> None:
    reference = Summary.of([100.0, 150.0, 80.0], [1, 2, 3])
    variant = Summary.of([110.0, 90.0, 140.0], [3, 4, 5])
    v = compare("throughput", reference, variant)
    assert v.pairs == 0
    assert v.method.startswith("unpaired")
    _diff, low, high = _welch_by_hand([100.0, 150.0, 80.0], [110.0, 90.0, 140.0])
    assert (v.low_pct, v.high_pct) == pytest.approx((_pct(low), _pct(high)))
    assert v.word == NO_CLEAR


def test_one_repeat_has_no_interval_and_no_verdict() -> None:
    v = compare("throughput", Summary.of([100.0]), Summary.of([200.0]))
    assert v.word == NO_VERDICT  # no word a rule could read as a difference or its absence
    assert v.change_pct == pytest.approx(100.0)
    assert not v.has_interval
    assert v.low_pct is None and v.high_pct is None
    assert not v.decided
    assert "one repeat" in v.method
    assert v.phrase() == "no verdict (one repeat; medians +100%)"
    # Three repeats against one: still no interval, whatever the size of the change.
    mixed = compare("throughput", Summary.of([100.0, 101.0, 99.0]), Summary.of([50.0]))
    assert mixed.word == NO_VERDICT
    assert not mixed.has_interval


def test_missing_data() -> None:
    v = compare("p99", Summary.of([]), Summary.of([1.0, 2.0]))
    assert v.word == NO_VERDICT
    assert v.change_pct is None
    assert v.method == "missing data"
    assert v.phrase() == "no verdict (missing data)"
    assert not v.decided
    assert compare("q", Summary.of([0.0, 0.0]), Summary.of([1.0, 1.0])).method == "missing data"


# --- decided, words, phrases -----------------------------------------------------------------


def test_decided_within_min_effect_either_way() -> None:
    tight = compare(
        "throughput", Summary.of([100.0, 100.0, 100.0]), Summary.of([101.0, 99.0, 100.5])
    )
    assert tight.word == NO_CLEAR
    assert tight.low_pct is not None and tight.high_pct is not None
    assert -MIN_EFFECT_PCT <= tight.low_pct < 0 < tight.high_pct <= MIN_EFFECT_PCT
    assert tight.decided
    wide = compare(
        "throughput", Summary.of([100.0, 100.0, 100.0]), Summary.of([104.0, 96.0, 103.0])
    )
    assert wide.word == NO_CLEAR
    assert wide.low_pct is not None and wide.low_pct < -MIN_EFFECT_PCT
    assert not wide.decided
    clear = compare(
        "throughput", Summary.of([100.0, 100.0, 100.0]), Summary.of([130.0, 128.0, 131.0])
    )
    assert clear.decided


def test_word_spelling() -> None:
    assert [str(w) for w in Word] == [
        "higher",
        "lower",
        "no clear difference",
        "not comparable",
        "no verdict",
    ]
    assert Word.HIGHER.value == "higher"
    assert Word("not comparable") is NOT_COMPARABLE


def test_verdict_to_dict() -> None:
    v = compare("throughput", Summary.of([1.0, 2.0, 3.0]), Summary.of([10.0, 21.0, 29.0]))
    data = v.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data == {
        "figure": "throughput",
        "word": "higher",
        "change_pct": v.change_pct,
        "ci95_change_pct": [v.low_pct, v.high_pct],
        "pairs": 3,
        "p_value": v.p_value,
        "reference_median": 2.0,
        "variant_median": 21.0,
        "method": v.method,
        "decided": True,
    }
    single = compare("throughput", Summary.of([1.0]), Summary.of([2.0])).to_dict()
    assert single["ci95_change_pct"] is None
    assert single["decided"] is False


def test_the_word_follows_the_interval_in_random_cases() -> None:
    rng = np.random.default_rng(20261130)
    seen: set[Word] = set()
    for _ in range(400):
        n_ref, n_var = int(rng.integers(1, 7)), int(rng.integers(1, 7))
        shift = int(rng.integers(0, 4)) if rng.random() < 0.3 else 0  # sometimes no common round
        ref_rounds = list(range(1, n_ref + 1))
        var_rounds = list(range(1 + shift, n_var + 1 + shift))
        round_factor = np.exp(rng.normal(0.0, rng.uniform(0.0, 0.3), 20))
        effect = rng.normal(0.0, 0.3)
        noise = rng.uniform(0.0, 0.4)
        ref: list[float | None] = [
            float(1000 * round_factor[r] * np.exp(rng.normal(0, noise))) for r in ref_rounds
        ]
        var: list[float | None] = [
            float(1000 * round_factor[r] * np.exp(effect + rng.normal(0, noise)))
            for r in var_rounds
        ]
        v = compare("figure", Summary.of(ref, ref_rounds), Summary.of(var, var_rounds))
        seen.add(v.word)
        phrase = v.phrase()
        if not v.has_interval:
            assert v.word == NO_VERDICT
            assert not v.decided
        elif v.low_pct is not None and v.high_pct is not None and v.low_pct <= 0 <= v.high_pct:
            assert v.word == NO_CLEAR, phrase
            assert "higher" not in phrase and "lower" not in phrase, phrase
        else:
            assert v.word == (HIGHER if (v.low_pct or 0) > 0 else LOWER), phrase
            assert v.decided
        if v.has_interval:
            assert v.low_pct <= v.change_pct <= v.high_pct  # type: ignore[operator]
    assert seen <= {HIGHER, LOWER, NO_CLEAR, NO_VERDICT} and {HIGHER, LOWER, NO_CLEAR} <= seen


# --- not comparable --------------------------------------------------------------------------


def _at_load(
    s: VariantSummary, concurrency: int | None = None, rate: float | None = None
) -> VariantSummary:
    return dataclasses.replace(
        s,
        settings=dataclasses.replace(s.settings, concurrency=concurrency, request_rate_per_s=rate),
    )


def _with_warning(s: VariantSummary, warning: str, repeat: int = 2) -> VariantSummary:
    cells = tuple(
        dataclasses.replace(c, perf=dataclasses.replace(c.perf, warnings=[warning]))
        if c.repeat == repeat
        else c
        for c in s.cells
    )
    return dataclasses.replace(s, cells=cells)


def test_compare_figure_at_the_same_load_is_compare(by_name: dict[str, VariantSummary]) -> None:
    base, zero = by_name["baseline"], by_name["batch_0ms_x1"]
    assert why_not_comparable(base, zero) is None
    v = compare_figure("throughput", "throughput", base, zero)
    assert v == compare("throughput", base.throughput, zero.throughput)
    assert v.word == HIGHER
    assert v.pairs == 3


def test_different_concurrency_is_not_comparable(by_name: dict[str, VariantSummary]) -> None:
    base, zero = by_name["baseline"], _at_load(by_name["batch_0ms_x1"], concurrency=4)
    assert not same_offered_load(base, zero)
    v = compare_figure("throughput", "throughput", base, zero)
    assert v.word == NOT_COMPARABLE
    assert not v.comparable and not v.clear
    assert v.decided  # nothing more to measure: another round cannot make them comparable
    assert v.method == "different offered loads"
    assert v.change_pct is None
    assert v.reference_median == base.throughput.median
    assert v.phrase() == "not comparable (different offered loads)"
    assert v.to_dict()["word"] == "not comparable"


def test_open_loop_rates_compare_only_when_equal(
    by_name: dict[str, VariantSummary],
) -> None:
    """Issue 36 audit: rows 1.5% apart in offered rate (each a share of its own peak) were
    compared; only rows offered the same rate are."""
    base = _at_load(by_name["baseline"], rate=1000.0)
    same = _at_load(by_name["batch_0ms_x1"], rate=1000.0)
    near = _at_load(by_name["batch_0ms_x1"], rate=1015.0)  # 1.5% apart: another load
    far = _at_load(by_name["batch_0ms_x1"], rate=1900.0)
    closed = by_name["batch_0ms_x1"]
    assert compare_figure("p99", "latency_p99", base, same).comparable
    for other in (near, far, closed):
        v = compare_figure("p99", "latency_p99", base, other)
        assert v.word == NOT_COMPARABLE
        assert v.method == "different offered loads"


@pytest.mark.parametrize(
    "warning",
    [
        FELL_BEHIND_WARNING,
        "Perf Analyzer was not able to keep up with the desired request rate. 12% of requests "
        "were delayed.",
    ],
)
def test_a_rate_perf_analyzer_fell_behind_is_not_comparable(
    by_name: dict[str, VariantSummary], warning: str
) -> None:
    assert FELL_BEHIND in warning
    base = _at_load(by_name["baseline"], rate=1000.0)
    zero = _at_load(by_name["batch_0ms_x1"], rate=1000.0)
    assert compare_figure("throughput", "throughput", base, zero).comparable
    behind = _with_warning(zero, warning)
    assert behind.load_generator_fell_behind
    assert not zero.load_generator_fell_behind
    for ref, sub in ((base, behind), (behind, base)):
        v = compare_figure("throughput", "throughput", ref, sub)
        assert v.word == NOT_COMPARABLE
        assert v.method == "perf_analyzer did not keep up the offered rate"
        assert "higher" not in v.phrase() and "lower" not in v.phrase()


def test_other_warnings_do_not_make_a_load_incomparable(
    by_name: dict[str, VariantSummary],
) -> None:
    warned = _with_warning(by_name["batch_0ms_x1"], "Failed to retrieve results from inference")
    assert not warned.load_generator_fell_behind
    assert compare_figure("throughput", "throughput", by_name["baseline"], warned).word == HIGHER


def test_verdict_is_a_frozen_record() -> None:
    v = Verdict("x", NO_CLEAR, None, None, None, "missing data")
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.word = HIGHER  # type: ignore[misc]


# --- aggregate ------------------------------------------------------------------------------


def _raw_cells(seed_run_dir: Path, variant: str) -> list[dict[str, object]]:
    folder = seed_run_dir / "results" / "cells"
    return [json.loads(p.read_text()) for p in sorted(folder.glob(f"{variant}__*.json"))]


def test_summarise_plan_order_and_groups(
    seed_cells: list[CellResult], plan_order: list[str]
) -> None:
    shuffled = list(seed_cells)
    random.Random(3).shuffle(shuffled)
    summaries = summarise(shuffled, plan_order)
    assert [s.variant.name for s in summaries] == plan_order
    assert plan_order == ["baseline", "batch_5ms_x1", "batch_5ms_x2", "batch_0ms_x1"]
    for s in summaries:
        assert s.load_key == "grpc_b1_c8"
        assert [c.repeat for c in s.cells] == [1, 2, 3]
        assert {c.variant.name for c in s.cells} == {s.variant.name}
        assert s.settings.concurrency == 8
        assert s.model_name == s.cells[0].model_name


def test_summary_figures_come_from_the_cells(
    seed_run_dir: Path, by_name: dict[str, VariantSummary]
) -> None:
    for name, s in by_name.items():
        raw = _raw_cells(seed_run_dir, name)
        tput = [c["perf"]["measurement"]["throughput_infer_per_s"] for c in raw]  # type: ignore[index]
        p99 = [c["perf"]["measurement"]["latency_p99_us"] for c in raw]  # type: ignore[index]
        queue = [c["server"]["queue_us_per_request"] for c in raw]  # type: ignore[index]
        assert s.throughput.median == pytest.approx(statistics.median(tput))
        assert s.latency_p99.median == pytest.approx(statistics.median(p99))
        assert s.queue_us.median == pytest.approx(statistics.median(queue))
        cores = [c["server_cpu_s"] / c["perf"]["wall_s"] for c in raw]  # type: ignore[index, operator]
        assert s.server_cores.median == pytest.approx(statistics.median(cores))
        assert s.stable_count == 3
        assert s.trial_counts == [c["perf"]["trial_count"] for c in raw]  # type: ignore[index]
        dist: dict[int, int] = {}
        for c in raw:
            for size, count in c["server"]["batch_size_executions"].items():  # type: ignore[index]
                dist[int(size)] = dist.get(int(size), 0) + count
        assert s.batch_distribution == dict(sorted(dist.items()))


def test_littles_law_ratio_near_one(by_name: dict[str, VariantSummary]) -> None:
    for s in by_name.values():
        ratio = s.littles_law_ratio
        assert ratio is not None
        expected = (s.throughput.median or 0) * (s.latency_avg.median or 0) * 1e-6 / 8
        assert ratio == pytest.approx(expected)
        assert abs(ratio - 1.0) < 0.05
        assert s.littles_law_ok is True
    assert LITTLE_TOLERANCE == 0.2


def test_littles_law_request_rate_has_no_ratio(by_name: dict[str, VariantSummary]) -> None:
    s = by_name["baseline"]
    open_loop = dataclasses.replace(
        s, settings=dataclasses.replace(s.settings, concurrency=None, request_rate_per_s=2000.0)
    )
    assert open_loop.in_flight is None
    assert open_loop.littles_law_ratio is None
    assert open_loop.littles_law_ok is None


def test_variant_summary_to_dict_is_json(by_name: dict[str, VariantSummary]) -> None:
    data = by_name["batch_0ms_x1"].to_dict()
    text = json.dumps(data)
    assert json.loads(text)["repeats"] == 3
    assert data["throughput_infer_per_s"]["median"] == by_name["batch_0ms_x1"].throughput.median
    assert set(data["batch_size_executions"]) == {
        str(k) for k in by_name["batch_0ms_x1"].batch_distribution
    }


def test_summarise_separates_load_points(seed_cells: list[CellResult]) -> None:
    other = [
        dataclasses.replace(c, load_key="http_b1_c8", cell_id=c.cell_id + "_http")
        for c in seed_cells
    ]
    summaries = summarise([*seed_cells, *other], ["baseline"])
    assert len(summaries) == 8
    assert summaries[0].variant.name == "baseline"
    assert {s.load_key for s in summaries} == {"grpc_b1_c8", "http_b1_c8"}
    assert all(len(s.cells) == 3 for s in summaries)
