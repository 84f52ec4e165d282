"""``tritonlab sweep`` end to end on the real server: Ctrl-C, resume, open-loop rates, report.

A tiny plan (2 variants and the block engine's A/A control x (2 concurrencies + 1 open-loop
rate) x 1 block = 9 cells), every configuration co-loaded. The run is interrupted after its
first cell, resumed to the end, re-run (nothing left to measure), refused for a different plan,
and its reports rebuilt from files.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest
from integration_support import (
    MAX_TRIALS,
    STABILITY_PCT,
    WINDOW_MS,
    describe,
    finish,
    kill_tree,
    names,
    process_tree,
    start_cli,
    wait_gone,
)

from tritonlab.experiments.store import CellResult

pytestmark = pytest.mark.integration

SUMMARY_RE = re.compile(r"measured (\d+) cells, reused (\d+)")
PLAN = f"""
model: simple_mlp.onnx
baseline: {{max_batch_size: 16}}
axes:
  max_queue_delay_microseconds: [0]
loads:
  concurrency: [2, 8]
  open_loop: {{peak_fractions: [0.5]}}
repeats: 1
measurement:
  measurement_interval_ms: {WINDOW_MS}
  stability_percentage: {STABILITY_PCT:g}
  max_trials: {MAX_TRIALS}
