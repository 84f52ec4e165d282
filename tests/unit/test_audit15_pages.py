"""An independent audit's benchmark-page findings, each fixed in the code that writes the page
(the pages are rendered again from their stored JSON, nothing measured again):

1. the pipeline page states each re-measured row's protocol and calls a load common only where
   the concurrency and the protocol both match (Model Analyzer's pick was measured over gRPC,
   tune's over HTTP, both "at the common load");
2. the adapter page's paced diagnostic says in how many rounds the paced reference explains
   the gap, and what the others leave unexplained, not "explains the gap";
3. the demo precision page sets the runs' estimates side by side and says where their
   intervals did not overlap: a run's interval is not the spread between fresh runs;
4. the models bench says that it did not store its runs' trust, names the verdicts near the
   noise floor, and stores each run's trust from now on.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from script_module import load_script

from tritonlab.report.run_data import load_run

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _stored(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RESULTS / name).read_text())
    return data


# --- 1. the pipeline page: a load is common only in concurrency and protocol -----------------


@pytest.fixture(scope="module")
def pipeline() -> ModuleType:
    return load_script("benchmarks/vs_model_analyzer/pipeline_compare.py")


def test_the_pipeline_rows_state_their_protocol(pipeline: ModuleType) -> None:
    data = _stored("pipeline_vs_model_analyzer.json")
    page = pipeline.markdown(data)
    assert "the common load is concurrency" not in page
    assert "| ma | gRPC | c8 | 6 |" in page and "| tune | HTTP | c8 | 6 |" in page
    assert (
        "each pick is measured over the protocol its tool chose (ma over gRPC; tune over HTTP), "
        "so the rows at concurrency 8 share the concurrency but not the protocol: no load is "
        "common to them, and the rows compare operating points (configuration and protocol), "
        "not configurations." in page
    )
    assert "frames 240x320 uint8, gRPC, batch 1" not in page
    assert "(Model Analyzer quick (ensemble): gRPC; tritonlab tune: HTTP)" in page
    assert (RESULTS / "pipeline_vs_model_analyzer.md").read_text() == page


def test_a_load_of_one_concurrency_and_protocol_is_called_common(pipeline: ModuleType) -> None:
    data = copy.deepcopy(_stored("pipeline_vs_model_analyzer.json"))
    for pick in data["picks"]:
        pick["protocol"] = "grpc"
    page = pipeline.markdown(data)
    assert (
        "the common load is concurrency 8 over gRPC (every pick at the same concurrency and "
        "protocol)." in page
    )
    assert "operating points" not in page
    # a row's own stored protocol wins over its pick's
    data["remeasured"][2]["protocol"] = "http"
    assert "| tune | HTTP | c8 |" in pipeline.markdown(data)


def test_a_remeasured_row_stores_its_protocol() -> None:
    remeasure = load_script("benchmarks/vs_model_analyzer/remeasure.py")
    row = remeasure.RemeasuredRow("tune", 8, False, (1.0,), (2.0,), protocol="http")
    assert row.to_dict()["protocol"] == "http"


# --- 2. the adapter page: how far the paced reference explains the gap -------------------------


@pytest.fixture(scope="module")
def adapter() -> ModuleType:
    return load_script("benchmarks/adapter_overhead.py")


def test_the_paced_diagnostic_counts_the_rounds_it_explains(adapter: ModuleType) -> None:
    record = _stored("adapter_overhead.json")
    page = adapter.render_markdown(record)
    assert "explains the gap as onnxruntime running cold" not in page
    assert (
        "## Paced in-process reference (diagnostic: onnxruntime running cold between served "
        "requests explains the gap to within 25 µs in 2 of 3 rounds at batch 1, 1 of 3 rounds "
        "at batch 8)" in page
    )
    assert (
        "Round 2 leaves 60.8 µs unexplained at batch 1; rounds 2 and 3 leave 76.7 and 29.5 µs "
        "unexplained at batch 8: each more than 25 µs (the target at batch 1)." in page
    )
    assert (RESULTS / "adapter_overhead.md").read_text() == page


def test_rounds_all_within_the_target_are_said_so(adapter: ModuleType) -> None:
    results = {
        f"batch_{b}": {"adapter_us_vs_paced_per_round": [3.0, 24.0, 11.0]}
        for b in adapter.BATCH_SIZES
    }
    clause, sentence = adapter.paced_explains(results)
    assert clause == (
        "explains the gap to within 25 µs in every round (3 of 3) at batch 1, every round "
        "(3 of 3) at batch 8"
    )
    assert sentence == "No round leaves more than 25 µs unexplained."


# --- 3. the demo precision page: the runs' agreement -----------------------------------------


@pytest.fixture(scope="module")
def demo() -> ModuleType:
    return load_script("benchmarks/demo_precision.py")


def test_the_runs_estimates_are_set_side_by_side(demo: ModuleType) -> None:
    report = _stored("demo_precision.json")
    page = demo.render_md(report)
    row = next(
        x
        for x in page.splitlines()
        if x.startswith("| shared, quiet | batch_0ms_x1 | throughput |")
    )
    assert "+84.1% (CI +78.1% to +89.5%) | +66.0% (CI +58.7% to +73.9%)" in row
    assert row.endswith("| no (runs 1 and 2, runs 1 and 3) |")
    quiet = next(x for x in page.splitlines() if x.startswith("| split, quiet | batch_5ms_x1 |"))
    assert quiet.endswith("| yes |")
    # the summary docs/results.md quotes carries the agreement and what it means
    summary = "\n".join(demo.summary_table(report))
    assert (
        "- shared, quiet: in 5 of 6 verdicts the runs' intervals did not overlap (batch_5ms_x1 "
        "throughput, batch_5ms_x1 p99, batch_5ms_x2 throughput, batch_5ms_x2 p99, "
        "batch_0ms_x1 throughput); a run's estimate fell up to 16 percentage points outside "
        "another run's interval (batch_5ms_x2 p99: run 3's +30.5% against run 1's CI +46.1% to "
        "+57.7%) (run 2 did not call its verdicts trusted: see the table above)." in summary
    )
    assert "- split, quiet: in 0 of 6 verdicts the runs' intervals did not overlap;" in summary
    assert "a run's interval (its half-width above) is not the spread between fresh runs" in summary
    assert (RESULTS / "demo_precision.md").read_text() == page


def _run(number: int, change: float, low: float, high: float) -> dict[str, Any]:
    verdict = {
        "config": "x2",
        "figure": "throughput",
        "change_pct": change,
        "ci95_pct": [low, high],
    }
    return {"condition": "split, quiet", "run": number, "verdicts": [verdict]}


def test_runs_whose_intervals_overlap_are_not_called_apart() -> None:
    demo = load_script("benchmarks/demo_agreement.py")
    found = demo.agreements([_run(1, 10.0, 8.0, 12.0), _run(2, 11.0, 9.0, 13.0)])
    assert demo.agreement_sentence("split, quiet", found) == (
        "split, quiet: in 0 of 1 verdicts the runs' intervals did not overlap; every run's "
        "estimate fell inside every other run's interval"
    )
    lines = demo.agreement_lines({"runs": [_run(1, 10.0, 8.0, 12.0), _run(2, 11.0, 9.0, 13.0)]})
    assert not any("is not the spread" in x for x in lines)
    one = demo.agreements([_run(1, 10.0, 8.0, 12.0)])
    assert (
        demo.agreement_sentence("split, quiet", one) == "split, quiet: one run, nothing to compare"
    )


# --- 4. the models bench: each run's trust ----------------------------------------------------


@pytest.fixture(scope="module")
def models() -> ModuleType:
    return load_script("benchmarks/models_bench.py")


def test_the_page_says_the_runs_trust_was_not_stored(models: ModuleType) -> None:
    """Runs stored without their trust record: the page says so and names the verdicts near
    the noise floor; the committed page carries each run's stored trust."""
    report = _stored("models.json")
    bare = {
        **report,
        "models": [{k: v for k, v in m.items() if k != "trust"} for m in report["models"]],
    }
    page = models.render_md(bare)
    assert page.count("| not stored |") == len(report["models"])
    note = next(x for x in page.splitlines() if x.startswith("This benchmark did not store"))
    assert "these 11 runs' A/A control or trust record" in note
    assert "a verdict near the noise floor may be noise" in note
    for quoted in (
        "oww_alexa instances_2: lower (-3%, CI -5% to -0.1%)",
        "nudenet_320n batch_0ms_x1: higher (+2%, CI +0.1% to +5%)",
        "ppocr_cls batch_0ms_x1: higher (+4%, CI +1% to +6%)",
    ):
        assert quoted in note
    assert "magika" not in note and "no clear difference" not in note
    committed = models.render_md(report)
    assert "| not stored |" not in committed
    assert "- ppocr_det: this run's verdicts are not to be trusted: its A/A control told" in (
        committed
    )
    assert (RESULTS / "models.md").read_text() == committed
    docs = (ROOT / "docs" / "models.md").read_text()
    assert models.rewritten_docs(docs, report) == docs


