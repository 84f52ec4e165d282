"""Rebuild every report of a run folder from its stored files (and nothing else)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonlab.analysis.aggregate import summarise
from tritonlab.analysis.cost_model import CostModel, ServingPathPoint
from tritonlab.analysis.explain import Analysis, analyse
from tritonlab.analysis.recommend import RECOMMENDATIONS_FILE, recommendations_from_manifest
from tritonlab.errors import TritonlabError
from tritonlab.experiments.store import (
    ADAPTIVE_FILE,
    OPERATORS_FILE,
    RESULTS_DIR,
    SERVING_PATH_DIR,
    CellResult,
    load_cells,
    load_manifest,
    write_json_atomic,
    write_text_atomic,
)
from tritonlab.paths import portable_command, portable_path, recorded_run_dir
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


COST_MODEL_FILE = "cost_model.json"


def _json_or(path: Path, default: Any) -> Any:
    return json.loads(path.read_text()) if path.exists() else default


def fit_cost_model(run_dir: Path, cores: int) -> CostModel | None:
    """The run's cost model: identity-model cells + in-process timings, both from disk."""
    operators = _json_or(run_dir / RESULTS_DIR / OPERATORS_FILE, None)
    if not operators:
        return None
    groups: dict[str, list[Any]] = {}
    for cell in load_cells(run_dir, SERVING_PATH_DIR):
        groups.setdefault(cell.variant.name, []).append(cell)
    points = [p for cells in groups.values() if (p := ServingPathPoint.from_cells(cells))]
    timings = {int(b): float(t) for b, t in operators["in_process_us_per_execution"].items()}
    empty = operators.get("null_in_process_us_per_execution") or {}
    timings = {b: max(0.0, t - float(empty.get(str(b), 0.0))) for b, t in timings.items()}
    return CostModel.fit(points, timings, cores)


def portable_records(
    run_dir: Path, manifest: dict[str, Any], cells: list[CellResult]
) -> list[CellResult]:
    """Rewrite the stored commands portably for display (``manifest`` in place).

    Runs stored before commands were written portably hold absolute paths: of the run folder
    they were measured in (read from the server command), of the cache and the virtualenv.
    """
    server = manifest.get("server") or {}
    roots = tuple(d for d in (recorded_run_dir(server.get("command")), run_dir) if d)
    if server.get("command"):
        server["command"] = portable_command(server["command"], roots)
    perf_analyzer = manifest.get("perf_analyzer") or {}
    if perf_analyzer.get("binary"):
        perf_analyzer["binary"] = portable_path(perf_analyzer["binary"], roots)
    return [
        replace(c, perf=replace(c.perf, command=portable_command(c.perf.command, roots)))
        for c in cells
    ]


def analyse_run(run_dir: Path) -> tuple[dict[str, Any], list[Analysis], CostModel | None]:
    manifest = load_manifest(run_dir)
    cells = portable_records(run_dir, manifest, load_cells(run_dir))
    if not cells:
        raise TritonlabError(f"{run_dir} has no measured cells yet; run the experiment first")
    order = [v["name"] for v in manifest["plan"]["variants"]]
    cores = int(manifest["machine"].get("cpu_affinity_count") or 1)
    model = fit_cost_model(run_dir, cores)
    return manifest, analyse(summarise(cells, order), cores, model), model


def build_report(run_dir: Path) -> BuiltReport:
    """Rebuild docs/, plots/, report.html, results/summary.json and README.md from stored files.

    Reads the cells and the manifest once; every output is a function of them alone.
    """
    manifest, analyses, model = analyse_run(run_dir)
    results = run_dir / RESULTS_DIR
    checks = _json_or(results / "infer_check.json", [])
    log_path = run_dir / "docs" / "experiment_log.md"
    operators = _json_or(results / OPERATORS_FILE, None)
    adaptive_rounds = _json_or(results / ADAPTIVE_FILE, [])
    summaries = [r.summary for a in analyses for r in a.reports]
    predictions = [model.predict(s) for s in summaries] if model else []
    cost_path = results / COST_MODEL_FILE
    if model is not None:
        write_json_atomic(
            cost_path,
            {"terms": model.to_dict(), "predictions": [p.to_dict() for p in predictions]},
        )
    else:
        cost_path.unlink(missing_ok=True)
    recs = recommendations_from_manifest(manifest, summaries)  # sweeps name a latency budget
    recs_path = results / RECOMMENDATIONS_FILE
    if recs is not None:
        write_json_atomic(recs_path, recs.to_dict())
    else:
        recs_path.unlink(missing_ok=True)
    write_text_atomic(
        log_path,
        render_experiment_log(
            manifest, analyses, checks, operators, recs, model, predictions, adaptive_rounds
        ),
    )
    summary_path = results / "summary.json"
    write_json_atomic(summary_path, {"analyses": [a.to_dict() for a in analyses]})
    plots = write_plots(run_dir, manifest, summaries, recs)
    html_path = write_html_report(run_dir, manifest, analyses, checks, plots, recs)
    write_text_atomic(run_dir / "README.md", project_readme(manifest, analyses))
    return BuiltReport(log_path, summary_path, analyses, plots, html_path)