recommend: {{latency_budget_p99_us: 1000000, target_load_infer_per_s: 10}}
"""
CELLS = {
    f"{variant}__{load}__r1"
    for variant in ("baseline", "batch_0us", "baseline_aa")
    for load in ("grpc_b1_c8", "grpc_b1_c2", "grpc_b1_p50")
}


def _run(args: list[str], cwd: Path, tag: str, timeout_s: float) -> tuple[int, str, str]:
    proc, stdout_path, stderr_path = start_cli(args, cwd, tag)
    code = finish(proc, timeout_s)
    return code, stdout_path.read_text(), stderr_path.read_text()


def _cells(out_dir: Path) -> dict[str, CellResult]:
    return {
        p.stem: CellResult.from_dict(json.loads(p.read_text()))
        for p in sorted((out_dir / "results" / "cells").glob("*.json"))
    }


@pytest.mark.timeout(600)
def test_sweep_interrupt_resume_rates_and_report(
    demo_onnx: Path, tmp_path: Path, logs_on_failure: list[Path]
) -> None:
    (tmp_path / "simple_mlp.onnx").write_bytes(demo_onnx.read_bytes())
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(PLAN)
    out_dir = tmp_path / "sweep"
    logs_on_failure.append(out_dir / "server" / "tritonserver.log")
    args = ["sweep", str(plan_path), "--out", str(out_dir), "--max-repeats", "1"]

    # 1. Interrupt after the first finished cell: everything below the CLI stops.
    proc, _, stderr_path = start_cli(args, tmp_path, "interrupted")
    try:
        deadline = time.monotonic() + 180
        while not _cells(out_dir):
            assert proc.poll() is None, f"exited early: {stderr_path.read_text()}"
            assert time.monotonic() < deadline, "no cell finished within 180 s"
            time.sleep(0.2)
        tree = process_tree(proc.pid)
        assert "tritonserver" in names(tree), describe(tree)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=40)
    finally:
        if proc.poll() is None:
            kill_tree(proc)
    stderr = stderr_path.read_text()
    assert code == 130, f"exit {code}; stderr: {stderr}"
    assert "interrupted" in stderr and "Traceback" not in stderr
    leftover = wait_gone(tree, timeout_s=5)
    assert not leftover, f"left running after Ctrl-C: {describe(leftover)}"
    kept = {cid: path.read_bytes() for cid, path in _kept_files(out_dir).items()}
    assert 1 <= len(kept) < len(CELLS)
    # Not a terminal: plain progress lines with an ETA.
    assert re.search(r"\[\d+/9\] measuring \S+ \(elapsed \d+:\d\d, ETA", stderr), stderr

    # 2. Resume: only the missing cells are measured; the kept ones are untouched.
    code, stdout, stderr = _run([*args, "--no-progress"], tmp_path, "resumed", timeout_s=400)
    assert code == 0, stderr
    assert "measuring" not in stderr  # --no-progress
    summary = SUMMARY_RE.search(stdout)
    assert summary, stdout
    assert (int(summary.group(1)), int(summary.group(2))) == (len(CELLS) - len(kept), len(kept))
    cells = _cells(out_dir)
    assert set(cells) == CELLS
    for cid, content in kept.items():
        assert _kept_files(out_dir)[cid].read_bytes() == content

    # 3. Open-loop cells ran at half of each variant's stored closed-loop peak, async, Poisson.
    for variant in ("baseline", "batch_0us"):
        peak = max(
            cells[f"{variant}__grpc_b1_c{c}__r1"].perf.measurement.throughput_infer_per_s  # type: ignore[union-attr]
            for c in (2, 8)
        )
        open_loop = cells[f"{variant}__grpc_b1_p50__r1"].perf
        assert open_loop.settings.request_rate_per_s == max(1.0, round(0.5 * peak))
        assert open_loop.settings.concurrency is None and open_loop.settings.async_mode
        assert "--request-distribution" in open_loop.command
        assert open_loop.measurement is not None and open_loop.measurement.throughput_infer_per_s

    # 4. The reports: recommendations with both picks, and the experiment log section.
    recs = json.loads((out_dir / "results" / "recommendations.json").read_text())
    budget = recs["latency_budget_p99_us"]
    within = [p for p in recs["points"] if p["latency_p99_us"] <= budget]
    best = max(within, key=lambda p: p["throughput_infer_per_s"])
    pick = recs["throughput_pick"]["point"]
    assert (pick["variant"], pick["load_key"]) == (best["variant"], best["load_key"])
    assert recs["latency_pick"] is not None
    # every open-loop curve has a rate within the (huge) budget unless perf_analyzer itself
    # said it could not keep up that rate, in which case the rate must not count
    for variant in ("baseline", "batch_0us"):
        fell_behind = any(
            "not able to keep up" in w for w in cells[f"{variant}__grpc_b1_p50__r1"].perf.warnings
        )
        assert (f"{variant}/grpc/b1" in recs["max_rate_within_budget"]) is not fell_behind
    assert set(recs["knees"]) == {"baseline/grpc/b1", "batch_0us/grpc/b1"}
    log = (out_dir / "docs" / "experiment_log.md").read_text()
    assert "## Recommendations" in log and recs["summary_line"] in log
    # The block engine: co-loaded, the cells' windows set from a warm-up, the noise floor stated.
    engine = json.loads((out_dir / "results" / "engine.json").read_text())
    assert engine["engine"] == "blocks" and engine["coload"]["co_loaded"], engine
    assert "grpc_b1_p50" in engine["windows_ms"]  # the open-loop rate's, set when measured
    assert "## Noise floor (A/A control)" in log
    assert all(p["variant"] != "baseline_aa" for p in recs["points"])  # never a candidate
    manifest = json.loads((out_dir / "results" / "manifest.json").read_text())
    assert manifest["sweep"]["latency_budget_p99_us"] == 1000000

    # 5. Re-running measures nothing; a different plan in the same folder is refused.
    code, stdout, stderr = _run([*args, "--no-progress"], tmp_path, "again", timeout_s=300)
    assert code == 0, stderr
    assert SUMMARY_RE.search(stdout) and "measured 0 cells" in stdout
    plan_path.write_text(PLAN.replace("repeats: 1", "repeats: 2"))
    code, _, stderr = _run(args, tmp_path, "other", timeout_s=120)
    assert code == 2 and "different plan or model" in stderr, stderr

    # 6. `tritonlab report` rebuilds the same files from the stored results alone.
    before = {
        name: (out_dir / name).read_bytes()
        for name in ("docs/experiment_log.md", "results/recommendations.json")
    }
    code, _, stderr = _run(["report", str(out_dir)], tmp_path, "report", timeout_s=120)
    assert code == 0, stderr
    for name, content in before.items():
        assert (out_dir / name).read_bytes() == content, name


def _kept_files(out_dir: Path) -> dict[str, Path]:
    return {p.stem: p for p in (out_dir / "results" / "cells").glob("*.json")}
