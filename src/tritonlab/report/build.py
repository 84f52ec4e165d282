"""Rebuild every report of a run folder from its stored files (and nothing else)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tritonlab.analysis.aggregate import summarise
from tritonlab.analysis.explain import Analysis, analyse
from tritonlab.errors import TritonlabError
from tritonlab.experiments.store import (
    RESULTS_DIR,
    load_cells,
    load_manifest,
    write_json_atomic,
    write_text_atomic,
)
from tritonlab.report.experiment_log import render_experiment_log


@dataclass(frozen=True)
class BuiltReport:
    experiment_log: Path
    summary_json: Path
    analyses: list[Analysis]


def analyse_run(run_dir: Path) -> tuple[dict[str, object], list[Analysis]]:
    manifest = load_manifest(run_dir)
    cells = load_cells(run_dir)
    if not cells:
        raise TritonlabError(f"{run_dir} has no measured cells yet; run the experiment first")
    order = [v["name"] for v in manifest["plan"]["variants"]]
    cores = int(manifest["machine"].get("cpu_affinity_count") or 1)
    return manifest, analyse(summarise(cells, order), cores)


def build_report(run_dir: Path) -> BuiltReport:
    manifest, analyses = analyse_run(run_dir)
    checks_path = run_dir / RESULTS_DIR / "infer_check.json"
    checks = json.loads(checks_path.read_text()) if checks_path.exists() else []
    log_path = run_dir / "docs" / "experiment_log.md"
    write_text_atomic(log_path, render_experiment_log(manifest, analyses, checks))
    summary_path = run_dir / RESULTS_DIR / "summary.json"
    write_json_atomic(summary_path, {"analyses": [a.to_dict() for a in analyses]})
    return BuiltReport(log_path, summary_path, analyses)
