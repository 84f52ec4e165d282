"""Rebuild every report of a run folder from its stored files (and nothing else)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tritonlab.analysis.aggregate import summarise
from tritonlab.analysis.explain import Analysis, analyse
from tritonlab.analysis.recommend import RECOMMENDATIONS_FILE, recommendations_from_manifest
from tritonlab.errors import TritonlabError
from tritonlab.experiments.store import (
    OPERATORS_FILE,
    RESULTS_DIR,
    load_cells,
    load_manifest,
    write_json_atomic,
    write_text_atomic,
)
from tritonlab.report.experiment_log import render_experiment_log
from tritonlab.report.html import write_html_report
from tritonlab.report.plots import write_plots
from tritonlab.report.project import project_readme


@dataclass(frozen=True)
class BuiltReport:
    experiment_log: Path
    summary_json: Path
    analyses: list[Analysis]
    plots: dict[str, Path] = field(default_factory=dict)
    html_report: Path | None = None


def analyse_run(run_dir: Path) -> tuple[dict[str, object], list[Analysis]]:
    manifest = load_manifest(run_dir)
    cells = load_cells(run_dir)
    if not cells:
        raise TritonlabError(f"{run_dir} has no measured cells yet; run the experiment first")
    order = [v["name"] for v in manifest["plan"]["variants"]]
    cores = int(manifest["machine"].get("cpu_affinity_count") or 1)
    return manifest, analyse(summarise(cells, order), cores)


def build_report(run_dir: Path) -> BuiltReport:
    """Rebuild docs/, plots/, report.html, results/summary.json and README.md from stored files.

    Reads the cells and the manifest once; every output is a function of them alone.
    """
    manifest, analyses = analyse_run(run_dir)
    checks_path = run_dir / RESULTS_DIR / "infer_check.json"
    checks = json.loads(checks_path.read_text()) if checks_path.exists() else []
    log_path = run_dir / "docs" / "experiment_log.md"
    operators_path = run_dir / RESULTS_DIR / OPERATORS_FILE
    operators = json.loads(operators_path.read_text()) if operators_path.exists() else None
    summaries = [r.summary for a in analyses for r in a.reports]
    recs = recommendations_from_manifest(manifest, summaries)  # sweeps name a latency budget
    recs_path = run_dir / RESULTS_DIR / RECOMMENDATIONS_FILE
    if recs is not None:
        write_json_atomic(recs_path, recs.to_dict())
    else:
        recs_path.unlink(missing_ok=True)
    write_text_atomic(log_path, render_experiment_log(manifest, analyses, checks, operators, recs))
    summary_path = run_dir / RESULTS_DIR / "summary.json"
    write_json_atomic(summary_path, {"analyses": [a.to_dict() for a in analyses]})
    plots = write_plots(run_dir, manifest, summaries, recs)
    html_path = write_html_report(run_dir, manifest, analyses, checks, plots, recs)
    write_text_atomic(run_dir / "README.md", project_readme(manifest, analyses))
    return BuiltReport(log_path, summary_path, analyses, plots, html_path)
