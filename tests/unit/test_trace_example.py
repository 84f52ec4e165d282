"""The committed replayed-traffic example (examples/simple_mlp_trace, ``make trace-example``):
its SUMMARY.md is what its stored results render to, its figures come from the compare run's
cells, and capacity and check read its trace loads."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

from tritonlab.decisions.check import compare_stored
from tritonlab.decisions.gate import EXIT_NOT_COMPARABLE, Thresholds
from tritonlab.deploy.capacity_run import run_capacity

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "simple_mlp_trace"
COMPARE = EXAMPLE / "compare"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "trace_example", ROOT / "scripts/trace_example.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_summary_is_what_the_stored_results_render_to() -> None:
    assert (EXAMPLE / "SUMMARY.md").read_text() == _script().render(EXAMPLE)


def test_the_compare_plan_is_the_two_tunes_picks() -> None:
    import yaml

    written = yaml.safe_load((EXAMPLE / "compare_plan.yaml").read_text())
    assert written == _script().compare_plan(EXAMPLE)


def test_capacity_under_the_trace_is_a_lower_bound_from_the_trace_cells() -> None:
    report = run_capacity(COMPARE, 10_000.0, 20_000.0, None)
    chosen = [r.capacity for r in report.rows if r.capacity.point is not None]
    assert chosen, "some configuration carries the trace within 20 ms"
    for capacity in chosen:
        assert capacity.point is not None
        if "under the trace" in capacity.dropped:  # perf_analyzer did not keep to it there
            assert "tbursts" not in capacity.point.load_key
        else:  # a configuration measured under the trace is sized under the trace alone
            assert capacity.load_words == "under the trace"
            assert "tbursts" in capacity.point.load_key


def test_another_trace_under_the_same_name_is_not_comparable(tmp_path: Path) -> None:
    new = tmp_path / "new"
    shutil.copytree(COMPARE / "results", new / "results")
    manifest = json.loads((new / "results/manifest.json").read_text())
    for load in manifest["plan"]["loads"]:
        if "trace" in load:
            load["trace"]["sha256"] = "0" * 64
    (new / "results/manifest.json").write_text(json.dumps(manifest))
    report = compare_stored(new, COMPARE, Thresholds(), set())
    assert report.exit_status == EXIT_NOT_COMPARABLE
    assert any("different traces under one name" in r for r in report.not_comparable)
