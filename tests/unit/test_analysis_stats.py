"""analysis/summary.py, verdicts.py and aggregate.py: repeats, intervals, verdicts, grouping."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import statistics
from pathlib import Path

import pytest

from tritonlab.analysis.aggregate import LITTLE_TOLERANCE, VariantSummary, summarise
from tritonlab.analysis.summary import Summary, t_quantile_975
from tritonlab.analysis.verdicts import (
    HIGHER,
    LOWER,
    MIN_EFFECT_PCT,
    NO_CLEAR,
    SINGLE_RUN_EFFECT_PCT,
    compare,
)
from tritonlab.experiments.store import CellResult

# --- Summary ---------------------------------------------------------------------------------


def test_summary_median_mean_interval_by_hand() -> None:
    s = Summary.of([14.0, 10.0, 12.0])
    assert s.n == 3
    assert s.median == 12.0
    assert s.mean == 12.0
    # mean 12, sample sd 2, t(0.975, df=2) = 4.303: half width 4.303 * 2 / sqrt(3) = 4.9687
    low, high = s.interval95 or (math.nan, math.nan)
    assert low == pytest.approx(12.0 - 4.303 * 2.0 / math.sqrt(3))
    assert high == pytest.approx(16.9687, abs=1e-4)
    assert s.spread_pct == pytest.approx(100.0 * 4.0 / 12.0)


def test_summary_even_count_median_and_interval() -> None:
    s = Summary.of([1.0, 2.0, 3.0, 10.0])
    assert s.median == 2.5
    sd = statistics.stdev([1.0, 2.0, 3.0, 10.0])
    half = 3.182 * sd / 2.0  # df=3, sqrt(4) = 2
    assert 4.0 - half < 0  # the raw t interval would go negative ...
    assert s.interval95 == pytest.approx((0.0, 4.0 + half))  # ... so its lower end is clamped


def test_summary_interval_not_clamped_when_positive() -> None:
    s = Summary.of([100.0, 104.0, 98.0])
    half = 4.303 * statistics.stdev([100.0, 104.0, 98.0]) / 3**0.5
    assert s.interval95 == pytest.approx((s.mean - half, s.mean + half))


def test_summary_single_value_has_no_interval() -> None:
    s = Summary.of([5.0])
    assert s.median == 5.0
    assert s.interval95 is None
    assert s.spread_pct is None
    assert s.to_dict() == {
        "values": [5.0],
        "median": 5.0,
        "mean": 5.0,
        "interval95": None,
        "spread_pct": None,
    }


def test_summary_drops_missing_and_non_finite() -> None:
    s = Summary.of([None, 1.0, math.nan, math.inf, 3.0])
    assert s.values == (1.0, 3.0)
    empty = Summary.of([None])
    assert empty.n == 0
    assert empty.median is None
    assert empty.mean is None
    assert empty.interval95 is None


def test_t_quantiles() -> None:
    assert t_quantile_975(1) == 12.706
    assert t_quantile_975(2) == 4.303
    assert t_quantile_975(11) == 2.228  # between rows: the next smaller df (10)
    assert t_quantile_975(30) == 2.042
    assert t_quantile_975(100) == 2.042
    assert t_quantile_975(1000) == 1.96


# --- verdicts -------------------------------------------------------------------------------


def test_separated_higher() -> None:
    v = compare("throughput", Summary.of([100, 101, 102]), Summary.of([119, 120, 121]))
    assert v.word == HIGHER
    assert v.clear
    assert v.change_pct == pytest.approx(100.0 * (120 - 101) / 101)
    assert v.reference_median == 101
    assert v.variant_median == 120
    assert v.phrase() == "higher (+19%)"
    assert "separated" in v.method


def test_separated_lower() -> None:
    v = compare("p99", Summary.of([1000, 1100, 1050]), Summary.of([800, 820, 790]))
    assert v.word == LOWER
    assert v.phrase() == f"lower ({100 * (800 - 1050) / 1050:+.0f}%)"


def test_overlapping_is_no_clear_difference() -> None:
    # Medians differ by 14%, but one repeat of the variant lies inside the reference's range.
    v = compare("throughput", Summary.of([100, 110, 120]), Summary.of([115, 125, 130]))
    assert v.change_pct == pytest.approx(100 * 15 / 110)
    assert v.word == NO_CLEAR
    assert not v.clear
    assert v.phrase().startswith("no clear difference (+")


def test_tiny_separated_shift_is_no_clear_difference() -> None:
    v = compare("throughput", Summary.of([100.0, 100.5, 101.0]), Summary.of([102, 102.5, 103]))
    assert v.change_pct is not None
    assert 0 < v.change_pct < MIN_EFFECT_PCT
    assert v.word == NO_CLEAR
    # The same separation with a large enough shift is clear.
    big = compare("throughput", Summary.of([100.0, 100.5, 101.0]), Summary.of([106, 106.5, 107]))
    assert big.change_pct is not None and big.change_pct >= MIN_EFFECT_PCT
    assert big.word == HIGHER


def test_single_run_threshold() -> None:
    below = 100.0 * (1 + (SINGLE_RUN_EFFECT_PCT - 1) / 100)
    above = 100.0 * (1 + (SINGLE_RUN_EFFECT_PCT + 1) / 100)
    v = compare("throughput", Summary.of([100.0]), Summary.of([below]))
    assert v.word == NO_CLEAR
    assert "single run" in v.method
    assert compare("throughput", Summary.of([100.0]), Summary.of([above])).word == HIGHER
    # One repeat on either side is enough to use the single-run rule.
    mixed = compare("throughput", Summary.of([100.0, 101.0, 99.0]), Summary.of([80.0]))
    assert mixed.word == LOWER
    assert "single run" in mixed.method


def test_missing_data() -> None:
    v = compare("p99", Summary.of([]), Summary.of([1.0, 2.0]))
    assert v.word == NO_CLEAR
    assert v.change_pct is None
    assert v.method == "missing data"
    assert v.phrase() == NO_CLEAR
    assert compare("q", Summary.of([0.0, 0.0]), Summary.of([1.0, 1.0])).method == "missing data"


def test_verdict_to_dict() -> None:
    v = compare("throughput", Summary.of([1, 2, 3]), Summary.of([10, 11, 12]))
    assert v.to_dict() == {
        "figure": "throughput",
        "word": HIGHER,
        "change_pct": pytest.approx(450.0),
        "reference_median": 2,
        "variant_median": 11,
        "method": v.method,
    }


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
