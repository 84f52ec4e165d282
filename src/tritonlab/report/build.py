"""Rebuild every report of a run folder from its stored files (and nothing else)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonlab import gateway
from tritonlab.explanation.explain import Analysis
from tritonlab.report.experiment_log import render_experiment_log
from tritonlab.report.html import write_html_report
from tritonlab.report.plot_support import PlotData
from tritonlab.report.plots import write_plots
from tritonlab.report.project import project_readme
from tritonlab.report.recommend_summary_text import recommendations_dict
from tritonlab.report.run_data import RunData, load_run
from tritonlab.result_files import write_result


@dataclass(frozen=True)
class BuiltReport:
    experiment_log: Path
    summary_json: Path
    analyses: list[Analysis]
    plots: dict[str, Path] = field(default_factory=dict)
    html_report: Path | None = None


def _unfitted(run: RunData) -> dict[str, Any]:
    """The loads the cost model predicts nothing for, with the input shapes it was fitted at
    (an empty dict when it fits every load, so such files read as before)."""
    if not run.unfitted_loads or run.cost_model is None:
        return {}
    shapes = run.cost_model.input_shapes or ()
    return {
        "fitted_input_shapes": {k: list(v) for k, v in shapes},
        "loads_at_other_input_shapes": run.unfitted_loads,
    }


def write_report(run: RunData) -> BuiltReport:
    """Write docs/, plots/, report.html, results/*.json and README.md from ``run``."""
    paths = run.paths
    if run.cost_model is not None:
        write_result(
            paths.cost_model,
            {
                "terms": run.cost_model.to_dict(),
                "predictions": [p.to_dict() for p in run.predictions],
                **_unfitted(run),
            },
        )
    else:
        gateway.remove(paths.cost_model)
    if run.recommendations is not None:  # sweeps name a latency budget
        write_result(paths.recommendations, recommendations_dict(run.recommendations))
    else:
        gateway.remove(paths.recommendations)
    gateway.write_text(paths.experiment_log, render_experiment_log(run))
    write_result(
        paths.summary,
        {"analyses": [a.to_dict() for a in run.analyses], "trust": run.trust.to_dict()},
    )
    plots = write_plots(paths.root, PlotData.of(run))
    html_path = write_html_report(run, plots)
    gateway.write_text(paths.readme, project_readme(run))
    return BuiltReport(paths.experiment_log, paths.summary, run.analyses, plots, html_path)


def build_report(run_dir: Path) -> BuiltReport:
    """Rebuild docs/, plots/, report.html, results/summary.json and README.md from stored files.

    Loads the run folder once (``load_run``); every output is a function of that record alone.
    """
    return write_report(load_run(run_dir))
