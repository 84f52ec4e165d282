"""The committed calibration results: the keys issue 34 names, the page rendered from the JSON,
the summary tritonlab carries written from the same JSON, and the JSON recomputed from the raw
files of the runs and checks (nothing typed by hand)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
JSON = RESULTS / "calibration.json"

pytestmark = pytest.mark.skipif(not JSON.exists(), reason="no calibration results committed")


@pytest.fixture(autouse=True)
def _beside_the_benchmarks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # bench_common, as the script has it


def _bench(name: str = "calibration_report") -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_json_has_the_keys_the_issue_names() -> None:
    report = json.loads(JSON.read_text())
    assert {"runs", "comparisons", "false_alarms"} <= set(report["aa"])
    assert {"intervals", "covered"} <= set(report["coverage"])
    for row in report["power"]:
        assert {"effect_pct", "trials", "detected", "measuring_s_median"} <= set(row)
    if "gate" in report:
        assert {"aa_checks", "false_regressions"} <= set(report["gate"])
        for row in report["gate"]["planted"]:
            assert {"effect_pct", "trials", "detected"} <= set(row)


def test_the_page_and_the_packaged_summary_come_from_the_json() -> None:
    bench = _bench()
    report = json.loads(JSON.read_text())
    page = _bench("calibration_page")
    assert (RESULTS / "calibration.md").read_text() == page.render_md(report)
    packaged = ROOT / "src" / "tritonlab" / "stats" / "calibration_rates.json"
    assert json.loads(packaged.read_text()) == bench.packaged_rates(report)


def test_the_json_is_what_the_raw_files_give() -> None:
    bench = _bench()
    stored = json.loads(JSON.read_text())
    recomputed = json.loads(json.dumps(bench.build_report(ROOT / stored["raw"])))
    keys = ("aa", "coverage", "power", "readings", "disturbed_cells", "gate", "process_term")
    for key in (*keys, "process_term_held", "process_term_shipped", "earlier_rounds"):
        assert recomputed.get(key) == stored.get(key), key


@pytest.mark.parametrize(
    ("false_alarms", "covered", "shipped"),
    [(5, 173, "held"), (7, 173, "pooled"), (0, 179, "pooled"), (5, 160, "pooled")],
)
def test_a_held_term_ships_only_when_its_round_is_within_the_bounds(
    false_alarms: int, covered: int, shipped: str
) -> None:
    bench = _bench()
    held, pooled = {"throughput_sd_log": 0.005}, {"throughput_sd_log": 0.004}
    report = {
        "aa": {"comparisons": 120, "false_alarms": false_alarms},
        "coverage": {"intervals": 180, "covered": covered},
        "process_term": pooled,
        "process_term_held": held,
    }
    assert bench.shipped_term(report) == (shipped, held if shipped == "held" else pooled)
    del report["process_term_held"]  # runs that held no term, or not all the same one
    assert bench.shipped_term(report) == ("pooled", pooled)


def test_gate_checks_of_one_plant_are_kept_apart_by_their_loop_turns() -> None:
    bench = _bench()

    def check(effect: int, turns: int, outcome: str) -> dict[str, object]:
        status = {"pass": 0, "regression": 1, "undecided": 3}[outcome]
        return {
            "effect_pct": effect,
            "iterations": turns,
            "throughput_outcome": outcome,
            "exit_status": status,
            "wall_s": 70.0,
        }

    checks = [
        check(0, 0, "pass"),
        check(0, 0, "undecided"),
        check(5, 1100, "undecided"),
        check(5, 1100, "regression"),
        check(5, 940, "pass"),
    ]
    gate = bench.summarise_gate(checks, {940: 5.0, 1100: 6.2})
    assert (gate["aa_checks"], gate["false_regressions"], gate["aa_passed"]) == (2, 0, 1)
    rows = [(p["iterations"], p["effect_pct"], p["trials"], p["detected"]) for p in gate["planted"]]
    assert rows == [(940, 5.0, 1, 0), (1100, 6.2, 2, 2)]
    assert bench.summarise_gate([check(5, 700, "pass")], {})["planted"][0]["effect_pct"] is None


def test_undecided_aa_checks_that_read_a_difference_are_listed() -> None:
    """Issue 36 audit: two A/A checks whose throughput interval excluded no change were
    called merely "undecided"; one whose interval holds zero is not listed."""
    bench = _bench()

    def aa(ci: list[float]) -> dict[str, object]:
        verdict = {"change_pct": sum(ci) / 2, "ci95_change_pct": ci}
        return {
            "check": f"gate{ci[0]}",
            "effect_pct": 0,
            "iterations": 0,
            "throughput_outcome": "undecided",
            "exit_status": 3,
            "wall_s": 70.0,
            "verdicts": [{"figure": "throughput", "verdict": verdict}],
        }

    gate = bench.summarise_gate([aa([-5.6, -1.3]), aa([-4.0, 2.0])], {})
    assert [a["ci95_change_pct"] for a in gate["aa_undecided_apart"]] == [[-5.6, -1.3]]
