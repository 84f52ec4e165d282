"""The evenly spaced load kind on the real server: a plan's ``constant_rate`` and
``request_rate`` at one rate reach perf_analyzer as its two request distributions, each holds
its rate, and the log words them apart (``experiments/load_kinds.py``).

One configuration, one closed-loop load and the two rates (3 cells, classic engine).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from integration_support import MAX_TRIALS, STABILITY_PCT, WINDOW_MS, run_cli

pytestmark = pytest.mark.integration

RATE = 300
PLAN = f"""
model: simple_mlp.onnx
baseline: {{max_batch_size: 16}}
loads:
  concurrency: [2]
  request_rate: [{RATE}]
  constant_rate: [{RATE}]
repeats: 1
measurement:
  engine: classic
  measurement_interval_ms: {WINDOW_MS}
  stability_percentage: {STABILITY_PCT:g}
  max_trials: {MAX_TRIALS}
"""


@pytest.mark.timeout(240)
def test_poisson_and_evenly_spaced_rates_are_measured_and_told_apart(
    demo_onnx: Path, tmp_path: Path
) -> None:
    shutil.copyfile(demo_onnx, tmp_path / "simple_mlp.onnx")
    (tmp_path / "plan.yaml").write_text(PLAN)
    out_dir = tmp_path / "out"
    done = run_cli(
        ["sweep", "plan.yaml", "--out", str(out_dir), "--no-progress", "--max-repeats", "1"],
        tmp_path,
        timeout_s=200,
    )
    assert done.returncode == 0, done.stdout + done.stderr

    cells = out_dir / "results" / "cells"
    for letter, distribution in (("r", "poisson"), ("k", "constant")):
        cell = json.loads((cells / f"baseline__grpc_b1_{letter}{RATE}__r1.json").read_text())
        command = cell["perf"]["command"]
        assert command[command.index("--request-distribution") + 1] == distribution
        assert command[command.index("--request-rate-range") + 1] == str(RATE)
        achieved = cell["perf"]["measurement"]["throughput_infer_per_s"]
        p99 = cell["perf"]["measurement"]["latency_p99_us"]
        print(f"{distribution}: {achieved:.1f} infer/s at {RATE} req/s, p99 {p99:.0f} µs")
        assert abs(achieved / RATE - 1) <= 0.05

    log = (out_dir / "docs" / "experiment_log.md").read_text()
    assert f"| {RATE}/s constant |" in log and f"| {RATE}/s |" in log


@pytest.mark.timeout(120)
def test_perf_offers_an_evenly_spaced_rate_and_refuses_another_spacing(
    demo_onnx: Path, tmp_path: Path
) -> None:
    shutil.copyfile(demo_onnx, tmp_path / "simple_mlp.onnx")
    args = ["perf", "simple_mlp.onnx", "--request-rate", str(RATE), "--window-ms", "800"]
    wrong = run_cli([*args, "--request-distribution", "uniform", "--out", "bad"], tmp_path)
    assert wrong.returncode == 2, wrong.stdout + wrong.stderr
    assert "--request-distribution must be one of poisson, constant, got 'uniform'" in (
        wrong.stderr
    )
    assert not (tmp_path / "bad").exists()  # refused before anything was written

    done = run_cli([*args, "--request-distribution", "constant", "--out", "out"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--request-distribution constant --async" in done.stdout
    with (tmp_path / "out" / "simple_mlp.csv").open() as handle:
        achieved = float(next(csv.DictReader(handle))["Inferences/Second"])
    assert abs(achieved / RATE - 1) <= 0.05
