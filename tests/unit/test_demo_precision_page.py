"""The demo precision bench's page says why a run did not call its verdicts trusted: a control
that read a difference (throughput or p99) is not "too many disturbed cells"."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    return load_script("benchmarks/demo_precision.py")


def _floor(throughput: str, p99: str, too_disturbed: bool) -> dict[str, Any]:
    return {
        "throughput": {"word": throughput},
        "latency_p99": {"word": p99},
        "too_disturbed": too_disturbed,
    }


@pytest.mark.parametrize(
    ("floor", "said"),
    [
        (_floor("no clear difference", "no clear difference", False), "yes"),
        (_floor("no clear difference", "higher", False), "no (A/A p99 higher)"),
        (_floor("lower", "higher", True), "no (A/A throughput lower, A/A p99 higher, too many"),
        (_floor("no clear difference", "undecided", True), "no (too many disturbed cells)"),
    ],
)
def test_the_page_names_why_a_run_is_not_trusted(floor: dict[str, Any], said: str) -> None:
    assert _bench()._trusted({"aa_control": [floor]}).startswith(said)
    assert _bench()._trusted({"aa_control": []}) == "not stated"


def _record(change: float, low: float, high: float, decided: bool) -> dict[str, Any]:
    return {
        "figure": "throughput",
        "word": "no clear difference",
        "change_pct": change,
        "ci95_change_pct": [low, high],
        "pairs": 16,
        "p_value": 0.4,
        "reference_median": 100.0,
        "variant_median": 101.0,
        "method": "paired by round",
        "decided": decided,
    }


def test_the_control_column_carries_its_interval_and_says_undecided() -> None:
    """Issue 36 audit: the A/A control column read "no clear difference (+5.2%)" for a control
    whose interval reached +12%. Both sides: an interval within ±5% is quoted without the word;
    one past it (+5.1%, which whole percents would print as +5%) is called undecided."""
    run = {
        "run": 3,
        "aa_control": [
            {
                "throughput": _record(5.2, -1.4, 12.2, False),
                "latency_p99": _record(-0.3, -4.0, 4.7, True),
            }
        ],
    }
    text = _bench().control_text(run)
    assert text == (
        "throughput no clear difference (+5.2%, 95% CI -1.4% to +12.2%), undecided; "
        "p99 no clear difference (-0.3%, 95% CI -4.0% to +4.7%)"
    )
    assert _bench().undecided_controls([run]) == "run 3: throughput (95% CI -1.4% to +12.2%)"
    run["aa_control"][0]["throughput"] = _record(1.0, -2.7, 5.1, False)
    assert "(95% CI -2.7% to +5.1%)" in _bench().undecided_controls([run])
    run["aa_control"][0]["throughput"] = _record(1.0, -2.7, 4.1, True)
    assert _bench().undecided_controls([run]) == "none"


def test_the_committed_page_says_which_controls_were_undecided() -> None:
    page = (ROOT / "benchmarks" / "results" / "demo_precision.md").read_text()
    assert "no clear difference (+5.2%, 95% CI -1.4% to +12.2%), undecided" in page
    assert "A/A control undecided (its interval reaching past ±5%)" in page
    assert (
        "A/A control undecided (its interval reaching past ±5%)"
        in (ROOT / "docs" / "results.md").read_text()
    )
