"""The one-command pipeline: ONNX file -> repository -> server -> checks -> measurements -> docs.

``run_project`` is what ``tritonlab run`` and ``tritonlab demo`` call; every stage it uses is a
library function of its own subpackage, and measuring and reporting meet only through files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from tritonlab.analysis.adaptive import undecided_project
from tritonlab.analysis.operators import profile_operators
from tritonlab.analysis.search import COMPUTE_BOUND_US
from tritonlab.errors import ConfigError
from tritonlab.experiments.blocks import ENGINE_BLOCKS
from tritonlab.experiments.manifest import SweepEntry, available_cores
from tritonlab.experiments.plan import (
    ExperimentPlan,
    MeasurementSettings,
    backends_plan,
    compute_plan,
    for_unbatched_model,
    seed_comparison_plan,
)
from tritonlab.experiments.run_folder import claim, discard_results
from tritonlab.experiments.runner import (
    AdaptiveRepeats,
    OpenLoopRates,
    RunOutcome,
    UndecidedCells,
    run_experiment,
)
from tritonlab.experiments.serving_path import NULL_MODEL_PATH
from tritonlab.experiments.session import InputFiles, ProgressCallback
from tritonlab.experiments.store import (
    OPERATORS_FILE,
    RESULTS_DIR,
    set_aside_cells,
    write_result,
)
from tritonlab.models.inputs import ModelInputs, derive_inputs, with_dynamic_dim
from tritonlab.models.inspect import OnnxModelInfo, check_with_onnxruntime, inspect_onnx
from tritonlab.models.shape_probe import probe_inputs
from tritonlab.paths import portable_path
from tritonlab.perf.in_process import in_process_ceiling, openvino_precision_used, time_in_process
from tritonlab.perf.locate import locate_perf_analyzer
from tritonlab.perf.machine import machine_ceilings
from tritonlab.perf.op_timing import ROOFLINE_BATCHES, time_operators
from tritonlab.report.build import BuiltReport, build_report
from tritonlab.report.project import (
    export_script_demo,
    export_script_user,
    write_project_files,
)
from tritonlab.repository.variants import aa_control
from tritonlab.server.gpu import check_gpu_variants
from tritonlab.server.launch import ServerOptions
from tritonlab.server.locate import default_cache_root, external_server, prepare_bundled_server
from tritonlab.server.process import LOOPBACK_HOSTS

MODEL_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class ProjectResult:
    outcome: RunOutcome
    report: BuiltReport


def check_measuring_host(options: ServerOptions) -> None:
    """Measurements keep a server they start on loopback: perf_analyzer runs on this machine,
    so nothing needs to listen elsewhere (``serve --host`` is the way to expose one)."""
    if not options.url and options.host not in LOOPBACK_HOSTS:
        raise ConfigError(
            f"--host {options.host}: measurements keep the server on loopback; to expose a "
            "server, use `tritonlab serve --host` (with TRITONLAB_API_KEY set)"
        )


def check_model_name(name: str) -> str:
    if not MODEL_NAME_RE.fullmatch(name) or "__" in name:
        raise ConfigError(
            f"model name {name!r}: use letters, digits, '_', '.', '-' (no '__'); pass --name"
        )
    return name


def load_model_info(onnx_path: Path) -> OnnxModelInfo:
    """Inspect the graph and make sure onnxruntime can run it, before any server starts."""
    info = inspect_onnx(onnx_path)
    check_with_onnxruntime(onnx_path)
    return info


CONFIG_SETS = ("auto", "seed", "compute", "backends")


def default_plan(
    info: OnnxModelInfo,
    inputs: ModelInputs,
    model_name: str,
    configs: str = "auto",
    repeats: int = 3,
    concurrency: int | None = None,
    protocol: str = "grpc",
    max_batch_size: int = 64,
    measurement: MeasurementSettings | None = None,
) -> ExperimentPlan:
    """The configurations ``run`` and ``demo`` compare, adapted to the model.

    ``seed``: the seed's four (batching and instances); ``compute``: threads x instances;
    ``backends``: onnxruntime against OpenVINO (f32 and bf16), with and without batching;
    ``auto`` times one batch-1 execution in-process and picks ``compute`` above
    ``COMPUTE_BOUND_US``. A model without a batch axis loses its batching variants.
    """
    if configs not in CONFIG_SETS:
        raise ConfigError(f"--configs must be one of {', '.join(CONFIG_SETS)}, got {configs!r}")
    cores = available_cores()
    notes: list[str] = []
    if configs == "auto":
        batch1_us = time_in_process(info, [1], iterations=5, inputs=inputs)[1]
        configs = "compute" if batch1_us > COMPUTE_BOUND_US else "seed"
        notes.append(
            f"Configuration set `{configs}` chosen automatically: one batch-1 execution took "
            f"{batch1_us / 1e3:.2f} ms in-process (median of 5), "
            + ("above" if configs == "compute" else "below")
            + f" the {COMPUTE_BOUND_US / 1e3:g} ms where the model's own compute, not the "
            "serving path, dominates a request"
            + (
                ", so threads x instances are compared."
                if configs == "compute"
                else ", so batching and instance counts are compared (the seed's four)."
            )
        )
    if configs == "backends":
        plan = backends_plan(
            model_name, repeats, concurrency or 8, protocol, max_batch_size, measurement
        )
    elif configs == "compute":
        plan = compute_plan(
            model_name, cores, repeats, concurrency, protocol, max_batch_size, measurement
        )
    else:
        plan = seed_comparison_plan(
            model_name, repeats, concurrency or 8, protocol, max_batch_size, measurement
        )
    plan = replace(plan, notes=tuple(notes))
    plan = plan if info.batched else for_unbatched_model(plan, cores)
    if plan.measurement.engine == ENGINE_BLOCKS:
        plan = replace(plan, variants=(*plan.variants, aa_control(plan.variants[0])))
    return plan


CEILING_WINDOW_ENV = "TRITONLAB_CEILING_WINDOW_S"
DEFAULT_CEILING_WINDOW_S = 3.0


def ceiling_window_s() -> float:
    """Seconds each in-process ceiling is measured for: 3 s, or ``$TRITONLAB_CEILING_WINDOW_S``
    (the behaviour tests use 1 s; the window is recorded with each ceiling)."""
    text = os.environ.get(CEILING_WINDOW_ENV, "")
    try:
        value = float(text) if text else DEFAULT_CEILING_WINDOW_S
    except ValueError as exc:
        raise ConfigError(
            f"{CEILING_WINDOW_ENV} must be a number of seconds, got {text!r}"
        ) from exc
    if not 0.1 <= value <= 60:
        raise ConfigError(f"{CEILING_WINDOW_ENV} must be between 0.1 and 60 s, got {value:g}")
    return value


def record_operator_profile(
    run_dir: Path, info: OnnxModelInfo, plan: ExperimentPlan, inputs: ModelInputs
) -> None:
    """Profile the heavy operators and time in-process runs once; kept across resumes."""
    path = run_dir / RESULTS_DIR / OPERATORS_FILE
    if path.exists():
        return
    largest = min(v.max_batch_size for v in plan.variants) if info.batched else 1
    batches = [b for b in (1, 2, 4, 8, 16, 32, 64) if b <= max(1, largest)]
    record: dict[str, object] = {
        "profile": profile_operators(info.path, inputs.shapes, info.batched).to_dict(),
        "in_process_us_per_execution": {
            str(b): t for b, t in time_in_process(info, batches, inputs=inputs).items()
        },
    }
    # Every other engine (backend and precision) the plan serves, timed the same way: the cost
    # model's fixed and per-sample terms are per engine.
    engines = sorted({(v.backend, v.precision) for v in plan.variants if v.engine != "onnxruntime"})
    if engines:
        record["engines_in_process_us_per_execution"] = {
            f"{backend} {precision}": {
                str(b): t
                for b, t in time_in_process(
                    info, batches, inputs=inputs, backend=backend, precision=precision
                ).items()
            }
            for backend, precision in engines
        }
        record["engines_precision_used"] = {
            f"{backend} {precision}": openvino_precision_used(info, precision)
            for backend, precision in engines
            if backend == "openvino"
        }
    client_batch = plan.loads[0].batch_size if info.batched else 1
    parallelism = sorted(
        {
            (v.instance_count, v.intra_op_threads or 0, v.backend, v.precision)
            for v in plan.variants
            if v.instance_kind == "KIND_CPU"
        }
    )
    window_s = ceiling_window_s()
    record["in_process_ceilings"] = [
        in_process_ceiling(
            info,
            instances,
            threads,
            client_batch,
            inputs,
            window_s=window_s,
            backend=backend,
            precision=precision,
        ).to_dict()
        for instances, threads, backend, precision in parallelism
    ]
    # The roofline: this machine's per-thread ceilings, and each heavy operator's own time at
    # the batch sizes it is drawn at (onnxruntime's profiler).
    record["machine_ceilings"] = machine_ceilings(default_cache_root()).to_dict()
    profile = record["profile"]
    assert isinstance(profile, dict)
    record["operator_us_per_execution"] = {
        str(b): times
        for b, times in time_operators(
            info,
            [o["name"] for o in profile["operators"]],
            [b for b in ROOFLINE_BATCHES if b <= max(1, largest)],
            inputs,
        ).items()
    }
    null_path = run_dir / NULL_MODEL_PATH
    if null_path.exists():
        # The serving-path cells already contain an empty onnxruntime call; the cost model
        # subtracts its in-process time so the model's own terms do not count it twice.
        null_info = replace(info, path=null_path)
        record["null_in_process_us_per_execution"] = {
            str(b): t for b, t in time_in_process(null_info, batches, inputs=inputs).items()
        }
    write_result(path, record)


def run_project(
    onnx_path: Path,
    run_dir: Path,
    plan: ExperimentPlan,
    options: ServerOptions,
    progress: ProgressCallback | None = None,
    fresh: bool = False,
    demo: str | None = None,
    time_budget_s: float | None = None,
    sweep: SweepEntry | None = None,
    open_loop_rates: OpenLoopRates | None = None,
    max_repeats: int | None = None,
    undecided: UndecidedCells | None = None,
    adaptive_budget_s: float | None = None,
    inputs: ModelInputs | None = None,
    remeasure: tuple[str, ...] = (),
    cluster: str | None = None,
) -> ProjectResult:
    """Deploy, check, measure and explain ``onnx_path`` into the project folder ``run_dir``.

    With ``max_repeats`` above the plan's repeats, rounds are added while a verdict that the
    explanations (or, with ``undecided`` given, the sweep's picks) rest on is undecided.
    """
    check_model_name(plan.model_name)
    check_measuring_host(options)
    check_gpu_variants(plan.variants, remote=bool(options.url))
    info = load_model_info(onnx_path)
    inputs = inputs or probe_inputs(info, derive_inputs(info), sized_by_user=False)
    if plan.loads and plan.loads[0].sequence_length is not None:
        # the reference load's length is what the profile, timings and check use too
        inputs = with_dynamic_dim(inputs, info, plan.loads[0].sequence_length)
    if fresh:
        discard_results(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    claim(run_dir)
    set_aside_cells(run_dir, remeasure)
    adaptive = None
    if max_repeats is not None and max_repeats > plan.repeats:
        order = [v.name for v in plan.variants]
        cores = available_cores()
        precision = plan.measurement.engine == ENGINE_BLOCKS
        adaptive = AdaptiveRepeats(
            max_repeats,
            undecided or (lambda: undecided_project(run_dir, order, cores, precision)),
            adaptive_budget_s,
            precision,
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
        inputs=inputs,
        cluster=cluster,
    )

    record_operator_profile(run_dir, info, plan, inputs)
    write_scripts(run_dir, info, inputs, plan, options, onnx_path, demo)
    return ProjectResult(outcome, build_report(run_dir))


def write_scripts(
    run_dir: Path,
    info: OnnxModelInfo,
    inputs: ModelInputs,
    plan: ExperimentPlan,
    options: ServerOptions,
    onnx_path: Path,
    demo: str | None,
) -> None:
    """The project folder's scripts and client: start the server, the baseline perf command
    (``plan``'s first load), re-export the model, one checked request."""
    perf_install = locate_perf_analyzer()
    server_install = None
    if not options.url:
        server_install = (
            external_server(options.server_bin, options.backend_dir)
            if options.server_bin
            else prepare_bundled_server()
        )
    load_inputs = InputFiles(inputs, info, run_dir).for_load(plan.loads[0])
    baseline_settings = plan.perf_settings(
        plan.loads[0],
        plan.model_name,
        "URL",
        load_inputs.shapes,
        portable_path(Path(load_inputs.data_file), run_dir) if load_inputs.data_file else None,
    )
    write_project_files(
        run_dir,
        plan.model_name,
        server_install,
        perf_install,
        baseline_settings,
        (
            export_script_demo(demo)
            if demo
            else export_script_user(onnx_path.resolve(), plan.model_name, run_dir)
        ),
    )
