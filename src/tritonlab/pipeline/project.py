"""The one-command pipeline: ONNX file -> repository -> server -> checks -> measurements -> docs.

``run_project`` is what ``tritonlab run`` and ``tritonlab demo`` call; every stage it uses is a
library function of its own subpackage, and measuring and reporting meet only through files.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tritonlab import gateway
from tritonlab.decisions.adaptive import undecided_project
from tritonlab.decisions.search import COMPUTE_BOUND_US
from tritonlab.errors import ConfigError, TritonlabError
from tritonlab.experiments.adaptive_run import AdaptiveRepeats, UndecidedCells
from tritonlab.experiments.blocks import (
    DEFAULT_EXTRA_BUDGET_S,
    DEFAULT_MAX_BLOCKS,
    DEFAULT_MEASURING_BUDGET_S,
    ENGINE_BLOCKS,
    ENGINES,
)
from tritonlab.experiments.manifest import SweepEntry, available_cores
from tritonlab.experiments.opening import check_resume, plan_fingerprint
from tritonlab.experiments.operator_record import record_operator_profile
from tritonlab.experiments.plan import (
    ExperimentPlan,
    PlanBasics,
    backends_plan,
    compute_plan,
    for_unbatched_model,
    install_traces,
    plan_traces_missing,
    seed_comparison_plan,
)
from tritonlab.experiments.plan_file import engine_repeats, with_engine_controls
from tritonlab.experiments.repository_plan import repository_baseline, repository_plan
from tritonlab.experiments.run_folder import claim, discard_results, open_run_folder
from tritonlab.experiments.runner import ClusterOpener, OpenLoopRates, RunOutcome, run_experiment
from tritonlab.experiments.sequence_plan import sequence_plan, without_batching
from tritonlab.experiments.session import InputFiles, ProgressCallback
from tritonlab.experiments.store import load_manifest, set_aside_cells
from tritonlab.models.inputs import ModelInputs, with_dynamic_dim
from tritonlab.models.inspect import OnnxModelInfo, check_with_onnxruntime, inspect_onnx
from tritonlab.models.shape_probe import checked_inputs
from tritonlab.models.state_pairs import state_tensors
from tritonlab.paths import portable_path
from tritonlab.perf.in_process import time_in_process
from tritonlab.perf.locate import locate_perf_analyzer
from tritonlab.perf.trace import Trace
from tritonlab.report.build import BuiltReport, build_report
from tritonlab.report.project import (
    export_script_demo,
    export_script_repository,
    export_script_user,
    write_project_files,
)
from tritonlab.repository.user_repo import read_repository_model
from tritonlab.repository.variants import is_model_name
from tritonlab.run_layout import RunLayout
from tritonlab.server.gpu import check_gpu_variants
from tritonlab.server.launch import ServerOptions
from tritonlab.server.locate import external_server, prepare_bundled_server
from tritonlab.server.process import LOOPBACK_HOSTS


@dataclass(frozen=True)
class RunControls:
    """How a run goes, whatever it measures: ``fresh`` sets earlier results aside first,
    ``time_budget_s`` stops it between cells, ``max_repeats``, ``adaptive_budget_s`` and
    ``measuring_budget_s`` (s: the run's measuring in all) bound the extra rounds, ``remeasure``
    names cells to measure again, ``cluster`` is a Ray address."""

    fresh: bool = False
    time_budget_s: float | None = None
    max_repeats: int | None = None
    adaptive_budget_s: float | None = None
    measuring_budget_s: float | None = None
    remeasure: tuple[str, ...] = ()
    cluster: str | None = None


DEFAULT_CONTROLS = RunControls()


@dataclass(frozen=True)
class ProjectResult:
    outcome: RunOutcome
    report: BuiltReport


@dataclass(frozen=True)
class Rounds:
    """The rounds a run measures: ``first`` of every cell, then more, up to ``most``, while a
    verdict is undecided, the extra ones taking ``extra_budget_s`` at the most and stopping
    before the run's measuring in all passes ``measuring_budget_s`` (None: no such limit)."""

    first: int
    most: int
    extra_budget_s: float
    measuring_budget_s: float | None = None


def check_choice(flag: str, value: str, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``, else a one-line ``ConfigError`` naming ``flag``."""
    if value not in choices:
        raise ConfigError(f"{flag} must be one of {', '.join(choices)}, got {value!r}")
    return value


def engine_rounds(
    engine: str,
    repeats: int | None = None,
    max_repeats: int | None = None,
    budget_s: float | None = None,
    classic_budget_s: float = 60.0,
    capped: bool = True,
) -> Rounds:
    """The ``Rounds`` of ``engine``: what was given, else the engine's defaults
    (``classic_budget_s``: the classic engine's budget, which a sweep sets higher). With the
    block engine, a run or demo (``capped``) stops its extra blocks before its measuring in all
    passes ``DEFAULT_MEASURING_BUDGET_S``; a sweep (which measures as many configurations as
    its plan names) gives its extra blocks ``DEFAULT_EXTRA_BUDGET_S``; a budget given replaces
    both."""
    blocks = check_choice("--engine", engine, ENGINES) == ENGINE_BLOCKS
    first = engine_repeats(engine, repeats)
    most = max_repeats if max_repeats is not None else (DEFAULT_MAX_BLOCKS if blocks else 5)
    if budget_s is not None:
        return Rounds(first, max(first, most), budget_s)
    if blocks and capped:
        # The measuring budget, which counts the planned blocks too, binds before the extra
        # blocks' own could: a run or demo stops at 250 s of measuring or at ``most`` blocks.
        budget = DEFAULT_MEASURING_BUDGET_S
        return Rounds(first, max(first, most), budget, budget)
    if blocks:
        return Rounds(first, max(first, most), DEFAULT_EXTRA_BUDGET_S)
    return Rounds(first, max(first, most), classic_budget_s)


def check_measuring_host(options: ServerOptions) -> None:
    """Measurements keep a server they start on loopback: perf_analyzer runs on this machine,
    so nothing needs to listen elsewhere (``serve --host`` is the way to expose one)."""
    if not options.url and options.host not in LOOPBACK_HOSTS:
        raise ConfigError(
            f"--host {options.host}: measurements keep the server on loopback; to expose a "
            "server, use `tritonlab serve --host` (with TRITONLAB_API_KEY set)"
        )


def check_model_name(name: str) -> str:
    """``name`` if Triton accepts it as a model name, else a ``ConfigError``."""
    if not is_model_name(name):
        raise ConfigError(
            f"model name {name!r}: use letters, digits, '_', '.', '-' (no '__'); pass --name"
        )
    return name


def load_model_info(onnx_path: Path) -> OnnxModelInfo:
    """Inspect the graph and make sure onnxruntime can run it, before any server starts."""
    info = inspect_onnx(onnx_path)
    check_with_onnxruntime(onnx_path)
    return info


def load_repository_info(
    root: Path,
    model: str,
    options: ServerOptions,
    step: str | None = None,
    reference: Path | None = None,
) -> OnnxModelInfo:
    """Read ``model`` of the user's repository at ``root`` as it is (``user_repo``), before
    any server starts: its backends checked against the server ``options`` name, an ONNX model
    also loaded by onnxruntime, ``reference`` (an .npz) checked to exist."""
    if options.url:
        raise ConfigError(
            "--url with --repository: the repository's configurations are written beside it and "
            "served by a tritonserver tritonlab starts (the bundled one, or --server-bin); to "
            "measure a server that already serves the repository, use `tritonlab perf --url`"
        )
    if reference is not None and not reference.is_file():
        raise ConfigError(
            f"--reference {reference}: not a file; pass an .npz of inputs and expected outputs"
        )
    info = read_repository_model(
        root, model, step, native=bool(options.server_bin), reference=reference
    )
    if info.runs_onnx:
        check_with_onnxruntime(info.path)
    return info


CONFIG_SETS = ("auto", "seed", "compute", "backends")


def default_plan(
    info: OnnxModelInfo,
    inputs: ModelInputs,
    basics: PlanBasics,
    configs: str = "auto",
    resume_dir: Path | None = None,
) -> ExperimentPlan:
    """The configurations ``run`` and ``demo`` compare, adapted to the model.

    ``resume_dir``: the run folder; when it holds a run whose ``auto`` set was chosen, that
    choice is kept (with its note) instead of timing the model again.

    ``seed``: the seed's four (batching and instances); ``compute``: threads x instances;
    ``backends``: onnxruntime against OpenVINO (f32 and bf16), with and without batching;
    ``auto`` times one batch-1 execution in-process and picks ``compute`` above
    ``COMPUTE_BOUND_US``. A model without a batch axis loses its batching variants. A model
    that carries state compares the sequence batcher's strategies under ``auto``
    (``sequence_plan``), and loses its batching variants under the others.
    """
    check_choice("--configs", configs, CONFIG_SETS)
    cores = available_cores()
    if info.source is not None:  # a repository model: compared from its own configuration
        if configs != "auto":
            raise ConfigError(
                "--configs: a repository's model is compared from its own configuration; "
                "leave --configs at auto, or write a plan file for `tritonlab sweep`"
            )
        plan = repository_plan(info.source, repository_baseline(info), basics)
        return replace(plan, variants=with_engine_controls(plan.variants, plan.measurement.engine))
    states = state_tensors(info)
    if states and configs == "auto":  # how sequences share the instances decides its serving
        plan = sequence_plan(basics, states, info.batched)
        return replace(plan, variants=with_engine_controls(plan.variants, plan.measurement.engine))
    notes: list[str] = []
    stored = _stored_auto_choice(resume_dir) if configs == "auto" else None
    if stored is not None:  # a resume keeps the set its run chose (a timing near the line
        configs, note = stored  # would otherwise flip it and refuse the resume)
        notes.append(note)
    elif configs == "auto":
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
        plan = backends_plan(basics)
    elif configs == "compute":
        plan = compute_plan(basics, cores)
    else:
        plan = seed_comparison_plan(basics)
    plan = replace(plan, notes=tuple(notes))
    plan = plan if info.batched else for_unbatched_model(plan, cores)
    if states:
        plan = without_batching(plan, states, info.batched)
    return replace(plan, variants=with_engine_controls(plan.variants, plan.measurement.engine))


AUTO_CHOICE_RE = re.compile(r"Configuration set `(seed|compute)` chosen automatically: ")


def _stored_auto_choice(run_dir: Path | None) -> tuple[str, str] | None:
    """The configuration set (and its note) a stored run in ``run_dir`` chose with ``auto``."""
    if run_dir is None or not RunLayout(run_dir).manifest.is_file():
        return None
    try:
        notes = load_manifest(run_dir).plan.notes
    except TritonlabError:
        return None  # a damaged manifest is reported where the run reads it
    for note in notes:
        if match := AUTO_CHOICE_RE.match(note):
            return match.group(1), note
    return None


def run_project(
    onnx_path: Path,
    run_dir: Path,
    plan: ExperimentPlan,
    options: ServerOptions,
    progress: ProgressCallback | None = None,
    controls: RunControls = DEFAULT_CONTROLS,
    *,
    demo: str | None = None,
    sweep: SweepEntry | None = None,
    open_loop_rates: OpenLoopRates | None = None,
    undecided: UndecidedCells | None = None,
    inputs: ModelInputs | None = None,
    info: OnnxModelInfo | None = None,
    traces: Sequence[Trace] = (),
) -> ProjectResult:
    """Deploy, check, measure and explain ``onnx_path`` into the project folder ``run_dir``.

    With ``controls.max_repeats`` above the plan's repeats, rounds are added while a verdict
    that the explanations (or, with ``undecided`` given, the sweep's picks) rest on is undecided.
    ``info``: the model already read (a model of a user's repository); default: ``onnx_path``.
    ``traces``: the traces the plan's trace loads replay, copied into the run folder first.
    """
    check_model_name(plan.model_name)
    check_measuring_host(options)
    check_gpu_variants(plan.variants, remote=bool(options.url))
    info = info or load_model_info(onnx_path)
    inputs = inputs or checked_inputs(info)
    if plan.loads and plan.loads[0].sequence_length is not None:
        # the reference load's length is what the profile, timings and check use too
        inputs = with_dynamic_dim(inputs, info, plan.loads[0].sequence_length)
    if missing := plan_traces_missing(plan, traces):
        raise ConfigError(f"the plan replays trace(s) {', '.join(missing)}: give their files")
    open_run_folder(
        run_dir,
        {
            "the model": onnx_path,
            "--repository": info.origin.root,
            "--reference": info.origin.reference,
            **{f"trace {t.path}": t.path for t in traces},
        },
    )
    if controls.fresh:
        discard_results(run_dir)
    elif traces:  # another run's folder is refused before its trace files are overwritten
        check_resume(run_dir, plan_fingerprint(plan, info.origin.sha256(), inputs))
    gateway.mkdir(run_dir)
    claim(run_dir)
    install_traces(run_dir, traces)
    set_aside_cells(run_dir, controls.remeasure)
    adaptive = None
    if controls.max_repeats is not None and controls.max_repeats > plan.repeats:
        order = [v.name for v in plan.variants]
        cores = available_cores()
        precision = plan.measurement.engine == ENGINE_BLOCKS
        adaptive = AdaptiveRepeats(
            controls.max_repeats,
            undecided or (lambda: undecided_project(run_dir, order, cores, precision)),
            controls.adaptive_budget_s,
            precision,
            controls.measuring_budget_s,
        )
    opener: ClusterOpener | None = None
    if controls.cluster:  # (ray_session imports the runner: it is bound here, not imported there)
        from tritonlab.distributed.ray_session import open_ray_session

        opener = functools.partial(open_ray_session, controls.cluster)
    outcome = run_experiment(
        plan,
        info,
        run_dir,
        options,
        progress,
        controls.time_budget_s,
        sweep=sweep,
        open_loop_rates=open_loop_rates,
        adaptive=adaptive,
        inputs=inputs,
        cluster=opener,
    )

    if info.runs_onnx:
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
    data, intervals = (
        portable_path(Path(f), run_dir, cwd=Path.cwd()) if f else None
        for f in (load_inputs.data_file, load_inputs.intervals_file)
    )
    write_project_files(
        run_dir,
        plan.model_name,
        server_install,
        perf_install,
        plan.perf_settings(
            plan.loads[0], plan.model_name, "URL", load_inputs.shapes, data, intervals
        ),
        (
            export_script_demo(demo)
            if demo
            else export_script_repository(info.source, plan.model_name, run_dir)
            if info.source is not None
            else export_script_user(onnx_path.resolve(), plan.model_name, run_dir)
        ),
    )
