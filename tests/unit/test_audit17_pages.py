"""An independent audit's findings on the two Model Analyzer benchmark pages, each fixed in the
code that writes the page (rendered again from the stored JSON, nothing measured again):

1. ``vs_model_analyzer.md`` quotes each tune pick with its stored stop reason and names the
   contenders its race did not separate from the pick, with their stored verdicts (both races
   stopped at their 12-round limit undecided); and it says that the re-measurement stored no
   A/A control and no interference record, so the identical pair (ma_brute_thr and tune_p99)
   is its only noise check, with that pair's verdicts computed from the stored rounds;
2. ``pipeline_vs_model_analyzer.md`` quotes tune's race verdict with both caveats the README's
   generated blocks attach: whether an A/A control was measured in the tune (from the stored
   record, else that none is stored) and that the race added rounds one at a time.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
BENCH = "benchmarks/vs_model_analyzer"


def _stored(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RESULTS / name).read_text())
    return data


@pytest.fixture(scope="module")
def compare() -> ModuleType:
    return load_script(f"{BENCH}/compare.py")


@pytest.fixture(scope="module")
def notes() -> ModuleType:
    return load_script(f"{BENCH}/race_notes.py")


@pytest.fixture(scope="module")
def pipeline() -> ModuleType:
    return load_script(f"{BENCH}/pipeline_compare.py")


# --- 1. vs_model_analyzer.md: each tune pick with its stop reason -----------------------------

THR_OPEN = (
    "The race ended without separating its pick from 2 contenders, each read against the pick: "
    "6 instances, dynamic batching (delay 0, max batch 64), 1 thread, grpc at concurrency 128: "
    "no clear difference (+2%, CI -4% to +9%); 4 instances, dynamic batching (delay 0, max batch "
    "64), 1 thread, grpc at concurrency 32: no clear difference (-1%, CI -13% to +11%). The pick "
    "is not shown to be ahead of them."
)
P99_OPEN = (
    "The race ended without separating its pick from 1 contender, read against the pick: "
    "3 instances, dynamic batching (delay 0, max batch 64), 1 thread, grpc at concurrency 16: "
    "no clear difference (-2%, CI -11% to +7%). The pick is not shown to be ahead of it."
)


def test_each_tune_pick_is_quoted_with_its_stop_reason(compare: ModuleType) -> None:
    data = _stored("vs_model_analyzer.json")
    page = compare.markdown(data)
    block = compare.readme_block(data)  # what docs/results.md quotes
    tunes = [s for s in data["searches"] if s.get("stop_reason")]
    assert len(tunes) == 2
    for text in (page, block):
        for search in tunes:
            assert f'{search["name"]}, its stored stop reason: "{search["stop_reason"]}".' in text
        assert THR_OPEN in text and P99_OPEN in text
        assert "measured over 12 rounds, one more at a time after the first 2" in text
        assert "No record of an A/A control in the tune is stored here" in text


def test_the_committed_pages_are_the_render(compare: ModuleType) -> None:
    data = _stored("vs_model_analyzer.json")
    assert (RESULTS / "vs_model_analyzer.md").read_text() == compare.markdown(data)
    blocks = load_script("scripts/results_benchmarks.py")
    quoted = blocks._from_docs(compare.readme_block(data))
    assert quoted in (ROOT / "docs" / "results.md").read_text()


def test_the_stop_reason_is_read_in_both_wordings(notes: ModuleType) -> None:
    old = notes.read_stop(
        "12 race rounds measured (the limit), not every verdict decided: against A, x (y, z) at "
        "concurrency 8, B, x at concurrency 8: no clear difference (+2%, CI -4% to +9%); C at "
        "concurrency 4: lower (-9%, CI -12% to -6%)"
    )
    assert old.race and not old.decided and old.rounds == 12
    assert old.leader == "A, x (y, z) at concurrency 8"
    assert old.verdicts == (
        ("B, x at concurrency 8", "no clear difference (+2%, CI -4% to +9%)"),
        ("C at concurrency 4", "lower (-9%, CI -12% to -6%)"),
    )
    assert old.unseparated() == old.verdicts[:1]
    new = notes.read_stop(
        "the race is decided: A at concurrency 8 leads by the median of its repeats; each other "
        "contender against it: B at concurrency 4: no verdict (one repeat; medians +112%); "
        "C at concurrency 2: higher (+5%, CI +1% to +9%)"
    )
    assert new.decided and new.rounds is None and new.leader == "A at concurrency 8"
    assert new.verdicts == (
        ("B at concurrency 4", "no verdict (one repeat; medians +112%)"),
        ("C at concurrency 2", "higher (+5%, CI +1% to +9%)"),
    )
    budget = notes.read_stop("time budget of 400 s reached; run the same command to go on")
    assert not budget.race and budget.verdicts == ()


def test_a_pick_other_than_the_leader_is_not_called_the_leader(notes: ModuleType) -> None:
    reason = (
        "12 race rounds measured (the limit), not every verdict decided: against A at "
        "concurrency 8, B at concurrency 8: no clear difference (+2%, CI -4% to +9%)"
    )
    text = notes.pick_stop_note("tune", reason, "B at concurrency 8", None, None)
    assert (
        "without separating its leader, A at concurrency 8 (its pick: B at concurrency 8)," in text
    )
    assert "read against the leader" in text
    assert "without separating its pick" not in text


def test_the_remeasurement_names_its_only_noise_check(compare: ModuleType) -> None:
    data = _stored("vs_model_analyzer.json")
    page = compare.markdown(data)
    sentence = (
        "The re-measurement stored no A/A control and no interference record in this page's "
        "JSON: this pair of identical picks is its only noise check (tune_p99 against "
        "ma_brute_thr at c16, paired by round: throughput no clear difference (+3%, CI -3% to "
        "+11%), p99 no clear difference (-0%, CI -12% to +9%))."
    )
    assert sentence in page
    # right after the sentence that names the pair
    assert "not a difference between the tools.\n" + sentence in page
    assert sentence in compare.readme_block(data)


def test_the_noise_check_is_computed_from_the_stored_rounds(compare: ModuleType) -> None:
    data = copy.deepcopy(_stored("vs_model_analyzer.json"))
    rows = {r["pick"]: r for r in data["remeasured"] if r["own_load"]}
    brute = rows["ma_brute_thr"]["throughput_infer_per_s"]
    rows["tune_p99"]["throughput_infer_per_s"] = [x * 1.5 for x in brute]
    page = compare.markdown(data)
    assert "paired by round: throughput higher (+50%" in page
    data["aa_control"] = []  # a stored control: the page does not say none was stored
    assert "stored no A/A control" not in compare.markdown(data)


def test_no_identical_pair_says_nothing_checks_the_noise(notes: ModuleType) -> None:
    data = _stored("vs_model_analyzer.json")
    assert notes.noise_check_note(data, []) == (
        "The re-measurement stored no A/A control and no interference record in this page's "
        "JSON: nothing on this page checks its noise."
    )


# --- 2. pipeline_vs_model_analyzer.md: tune's race verdict with its two caveats ---------------

ROUNDS_NOT_STORED = (
    "This page does not store how many rounds the race measured: it measures 2, then adds one "
    "at a time while a verdict is undecided, and where it added any, looking after every round "
    "and stopping on a decided word raises the chance of a false higher or lower in those "
    "verdicts above the 95% level stated."
)
NO_CONTROL_STORED = (
    "No record of an A/A control in the tune is stored here, so nothing on this page shows "
    "whether one was measured."
)


def test_the_pipeline_race_verdict_carries_both_caveats(pipeline: ModuleType) -> None:
    data = _stored("pipeline_vs_model_analyzer.json")
    page = pipeline.markdown(data)
    verdict = "grpc at concurrency 16: lower (-8%, CI -12% to -4%)"
    assert verdict in page
    assert f'{verdict}". {ROUNDS_NOT_STORED} {NO_CONTROL_STORED}' in page
    assert (RESULTS / "pipeline_vs_model_analyzer.md").read_text() == page


def test_stored_rounds_and_trust_are_read(pipeline: ModuleType) -> None:
    data = copy.deepcopy(_stored("pipeline_vs_model_analyzer.json"))
    data["tune"]["race_rounds"] = 5
    data["tune"]["trust"] = {"controls": 0, "cells_monitored": 11, "state": "quiet"}
    page = pipeline.markdown(data)
    assert (
        "The race's verdicts were measured over 5 rounds, one more at a time after the first 2 "
        "while one was undecided: looking after every round and stopping on a decided word "
        "raises the chance of a false higher or lower in those verdicts above the 95% level "
        "stated. No A/A control was measured in the tune: the interference monitor alone "
        "checked its noise." in page
    )
    data["tune"]["race_rounds"] = 2
    assert "The race measured its first 2 rounds and added none." in pipeline.markdown(data)


def test_a_tune_run_folder_gives_its_race_rounds_and_trust(notes: ModuleType) -> None:
    run = ROOT / "examples" / "resnet18_pipeline_tune"
    steps = json.loads((run / "results" / "tune.json").read_text())["steps"]
    assert notes.race_rounds(steps) == 4
    trust = notes.tune_trust(run)
    assert trust is not None and trust["controls"] == 0 and trust["cells_monitored"] > 0
    assert notes.tune_trust(run / "missing") is None
