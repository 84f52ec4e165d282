"""Recommendations: the budget (every repeat), excluded points, the tie-break, the frontier,
picks and runner-ups, "different optima" only when clearly different, knees, open-loop rates,
saturation, and the log section that states the rules."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tritonlab.decisions.frontier import (
    after_knee,
    knee_concurrency,
    pareto_frontier,
    saturation_findings,
    saturation_over_concurrency,
)
from tritonlab.decisions.recommend import recommend, recommendations_from_manifest
from tritonlab.decisions.recommend_records import OperatingPoint, Recommendations, operating_point
from tritonlab.experiments.manifest import Manifest, SweepEntry
from tritonlab.experiments.store import CellResult, load_cells
from tritonlab.report.recommend_section import recommendations_section
from tritonlab.report.recommend_summary_text import (
    RULES,
    recommendations_dict,
    saturation_text,
    summary_line,
)
from tritonlab.report.recommend_text import decided_by, exclusion_note, justification
from tritonlab.stats.aggregate import FELL_BEHIND, VariantSummary, summarise
from tritonlab.stats.config_key import ConfigKey

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TEMPLATE = json.loads(
    (FIXTURES / "seed_run/results/cells/baseline__grpc_b1_c8__r1.json").read_text()
)

DESCRIPTIONS = {
    "baseline": "baseline (no batching, count=1)",
    "batch_0us": "batching (0 µs, count=1)",
    "batch_5000us": "batching (5 ms, count=1)",
    "batch_0us_x2": "batching (0 µs, count=2)",
}
WARNING = f"Perf Analyzer was {FELL_BEHIND} with the desired request rate."


def cell(
    variant: str,
    throughputs: float,
    p99_us: float | None,
    repeat: int = 1,
    concurrency: int | None = 8,
    rate: float | None = None,
    protocol: str = "grpc",
    batch: int = 1,
    queue_us: float = 100.0,
    instances: int | None = None,
    fell_behind: bool = False,
    load_key: str | None = None,
) -> CellResult:
    """A real cell record (the seed run's shape) with the figures a test needs.

    ``instances`` defaults to 2 for ``*_x2`` variants and 1 otherwise; ``fell_behind`` adds
    perf_analyzer's warning that it could not keep up the rate; ``load_key`` overrides the key
    (sweeps key open-loop cells by fraction of the peak, so two rates can share one key).
    """
    data = copy.deepcopy(TEMPLATE)
    load = f"r{rate:g}" if rate is not None else f"c{concurrency}"
    load_key = load_key or f"{protocol}_b{batch}_{load}"
    data["cell_id"] = f"{variant}__{load_key}__r{repeat}"
    data["load_key"] = load_key
    data["repeat"] = repeat
    data["started_utc"] = f"2026-01-01T00:00:{repeat:02d}Z"
    data["variant"].update(
        name=variant,
        description=DESCRIPTIONS.get(variant, variant),
        instance_count=instances or (2 if variant.endswith("_x2") else 1),
    )
    if variant != "baseline":
        data["variant"]["dynamic_batching"] = True
    data["model_name"] = "simple_mlp" if variant == "baseline" else f"simple_mlp__{variant}"
    settings = data["perf"]["settings"]
    settings.update(
        protocol=protocol,
        batch_size=batch,
        concurrency=None if rate is not None else concurrency,
        request_rate_per_s=rate,
    )
    m = data["perf"]["measurement"]
    m.update(
        throughput_infer_per_s=throughputs,
        latency_p99_us=p99_us,
        concurrency=settings["concurrency"],
        request_rate_per_s=rate,
    )
    data["perf"]["warnings"] = [WARNING] if fell_behind else []
    data["server"]["queue_us_per_request"] = queue_us
    return CellResult.from_dict(data)


def repeats(variant: str, tputs: list[float], p99s: list[float], **kw: Any) -> list[CellResult]:
    """One cell per repeat, numbered 1..n so two variants' repeats pair by round."""
    return [
        cell(variant, t, p, repeat=i + 1, **kw)
        for i, (t, p) in enumerate(zip(tputs, p99s, strict=True))
    ]


def summaries(cells: list[CellResult]) -> list[VariantSummary]:
    return summarise(cells, ["baseline", "batch_0us", "batch_5000us", "batch_0us_x2"])


def point(variant: str, tput: float, p99: float, key: str = "grpc_b1_c8") -> OperatingPoint:
    return OperatingPoint(variant, variant, key, "grpc", 1, 8, None, tput, p99)


def _open(variant: str, tputs: list[float], p99s: list[float], **kw: Any) -> list[CellResult]:
    return repeats(variant, tputs, p99s, concurrency=None, **kw)


# --- operating points and the frontier -------------------------------------------------------


def test_operating_point_takes_medians_the_worst_p99_and_skips_cells_without_p99() -> None:
    [s] = summaries(repeats("batch_0us_x2", [100, 300, 200], [900, 700, 800]))
    p = operating_point(s)
    assert p is not None
    assert (p.throughput_infer_per_s, p.latency_p99_us, p.worst_p99_us) == (200.0, 800.0, 900.0)
    assert (p.instance_count, p.repeats, p.load_generator_fell_behind) == (2, 3, False)
    assert (p.variant, p.load_key, p.protocol, p.concurrency, p.request_rate_per_s) == (
        "batch_0us_x2",
        "grpc_b1_c8",
        "grpc",
        8,
        None,
    )
    assert p.curve_key == ConfigKey("batch_0us_x2", "grpc", 1)
    assert str(p.curve_key) == "batch_0us_x2/grpc/b1"
    assert p.within(900) and not p.within(899)
    assert p.to_dict()["latency_p99_max_us"] == 900.0
    assert OperatingPoint.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    [unstable] = summaries([cell("baseline", 100, None)])  # unstable: no percentiles
    assert operating_point(unstable) is None
    recs = recommend([unstable, s], 5000)
    assert recs.unmeasured == ["baseline at grpc_b1_c8"]
    assert "1 cell group (baseline at grpc_b1_c8) had no stable" in exclusion_note(recs)


def test_pareto_frontier() -> None:
    a, b, c = point("a", 1000, 2000), point("b", 2000, 3000), point("c", 3000, 9000)
    dominated = point("d", 1500, 3500)  # b has more throughput and a shorter tail
    tie_worse = point("e", 2000, 3100)  # same throughput as b, longer tail
    twin = point("f", 1000, 2000)  # identical to a: neither dominates the other
    front = pareto_frontier([c, dominated, a, b, tie_worse, twin])
    assert [p.variant for p in front] == ["a", "f", "b", "c"]


def test_pareto_frontier_leaves_out_points_perf_analyzer_fell_behind_on() -> None:
    a, b = point("a", 1000, 2000), point("b", 2000, 3000)
    fell = dataclasses.replace(point("x", 5000, 1000), load_generator_fell_behind=True)
    assert [p.variant for p in pareto_frontier([a, b, fell])] == ["a", "b"]
    # It would dominate both if it counted.
    assert [p.variant for p in pareto_frontier([a, b, point("x", 5000, 1000)])] == ["x"]


# --- the budget: every repeat's p99, not the median --------------------------------------------


def test_median_within_budget_but_one_repeat_over_is_not_picked() -> None:
    cells = [
        *repeats("baseline", [2000, 2010, 1990], [4500, 4600, 4400]),
        # Median p99 4,100 µs is within 5,000, but round 3 reached 5,600: not within.
        *repeats("batch_0us", [3000, 3010, 2990], [4000, 4100, 5600]),
    ]
    recs = recommend(summaries(cells), latency_budget_p99_us=5000)
    pick = recs.throughput_pick
    assert pick is not None and pick.point.variant == "baseline"
    assert (
        "within the 5,000 µs budget in every repeat (of 2 eligible; 1 more had a median p99 "
        in (justification(pick, recs))
    )
    assert "no runner-up" in justification(pick, recs)  # batch_0us does not qualify either
    # The other side: with every repeat within a wider budget it is picked.
    wide_recs = recommend(summaries(cells), latency_budget_p99_us=5600)
    wide = wide_recs.throughput_pick
    assert wide is not None and wide.point.variant == "batch_0us"
    assert "worst repeat's p99 5,600 µs" in justification(wide, wide_recs)
    # Nothing within in every repeat: no throughput pick, and the line says so.
    none = recommend(summaries(cells), latency_budget_p99_us=4550)
    assert none.throughput_pick is None
    assert summary_line(none).endswith(
        "no configuration met the latency budget or the target load."
    )


def test_latency_pick_says_when_a_repeat_is_over_the_budget() -> None:
    cells = [*repeats("batch_0us", [3000, 3010, 2990], [4000, 4100, 5600])]
    recs = recommend(summaries(cells), 5000, target_load_infer_per_s=2000)
    assert recs.throughput_pick is None
    assert recs.latency_pick is not None
    assert "(this one with a repeat above the 5,000 µs budget" in justification(
        recs.latency_pick, recs
    )
    assert summary_line(recs).endswith(
        "no operating point kept every repeat's p99 within the budget, so there is no "
        "throughput-first pick."
    )


def test_max_rate_counts_a_rate_only_when_every_repeat_is_within_budget() -> None:
    cells = [
        *_open("baseline", [1000, 1000, 1000], [1500, 1600, 1550], rate=1000.0),
        # Median p99 4,200 µs is within 5,000, but one repeat reached 9,000 µs.
        *_open("baseline", [1600, 1590, 1600], [4000, 4200, 9000], rate=1600.0),
        *_open("baseline", [1900, 1910, 1900], [20000, 21000, 20500], rate=2000.0),
        # Within budget but served far below the offered rate: the server fell behind.
        *_open("batch_0us", [1000, 1000, 1000], [1000, 1000, 1000], rate=3000.0),
        *_open("batch_0us", [1495, 1500, 1500], [1200, 1300, 1250], rate=1500.0),
        *_open("batch_0us", [2480, 2500, 2490], [2000, 2100, 2050], rate=2500.0),
    ]
    recs = recommend(summaries(cells), 5000)
    assert recs.max_rate_within_budget == {
        ConfigKey("baseline", "grpc", 1): 1000.0,
        ConfigKey("batch_0us", "grpc", 1): 2500.0,
    }
    # Every repeat of 1,600 req/s within a wider budget: it counts.
    wide = recommend(summaries(cells), 9000).max_rate_within_budget
    assert wide[ConfigKey("baseline", "grpc", 1)] == 1600.0
    p = next(p for p in recs.points if p.request_rate_per_s == 2000.0)
    assert p.concurrency is None and p.load_key == "grpc_b1_r2000"
    assert recs.knees == {}
    assert recommend(summaries(cells), 1000).max_rate_within_budget == {}


# --- excluded points: perf_analyzer could not keep up ------------------------------------------


def _open_loop_sweep(fell_behind: bool) -> list[CellResult]:
    return [
        *_open("baseline", [1500, 1495, 1505], [1200, 1300, 1250], rate=1500.0),
        *_open("batch_5000us", [1200, 1190, 1210], [2000, 2100, 2050], rate=1200.0),
        # The best point by far, if perf_analyzer had really offered its rate.
        *_open(
            "batch_0us",
            [3000, 2990, 3010],
            [1000, 1100, 1050],
            rate=3000.0,
            fell_behind=fell_behind,
        ),
    ]


def test_fell_behind_points_are_excluded_from_frontier_picks_runner_ups_and_rates() -> None:
    recs = recommend(summaries(_open_loop_sweep(True)), 5000, target_load_infer_per_s=1000)
    [fell] = recs.excluded
    assert (fell.variant, fell.load_key) == ("batch_0us", "grpc_b1_r3000")
    assert fell in recs.points and fell not in recs.eligible
    assert all(p.variant != "batch_0us" for p in recs.frontier)
    tp, lp = recs.throughput_pick, recs.latency_pick
    assert tp is not None and lp is not None
    assert tp.point.variant == "baseline" and lp.point.variant == "baseline"
    assert tp.runner_up is not None and tp.runner_up.variant == "batch_5000us"
    assert lp.runner_up is not None and lp.runner_up.variant == "batch_5000us"
    assert ConfigKey("batch_0us", "grpc", 1) not in recs.max_rate_within_budget
    note = (
        "1 operating point (batch_0us at grpc_b1_r3000) was excluded from the frontier, the "
        "picks, the runner-ups and the rate table: perf_analyzer could not keep up"
    )
    assert note in exclusion_note(recs)
    assert note in justification(tp, recs) and note in justification(lp, recs)
    assert "excluded 1 operating point where perf_analyzer could not keep up" in summary_line(recs)
    data = json.loads(json.dumps(recommendations_dict(recs)))
    assert data["excluded_points"][0]["variant"] == "batch_0us"
    assert "could not keep up" in data["excluded_points"][0]["reason"]
    assert [p["load_generator_fell_behind"] for p in data["points"]] == [False, True, False]


def test_the_same_points_count_when_perf_analyzer_kept_up() -> None:
    recs = recommend(summaries(_open_loop_sweep(False)), 5000, target_load_infer_per_s=1000)
    assert recs.excluded == [] and exclusion_note(recs) == ""
    assert recs.throughput_pick is not None and recs.latency_pick is not None
    assert recs.throughput_pick.point.variant == "batch_0us"
    assert recs.latency_pick.point.variant == "batch_0us"
    assert [p.variant for p in recs.frontier] == ["batch_0us"]
    assert recs.max_rate_within_budget[ConfigKey("batch_0us", "grpc", 1)] == 3000.0
    assert "excluded" not in summary_line(recs)


def test_rates_perf_analyzer_could_not_keep_up_do_not_count() -> None:
    cells = [
        *_open("baseline", [1500, 1495], [1200, 1300], rate=1500.0),
        *_open("baseline", [2500, 2490], [2000, 2100], rate=2500.0, fell_behind=True),
    ]
    recs = recommend(summaries(cells), 5000)
    assert recs.max_rate_within_budget == {ConfigKey("baseline", "grpc", 1): 1500.0}
    assert [p.load_generator_fell_behind for p in recs.points] == [False, True]
    assert recs.throughput_pick is not None
    assert recs.throughput_pick.point.request_rate_per_s == 1500.0


# --- picks, runner-ups and the baseline --------------------------------------------------------


def _two_config_sweep() -> list[CellResult]:
    return [
        *repeats("baseline", [1000, 1010, 990], [3000, 3100, 2900], concurrency=4),
        *repeats("baseline", [1200, 1210, 1190], [7000, 7100, 6900], concurrency=8),
        *repeats("batch_0us", [1500, 1520, 1480], [2500, 2600, 2400], concurrency=4),
        *repeats("batch_0us", [2400, 2450, 2350], [4800, 4900, 4700], concurrency=8),
        *repeats("batch_5000us", [900, 910, 890], [9000, 9100, 8900], concurrency=8),
    ]


def test_throughput_pick_is_highest_throughput_within_budget() -> None:
    recs = recommend(summaries(_two_config_sweep()), latency_budget_p99_us=5000)
    pick = recs.throughput_pick
    assert pick is not None and pick.kind == "throughput-first"
    assert (pick.point.variant, pick.point.load_key) == ("batch_0us", "grpc_b1_c8")
    assert pick.verdicts["throughput"].word == "higher"
    assert pick.verdicts["latency_p99"].word == "lower"
    assert pick.verdicts["throughput"].reference_median == 1200
    assert pick.tie_break is not None and not pick.tie_break.applied
    text = justification(pick, recs)
    assert text.startswith("Action: serve 'batching (0 µs, count=1)' (batch_0us)")
    assert "Result: 2,400 infer/s at p99 4,800 µs (medians; worst repeat's p99 4,900 µs)" in text
    assert "Judgement: the change pays" in text
    assert "Tied within the noise" not in text
    # Runner-up: another configuration (the baseline at c4), not batch_0us at c4.
    assert pick.runner_up is not None
    assert (pick.runner_up.variant, pick.runner_up.concurrency) == ("baseline", 4)
    assert pick.runner_up_verdict is not None and pick.runner_up_verdict.word == "higher"
    assert "beats the runner-up, 'baseline (no batching, count=1)' at grpc, batch 1, concur" in text
    # A tighter budget moves the pick; no point within budget gives no pick.
    tight = recommend(summaries(_two_config_sweep()), latency_budget_p99_us=2700)
    assert tight.throughput_pick is not None
    assert tight.throughput_pick.point.load_key == "grpc_b1_c4"
    assert recommend(summaries(_two_config_sweep()), 1000).throughput_pick is None


def test_latency_pick_is_lowest_p99_that_carries_the_target() -> None:
    recs = recommend(summaries(_two_config_sweep()), 5000, target_load_infer_per_s=1100)
    pick = recs.latency_pick
    assert pick is not None and pick.kind == "latency-first"
    # batch_0us at c4 (1,500 infer/s, p99 2,500) beats the baseline at c8 (p99 7,000).
    assert (pick.point.variant, pick.point.concurrency) == ("batch_0us", 4)
    assert "target load of 1,100 infer/s" in justification(pick, recs)
    assert "(this one with every repeat within the 5,000 µs budget" in justification(pick, recs)
    assert pick.verdicts["latency_p99"].word == "lower"
    assert recommend(summaries(_two_config_sweep()), 5000).latency_pick is None
    assert recommend(summaries(_two_config_sweep()), 5000, 99999).latency_pick is None


def test_pick_says_when_its_lead_over_the_runner_up_is_not_clear() -> None:
    cells = [
        *repeats("baseline", [2000, 2300, 2100], [4000, 4100, 3900]),
        *repeats("batch_0us", [2150, 1950, 2250], [4000, 4200, 3800]),
    ]
    recs = recommend(summaries(cells), 5000, target_load_infer_per_s=1000)
    pick = recs.throughput_pick
    # Tied within the noise, one instance each, p99 not separated: the best median stays.
    assert pick is not None and pick.point.variant == "batch_0us"
    assert pick.tie_break is not None and not pick.tie_break.overridden
    assert decided_by(pick.tie_break) == (
        "the better median throughput, though not clearly (nothing else separated them at the "
        "same load)"
    )
    assert pick.verdicts["throughput"].word == "no clear difference"
    assert "not clearly above the baseline" in justification(pick, recs)
    assert pick.runner_up_verdict is not None
    assert pick.runner_up_verdict.word == "no clear difference"
    assert "not clear given the noise" in justification(pick, recs)
    # Clearly separated repeats: the lead is stated as a win instead.
    clear = [
        *repeats("baseline", [2000, 2010, 1990], [4000, 4100, 3900]),
        *repeats("batch_0us", [2500, 2510, 2490], [4000, 4100, 3900]),
    ]
    clear_pick_recs = recommend(summaries(clear), 5000)
    clear_pick = clear_pick_recs.throughput_pick
    assert clear_pick is not None and clear_pick.point.variant == "batch_0us"
    assert "is not clear" not in justification(clear_pick, clear_pick_recs)
    assert "beats the runner-up" in justification(clear_pick, clear_pick_recs)


def test_baseline_pick_and_missing_baseline_load() -> None:
    cells = [
        *repeats("baseline", [3000, 3010, 2990], [2000, 2100, 1900], concurrency=4),
        *repeats("batch_5000us", [900, 910, 890], [9000, 9100, 8900], concurrency=16),
    ]
    recs = recommend(summaries(cells), 5000)
    assert recs.throughput_pick is not None
    assert recs.throughput_pick.point.variant == "baseline"
    assert "keep it" in justification(recs.throughput_pick, recs)
    wide = recommend(summaries(cells), 10000, target_load_infer_per_s=800)
    pick = wide.latency_pick
    assert pick is not None and pick.point.variant == "baseline"
    only_other = recommend(summaries(cells[3:]), 10000)
    assert only_other.throughput_pick is not None
    assert only_other.throughput_pick.verdicts == {}
    assert "baseline was not measured at this load" in justification(
        only_other.throughput_pick, only_other
    )
    assert "no runner-up" in justification(only_other.throughput_pick, only_other)


def test_verdicts_against_a_baseline_under_another_offered_rate_are_not_comparable() -> None:
    # A sweep keys open-loop cells by the fraction of each configuration's own peak.
    cells = [
        *_open("baseline", [1000, 1005, 995], [3000, 3100, 2900], rate=1000.0, load_key="p50"),
        *_open("batch_0us", [1500, 1505, 1495], [2000, 2100, 1900], rate=1500.0, load_key="p50"),
    ]
    pick_recs = recommend(summaries(cells), 5000)
    pick = pick_recs.throughput_pick
    assert pick is not None and pick.point.variant == "batch_0us"
    assert pick.verdicts["throughput"].word == "not comparable"
    assert pick.verdicts["latency_p99"].word == "not comparable"
    assert "throughput and p99 not comparable (different offered loads)" in justification(
        pick, pick_recs
    )
    assert "is not comparable with the pick's (different offered loads)" in justification(
        pick, pick_recs
    )
    assert "no clear difference" not in justification(pick, pick_recs)
    # The runner-up, at another rate, is not comparable either: the lead rests on medians.
    assert pick.runner_up_verdict is not None and not pick.runner_up_verdict.comparable
    assert "the lead rests on the medians alone" in justification(pick, pick_recs)


def test_verdicts_against_a_baseline_perf_analyzer_fell_behind_on() -> None:
    cells = [
        *_open("baseline", [1000, 1005, 995], [3000, 3100, 2900], rate=1000.0, fell_behind=True),
        *_open("batch_0us", [1000, 1002, 998], [2000, 2100, 1900], rate=1000.0),
    ]
    pick_recs = recommend(summaries(cells), 5000)
    pick = pick_recs.throughput_pick
    assert pick is not None and pick.point.variant == "batch_0us"
    assert pick.verdicts["latency_p99"].word == "not comparable"
    assert "perf_analyzer did not keep up" in pick.verdicts["latency_p99"].method
    assert pick.runner_up is None  # the baseline point itself is excluded


# --- the tie-break -----------------------------------------------------------------------------


def test_tie_on_throughput_goes_to_fewer_instances() -> None:
    cells = [
        # 2 instances, the highest median throughput (3,000) and the shorter tail ...
        *repeats("batch_0us_x2", [3000, 3300, 2800], [4000, 4200, 3900]),
        # ... 1 instance, 2,950 median: no clear difference from 3,000 given the noise.
        *repeats("batch_0us", [2900, 2950, 3100], [4500, 4600, 4400]),
    ]
    recs = recommend(summaries(cells), 5000)
    pick = recs.throughput_pick
    assert pick is not None and pick.point.variant == "batch_0us"
    tie = pick.tie_break
    assert tie is not None and tie.applied and tie.overridden
    assert (tie.best_by_median.variant, [p.variant for p in tie.tied]) == (
        "batch_0us_x2",
        ["batch_0us_x2"],
    )
    assert decided_by(tie) == "fewer instances (1 against 2)"
    text = justification(pick, recs)
    assert "tied within the noise with the highest median throughput" in text
    assert (
        "Not separated from 1 other point on throughput (batch_0us_x2 at grpc_b1_c8; no clear "
        "difference against the best median, batch_0us_x2 at grpc_b1_c8; against batch_0us_x2 "
        "at grpc_b1_c8: no clear difference ("
    ) in text
    assert "); the tie-break took the one with fewer instances (1 against 2): it prefers" in text
    # The runner-up has the better median, but not clearly.
    assert pick.runner_up is not None and pick.runner_up.variant == "batch_0us_x2"
    assert "has the better median, but its lead is not clear given the noise" in text
    data = json.loads(json.dumps(recommendations_dict(recs)))["throughput_pick"]["tie_break"]
    assert data["applied"] and data["changed_the_pick"]
    assert data["decided_by"] == "fewer instances (1 against 2)"


def test_tie_at_equal_instances_goes_to_the_shorter_tail() -> None:
    cells = [
        *repeats("batch_0us", [3000, 3300, 2800], [4500, 4600, 4400]),
        *repeats("batch_5000us", [2900, 2950, 3100], [3000, 3100, 2900]),
    ]
    pick_recs = recommend(summaries(cells), 5000)
    pick = pick_recs.throughput_pick
    assert pick is not None and pick.point.variant == "batch_5000us"
    assert pick.tie_break is not None
    assert decided_by(pick.tie_break).startswith(
        "a clearly shorter tail at the same load (p99 lower ("
    )
    assert "took the one with a clearly shorter tail" in justification(pick, pick_recs)
    data = json.loads(json.dumps(recommendations_dict(pick_recs)))["throughput_pick"]
    assert data["tie_break"]["decisive_verdict"]["word"] == "lower"
    assert data["tie_break"]["tie_verdict"]["word"] == "no clear difference"


def test_a_tie_break_on_p99_compares_two_configurations_at_the_same_load_only() -> None:
    """Issue 36: tie-breaks on p99 compared c8 against c16; in a closed loop half the
    concurrency is about half the latency, so the figure measured the load. Two configurations
    tied on throughput at different loads: the shorter tail at the lower load does not decide."""
    cells = [
        *repeats("batch_0us", [3000, 3300, 2800], [9000, 9200, 8800], concurrency=16),
        *repeats("batch_5000us", [2900, 2950, 3100], [4500, 4600, 4400], concurrency=8),
    ]
    pick_recs = recommend(summaries(cells), 10_000)
    pick = pick_recs.throughput_pick
    assert pick is not None and pick.point.variant == "batch_0us"  # the best median stays
    assert pick.tie_break is not None and pick.tie_break.applied
    assert pick.tie_break.decided == "median" and pick.tie_break.decisive_verdict is None
    # the same two at the same load: the paired p99 decides
    same = [
        *repeats("batch_0us", [3000, 3300, 2800], [9000, 9200, 8800], concurrency=8),
        *repeats("batch_5000us", [2900, 2950, 3100], [4500, 4600, 4400], concurrency=8),
    ]
    same_pick = recommend(summaries(same), 10_000).throughput_pick
    assert same_pick is not None and same_pick.point.variant == "batch_5000us"
    assert same_pick.tie_break is not None and same_pick.tie_break.decided == "p99"


def test_tie_between_concurrencies_of_one_curve_compares_throughput_directly() -> None:
    cells = [
        *repeats("baseline", [2000, 2200, 1900], [3000, 3100, 2900], concurrency=4),
        *repeats("baseline", [2050, 2150, 2000], [6000, 6100, 5900], concurrency=8),
    ]
    pick_recs = recommend(summaries(cells), 7000)
    pick = pick_recs.throughput_pick
    assert pick is not None and pick.point.concurrency == 4  # c8's 2,050 is not clearly more
    assert pick.tie_break is not None and pick.tie_break.best_by_median.concurrency == 8
    # which load to run one configuration at: its p99 at the lower load may decide
    assert (
        "took the one with a clearly shorter tail (grpc_b1_c4: another load of the same "
        "configuration)"
    ) in justification(pick, pick_recs)


def test_a_clear_lead_is_not_overridden_by_the_tie_break() -> None:
    cells = [
        *repeats("batch_0us_x2", [3000, 3010, 2990], [4500, 4600, 4400]),
        *repeats("batch_0us", [2500, 2510, 2490], [3000, 3100, 2900]),  # fewer instances
    ]
    pick_recs = recommend(summaries(cells), 5000)
    pick = pick_recs.throughput_pick
    assert pick is not None and pick.point.variant == "batch_0us_x2"
    assert pick.tie_break is not None and not pick.tie_break.applied
    assert "Not separated from" not in justification(pick, pick_recs)
    assert "beats the runner-up" in justification(pick, pick_recs)


def test_one_repeat_shows_no_tie() -> None:
    cells = [cell("batch_0us_x2", 3000, 4000), cell("batch_0us", 2950, 3000)]
    pick_recs = recommend(summaries(cells), 5000)
    pick = pick_recs.throughput_pick
    assert pick is not None and pick.point.variant == "batch_0us_x2"  # by median
    assert pick.tie_break is not None and not pick.tie_break.applied
    assert "is not clear: throughput no verdict (one repeat; medians" in justification(
        pick, pick_recs
    )


def test_one_repeat_against_the_baseline_is_not_judged() -> None:
    """A pick with one repeat on a side has no verdict against the baseline: the justification
    neither says the change pays nor that the difference is within the noise."""
    cells = [cell("baseline", 1000, 3000), cell("batch_0us_x2", 3000, 4000)]
    pick_recs = recommend(summaries(cells), 5000)
    pick = pick_recs.throughput_pick
    assert pick is not None and pick.point.variant == "batch_0us_x2"
    text = justification(pick, pick_recs)
    assert "throughput has no verdict (one repeat; medians +200%)" in text
    assert "does not show whether the change pays" in text
    assert "within the noise" not in text and "the change pays:" not in text
    # Counter-example: with paired rounds the verdict is a word and the judgement follows it.
    paired = [
        cell(v, t * f, 3000, repeat=r)
        for r, f in ((1, 1.0), (2, 1.02), (3, 0.99))
        for v, t in (("baseline", 1000), ("batch_0us_x2", 3000))
    ]
    recs = recommend(summaries(paired), 5000)
    assert recs.throughput_pick is not None
    assert "the change pays: more throughput" in justification(recs.throughput_pick, recs)


def test_points_under_different_offered_rates_are_not_tied() -> None:
    cells = [
        *_open("batch_0us_x2", [2000, 2100, 1900], [3000, 3100, 2900], rate=2000.0),
        *_open("batch_0us", [1900, 1950, 1850], [2000, 2100, 1900], rate=1900.0),
    ]
    pick_recs = recommend(summaries(cells), 5000)
    pick = pick_recs.throughput_pick
    assert pick is not None and pick.point.variant == "batch_0us_x2"
    assert pick.tie_break is not None
    assert not pick.tie_break.applied and pick.tie_break.not_comparable == 1


def test_tie_on_p99_for_the_latency_pick_goes_to_fewer_instances() -> None:
    cells = [
        *repeats("batch_0us_x2", [3000, 3010, 2990], [2000, 2300, 1900]),
        *repeats("batch_0us", [2500, 2510, 2490], [2100, 2050, 2400]),
    ]
    recs = recommend(summaries(cells), 5000, target_load_infer_per_s=2000)
    pick = recs.latency_pick
    assert pick is not None and pick.point.variant == "batch_0us"
    assert pick.tie_break is not None and pick.tie_break.figure == "p99"
    assert decided_by(pick.tie_break) == "fewer instances (1 against 2)"
    assert "tied within the noise with the lowest median p99" in justification(pick, recs)
    assert "Not separated from 1 other point on p99" in justification(pick, recs)
    # Throughput-first: 3,000 is clearly above 2,500, so no tie there.
    assert recs.throughput_pick is not None
    assert recs.throughput_pick.point.variant == "batch_0us_x2"


# --- the summary line: "different optima" only when clearly different ---------------------------


def test_summary_line_states_action_result_and_judgement() -> None:
    recs = recommend(summaries(_two_config_sweep()), 5000, target_load_infer_per_s=1100)
    line = summary_line(recs)
    assert line.startswith("Deployed the ONNX model simple_mlp on NVIDIA Triton")
    # Only the knobs the sweep varied are named (the synthetic variants differ in batching).
    assert "swept 3 serving configurations (dynamic_batching) with perf_analyzer" in line
    assert "concurrency 4–8" in line
    assert "3 interleaved repeats per cell" in line
    assert "'batching (0 µs, count=1)' for throughput-first use (2,400 infer/s, higher (+100%" in (
        line
    )
    assert "p99 4,800 µs with every repeat within a 5,000 µs budget" in line
    assert "for latency-first use (p99 2,500 µs while carrying 1,500 infer/s" in line
    # Same variant, two loads: one configuration serves both goals.
    assert line.endswith(
        "here one server configuration serves both goals; what differs is the load it is run "
        "at, so the operating point (concurrency or rate) must be chosen for the scenario."
    )
    assert "different optima" not in line
    nothing = recommend(summaries(_two_config_sweep()), 100)
    assert summary_line(nothing).endswith(
        "no configuration met the latency budget or the target load."
    )
    assert summary_line(recommend([], 5000)) == "No operating points were measured."


def test_summary_line_different_optima_when_clearly_different() -> None:
    cells = [
        *repeats("baseline", [1000, 1010, 990], [1000, 1010, 990], concurrency=4),
        *repeats("batch_0us", [3000, 3010, 2990], [4000, 4010, 3990], concurrency=4),
    ]
    recs = recommend(summaries(cells), 5000, target_load_infer_per_s=900)
    assert recs.throughput_pick is not None and recs.latency_pick is not None
    assert recs.throughput_pick.point.variant == "batch_0us"
    assert recs.latency_pick.point.variant == "baseline"
    assert "maximum throughput and low latency are different optima (the latency-first pick's " in (
        summary_line(recs)
    )
    assert "p99 lower (" in summary_line(recs)


def test_summary_line_picks_within_each_others_noise_are_not_different_optima() -> None:
    cells = [
        # Median p99 3,200 µs, but one repeat at 5,600: not within the budget in every repeat.
        *repeats("baseline", [2000, 2200, 1900], [3000, 3200, 5600]),
        *repeats("batch_0us", [2100, 2000, 2050], [3300, 3100, 3500]),
    ]
    recs = recommend(summaries(cells), 5000, target_load_infer_per_s=1000)
    assert recs.throughput_pick is not None and recs.latency_pick is not None
    assert recs.throughput_pick.point.variant == "batch_0us"
    assert recs.latency_pick.point.variant == "baseline"
    line = summary_line(recs)
    assert "different optima" not in line
    assert "the two picks are within each other's noise (the latency-first pick's p99 no clear" in (
        line
    )
    assert line.endswith(
        "so either configuration serves both goals as far as these repeats can tell."
    )


def test_summary_line_one_point_or_one_pick() -> None:
    cells = repeats("batch_0us", [3000, 3010, 2990], [2000, 2100, 1900])
    recs = recommend(summaries(cells), 5000, target_load_infer_per_s=1000)
    assert summary_line(recs).endswith(": here one operating point serves both goals.")
    no_target = recommend(summaries(cells), 5000)
    assert summary_line(no_target).endswith(
        "no target load was given, so there is no latency-first pick."
    )
    too_high = recommend(summaries(cells), 5000, target_load_infer_per_s=9000)
    assert summary_line(too_high).endswith(
        "no operating point carried the target load, so there is no latency-first pick."
    )
    assert all("different optima" not in summary_line(r) for r in (recs, no_target, too_high))


# --- knees -----------------------------------------------------------------------------------


def _curve(variant: str, levels: dict[int, list[float]]) -> list[CellResult]:
    return [
        c
        for conc, tputs in levels.items()
        for c in repeats(variant, tputs, [1000.0] * len(tputs), concurrency=conc)
    ]


def test_knee_is_where_the_next_level_stops_paying() -> None:
    cells = _curve(
        "baseline",
        {1: [1000, 1010, 990], 2: [1800, 1810, 1790], 4: [2600, 2610, 2590], 8: [2650, 2700, 2600]},
    )
    recs = recommend(summaries(cells), 5000)
    assert recs.knees == {ConfigKey("baseline", "grpc", 1): 4}


def test_knee_when_every_step_gains_and_with_one_level() -> None:
    rising = _curve("batch_0us", {1: [1000, 1010], 4: [2500, 2510], 16: [5000, 5010]})
    [curve_summaries] = [summaries(rising)]
    assert knee_concurrency(curve_summaries) == 16
    assert knee_concurrency(curve_summaries[:1]) is None


def test_knee_small_but_clear_gain_is_flat() -> None:
    # Separated repeats, but +6% over two doublings (3% per doubling) is under 10% per doubling.
    cells = _curve("baseline", {2: [2000, 2005, 1995], 8: [2120, 2125, 2115]})
    assert knee_concurrency(summaries(cells)) == 2
    # its interval stays under the threshold: the knee is settled and said without a doubt
    note = after_knee(summaries(cells), 2)
    assert note.startswith("concurrency 8: throughput") and "spans the rule" not in note


def test_knee_noise_is_no_gain() -> None:
    # +25% median, but the repeats overlap: "no clear difference", so the knee is at 1.
    cells = _curve("baseline", {1: [1000, 1600, 900], 2: [1250, 800, 1700]})
    assert knee_concurrency(summaries(cells)) == 1


def test_knees_per_protocol_and_batch() -> None:
    cells = _curve("baseline", {1: [1000, 1010], 2: [1010, 1000]}) + [
        c
        for conc, t in ((1, 500.0), (4, 1500.0))
        for c in repeats("baseline", [t, t + 5], [1000, 1000], concurrency=conc, protocol="http")
    ]
    recs = recommend(summaries(cells), 5000)
    assert recs.knees == {ConfigKey("baseline", "grpc", 1): 1, ConfigKey("baseline", "http", 1): 4}


def test_knee_is_not_hidden_by_one_noisy_flat_step() -> None:
    cells = _curve(
        "baseline",
        {1: [1000, 1005, 995], 4: [1100, 1500, 900], 16: [3000, 3010, 2990]},
    )
    # 1 -> 4 is "no clear difference", but 16 clearly beats both lower levels
    assert knee_concurrency(summaries(cells)) == 16


# --- saturation over concurrency -------------------------------------------------------------


def _queue_curve(points: dict[int, tuple[list[float], list[float]]]) -> list[CellResult]:
    out = []
    for conc, (tputs, queues) in points.items():
        for i, (t, q) in enumerate(zip(tputs, queues, strict=True)):
            out.append(cell("baseline", t, 1000, i + 1, concurrency=conc, queue_us=q))
    return out


def test_saturation_when_queue_grows_and_throughput_is_flat() -> None:
    cells = _queue_curve(
        {
            2: ([1500, 1510, 1490], [200, 210, 190]),
            4: ([2500, 2510, 2490], [400, 420, 380]),  # throughput still rising: not saturated
            8: ([2550, 2480, 2600], [1500, 1550, 1450]),  # flat throughput, queue x3.7
        }
    )
    sat = saturation_over_concurrency(summaries(cells))
    assert sat is not None
    assert (sat.curve, sat.concurrency_before, sat.concurrency_after) == (
        ConfigKey("baseline", "grpc", 1),
        4,
        8,
    )
    assert (sat.queue_us_before, sat.queue_us_after) == (400, 1500)
    assert sat.throughput_verdict.word == "no clear difference"
    assert "queue time rose from 400 to 1,500 µs" in saturation_text(sat)
    assert [s.curve for s in saturation_findings(summaries(cells))] == [
        ConfigKey("baseline", "grpc", 1)
    ]


def test_no_saturation_while_throughput_rises_or_queue_barely_moves() -> None:
    rising = _queue_curve(
        {4: ([2000, 2010, 1990], [400, 410, 390]), 8: ([3000, 3010, 2990], [1500, 1510, 1490])}
    )
    assert saturation_over_concurrency(summaries(rising)) is None
    small = _queue_curve(
        {4: ([2500, 2510, 2490], [400, 410, 390]), 8: ([2500, 2490, 2510], [500, 510, 490])}
    )
    assert saturation_over_concurrency(summaries(small)) is None  # +25% < 50%


def test_no_saturation_when_throughput_gain_is_large_but_noisy() -> None:
    cells = _queue_curve(
        {
            4: ([2000, 2600, 1500], [400, 420, 380]),
            8: ([2600, 3200, 1900], [1500, 1550, 1450]),  # +30% median, overlapping repeats
        }
    )
    assert saturation_over_concurrency(summaries(cells)) is None


# --- serialisation, the log section, the manifest ----------------------------------------------


def test_to_dict_is_json_and_complete() -> None:
    recs = recommend(summaries(_two_config_sweep()), 5000, target_load_infer_per_s=1100)
    data = json.loads(json.dumps(recommendations_dict(recs)))
    assert set(data) >= {
        "latency_budget_p99_us",
        "target_load_infer_per_s",
        "points",
        "excluded_points",
        "exclusion_note",
        "frontier",
        "throughput_pick",
        "latency_pick",
        "knees",
        "max_rate_within_budget",
        "summary_line",
        "method",
    }
    assert len(data["points"]) == 5
    assert data["points"][1]["latency_p99_max_us"] == 7100
    assert data["throughput_pick"]["verdicts"]["throughput"]["word"] == "higher"
    assert data["throughput_pick"]["runner_up"]["variant"] == "baseline"
    assert data["throughput_pick"]["runner_up_verdict"]["word"] == "higher"
    assert data["throughput_pick"]["tie_break"]["applied"] is False
    assert data["knees"] == {"baseline/grpc/b1": 8, "batch_0us/grpc/b1": 8}
    assert data["method"]["budget"] == RULES["budget"]
    assert set(data["method"]) >= {"budget", "excluded", "tie_break", "different_optima"}


def test_log_section_states_the_rules() -> None:
    s = summaries(_open_loop_sweep(True))
    recs = recommend(s, 5000, target_load_infer_per_s=1000)
    text = "\n".join(recommendations_section(recs, s))
    assert "a point meets the p99 budget only when every repeat's p99 is within it" in text
    assert "1 operating point (batch_0us at grpc_b1_r3000) was excluded" in text
    assert "3 measured operating points (medians over repeats), 1 of them excluded" in text
    assert f"- Tie-break: {RULES['tie_break']}" in text
    assert "fewer instances, then a point the other figure (p99 for a throughput pick" in text
    assert "worst repeat's p99 µs" in text
    tied = [
        *repeats("batch_0us_x2", [3000, 3300, 2800], [4000, 4200, 3900]),
        *repeats("batch_0us", [2900, 2950, 3100], [4500, 4600, 4400]),
    ]
    recs = recommend(summaries(tied), 5000)
    text = "\n".join(recommendations_section(recs, summaries(tied)))
    assert (
        "Tie-break applied on throughput: tied within the noise: batch_0us at grpc_b1_c8, "
        "batch_0us_x2 at grpc_b1_c8; best by median batch_0us_x2 at grpc_b1_c8; chose "
        "batch_0us at grpc_b1_c8, decided by fewer instances"
    ) in text
    assert "No point was excluded in this sweep." in text


def test_recommendations_only_for_runs_with_a_latency_budget() -> None:
    s = summaries(_two_config_sweep())
    manifest = Manifest.from_dict(
        json.loads((FIXTURES / "seed_run" / "results" / "manifest.json").read_text())
    )
    assert recommendations_from_manifest(manifest, s) is None
    no_budget = dataclasses.replace(manifest, sweep=SweepEntry("plan.yaml", "demo"))
    assert recommendations_from_manifest(no_budget, s) is None
    recs = recommendations_from_manifest(
        dataclasses.replace(manifest, sweep=SweepEntry("plan.yaml", "demo", 5000.0, 1100.0)), s
    )
    assert recs is not None and recs.target_load_infer_per_s == 1100.0


# --- recorded runs -----------------------------------------------------------------------------


def test_on_the_recorded_seed_run(seed_run_dir: Path) -> None:
    """Real cells: batching at 0 ms is the throughput pick once every repeat is within budget;
    at 6,000 µs its median (5,643) is within but one repeat (6,059) is not."""
    order = ["baseline", "batch_5ms_x1", "batch_5ms_x2", "batch_0ms_x1"]
    s = summarise(load_cells(seed_run_dir), order)
    assert recommend(s, 6000, 2000).throughput_pick is None
    recs = recommend(s, 6100, 2000)
    assert recs.throughput_pick is not None
    assert recs.throughput_pick.point.variant == "batch_0ms_x1"
    assert recs.throughput_pick.verdicts["throughput"].word == "higher"
    assert [p.variant for p in recs.frontier] == ["batch_0ms_x1"]
    assert all(p.variant not in ("batch_5ms_x1", "batch_5ms_x2") for p in recs.frontier)


@pytest.fixture(scope="module")
def sweep_run_dir() -> Path:
    return FIXTURES / "sweep_run"


def _check_pick_rules(recs: Recommendations) -> None:
    budget = recs.latency_budget_p99_us
    pick = recs.throughput_pick
    assert pick is not None and pick.tie_break is not None
    assert pick.point.within(budget) and not pick.point.load_generator_fell_behind
    best = pick.tie_break.best_by_median
    assert all(
        p.throughput_infer_per_s <= best.throughput_infer_per_s
        for p in recs.eligible
        if p.within(budget)
    )
    # The best by median, or a point tied with it that the tie-break preferred.
    assert pick.point == best or (pick.tie_break.overridden and best in pick.tie_break.tied)


def test_on_the_recorded_sweep(sweep_run_dir: Path) -> None:
    """Real sweep cells: every pick respects its rules, knees lie on measured levels."""
    manifest = Manifest.from_dict(
        json.loads((sweep_run_dir / "results" / "manifest.json").read_text())
    )
    order = manifest.variant_order
    s = summarise(load_cells(sweep_run_dir), order)
    recs = recommendations_from_manifest(manifest, s)
    assert recs is not None
    _check_pick_rules(recs)
    assert recs.excluded and all(p.load_generator_fell_behind for p in recs.excluded)
    assert not any(p.load_generator_fell_behind for p in recs.frontier)
    levels = {p.concurrency for p in recs.points if p.concurrency is not None}
    assert recs.knees and set(recs.knees.values()) <= levels
    assert recs.max_rate_within_budget
