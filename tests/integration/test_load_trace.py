"""A generated bursty trace replayed on the real server (``sweep --load-trace``): perf_analyzer
follows the intervals, and the experiment log states the trace's rate, CV and adherence.

One configuration, one closed-loop load and the trace (2 cells, classic engine; a 2 s cycle, so
each window of the trace cell is one whole cycle); the trace's file name has a space and quotes,
and goes nowhere near a shell.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from integration_support import MAX_TRIALS, STABILITY_PCT, WINDOW_MS, run_cli

from tritonlab.perf.trace import read_trace

pytestmark = pytest.mark.integration

PLAN = f"""
model: simple_mlp.onnx
baseline: {{max_batch_size: 16}}
loads:
  concurrency: [2]
repeats: 1
measurement:
  engine: classic
  measurement_interval_ms: {WINDOW_MS}
  stability_percentage: {STABILITY_PCT:g}
  max_trials: {MAX_TRIALS}
"""


@pytest.mark.timeout(240)
def test_a_bursty_trace_is_replayed_at_its_mean_rate(demo_onnx: Path, tmp_path: Path) -> None:
    shutil.copyfile(demo_onnx, tmp_path / "simple_mlp.onnx")
    (tmp_path / "plan.yaml").write_text(PLAN)
    trace_file = tmp_path / "my 'bursty\" trace.csv"
    generated = run_cli(
        ["trace", "generate", "--kind", "bursts", "--rate", "300", "--low-rate", "50",
         "--on-s", "0.25", "--off-s", "0.25", "--duration-s", "2", "--seed", "7",
         "--out", str(trace_file)],
        tmp_path,
    )  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    stats = read_trace(trace_file).stats
    assert stats.interarrival_cv > 1.0  # bursty: burstier than Poisson

    out_dir = tmp_path / "out"
    done = run_cli(
        ["sweep", "plan.yaml", "--out", str(out_dir), "--load-trace", str(trace_file),
         "--no-progress", "--max-repeats", "1"],
        tmp_path,
        timeout_s=200,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

    key = f"grpc_b1_t{stats.name}"
    cell = json.loads((out_dir / "results" / "cells" / f"baseline__{key}__r1.json").read_text())
    command = cell["perf"]["command"]
    assert command[command.index("--request-intervals") + 1] == f"traces/{stats.name}.intervals.txt"
    assert (out_dir / "traces" / f"{stats.name}.csv").read_bytes() == trace_file.read_bytes()
    achieved = cell["perf"]["measurement"]["throughput_infer_per_s"]
    print(f"trace mean {stats.mean_rate_per_s:.1f} req/s, achieved {achieved:.1f} req/s")
    assert abs(achieved / stats.mean_rate_per_s - 1) <= 0.05

    log = (out_dir / "docs" / "experiment_log.md").read_text()
    assert f"mean rate {stats.mean_rate_per_s:,.1f} req/s" in log
    assert f"coefficient of variation of inter-arrival times {stats.interarrival_cv:.2f}" in log
    row = re.search(r"\| baseline[^|]*\| 1 \| ([\d,.]+) \| ([\d.]+)% \| (\w+) ", log)
    assert row, log
    assert float(row.group(1).replace(",", "")) == pytest.approx(achieved, abs=0.06)
    assert row.group(3) == "yes"
