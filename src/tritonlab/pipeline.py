"""The one-command pipeline: ONNX file -> repository -> server -> checks -> measurements -> docs.

``run_project`` is what ``tritonlab run`` and ``tritonlab demo`` call; every stage it uses is a
library function of its own subpackage, and measuring and reporting meet only through files.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from tritonlab.analysis.adaptive import undecided_project
from tritonlab.analysis.operators import profile_operators
from tritonlab.errors import ConfigError
from tritonlab.experiments.manifest import SweepEntry, available_cores
from tritonlab.experiments.plan import ExperimentPlan
from tritonlab.experiments.runner import (
    AdaptiveRepeats,
    OpenLoopRates,
    ProgressCallback,
    RunOutcome,
    UndecidedCells,
    concrete_input_shapes,
    run_experiment,
)
from tritonlab.experiments.serving_path import NULL_MODEL_PATH
from tritonlab.experiments.store import (
    OPERATORS_FILE,
    RESULTS_DIR,
    write_json_atomic,
)
from tritonlab.models.inspect import OnnxModelInfo, check_with_onnxruntime, inspect_onnx
from tritonlab.perf.in_process import time_in_process
from tritonlab.perf.locate import locate_perf_analyzer
from tritonlab.report.build import BuiltReport, build_report
from tritonlab.report.project import (
    export_script_demo,
    export_script_user,
    write_project_files,
)
from tritonlab.server.gpu import check_gpu_variants
from tritonlab.server.launch import ServerOptions
from tritonlab.server.locate import external_server, prepare_bundled_server

MODEL_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class ProjectResult:
    outcome: RunOutcome
    report: BuiltReport


def check_model_name(name: str) -> str:
    if not MODEL_NAME_RE.match(name) or "__" in name:
        raise ConfigError(
            f"model name {name!r}: use letters, digits, '_', '.', '-' (no '__'); pass --name"
        )
    return name


def load_model_info(onnx_path: Path) -> OnnxModelInfo:
    """Inspect the graph and make sure onnxruntime can run it, before any server starts."""
    info = inspect_onnx(onnx_path)
    check_with_onnxruntime(onnx_path)
    return info


def record_operator_profile(run_dir: Path, info: OnnxModelInfo, plan: ExperimentPlan) -> None:
    """Profile the heavy operators and time in-process runs once; kept across resumes."""
    path = run_dir / RESULTS_DIR / OPERATORS_FILE
    if path.exists():
        return
    largest = min(v.max_batch_size for v in plan.variants) if info.batched else 1
    batches = [b for b in (1, 2, 4, 8, 16, 32, 64) if b <= max(1, largest)]
    record: dict[str, object] = {
        "profile": profile_operators(info.path).to_dict(),
        "in_process_us_per_execution": {
            str(b): t for b, t in time_in_process(info, batches).items()
        },
    }
    null_path = run_dir / NULL_MODEL_PATH
    if null_path.exists():
        # The serving-path cells already contain an empty onnxruntime call; the cost model
        # subtracts its in-process time so the model's own terms do not count it twice.
        null_info = replace(info, path=null_path)
        record["null_in_process_us_per_execution"] = {
            str(b): t for b, t in time_in_process(null_info, batches).items()
        }
    write_json_atomic(path, record)


def run_project(
    onnx_path: Path,
    run_dir: Path,
    plan: ExperimentPlan,
    options: ServerOptions,
    progress: ProgressCallback | None = None,
    fresh: bool = False,
    demo: bool = False,
    time_budget_s: float | None = None,
    sweep: SweepEntry | None = None,
    open_loop_rates: OpenLoopRates | None = None,
    max_repeats: int | None = None,
    undecided: UndecidedCells | None = None,
    adaptive_budget_s: float | None = None,
) -> ProjectResult:
    """Deploy, check, measure and explain ``onnx_path`` into the project folder ``run_dir``.

    With ``max_repeats`` above the plan's repeats, rounds are added while a verdict that the
    explanations (or, with ``undecided`` given, the sweep's picks) rest on is undecided.
    """
    check_model_name(plan.model_name)
    check_gpu_variants(plan.variants, remote=bool(options.url))
    info = load_model_info(onnx_path)
    if fresh:
        for sub in ("results", "benchmarks", "models", "server", "docs", "serving_path"):
            shutil.rmtree(run_dir / sub, ignore_errors=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    adaptive = None
    if max_repeats is not None and max_repeats > plan.repeats:
        order = [v.name for v in plan.variants]
        cores = available_cores()
        adaptive = AdaptiveRepeats(
            max_repeats,
            undecided or (lambda: undecided_project(run_dir, order, cores)),
            adaptive_budget_s,
        )
    outcome = run_experiment(
        plan,
        info,
        run_dir,
        options,
        progress,
        time_budget_s,
        sweep=sweep,
        open_loop_rates=open_loop_rates,
        adaptive=adaptive,
    )

    record_operator_profile(run_dir, info, plan)

    perf_install = locate_perf_analyzer()
    server_install = None
    if not options.url:
        server_install = (
            external_server(options.server_bin, options.backend_dir)
            if options.server_bin
            else prepare_bundled_server()
        )
    baseline_settings = plan.perf_settings(
        plan.loads[0], plan.model_name, "URL", concrete_input_shapes(info)
    )
    write_project_files(
        run_dir,
        plan.model_name,
        server_install,
        perf_install,
        baseline_settings,
        (
            export_script_demo()
            if demo
            else export_script_user(onnx_path.resolve(), plan.model_name, run_dir)
        ),
    )
    return ProjectResult(outcome, build_report(run_dir))
