"""explanation/explain.py: the three layers per variant of the recorded seed run."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from tritonlab.experiments.store import load_cells
from tritonlab.explanation.explain import (
    SERVER_FIGURES,
    Analysis,
    VariantReport,
    analyse,
    choose_reference,
)
from tritonlab.repository.knobs import describe_change
from tritonlab.repository.variants import ServingVariant
from tritonlab.stats.aggregate import VariantSummary, compare_figure, summarise
from tritonlab.stats.verdicts import HIGHER, LOWER, NO_CLEAR, NOT_COMPARABLE

Names = dict[str, VariantSummary]
SWEEP_RUN = Path(__file__).resolve().parent.parent / "fixtures" / "sweep_run"
NO_EFFECT = "no measurable effect"


def judgement(r: VariantReport) -> str:
    found = re.search(
        r"Judgement(?: \(against '[^']*', the row it is explained from\))?: (.*)\.$", r.result
    )
    assert found, r.result
    return found.group(1)


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
    # Compared with itself, nothing is a clear difference, and that is decided (exactly 0%).
    assert all(v.word == NO_CLEAR for v in r.verdicts.values())
    assert all(v.change_pct == 0.0 and v.decided for v in r.verdicts.values())


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
    # Average latency clearly rose; over three rounds the p99's interval still reaches just
    # below no change, so its word is "no clear difference" and the judgement follows it.
    assert r.verdicts["latency_avg"].word == HIGHER
    p99 = r.verdicts["latency_p99"]
    assert p99.word == NO_CLEAR
    assert p99.low_pct is not None and p99.high_pct is not None
    assert p99.low_pct < 0 < p99.high_pct
    assert not p99.decided
    assert "queue-delay-trap" in [f.rule for f in r.findings]
    assert "Queue-delay trap" in r.result
    assert "Judgement: less throughput for no latency gain" in r.result
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
    assert "batching-amortised" in [f.rule for f in r.findings]
    assert "Batching formed batches of 4.0 on average (was 1.0)" in r.result
    assert "compute per inference lower (batching)" in r.note
    assert r.note.startswith(f"tput {r.verdicts['throughput'].phrase()}")
    assert "Against the baseline" not in r.result  # the reference is the baseline


def test_result_quotes_medians_with_ranges_and_change_intervals(
    reports: dict[str, VariantReport], by_name: Names
) -> None:
    s, base = by_name["batch_0ms_x1"], by_name["baseline"]
    r = reports["batch_0ms_x1"]
    low, high = s.throughput.range or (0.0, 0.0)
    expected = f"{s.throughput.median:,.0f} infer/s ({low:,.0f}–{high:,.0f})"
    assert expected == s.throughput.text(unit="infer/s")
    assert f"{expected} against {base.throughput.text(unit='infer/s')}" in r.result
    assert f"p99 {r.reference_verdicts['latency_p99'].phrase()}: " in r.result
    tput = r.reference_verdicts["throughput"]
    assert f"Throughput {tput.phrase()}: " in r.result
    assert tput.phrase().startswith("higher (+31%, CI +")
    assert "[95% CI" not in r.result  # the medians carry ranges, not extrapolated intervals


def test_verdicts_pair_the_recorded_rounds(reports: dict[str, VariantReport]) -> None:
    for r in list(reports.values())[1:]:
        for v in [*r.verdicts.values(), *r.reference_verdicts.values()]:
            assert v.pairs == 3
            assert v.has_interval


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
    assert choose_reference(by_name["batch_5ms_x2"], earlier).variant.name == ("batch_5ms_x1")
    assert choose_reference(by_name["batch_0ms_x1"], earlier).variant.name == "baseline"


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


def test_open_loop_at_different_offered_rates_is_not_comparable(by_name: Names) -> None:
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
    for v in r.reference_verdicts.values():
        assert v.word == NOT_COMPARABLE
        assert v.method == "different offered loads"
    assert r.verdicts["latency_p99"].word == NOT_COMPARABLE
    assert "batching-amortised" not in [f.rule for f in r.findings]
    assert "Throughput not comparable (different offered loads)" in r.result
    assert judgement(r).startswith("not comparable with the reference (different offered loads)")
    assert NO_EFFECT not in r.result
    assert r.note == (
        "tput not comparable (different offered loads), p99 not comparable (different offered "
        "loads)"
    )


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


# --- the judgement names the server figures that separated -----------------------------------


def _client_figures_of(subject: VariantSummary, donor: VariantSummary) -> VariantSummary:
    """``subject`` with ``donor``'s perf_analyzer figures, round by round, throughput scaled by
    an inconsistent few percent: the client sees no clear change, the server keeps its own."""
    factors = {1: 1.06, 2: 0.95, 3: 1.02}
    donors = {c.repeat: c for c in donor.cells}
    cells = []
    for cell in subject.cells:
        perf = donors[cell.repeat].perf
        assert perf.measurement is not None
        measurement = dataclasses.replace(
            perf.measurement,
            throughput_infer_per_s=perf.measurement.throughput_infer_per_s * factors[cell.repeat],
        )
        cells.append(
            dataclasses.replace(cell, perf=dataclasses.replace(perf, measurement=measurement))
        )
    return dataclasses.replace(subject, cells=tuple(cells))


def test_recorded_0ms_batching_judgement_is_not_no_effect(
    reports: dict[str, VariantReport],
) -> None:
    r = reports["batch_0ms_x1"]
    assert NO_EFFECT not in judgement(r)
    assert judgement(r) == "more throughput at no clear cost in tail latency"


def test_server_figures_that_separated_are_named_when_client_figures_do_not(
    by_name: Names,
) -> None:
    # The recorded 0 ms variant: queue fell and mean batch rose (and compute per inference
    # fell) in every round. With client figures that show no clear change, the judgement
    # must not call that "no measurable effect": it names the server figures.
    base = by_name["baseline"]
    quiet = _client_figures_of(by_name["batch_0ms_x1"], base)
    (analysis,) = analyse([base, quiet], cores=2)
    r = analysis.reports[1]
    assert r.reference_verdicts["throughput"].word == NO_CLEAR
    assert r.reference_verdicts["latency_p99"].word == NO_CLEAR
    text = judgement(r)
    assert NO_EFFECT not in text
    assert text.startswith(
        "no clear change in throughput or p99 at this load, although the "
        "server's own figures separated ("
    )
    assert "queue per request lower (-7" in text
    assert "mean batch higher (+" in text
    assert "compute per inference lower (-3" in text
    # the client intervals reach past ±5%: the run cannot tell whether it showed (issue 36)
    assert "a change inside the server; whether it showed at the client this run cannot" in text


def test_nothing_separated_is_no_measurable_effect(by_name: Names) -> None:
    # A second instance that changed nothing: the baseline's own cells under another name,
    # every figure a few percent off, inconsistently, round by round.
    base = by_name["baseline"]
    variant = dataclasses.replace(base.variant, name="baseline_x2", instance_count=2)
    factors = {1: 1.04, 2: 0.97, 3: 1.01}
    cells = []
    for c in base.cells:
        assert c.server is not None and c.perf.measurement is not None
        f = factors[c.repeat]
        m = dataclasses.replace(
            c.perf.measurement,
            throughput_infer_per_s=c.perf.measurement.throughput_infer_per_s * f,
            latency_p99_us=(c.perf.measurement.latency_p99_us or 0.0) / f,
        )
        server = dataclasses.replace(
            c.server,
            queue_us_per_request=c.server.queue_us_per_request / f,
            compute_us_per_inference=c.server.compute_us_per_inference * (2.0 - f),
        )
        cells.append(
            dataclasses.replace(
                c, variant=variant, perf=dataclasses.replace(c.perf, measurement=m), server=server
            )
        )
    twin = dataclasses.replace(base, variant=variant, cells=tuple(cells))
    (analysis,) = analyse([base, twin], cores=2)
    r = analysis.reports[1]
    assert r.reference_verdicts["throughput"].word == NO_CLEAR
    assert r.reference_verdicts["latency_p99"].word == NO_CLEAR
    for attr in SERVER_FIGURES:
        assert compare_figure(attr, attr, base, twin).word == NO_CLEAR
    # identical copies whose intervals still reach past ±5% (-8% to +10%): no clear change,
    # not "no effect" (issue 36 audit)
    assert judgement(r).startswith("no clear change at this load, but the intervals still allow")
    assert "server's own figures separated" not in r.result


def test_recorded_second_instance_in_the_trap_is_no_measurable_effect(
    reports: dict[str, VariantReport],
) -> None:
    # batch_5ms_x2 against batch_5ms_x1: neither the client's nor the server's figures moved.
    r = reports["batch_5ms_x2"]
    # its intervals reach past ±5%: no effect is not shown, only no clear change (issue 36)
    assert judgement(r).startswith("no clear change at this load, but the intervals still allow")
    assert "although the server's own figures separated" not in r.result


@pytest.mark.skipif(
    not (SWEEP_RUN / "results" / "manifest.json").exists(),
    reason="the recorded sweep fixture tests/fixtures/sweep_run is not present",
)
def test_recorded_sweep_0us_batching_names_the_queue() -> None:
    manifest = json.loads((SWEEP_RUN / "results" / "manifest.json").read_text())
    order = [v["name"] for v in manifest["plan"]["variants"]]
    analyses = {a.load_key: a for a in analyse(summarise(load_cells(SWEEP_RUN), order), cores=2)}
    r = next(r for r in analyses["grpc_b1_c8"].reports if r.summary.variant.name == "batch_0us")
    assert r.reference == "baseline"
    assert r.reference_verdicts["throughput"].word == NO_CLEAR
    assert r.reference_verdicts["latency_p99"].word == NO_CLEAR
    text = judgement(r)
    assert NO_EFFECT not in text
    assert "queue per request lower" in text


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _recorded(name: str) -> dict[str, Analysis]:
    run = EXAMPLES / name
    manifest = json.loads((run / "results" / "manifest.json").read_text())
    order = [v["name"] for v in manifest["plan"]["variants"]]
    return {a.load_key: a for a in analyse(summarise(load_cells(run), order), cores=2)}


def _cache_finding(analysis: Analysis) -> tuple[str, dict[str, object]]:
    r = next(r for r in analysis.reports if r.summary.variant.name == "nobatch_cache")
    found = next(f for f in r.findings if f.rule == "cache-effect")
    return found.text, found.figures


@pytest.mark.parametrize("load", ["grpc_b1_c4", "grpc_b1_c16"])
def test_recorded_cache_runs_word_repeated_and_fresh_inputs_apart(load: str) -> None:
    """The two recorded cache runs: inputs that repeat (nearly every lookup a hit, said to hold
    for repeating traffic) and inputs drawn afresh per cell (no hit, worded as the cost of
    lookups that are never reused); the share is Triton's own counts."""
    text, figures = _cache_finding(_recorded("simple_mlp_cache")[load])
    assert float(str(figures["cache_hit_share"])) > 0.9 and "inputs repeat" in text
    text, figures = _cache_finding(_recorded("simple_mlp_cache_fresh")[load])
    assert figures["cache_hits"] == 0 and int(str(figures["cache_misses"])) > 0
    assert "never reused" in text and "inputs repeat" not in text
    lookups = int(str(figures["cache_misses"]))
    assert f"found no stored response (0 hits in {lookups:,} lookups" in text  # not "almost"


def test_a_pick_served_from_the_cache_carries_its_hit_share() -> None:
    recs = json.loads((EXAMPLES / "simple_mlp_cache/results/recommendations.json").read_text())
    pick = recs["throughput_pick"]
    assert pick["point"]["cache_hit_share"] > 0.9
    assert "Caveat: the response cache answered" in pick["justification"]
    fresh = json.loads(
        (EXAMPLES / "simple_mlp_cache_fresh/results/recommendations.json").read_text()
    )
    assert "cache_hit_share" not in fresh["throughput_pick"]["point"]  # batching alone won
