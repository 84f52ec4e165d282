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
