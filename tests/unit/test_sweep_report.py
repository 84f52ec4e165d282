"""Reports of a recorded sweep: recommendations.json and the log section, rebuilt from files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tritonlab.report.build import build_report
from tritonlab.run_layout import RECOMMENDATIONS_FILE

SWEEP_RUN = Path(__file__).resolve().parent.parent / "fixtures" / "sweep_run"


@pytest.fixture
def sweep_copy(tmp_path: Path) -> Path:
    target = tmp_path / "sweep"
    shutil.copytree(SWEEP_RUN, target)
    return target


def test_recorded_sweep_fixture_is_small_and_complete() -> None:
    files = [p for p in SWEEP_RUN.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 320_000
    manifest = json.loads((SWEEP_RUN / "results" / "manifest.json").read_text())
    assert manifest["sweep"]["latency_budget_p99_us"] > 0
    plan = manifest["plan"]
    expected = len(plan["variants"]) * len(plan["loads"]) * plan["repeats"]
    assert len(list((SWEEP_RUN / "results" / "cells").glob("*.json"))) == expected


def test_sweep_report_writes_recommendations_and_rebuilds_identically(sweep_copy: Path) -> None:
    built = build_report(sweep_copy)
    recs_path = sweep_copy / "results" / RECOMMENDATIONS_FILE
    recs = json.loads(recs_path.read_text())
    log = built.experiment_log.read_text()
    assert "## Recommendations" in log
    assert recs["summary_line"] in log
    assert log.index("## Recommendations") < log.index("## Results:")
    pick = recs["throughput_pick"]
    assert pick is not None
    assert pick["point"]["latency_p99_us"] <= recs["latency_budget_p99_us"]
    assert pick["justification"] in log
    assert "### Pareto frontier" in log and "### Knee of each concurrency curve" in log
    before = {p: p.read_bytes() for p in (built.experiment_log, recs_path)}
    build_report(sweep_copy)
    for path, content in before.items():
        assert path.read_bytes() == content, path


def test_runs_without_a_budget_get_no_recommendations(sweep_copy: Path) -> None:
    build_report(sweep_copy)
    manifest_path = sweep_copy / "results" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["sweep"]
    manifest_path.write_text(json.dumps(manifest))
    built = build_report(sweep_copy)
    assert not (sweep_copy / "results" / RECOMMENDATIONS_FILE).exists()  # stale file removed
    assert "## Recommendations" not in built.experiment_log.read_text()
