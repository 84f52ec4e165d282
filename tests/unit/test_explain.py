"""analysis/explain.py: the three layers per variant of the recorded seed run."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tritonlab.analysis.aggregate import VariantSummary
from tritonlab.analysis.explain import (
    Analysis,
    VariantReport,
    analyse,
    choose_reference,
    describe_change,
)
from tritonlab.analysis.verdicts import HIGHER, LOWER, NO_CLEAR
from tritonlab.repository.variants import ServingVariant

Names = dict[str, VariantSummary]


@pytest.fixture(scope="module")
def analyses(seed_summaries: list[VariantSummary]) -> list[Analysis]:
    return analyse(seed_summaries, cores=2)


@pytest.fixture(scope="module")
def reports(analyses: list[Analysis]) -> dict[str, VariantReport]:
    return {r.summary.variant.name: r for r in analyses[0].reports}


def test_one_analysis_with_a_report_per_variant(
    analyses: list[Analysis], plan_order: list[str]
) -> None:
    assert len(analyses) == 1
    analysis = analyses[0]
    assert analysis.load_key == "grpc_b1_c8"
    assert analysis.cores == 2
    assert [r.summary.variant.name for r in analysis.reports] == plan_order
    for r in analysis.reports:
        assert r.background.strip()
        assert r.action.strip()
        assert r.result.strip()
        assert r.note.strip()


def test_baseline_report(reports: dict[str, VariantReport]) -> None:
    r = reports["baseline"]
    assert r.reference is None
    assert r.changed == []
    assert r.reference_verdicts == {}
    assert r.action.startswith("Nothing changed")
    assert "no batching and 1 instance" in r.background
    assert r.note.startswith("baseline")
    assert r.note == "baseline; instance saturated"
    assert "Saturated:" in r.result
    # Compared with itself, nothing is a clear difference.
    assert all(v.word == NO_CLEAR for v in r.verdicts.values())


def test_5ms_x1_enables_batching_and_hits_the_trap(
    reports: dict[str, VariantReport], by_name: Names
) -> None:
    r = reports["batch_5ms_x1"]
    assert r.reference == "baseline"
    assert r.changed == ["dynamic_batching"]
    assert r.action == (
        "One change from 'baseline (no batching, count=1)': enabled dynamic_batching with "
        "max_queue_delay_microseconds = 5000."
    )
    assert "dynamic batching raise throughput" in r.background
    assert r.verdicts["throughput"].word == LOWER
    assert r.verdicts["latency_p99"].word == HIGHER
    assert [f.rule for f in r.findings] == ["queue-delay-trap"]
    assert "Queue-delay trap" in r.result
    assert "Judgement: worse on both throughput and tail latency" in r.result
    assert "queue-delay trap" in r.note
    s = by_name["batch_5ms_x1"]
    assert f"queued {s.queue_us.median:,.0f} µs" in r.result
    assert f"batches of {s.mean_batch.median:.1f} on average" in r.result


def test_5ms_x2_reference_is_5ms_x1(reports: dict[str, VariantReport]) -> None:
    r = reports["batch_5ms_x2"]
    assert r.reference == "batch_5ms_x1"
    assert r.changed == ["instance_count"]
    assert r.action == ("One change from 'batching (5 ms, count=1)': instance_group count 1 -> 2.")
    assert "running 2 model instances instead of 1" in r.background
    assert "2 cores" in r.background
    # Against its reference: no clear difference; against the baseline: the trap's loss.
    assert r.reference_verdicts["throughput"].word == NO_CLEAR
    assert r.verdicts["throughput"].word == LOWER
    assert "Against the baseline: throughput lower" in r.result
    assert {f.rule for f in r.findings} == {"queue-delay-trap", "instances-effect"}
    assert "1 -> 2 instances" in r.result


def test_0ms_batching_pays(reports: dict[str, VariantReport]) -> None:
    r = reports["batch_0ms_x1"]
    # Ties (baseline and batch_5ms_x1 both differ in one field) go to the earliest: baseline.
    assert r.reference == "baseline"
    assert r.changed == ["dynamic_batching"]
    assert r.action.endswith("max_queue_delay_microseconds = 0.")
    assert r.verdicts["throughput"].word == HIGHER
    assert "Batching raised throughput" in r.result
    assert "batching pays" in r.note
    assert r.note.startswith(f"tput {r.verdicts['throughput'].phrase()}")
    assert "Against the baseline" not in r.result  # the reference is the baseline


def test_result_quotes_medians_and_intervals(
    reports: dict[str, VariantReport], by_name: Names
) -> None:
    s = by_name["batch_0ms_x1"]
    low, high = s.throughput.interval95 or (0.0, 0.0)
    expected = f"{s.throughput.median:,.0f} infer/s [95% CI {low:,.0f}–{high:,.0f}]"
    assert expected in reports["batch_0ms_x1"].result


def test_report_to_dict_is_json(analyses: list[Analysis]) -> None:
    data = json.loads(json.dumps(analyses[0].to_dict()))
    assert data["load_key"] == "grpc_b1_c8"
    assert [v["report"]["variant"] for v in data["variants"]] == [
        "baseline",
        "batch_5ms_x1",
        "batch_5ms_x2",
        "batch_0ms_x1",
    ]
    x2 = data["variants"][2]["report"]
    assert x2["reference"] == "batch_5ms_x1"
    assert x2["changed"] == ["instance_count"]
    assert {f["rule"] for f in x2["findings"]} == {"queue-delay-trap", "instances-effect"}


def test_choose_reference_prefers_fewest_changes(by_name: Names) -> None:
    earlier = [by_name["baseline"], by_name["batch_5ms_x1"]]
    assert choose_reference(by_name["batch_5ms_x2"].variant, earlier).variant.name == (
        "batch_5ms_x1"
    )
    assert choose_reference(by_name["batch_0ms_x1"].variant, earlier).variant.name == "baseline"


def test_describe_change() -> None:
    before = ServingVariant("a", "a")
    after = dataclasses.replace(
        before,
        dynamic_batching=True,
        max_queue_delay_us=100,
        preferred_batch_sizes=(4,),
        max_batch_size=32,
        instance_kind="KIND_GPU",
        intra_op_threads=4,
    )
    assert describe_change("dynamic_batching", before, after) == (
        "enabled dynamic_batching with max_queue_delay_microseconds = 100 and "
        "preferred_batch_size = [4]"
    )
    assert describe_change("dynamic_batching", after, before) == "disabled dynamic_batching"
    assert describe_change("max_batch_size", before, after) == "max_batch_size 64 -> 32"
    assert describe_change("instance_kind", before, after) == (
        "instance_group kind KIND_CPU -> KIND_GPU"
    )
    assert describe_change("intra_op_threads", before, after) == "intra_op_thread_count 1 -> 4"
    assert describe_change("preferred_batch_sizes", before, after) == "preferred_batch_size = [4]"


def test_delay_only_change_background(by_name: Names) -> None:
    # A 0 ms, count=2 row differs from the baseline in two fields but from batch_5ms_x2 only
    # in its delay, so batch_5ms_x2 is its reference.
    b0 = by_name["batch_0ms_x1"]
    variant = dataclasses.replace(b0.variant, name="batch_0ms_x2", instance_count=2)
    b0x2 = dataclasses.replace(
        b0,
        variant=variant,
        cells=tuple(dataclasses.replace(c, variant=variant) for c in b0.cells),
    )
    (analysis,) = analyse([by_name["baseline"], by_name["batch_5ms_x2"], b0x2], cores=2)
    r = analysis.reports[2]
    assert r.reference == "batch_5ms_x2"
    assert r.changed == ["max_queue_delay_us"]
    assert r.action.endswith(": max_queue_delay_microseconds 5000 -> 0.")
    assert r.action.startswith("One change from")
    assert "Does waiting less for a batch (5000 -> 0 µs)" in r.background
    assert r.reference_verdicts["throughput"].word == HIGHER


def test_one_analysis_per_load_point(by_name: Names) -> None:
    base = by_name["baseline"]
    other = dataclasses.replace(base, load_key="http_b1_c8")
    analyses = analyse([base, by_name["batch_5ms_x1"], other], cores=2)
    assert [a.load_key for a in analyses] == ["grpc_b1_c8", "http_b1_c8"]
    assert len(analyses[0].reports) == 2
    assert len(analyses[1].reports) == 1
    assert analyses[1].reports[0].reference is None


def test_open_loop_at_different_offered_rates_compares_tails_only(by_name: Names) -> None:
    from dataclasses import replace

    def at_rate(s: VariantSummary, rate: float) -> VariantSummary:
        return replace(
            s,
            load_key="grpc_b1_p50",
            settings=replace(s.settings, concurrency=None, request_rate_per_s=rate),
        )

    base = at_rate(by_name["baseline"], 1100.0)
    zero = at_rate(by_name["batch_0ms_x1"], 1900.0)
    (analysis,) = analyse([base, zero], cores=2)
    r = analysis.reports[1]
    assert r.reference_verdicts["throughput"].method == "not comparable: different offered rates"
    assert r.reference_verdicts["throughput"].word == "no clear difference"
    assert "batching-raised-throughput" not in [f.rule for f in r.findings]
    assert "same share of its own peak" in r.result


def test_reference_prefers_the_variant_with_fewer_raw_changes(by_name: Names) -> None:
    from dataclasses import replace

    five = by_name["batch_5ms_x1"]
    pref8 = replace(
        five,
        variant=replace(
            five.variant,
            name="batch_5ms_pref8",
            description="5 ms, preferred [8]",
            preferred_batch_sizes=(8,),
        ),
    )
    (analysis,) = analyse([by_name["baseline"], five, pref8], cores=2)
    r = analysis.reports[2]
    assert r.reference == "batch_5ms_x1"
    assert r.changed == ["preferred_batch_sizes"]
