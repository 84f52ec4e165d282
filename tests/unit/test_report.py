"""report/ and report.build.build_report: rebuilt from a copy of the recorded run, byte for byte."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tritonlab.analysis.aggregate import VariantSummary
from tritonlab.errors import TritonlabError
from tritonlab.report.build import BuiltReport, analyse_run, build_report

TABLE_HEADER = (
    "| config | conc. | infer/s | avg µs | p95 µs | p99 µs | queue µs | compute infer µs "
    "| mean batch | server / client cores | notes |"
)


@pytest.fixture
def run_copy(seed_run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(seed_run_dir, target)
    return target


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@dataclass(frozen=True)
class Built:
    """A copy of the recorded run, reported twice (plots make each build take seconds)."""

    run_dir: Path
    first: BuiltReport
    first_log: bytes
    first_summary: bytes
    first_readme: bytes
    second: BuiltReport
    cells_before: dict[str, bytes]


@pytest.fixture(scope="module")
def built(seed_run_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    run_dir = tmp_path_factory.mktemp("report") / "run"
    shutil.copytree(seed_run_dir, run_dir)
    cells_before = _files(run_dir / "results" / "cells")
    first = build_report(run_dir)
    first_log = first.experiment_log.read_bytes()
    first_summary = first.summary_json.read_bytes()
    first_readme = (run_dir / "README.md").read_bytes()
    second = build_report(run_dir)
    return Built(run_dir, first, first_log, first_summary, first_readme, second, cells_before)


def test_build_report_is_deterministic(built: Built) -> None:
    run_dir = built.run_dir
    assert built.first.experiment_log == run_dir / "docs" / "experiment_log.md"
    assert built.first.summary_json == run_dir / "results" / "summary.json"
    assert built.second.experiment_log.read_bytes() == built.first_log
    assert built.second.summary_json.read_bytes() == built.first_summary
    # Reports only read the stored cells.
    assert _files(run_dir / "results" / "cells") == built.cells_before
    # No temporary files left next to the outputs.
    for folder in (run_dir, run_dir / "docs", run_dir / "results"):
        assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]


def test_experiment_log_content(built: Built, seed_summaries: list[VariantSummary]) -> None:
    text = built.first_log.decode()
    lines = text.splitlines()
    assert lines[0] == "# Experiment log: simple_mlp on Triton"
    assert TABLE_HEADER in lines
    assert "Queue-delay trap" in text
    assert "## Conditions" in text
    assert "## Method" in text
    assert "## Reproduce" in text
    assert "concurrency 8" in text
    # One table row per variant, in plan order, with its median throughput.
    header = lines.index(TABLE_HEADER)
    rows = lines[header + 2 : header + 2 + len(seed_summaries)]
    for row, s in zip(rows, seed_summaries, strict=True):
        assert row.startswith(f"| {s.variant.description} | 8 | {s.throughput.median:,.0f} (")
    # The three layers for every variant, inside its own section, in plan order.
    sections = text.split("\n### ")[1:]
    titles = [sec.splitlines()[0] for sec in sections]
    assert titles[: len(seed_summaries)] == [s.variant.description for s in seed_summaries]
    for section in sections[: len(seed_summaries)]:
        assert "- **Background.** " in section
        assert "- **Action.** " in section
        assert "- **Result and explanation.** " in section
        assert "Evidence: batch sizes Triton executed" in section


def test_summary_json_matches_analysis(built: Built) -> None:
    data = json.loads(built.first_summary)
    analyses = built.first.analyses
    assert data["analyses"] == json.loads(json.dumps([a.to_dict() for a in analyses]))
    (analysis,) = data["analyses"]
    variants = analysis["variants"]
    assert [v["report"]["variant"] for v in variants] == [
        "baseline",
        "batch_5ms_x1",
        "batch_5ms_x2",
        "batch_0ms_x1",
    ]
    assert variants[2]["report"]["reference"] == "batch_5ms_x1"
    assert variants[1]["summary"]["repeats"] == 3


def _medians(data: dict[str, Any]) -> list[tuple[str, float, float]]:
    return [
        (
            v["summary"]["variant"]["name"],
            v["summary"]["throughput_infer_per_s"]["median"],
            v["summary"]["latency_p99_us"]["median"],
        )
        for v in data["analyses"][0]["variants"]
    ]


def test_rebuilt_summary_agrees_with_recorded_medians(built: Built, seed_run_dir: Path) -> None:
    recorded = json.loads((seed_run_dir / "results" / "summary.json").read_text())
    assert _medians(json.loads(built.first_summary)) == _medians(recorded)


def test_build_report_writes_readme(built: Built, seed_summaries: list[VariantSummary]) -> None:
    readme = built.first_readme.decode()
    assert readme.startswith("# simple_mlp on NVIDIA Triton Inference Server")
    assert "## Key results" in readme
    for s in seed_summaries:
        assert f"**{s.variant.description}**: {s.throughput.median:,.0f} infer/s" in readme
    assert (built.run_dir / "README.md").read_bytes() == built.first_readme


def test_analyse_run_needs_a_manifest(tmp_path: Path) -> None:
    with pytest.raises(TritonlabError, match="not a tritonlab run folder"):
        analyse_run(tmp_path)


def test_analyse_run_needs_cells(run_copy: Path) -> None:
    shutil.rmtree(run_copy / "results" / "cells")
    with pytest.raises(TritonlabError, match="no measured cells"):
        build_report(run_copy)