def _measured(**fields: Any) -> dict[str, Any]:
    return {
        "name": "m",
        "kind": "k",
        "package": "p",
        "version": "1",
        "rc": 0,
        "wall_s": 9.0,
        "traceback": False,
        "error": "",
        "servers_left": 0,
        "checked_against": ["onnxruntime"],
        "cells": 40,
        "dims": "",
        "controls": [],
        "throughput": ["x2: higher (+4%, CI +1% to +6%)"],
    } | fields


def test_a_stored_trust_is_quoted_and_unrounded_ends_are_read(models: ModuleType) -> None:
    run = load_run(ROOT / "examples" / "simple_mlp_trace" / "tune_concurrency")
    trust = run.trust.to_dict()
    verdict = {"config": "x2", "word": "higher", "change_pct": 4.0, "ci95_pct": [1.4, 6.0]}
    entry = _measured(trust=trust, throughput_verdicts=[verdict])
    lines = models.table_lines({"models": [entry]})
    assert f"| {run.trust.state} | 9 s |" in lines[2]
    assert run.trust.caveat(), "the trace example's run is one with a doubt"
    assert models.trust_lines({"models": [entry]}) == ["", f"- m: {run.trust.caveat()}."]
    # the printed '+1%' is 1.4% unrounded: not within 1% of zero; 0.6% is
    assert models.near_floor(entry) == []
    verdict["ci95_pct"] = [0.6, 6.0]
    assert models.near_floor(entry) == ["x2: higher (+4%, CI +1% to +6%)"]


def test_a_run_summary_stores_its_trust(models: ModuleType) -> None:
    folder = ROOT / "examples" / "simple_mlp_demo"
    summary = models.summarise_model(folder)
    assert summary["trust"] == load_run(folder).trust.to_dict()
    assert len(summary["throughput_verdicts"]) == len(summary["throughput"])
    assert all(len(v["ci95_pct"]) == 2 for v in summary["throughput_verdicts"])
