"""report/ and report.build.build_report: rebuilt from a copy of the recorded run, byte for byte."""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tritonlab.errors import TritonlabError
from tritonlab.experiments.manifest import AdaptiveEntry
from tritonlab.experiments.rounds import AdaptiveRound
from tritonlab.experiments.store import load_cells, save_cell
from tritonlab.report.build import BuiltReport, build_report
from tritonlab.report.experiment_log import render_experiment_log
from tritonlab.report.method_section import VerdictCount, count_verdicts, method_lines
from tritonlab.report.run_data import RunData, load_run
from tritonlab.result_files import write_json_atomic
from tritonlab.run_layout import (
    ADAPTIVE_FILE,
    COST_MODEL_FILE,
    OPERATORS_FILE,
    RESULTS_DIR,
    SERVING_PATH_DIR,
)
from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.verdicts import CONFIDENCE

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
    # One table row per variant, in plan order: medians with the range of the repeats.
    header = lines.index(TABLE_HEADER)
    rows = lines[header + 2 : header + 2 + len(seed_summaries)]
    for row, s in zip(rows, seed_summaries, strict=True):
        assert row.startswith(f"| {s.variant.description} | 8 | {s.throughput.median:,.0f} (")
        low, high = s.throughput.range or (0.0, 0.0)
        assert row.startswith(
            f"| {s.variant.description} | 8 | {s.throughput.median:,.0f} "
            f"({low:,.0f}–{high:,.0f}) | {s.latency_avg.text()} | {s.latency_p95.text()} | "
            f"{s.latency_p99.text()} | "
        )
    assert "the range of the repeats (min–max) in brackets" in text
    assert "[95% CI" not in text  # medians carry ranges now, not extrapolated intervals
    # The three layers for every variant, inside its own section, in plan order.
    sections = text.split("\n### ")[1:]
    titles = [sec.splitlines()[0] for sec in sections]
    assert titles[: len(seed_summaries)] == [s.variant.description for s in seed_summaries]
    for section in sections[: len(seed_summaries)]:
        assert "- **Background.** " in section
        assert "- **Action.** " in section
        assert "- **Result and explanation.** " in section
        assert "Evidence: batch sizes Triton executed" in section


def test_experiment_log_verdicts_and_method(built: Built) -> None:
    text = built.first_log.decode()
    method = text.split("## Method\n", 1)[1].split("\n## ", 1)[0]
    assert "brackets give the range of the repeats (min–max)" in method
    assert "pairs the two configurations' repeats by round" in method
    assert "two-sided 95% Student-t confidence interval (scipy.stats)" in method
    assert "The word follows the interval" in method
    assert '"not comparable"' in method
    # 3 configurations against the baseline, and batch_5ms_x2 also against batch_5ms_x1.
    assert count_verdicts(built.first.analyses).stated == 8
    assert "the rows of this log state 8 throughput and p99 verdicts" in method
    assert f"about {8 * (1 - CONFIDENCE):.1f} of them" in method
    assert "Adaptive repeats" not in text  # the recorded run planned none
    # The notes carry the verdicts with the interval of the change, worded by it.
    assert "tput higher (+31%, CI +16% to +49%)" in text
    assert "p99 no clear difference (+59%, CI -2% to +159%)" in text
    # Without identity-model cells and operators.json there is no cost model, and the log
    # says why instead of printing one.
    assert "## Serving cost model: predicted against measured" in text
    assert "Not available for this run" in text
    assert not (built.run_dir / RESULTS_DIR / COST_MODEL_FILE).exists()


def test_method_lines_count_the_verdicts() -> None:
    assert "the rows of this log state 0 throughput and p99 verdicts" in "\n".join(method_lines())
    lines = method_lines(VerdictCount(20))
    assert lines[:2] == ["## Method", ""]
    assert "about 1.0 of them would still read higher or lower by chance" in "\n".join(lines)


def test_load_run_reads_the_folder_once_into_records(run_copy: Path) -> None:
    run = load_run(run_copy)
    assert run.manifest.model.name == "simple_mlp"
    assert run.manifest.schema_version == 1  # recorded before the schema version was written
    assert [a.load_key for a in run.analyses] == ["grpc_b1_c8"]
    assert run.analyses[0].cores == 2
    assert len(run.cells) == 12 and len(run.summaries) == 4
    assert [c.protocol for c in run.infer_checks] == ["http", "grpc"]
    assert run.cost_model is None  # the recorded seed run has no serving-path cells or operators
    assert run.predictions == [] and run.recommendations is None and run.operators is None
    assert run.paths.experiment_log == run_copy / "docs" / "experiment_log.md"
    assert run.paths.cells == run_copy / "results" / "cells"


def _with_adaptive(run: RunData, rounds: list[AdaptiveRound]) -> RunData:
    manifest = dataclasses.replace(run.manifest, adaptive=AdaptiveEntry(6, 600.0))
    return dataclasses.replace(run, manifest=manifest, infer_checks=[], adaptive_rounds=rounds)


