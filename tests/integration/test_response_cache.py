"""The response cache, a knob added through the knob table, end to end on the real server.

A plan switches ``response_cache`` on against the baseline: the served config.pbtxt enables the
cache, the server runs with ``--cache-config``, Triton's statistics count hits and misses in the
cached configuration's cell (perf_analyzer cycles through a few distinct samples, so after one
miss per sample every request hits), and the experiment log explains the change with them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from integration_support import MAX_TRIALS, STABILITY_PCT, WINDOW_MS, finish, start_cli

from tritonlab.experiments.store import CellResult

pytestmark = pytest.mark.integration

PLAN = f"""
model: simple_mlp.onnx
axes:
  response_cache: [true]
loads:
  concurrency: [4]
repeats: 1
measurement:
  engine: classic
  measurement_interval_ms: {WINDOW_MS}
  stability_percentage: {STABILITY_PCT:g}
  max_trials: {MAX_TRIALS}
"""


@pytest.mark.timeout(400)
def test_a_plan_enables_the_response_cache_and_the_log_explains_it(
    demo_onnx: Path, tmp_path: Path, logs_on_failure: list[Path]
) -> None:
    (tmp_path / "simple_mlp.onnx").write_bytes(demo_onnx.read_bytes())
    plan_path = tmp_path / "plan.yaml"
    plan_path.write_text(PLAN)
    out_dir = tmp_path / "cache"
    logs_on_failure.append(out_dir / "server" / "tritonserver.log")
    args = ["sweep", str(plan_path), "--out", str(out_dir), "--max-repeats", "1", "--no-progress"]
    proc, _stdout, stderr = start_cli(args, tmp_path, "cache")
    assert finish(proc, 360) == 0, stderr.read_text()[-3000:]

    config = (out_dir / "models" / "simple_mlp__nobatch_cache" / "config.pbtxt").read_text()
    assert "response_cache {\n  enable: true\n}" in config
    assert "response_cache" not in (out_dir / "models" / "simple_mlp" / "config.pbtxt").read_text()
    manifest = json.loads((out_dir / "results" / "manifest.json").read_text())
    assert any(a.startswith("--cache-config=local,size=") for a in manifest["server"]["command"])

    cells = {
        p.stem: CellResult.from_dict(json.loads(p.read_text()))
        for p in (out_dir / "results" / "cells").glob("*.json")
    }
    cached = next(c for name, c in cells.items() if name.startswith("nobatch_cache__"))
    plain = next(c for name, c in cells.items() if name.startswith("baseline__"))
    assert cached.server is not None and plain.server is not None
    assert cached.server.cache_hit_count > 0
    assert 0 < cached.server.cache_miss_count <= cached.server.request_count
    assert plain.server.cache_hit_count == plain.server.cache_miss_count == 0
    log = (out_dir / "docs" / "experiment_log.md").read_text()
    assert "enabled the response cache" in log
    assert "The response cache answered" in log


@pytest.mark.timeout(300)
def test_tune_holds_the_response_cache_it_is_given(tmp_path: Path) -> None:
    """tune --hold response_cache=true serves every configuration it measures with the cache
    on."""
    out_dir = tmp_path / "tuned"
    args = ["tune", "simple_mlp", "--out", str(out_dir), "--hold", "response_cache=true"]
    args += ["--time-budget", "10", "--window-ms", "400", "--max-race-rounds", "2"]
    args += ["--keep-protocol", "--max-instances", "1"]
    proc, _stdout, stderr = start_cli(args, tmp_path, "tune-cache")
    assert finish(proc, 240) == 0, stderr.read_text()[-3000:]
    cells = [
        CellResult.from_dict(json.loads(p.read_text()))
        for p in (out_dir / "results" / "cells").glob("*.json")
    ]
    assert cells and all(c.variant.response_cache for c in cells)
    assert all(c.server and c.server.cache_hit_count > 0 for c in cells if c.perf.measurement)
    for folder in (out_dir / "models").iterdir():
        assert "response_cache {\n  enable: true\n}" in (folder / "config.pbtxt").read_text()
    assert "response cache" in (out_dir / "docs" / "experiment_log.md").read_text()
