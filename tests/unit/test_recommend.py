"""Recommendations: frontier, picks, runner-up noise, knees, open-loop rates, saturation."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tritonlab.analysis.aggregate import VariantSummary, summarise
from tritonlab.analysis.recommend import (
    OperatingPoint,
    knee_concurrency,
    operating_point,
    pareto_frontier,
    recommend,
    recommendations_from_manifest,
    saturation_findings,
    saturation_over_concurrency,
)
from tritonlab.experiments.store import CellResult, load_cells

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
) -> CellResult:
    """A real cell record (the seed run's shape) with the figures a test needs."""
    data = copy.deepcopy(TEMPLATE)
    load = f"r{rate:g}" if rate is not None else f"c{concurrency}"
    load_key = f"{protocol}_b{batch}_{load}"
    data["cell_id"] = f"{variant}__{load_key}__r{repeat}"
    data["load_key"] = load_key
    data["repeat"] = repeat
    data["started_utc"] = f"2026-01-01T00:00:{repeat:02d}Z"
    data["variant"].update(name=variant, description=DESCRIPTIONS.get(variant, variant))
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
    data["server"]["queue_us_per_request"] = queue_us
    return CellResult.from_dict(data)


def repeats(variant: str, tputs: list[float], p99s: list[float], **kw: Any) -> list[CellResult]:
    return [
        cell(variant, t, p, repeat=i + 1, **kw)
        for i, (t, p) in enumerate(zip(tputs, p99s, strict=True))
    ]


def summaries(cells: list[CellResult]) -> list[VariantSummary]:
    return summarise(cells, ["baseline", "batch_0us", "batch_5000us", "batch_0us_x2"])


def point(variant: str, tput: float, p99: float, key: str = "grpc_b1_c8") -> OperatingPoint:
    return OperatingPoint(variant, variant, key, "grpc", 1, 8, None, tput, p99)


# --- operating points and the frontier -------------------------------------------------------


def test_operating_point_takes_medians_and_skips_cells_without_p99() -> None:
    [s] = summaries(repeats("baseline", [100, 300, 200], [900, 700, 800]))
    p = operating_point(s)
    assert p is not None
    assert (p.throughput_infer_per_s, p.latency_p99_us) == (200.0, 800.0)
    assert (p.variant, p.load_key, p.protocol, p.concurrency, p.request_rate_per_s) == (
        "baseline",
        "grpc_b1_c8",
        "grpc",
        8,
        None,
    )
    assert p.curve_key == "baseline/grpc/b1"
    [unstable] = summaries([cell("baseline", 100, None)])  # unstable: no percentiles
    assert operating_point(unstable) is None


def test_pareto_frontier() -> None:
    a, b, c = point("a", 1000, 2000), point("b", 2000, 3000), point("c", 3000, 9000)
    dominated = point("d", 1500, 3500)  # b has more throughput and a shorter tail
    tie_worse = point("e", 2000, 3100)  # same throughput as b, longer tail
    twin = point("f", 1000, 2000)  # identical to a: neither dominates the other
    front = pareto_frontier([c, dominated, a, b, tie_worse, twin])
    assert [p.variant for p in front] == ["a", "f", "b", "c"]


# --- picks -----------------------------------------------------------------------------------


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
    text = pick.justification
    assert text.startswith("Action: serve 'batching (0 µs, count=1)' (batch_0us)")
    assert "Result: 2,400 infer/s at p99 4,800 µs" in text
    assert "Judgement: the change pays" in text
    # Runner-up: another configuration (the baseline at c4), not batch_0us at c4.
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
    assert "target load of 1,100 infer/s" in pick.justification
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
    assert pick is not None and pick.point.variant == "batch_0us"
    assert "is not clear given the noise" in pick.justification
    assert pick.verdicts["throughput"].word == "no clear difference"
    assert "not clearly above the baseline" in pick.justification
    # Clearly separated repeats: the lead is stated as a win instead.
    clear = [
        *repeats("baseline", [2000, 2010, 1990], [4000, 4100, 3900]),
        *repeats("batch_0us", [2500, 2510, 2490], [4000, 4100, 3900]),
    ]
    clear_pick = recommend(summaries(clear), 5000).throughput_pick
    assert clear_pick is not None
    assert "is not clear" not in clear_pick.justification
    assert "beats the runner-up" in clear_pick.justification


def test_baseline_pick_and_missing_baseline_load() -> None:
    cells = [
        *repeats("baseline", [3000, 3010, 2990], [2000, 2100, 1900], concurrency=4),
        *repeats("batch_5000us", [900, 910, 890], [9000, 9100, 8900], concurrency=16),
    ]
    recs = recommend(summaries(cells), 5000)
    assert recs.throughput_pick is not None
    assert recs.throughput_pick.point.variant == "baseline"
    assert "keep it" in recs.throughput_pick.justification
    wide = recommend(summaries(cells), 10000, target_load_infer_per_s=800)
    pick = wide.latency_pick
    assert pick is not None and pick.point.variant == "baseline"
    only_other = recommend(summaries(cells[3:]), 10000)
    assert only_other.throughput_pick is not None
    assert only_other.throughput_pick.verdicts == {}
    assert "baseline was not measured at this load" in only_other.throughput_pick.justification
    assert "no runner-up" in only_other.throughput_pick.justification


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
    assert recs.knees == {"baseline/grpc/b1": 4}


def test_knee_when_every_step_gains_and_with_one_level() -> None:
    rising = _curve("batch_0us", {1: [1000, 1010], 4: [2500, 2510], 16: [5000, 5010]})
    [curve_summaries] = [summaries(rising)]
    assert knee_concurrency(curve_summaries) == 16
    assert knee_concurrency(curve_summaries[:1]) is None


def test_knee_small_but_clear_gain_is_flat() -> None:
    # Separated repeats, but +6% over two doublings (3% per doubling) is under 10% per doubling.
    cells = _curve("baseline", {2: [2000, 2005, 1995], 8: [2120, 2125, 2115]})
    assert knee_concurrency(summaries(cells)) == 2


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
    assert recs.knees == {"baseline/grpc/b1": 1, "baseline/http/b1": 4}


# --- open loop -------------------------------------------------------------------------------


def test_max_rate_within_budget() -> None:
    cells = [
        *repeats("baseline", [1000, 1000], [1500, 1600], rate=1000.0, concurrency=None),
        *repeats("baseline", [1600, 1590], [4000, 4500], rate=1600.0, concurrency=None),
        *repeats("baseline", [1900, 1910], [20000, 21000], rate=2000.0, concurrency=None),
        # Within budget but served far below the offered rate: the server fell behind.
        *repeats("batch_0us", [1000, 1000], [1000, 1000], rate=3000.0, concurrency=None),
        *repeats("batch_0us", [1495, 1500], [1200, 1300], rate=1500.0, concurrency=None),
        *repeats("batch_0us", [2480, 2500], [2000, 2100], rate=2500.0, concurrency=None),
    ]
    recs = recommend(summaries(cells), 5000)
    assert recs.max_rate_within_budget == {"baseline/grpc/b1": 1600.0, "batch_0us/grpc/b1": 2500.0}
    p = next(p for p in recs.points if p.request_rate_per_s == 2000.0)
    assert p.concurrency is None and p.load_key == "grpc_b1_r2000"
    assert recs.knees == {}
    assert recommend(summaries(cells), 1000).max_rate_within_budget == {}


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
    assert (sat.curve, sat.concurrency_before, sat.concurrency_after) == ("baseline/grpc/b1", 4, 8)
    assert (sat.queue_us_before, sat.queue_us_after) == (400, 1500)
    assert sat.throughput_verdict.word == "no clear difference"
    assert "queue time rose from 400 to 1,500 µs" in sat.text
    assert [s.curve for s in saturation_findings(summaries(cells))] == ["baseline/grpc/b1"]


def test_no_saturation_while_throughput_rises_or_queue_barely_moves() -> None:
    rising = _queue_curve(
        {4: ([2000, 2010, 1990], [400, 410, 390]), 8: ([3000, 3010, 2990], [1500, 1510, 1490])}
    )
    assert saturation_over_concurrency(summaries(rising)) is None
    small = _queue_curve(
        {4: ([2500, 2510, 2490], [400, 410, 390]), 8: ([2500, 2490, 2510], [500, 510, 490])}
    )
    assert saturation_over_concurrency(summaries(small)) is None  # +25% < 50%


# --- summary line, serialisation, manifest ---------------------------------------------------


def test_summary_line_states_action_result_and_judgement() -> None:
    recs = recommend(summaries(_two_config_sweep()), 5000, target_load_infer_per_s=1100)
    line = recs.summary_line
    assert line.startswith("Deployed the ONNX model simple_mlp on NVIDIA Triton")
    # Only the knobs the sweep varied are named (the synthetic variants differ in batching).
    assert "swept 3 serving configurations (dynamic_batching) with perf_analyzer" in line
    assert "concurrency 4–8" in line
    assert "3 interleaved repeats per cell" in line
    assert "'batching (0 µs, count=1)' for throughput-first use (2,400 infer/s, higher (+100%)" in (
        line
    )
    assert "for latency-first use (p99 2,500 µs while carrying 1,500 infer/s" in line
    assert line.endswith(
        "here one server configuration serves both goals; what differs is the load it is run "
        "at, so the operating point (concurrency or rate) must be chosen for the scenario."
    )
    other = recommend(summaries(_two_config_sweep()), 2700, target_load_infer_per_s=1100)
    assert other.throughput_pick is not None and other.latency_pick is not None
    nothing = recommend(summaries(_two_config_sweep()), 100)
    assert nothing.summary_line.endswith(
        "no configuration met the latency budget or the target load."
    )
    assert recommend([], 5000).summary_line == "No operating points were measured."


def test_summary_line_different_optima() -> None:
    cells = [
        *repeats("baseline", [1000, 1010, 990], [1000, 1010, 990], concurrency=4),
        *repeats("batch_0us", [3000, 3010, 2990], [4000, 4010, 3990], concurrency=4),
    ]
    recs = recommend(summaries(cells), 5000, target_load_infer_per_s=900)
    assert recs.throughput_pick is not None and recs.latency_pick is not None
    assert recs.throughput_pick.point.variant == "batch_0us"
    assert recs.latency_pick.point.variant == "baseline"
    assert "different optima" in recs.summary_line


def test_to_dict_is_json_and_complete() -> None:
    recs = recommend(summaries(_two_config_sweep()), 5000, target_load_infer_per_s=1100)
    data = json.loads(json.dumps(recs.to_dict()))
    assert set(data) >= {
        "latency_budget_p99_us",
        "target_load_infer_per_s",
        "points",
        "frontier",
        "throughput_pick",
        "latency_pick",
        "knees",
        "max_rate_within_budget",
        "summary_line",
    }
    assert len(data["points"]) == 5
    assert data["throughput_pick"]["verdicts"]["throughput"]["word"] == "higher"
    assert data["knees"] == {"baseline/grpc/b1": 8, "batch_0us/grpc/b1": 8}


def test_recommendations_only_for_runs_with_a_latency_budget() -> None:
    s = summaries(_two_config_sweep())
    assert recommendations_from_manifest({}, s) is None
    assert recommendations_from_manifest({"sweep": {"latency_budget_p99_us": None}}, s) is None
    recs = recommendations_from_manifest(
        {"sweep": {"latency_budget_p99_us": 5000, "target_load_infer_per_s": 1100}}, s
    )
    assert recs is not None and recs.target_load_infer_per_s == 1100.0


def test_on_the_recorded_seed_run(seed_run_dir: Path) -> None:
    """Real cells: batching at 0 ms is the throughput pick; the 5 ms trap is far off the front."""
    order = ["baseline", "batch_5ms_x1", "batch_5ms_x2", "batch_0ms_x1"]
    recs = recommend(summarise(load_cells(seed_run_dir), order), 6000, 2000)
    assert recs.throughput_pick is not None
    assert recs.throughput_pick.point.variant == "batch_0ms_x1"
    assert recs.throughput_pick.verdicts["throughput"].word == "higher"
    assert [p.variant for p in recs.frontier] == ["batch_0ms_x1"]
    assert all(p.variant not in ("batch_5ms_x1", "batch_5ms_x2") for p in recs.frontier)


@pytest.fixture(scope="module")
def sweep_run_dir() -> Path:
    return FIXTURES / "sweep_run"


def test_on_the_recorded_sweep(sweep_run_dir: Path) -> None:
    """Real sweep cells: every pick respects its rule, knees lie on measured levels."""
    manifest = json.loads((sweep_run_dir / "results" / "manifest.json").read_text())
    order = [v["name"] for v in manifest["plan"]["variants"]]
    s = summarise(load_cells(sweep_run_dir), order)
    recs = recommendations_from_manifest(manifest, s)
    assert recs is not None
    budget = recs.latency_budget_p99_us
    pick = recs.throughput_pick
    assert pick is not None and pick.point.latency_p99_us <= budget
    assert all(
        p.throughput_infer_per_s <= pick.point.throughput_infer_per_s
        for p in recs.points
        if p.latency_p99_us <= budget
    )
    assert pick.point in recs.frontier
    levels = {p.concurrency for p in recs.points if p.concurrency is not None}
    assert recs.knees and set(recs.knees.values()) <= levels
    assert recs.max_rate_within_budget


# --- review fixes: knees see later gains, flat means flat, warned rates do not count ----------


def test_knee_is_not_hidden_by_one_noisy_flat_step() -> None:
    cells = _curve(
        "baseline",
        {1: [1000, 1005, 995], 4: [1100, 1500, 900], 16: [3000, 3010, 2990]},
    )
    # 1 -> 4 is "no clear difference", but 16 clearly beats both lower levels
    assert knee_concurrency(summaries(cells)) == 16


def test_no_saturation_when_throughput_gain_is_large_but_noisy() -> None:
    cells = _queue_curve(
        {
            4: ([2000, 2600, 1500], [400, 420, 380]),
            8: ([2600, 3200, 1900], [1500, 1550, 1450]),  # +30% median, overlapping repeats
        }
    )
    assert saturation_over_concurrency(summaries(cells)) is None


def test_rates_perf_analyzer_could_not_keep_up_do_not_count() -> None:
    warned = [
        dataclasses.replace(
            c,
            perf=dataclasses.replace(
                c.perf,
                warnings=["Perf Analyzer was not able to keep up with the desired request rate."],
            ),
        )
        for c in repeats("baseline", [2500, 2490], [2000, 2100], rate=2500.0, concurrency=None)
    ]
    cells = [
        *repeats("baseline", [1500, 1495], [1200, 1300], rate=1500.0, concurrency=None),
        *warned,
    ]
    recs = recommend(summaries(cells), 5000)
    assert recs.max_rate_within_budget == {"baseline/grpc/b1": 1500.0}
    assert [p.load_generator_fell_behind for p in recs.points] == [False, True]