def test_adaptive_lines_in_the_method(run_copy: Path) -> None:
    run = load_run(run_copy)
    decided = render_experiment_log(_with_adaptive(run, []))
    method = decided.split("## Method\n", 1)[1].split("\n## ", 1)[0]
    assert (
        "- Adaptive repeats: 3 rounds planned, at most 6 repeats of each configuration, extra "
        "rounds within 600 s." in method
    )
    assert "No extra round was measured." in method  # not a claim that all were decided
    record = AdaptiveRound(
        round=4,
        reasons=tuple(f"reason {i}" for i in range(1, 7)),
        cells=("baseline__grpc_b1_c8__r4", "batch_0ms_x1__grpc_b1_c8__r4"),
    )
    text = render_experiment_log(_with_adaptive(run, [record]))
    method = text.split("## Method\n", 1)[1].split("\n## ", 1)[0]
    assert (
        "- Round 4: 2 cells re-measured because these verdicts were undecided: reason 1; "
        "reason 2; reason 3; reason 4; and 2 more." in method
    )
    assert method.endswith("\n")  # the section still ends before ## Reproduce
    assert "\n## Reproduce" in text


def test_build_report_with_a_cost_model(run_copy: Path) -> None:
    # Stand-ins for the identity probes (the baseline's cells: one request per execution; the
    # 0 ms batcher's: about four) and an operators.json with in-process timings.
    for cell in load_cells(run_copy):
        if cell.variant.name in ("baseline", "batch_0ms_x1"):
            name = f"serving_path_{cell.variant.name}"
            variant = dataclasses.replace(cell.variant, name=name)
            save_cell(
                run_copy,
                dataclasses.replace(cell, variant=variant, cell_id=f"{name}__r{cell.repeat}"),
                SERVING_PATH_DIR,
            )
    operator = {
        "name": "fc1",
        "op_type": "Gemm",
        "flops_per_sample": 2 * 256 * 128,
        "weight_bytes": 256 * 128 * 4,
        "activation_bytes_per_sample": (256 + 128) * 4,
    }
    operators = {
        "profile": {"operators": [operator]},
        "in_process_us_per_execution": {"1": 35.3, "8": 79.4},
    }
    write_json_atomic(run_copy / RESULTS_DIR / OPERATORS_FILE, operators)
    built = build_report(run_copy)
    model = load_run(run_copy).cost_model
    assert model is not None
    assert model.model_fixed_us == pytest.approx(29.0)
    assert model.model_per_sample_us == pytest.approx(6.3)
    data = json.loads((run_copy / RESULTS_DIR / COST_MODEL_FILE).read_text())
    assert data["terms"] == json.loads(json.dumps(model.to_dict()))
    assert [p["variant"] for p in data["predictions"]] == [
        "baseline",
        "batch_5ms_x1",
        "batch_5ms_x2",
        "batch_0ms_x1",
    ]
    assert data["predictions"][0]["regime"] == "no batching"
    text = built.experiment_log.read_text()
    assert "| S_exec: serving path, fixed per execution |" in text
    assert "Not available for this run" not in text
    assert "## Operators and batching" in text
    assert "Which cost does batching spread?" in text
    # The HTML report carries the same section, its tables rendered and its text escaped.
    assert built.html_report is not None
    page = built.html_report.read_text()
    assert '<section id="cost-model">' in page and '<a href="#cost-model">' in page
    assert "<td>S_exec: serving path, fixed per execution</td>" in page
    assert page.count("<td>grpc_b1_c8</td>") == 4  # one predicted-against-measured row each
    assert "| S_exec" not in page  # no raw markdown left
    # Without operators.json the model and its file go away again.
    (run_copy / RESULTS_DIR / OPERATORS_FILE).unlink()
    page = build_report(run_copy).html_report.read_text()  # type: ignore[union-attr]
    assert not (run_copy / RESULTS_DIR / COST_MODEL_FILE).exists()
    assert "Not available for this run" in page


def test_build_report_reads_adaptive_rounds(run_copy: Path) -> None:
    manifest = json.loads((run_copy / RESULTS_DIR / "manifest.json").read_text())
    manifest["adaptive"] = {"max_repeats": 6, "budget_s": 600.0}
    write_json_atomic(run_copy / RESULTS_DIR / "manifest.json", manifest)
    record = {"round": 4, "cells": ["baseline__grpc_b1_c8__r4"], "reasons": ["only reason"]}
    write_json_atomic(run_copy / RESULTS_DIR / ADAPTIVE_FILE, [record])
    text = build_report(run_copy).experiment_log.read_text()
    assert "- Round 4: 1 cells re-measured because these verdicts were undecided: only reason." in (
        text
    )


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
        load_run(tmp_path)


def test_analyse_run_needs_cells(run_copy: Path) -> None:
    shutil.rmtree(run_copy / "results" / "cells")
    with pytest.raises(TritonlabError, match="no measured cells"):
        build_report(run_copy)
