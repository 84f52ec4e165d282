"""A statement of a generated page an audit found misleading, now said by the code that writes
it: calibration.md quoted its A/A false alarms beside the runs' 11 to 33 blocks, where two of
the four identical copies of every run were measured in the 10 planned blocks only, so most A/A
comparisons (and their coverage) rest on 10 pairs. The report now stores how many comparisons
rest on how many pairs, and the page says it beside the false alarms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


@pytest.fixture(autouse=True)
def _beside_the_benchmarks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # bench_common, as the script has it


def _cells(blocks: int, shift: int = 0, level: float = 100.0) -> dict[str, dict[str, float]]:
    values = [level + (b * 7 + shift) % 5 for b in range(1, blocks + 1)]
    return {
        str(b): {"throughput_infer_per_s": v, "latency_p99_us": 1000.0, "wall_s": 1.0}
        for b, v in zip(range(1, blocks + 1), values, strict=True)
    }


def test_the_aa_comparisons_are_split_by_how_many_pairs_they_rest_on() -> None:
    bench = load_script("benchmarks/calibration_report.py")
    run = {
        "run": 1,
        "blocks": 16,
        "plants_iterations": {"3": 700},
        "cells": {
            "baseline": _cells(16),
            "baseline_aa": _cells(16, 1),
            "aa_copy": _cells(10, 2),  # measured in the planned blocks only
            "aa_copy2": _cells(10, 3),
            "plant_3": _cells(16, 4, 90.0),
        },
    }
    by = bench.analyse_runs([run])["aa_by_length"]
    assert by["short_copies_per_run"] == [2, 2]
    assert by["short"]["comparisons"] == 5  # every pair with one of the two short copies
    assert (by["short"]["pairs_min"], by["short"]["pairs_max"]) == (10, 10)
    assert by["full"]["comparisons"] == 1  # baseline_aa vs baseline
    assert (by["full"]["pairs_min"], by["full"]["pairs_max"]) == (16, 16)
    for part in ("short", "full"):
        assert by[part]["intervals"] == by[part]["comparisons"]


def test_the_page_says_how_many_aa_comparisons_rest_on_the_planned_blocks() -> None:
    page = load_script("benchmarks/calibration_page.py")
    report = {
        "aa": {"configurations": 4},
        "aa_by_length": {
            "short_copies_per_run": [2, 2],
            "short": {
                "comparisons": 100,
                "pairs_min": 10,
                "pairs_max": 10,
                "false_alarms": 2,
                "intervals": 100,
                "covered": 98,
            },
            "full": {
                "comparisons": 20,
                "pairs_min": 11,
                "pairs_max": 33,
                "false_alarms": 1,
                "intervals": 20,
                "covered": 19,
            },
        },
    }
    assert page._aa_lengths(report) == (
        "; 2 of the 4 copies in each run were measured in the 10 planned blocks only, so 100 of "
        "the 120 comparisons rest on 10 pairs, with 2 false alarms and their intervals held no "
        "change in 98 of 100; the 20 at the run's full length, 11 to 33 pairs, hold 1 false "
        "alarm, their intervals held no change in 19 of 20"
    )
    assert page._aa_lengths({"aa": {}}) == ""  # a report from before the breakdown


def test_the_committed_calibration_page_says_what_its_aa_comparisons_rest_on() -> None:
    bench = load_script("benchmarks/calibration_report.py")
    stored = json.loads((RESULTS / "calibration.json").read_text())
    recomputed = json.loads(json.dumps(bench.build_report(ROOT / stored["raw"])))
    by = stored["aa_by_length"]
    assert by == recomputed["aa_by_length"]
    assert by["short"]["comparisons"] + by["full"]["comparisons"] == stored["aa"]["comparisons"]
    assert by["short"]["false_alarms"] + by["full"]["false_alarms"] == stored["aa"]["false_alarms"]
    line = next(
        x
        for x in (RESULTS / "calibration.md").read_text().splitlines()
        if x.startswith("- A/A comparisons")
    )
    short = by["short"]
    assert (
        f"{short['comparisons']} of the {stored['aa']['comparisons']} comparisons rest on "
        f"{short['pairs_min']} pairs" in line
    )
    assert f"the {by['full']['comparisons']} at the run's full length" in line
