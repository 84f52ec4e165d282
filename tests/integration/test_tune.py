"""``tritonlab tune`` on the real server: a search cut short by its time budget, then resumed.

Short windows (400 ms) and two race rounds keep it brief; the figures are not a benchmark
(that is `make tune-bench`), the test checks the mechanics: every step measured for real and
recorded with its reason, the resume replays the stored cells, the pick's config.pbtxt parses
and matches the pick, and the log explains the path.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from integration_support import cli_env, tritonlab_command

from tritonlab.repository.config import read_config
from tritonlab.result_files import read_result

pytestmark = pytest.mark.integration

SUMMARY_RE = re.compile(r"measured (\d+) cells, reused (\d+)")
# 30 ms: the demo MLP's p99 at concurrency 1 is about 1 ms, but a 400 ms window under the
# parallel test tier once went past a 10 ms budget, and a search whose first cell misses its
# budget rightly stops before it has anything to race.
ARGS = [
    *("--window-ms", "400", "--max-race-rounds", "2", "--p99-budget-ms", "30"),
    *("--keep-protocol", "--max-instances", "2"),  # a smaller space: a shorter test
]


def _tune(out_dir: Path, budget_s: int, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *tritonlab_command(),
            "tune",
            "simple_mlp",
            "--out",
            str(out_dir),
            "--time-budget",
            str(budget_s),
            *ARGS,
        ],
        cwd=cwd,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=budget_s + 240,
    )


@pytest.mark.timeout(600)
def test_tune_stops_at_its_budget_resumes_and_explains_its_pick(tmp_path: Path) -> None:
    out_dir = tmp_path / "tuned"
    # The block engine first starts the server, checks the answers and sets its window from a
    # warm-up: 20 s leaves a few cells to the search.
    first = _tune(out_dir, 20, tmp_path)
    assert first.returncode == 0, first.stderr
    assert "time budget of 20 s reached" in first.stderr, first.stderr
    cells_first = sorted((out_dir / "results" / "cells").glob("*.json"))
    assert cells_first, "the budget still lets the first cells finish"

    second = _tune(out_dir, 300, tmp_path)
    assert second.returncode == 0, second.stderr
    summary = SUMMARY_RE.search(second.stdout)
    assert summary, second.stdout
    assert int(summary.group(2)) == len(cells_first), "the stored cells are replayed"

    tune = read_result(out_dir / "results" / "tune.json")
    steps = tune["steps"]
    assert [s["reused"] for s in steps[: len(cells_first)]] == [True] * len(cells_first)
    phases = {s["phase"] for s in steps}
    tried = {(s["configuration"]["instances"], s["configuration"]["protocol"]) for s in steps}
    assert max(n for n, _ in tried) <= 2 and {p for _, p in tried} == {"grpc"}
    assert {"ramp", "move", "race"} <= phases, phases
    assert all(s["reason"] for s in steps)
    assert tune["stop_reason"] and "race" in tune["stop_reason"], tune["stop_reason"]
    pick = tune["pick"]
    assert pick["repeats"] >= 3  # the ramp's measurement and both race rounds
    # within the budget: the median of the point's repeats (a single repeat may go over)
    assert pick["latency_p99_us"]["median"] <= 30_000
    over = pick["p99_over_budget_repeats"]
    assert pick["meets_p99_budget_every_repeat"] == (over == 0)
    for step in steps:  # every step's figures are the stored cell's
        cell = json.loads((out_dir / "results" / "cells" / f"{step['cell']}.json").read_text())
        assert cell["perf"]["measurement"]["throughput_infer_per_s"] == pytest.approx(
            step["throughput_infer_per_s"]
        )
        assert cell["perf"]["settings"]["concurrency"] == step["concurrency"]

    config = read_config(out_dir / "pick" / "simple_mlp" / "config.pbtxt")
    knobs = pick["configuration"]
    assert config.name == "simple_mlp"
    assert config.instance_group[0].count == knobs["instances"]
    assert config.HasField("dynamic_batching") == knobs["batching"]
    assert config.max_batch_size == knobs["max_batch"]
    log = (out_dir / "docs" / "experiment_log.md").read_text()
    assert "## Tune: the pick and the path to it" in log
    assert f"at concurrency {pick['concurrency']}" in log
    assert "pick:" in second.stdout and "config.pbtxt of the pick" in second.stdout
