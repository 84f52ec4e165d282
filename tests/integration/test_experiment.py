"""run_experiment end to end: cells on disk, a resume that measures nothing, a report from files."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from integration_support import (
    BASELINE,
    BATCHING,
    MAX_TRIALS,
    SERVED_PROCESS_NAMES,
    STABILITY_PCT,
    WINDOW_MS,
    living,
    names,
)

from tritonlab.experiments.plan import ExperimentPlan, LoadPoint, MeasurementSettings
from tritonlab.experiments.runner import run_experiment
from tritonlab.experiments.store import load_cells, load_manifest
from tritonlab.models.demo import DEMO_MODEL_NAME
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.report.build import build_report
from tritonlab.result_files import read_result
from tritonlab.server.launch import ServerOptions

pytestmark = pytest.mark.integration


def _served_children() -> list[str]:
    """tritonserver / perf_analyzer / stub processes below this test process."""
    children = living(psutil.Process().children(recursive=True))
    return [n for n in names(children) if any(s in n for s in SERVED_PROCESS_NAMES)]


@pytest.mark.timeout(300)
def test_run_experiment_stores_cells_resumes_and_reports(
    demo_info: OnnxModelInfo, tmp_path: Path, logs_on_failure: list[Path]
) -> None:
    run_dir = tmp_path / "run"
    logs_on_failure.append(run_dir / "server" / "tritonserver.log")
    plan = ExperimentPlan(
        model_name=DEMO_MODEL_NAME,
        variants=(BASELINE, BATCHING),
        loads=(LoadPoint(protocol="grpc", batch_size=1, concurrency=8),),
        repeats=1,
        measurement=MeasurementSettings(
            measurement_interval_ms=WINDOW_MS,
            stability_percentage=STABILITY_PCT,
            max_trials=MAX_TRIALS,
            retries_when_unstable=1,
        ),
    )
    expected = ["baseline__grpc_b1_c8__r1", "batch_2ms_x1__grpc_b1_c8__r1"]

    outcome = run_experiment(plan, demo_info, run_dir, ServerOptions())

    assert outcome.measured == expected
    assert outcome.skipped == []
    assert outcome.stopped_early is None
    assert [c.protocol for c in outcome.infer_checks] == ["http", "grpc"]
    assert not _served_children(), "a server or perf_analyzer outlived run_experiment"

    results = run_dir / "results"
    assert sorted(p.stem for p in (results / "cells").glob("*.json")) == expected
    cells = {c.cell_id: c for c in load_cells(run_dir)}
    for cid in expected:
        cell = cells[cid]
        assert cell.perf.measurement is not None
        assert cell.perf.measurement.throughput_infer_per_s > 0
        assert cell.server is not None and cell.server.request_count > 0
        assert cell.perf.command[cell.perf.command.index("-m") + 1] == cell.model_name
        assert cell.config_pbtxt.strip()
        assert (run_dir / "benchmarks" / cell.variant.name).is_dir()
    assert "dynamic_batching" in cells[expected[1]].config_pbtxt
    assert "dynamic_batching" not in cells[expected[0]].config_pbtxt
    assert cells[expected[0]].server.mean_batch_size == 1.0  # type: ignore[union-attr]

    manifest = load_manifest(run_dir)
    assert manifest.plan.repeats == 1
    assert manifest.plan_fingerprint
    assert manifest.server.version == "2.51.0"
    checks = read_result(results / "infer_check.json")
    assert [c["protocol"] for c in checks] == ["http", "grpc"]
    assert all(c["max_abs_diff"] <= c["tolerance_abs"] for c in checks)

    def stored() -> dict[str, bytes]:
        kept = [*results.rglob("*"), run_dir / "server" / "tritonserver.log"]
        return {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in kept if p.is_file()}

    before = stored()
    again = run_experiment(plan, demo_info, run_dir, ServerOptions())
    assert again.measured == []
    assert sorted(again.skipped) == expected
    # nothing left to measure: no server started (its log untouched), no record rewritten
    # (manifest, answer checks, cells), and the answer checks are the stored ones
    assert stored() == before, "a re-run with nothing to measure rewrote a record"
    assert [c.protocol for c in again.infer_checks] == ["http", "grpc"]

    report = build_report(run_dir)
    log = run_dir / "docs" / "experiment_log.md"
    assert report.experiment_log == log
    text = log.read_text()
    assert BASELINE.description in text
    assert BATCHING.description in text
    assert (run_dir / "README.md").exists()
