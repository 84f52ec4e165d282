"""Which model a command measures, read and checked before any server starts: an ONNX file, a
built-in model (exported into the run folder), or a model of the user's Triton repository as it
is; for an ensemble, then, the step whose knobs the configurations change (``--step``, or the
one a short probe finds to bind); and the plan ``run`` and ``demo`` measure it with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonlab import gateway
from tritonlab.errors import ConfigError, ResultFileError
from tritonlab.experiments.plan import ExperimentPlan, MeasurementSettings, PlanBasics, under_trace
from tritonlab.experiments.repository_plan import REPOSITORY_CONCURRENCY, repository_baseline
from tritonlab.experiments.store import load_manifest
from tritonlab.models.inputs import ModelInputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.models.shape_probe import checked_inputs
from tritonlab.models.source import KIND_ENSEMBLE, RepositorySource
from tritonlab.models.zoo import BUILTIN_MODELS, export_builtin
from tritonlab.perf.locate import locate_perf_analyzer
from tritonlab.perf.runner import run_perf
from tritonlab.perf.settings import PerfSettings
from tritonlab.perf.trace import Trace, read_trace
from tritonlab.pipeline.project import (
    check_model_name,
    default_plan,
    load_model_info,
    load_repository_info,
)
from tritonlab.repository.layout import add_model, load_order
from tritonlab.repository.user_repo import ENSEMBLE, read_user_model
from tritonlab.run_layout import RunLayout
from tritonlab.server.called_models import server_time_shares
from tritonlab.server.launch import ServerOptions, running_server
from tritonlab.server.stats import ServerStatsDelta, StatsSnapshot, stats_delta


@dataclass(frozen=True)
class RepositoryChoice:
    """``--repository DIR --model NAME`` (with ``--step`` and ``--reference``)."""

    root: Path
    model: str
    step: str | None = None
    reference: Path | None = None


@dataclass(frozen=True)
class ChosenModel:
    """The model to measure: its Triton name, what was read of it, the inputs every request
    carries, and the built-in model it was exported from (None: the user's own)."""

    name: str
    info: OnnxModelInfo
    inputs: ModelInputs
    builtin: str | None = None


def choose_model(
    model: str | Path | None,
    name: str | None,
    out_dir: Path,
    options: ServerOptions,
    repository: RepositoryChoice | None = None,
    shapes: list[str] | None = None,
    input_data: Path | None = None,
) -> ChosenModel:
    """Read the model the command names (``repository``, a built-in model's name, or an ONNX
    file), checked and named (``--name``, else the folder or file it came from), and the
    inputs it will be sent (``--shape``, ``--input-data``); one-line errors before anything
    is served."""
    builtin = None
    if repository is not None:
        model_name = check_model_name(name or repository.model)
        info = load_repository_info(
            repository.root, repository.model, options, repository.step, repository.reference
        )
    elif model is None:
        raise ConfigError("give the ONNX model file, or --repository DIR --model NAME")
    elif isinstance(model, str) and model in BUILTIN_MODELS:
        builtin = model
        model_name = check_model_name(name or model)
        path = export_builtin(model, RunLayout(out_dir).exported_model(model)).onnx_path
        info = load_model_info(path)
    else:
        path = Path(model)
        model_name = check_model_name(name or path.stem)
        info = load_model_info(path)
    return ChosenModel(model_name, info, checked_inputs(info, shapes, input_data), builtin)


# Which step of an ensemble the variants change (without ``--step``): the user's pipeline is
# served as it is in a temporary repository and measured once with perf_analyzer at the run's
# load; Triton's statistics of each step over that window say where a request spends its server
# time (queue and compute per request, times calls per request). The step with the largest share
# is the one whose knobs are varied, and the reason (the probe's figures) goes into the run's
# manifest and log. A resumed run keeps the choice its manifest records.

PROBE_WINDOW_MS = 1000
PROBE_STABILITY_PCT = 50.0


def _stored_choice(run_dir: Path, source: RepositorySource) -> dict[str, object] | None:
    """The step a run folder's manifest records for the same model, if any."""
    if not RunLayout(run_dir).manifest.exists():
        return None
    try:
        repository = load_manifest(run_dir).model.repository or {}
    except ResultFileError:
        return None
    if repository.get("model") != source.model or not repository.get("tuned"):
        return None
    return dict(repository)


def probe_steps(
    info: OnnxModelInfo,
    model_name: str,
    options: ServerOptions,
    inputs: ModelInputs,
    concurrency: int,
    protocol: str = "grpc",
) -> dict[str, ServerStatsDelta]:
    """Serve the pipeline as the user configured it and measure one perf_analyzer run; each
    step's statistics over it, by name (the measured model's own under ``model_name``)."""
    with gateway.temporary_folder("tritonlab-probe-") as tmp:
        work = RunLayout(tmp.root)  # a scratch folder laid out like a run folder
        model = add_model(work.models, info, model_name, repository_baseline(info))
        with running_server(
            options, work.models, work.server_log, explicit_model_control=True
        ) as server:
            for name in load_order(model):
                server.load_model(name)
            data = inputs.write_perf_data(work.perf_data())
            dynamic = {s.name for s in info.inputs if -1 in s.dims}
            settings = PerfSettings(
                model_name=model.model_name,
                url=server.url(protocol),
                protocol=protocol,
                concurrency=concurrency,
                measurement_interval_ms=PROBE_WINDOW_MS,
                stability_percentage=PROBE_STABILITY_PCT,
                input_shapes={k: v for k, v in inputs.sent_shapes.items() if k in dynamic},
                input_data=str(data),
            )
            names = [(model_name, model.model_name), *model.called]
            before = {n: StatsSnapshot.from_triton(server.model_statistics(s)) for n, s in names}
            run_perf(locate_perf_analyzer(), settings, work.benchmark_dir("probe"), "probe")
            after = {n: StatsSnapshot.from_triton(server.model_statistics(s)) for n, s in names}
    return {n: stats_delta(before[n], after[n]) for n, _ in names}


def bind_step(
    chosen: ChosenModel,
    options: ServerOptions,
    run_dir: Path,
    concurrency: int,
    protocol: str,
    fresh: bool,
) -> ChosenModel:
    """``chosen`` with, for an ensemble of the user's repository (without ``--step``), its
    binding step as the one the variants change; any other model as it is. A run folder's
    earlier choice is kept."""
    info, model_name = chosen.info, chosen.name
    source = info.source
    if source is None or source.kind != KIND_ENSEMBLE or source.tuned_reason.startswith("chosen"):
        return chosen
    stored = None if fresh else _stored_choice(run_dir, source)
    if stored is not None:
        step, reason = str(stored["tuned"]), str(stored.get("tuned_reason", ""))
    else:
        deltas = probe_steps(info, model_name, options, chosen.inputs, concurrency, protocol)
        top = deltas.pop(model_name)
        shares = server_time_shares(deltas)
        candidates = [n for n in shares if read_user_model(source.root, n).backend != ENSEMBLE]
        step = max(candidates, key=lambda n: shares[n])
        figures = "; ".join(
            f"`{n}` {shares[n]:.0%} (queue {deltas[n].queue_us_per_request:,.0f} µs "
            f"+ compute {deltas[n].compute_us_per_request:,.0f} µs per request)"
            for n in shares
        )
        reason = (
            f"it held the largest share of the steps' server time in an opening probe (the "
            f"pipeline as configured, one perf_analyzer run at concurrency {concurrency}, "
            f"{top.request_count:,} requests): {figures}"
        )
    backend = read_user_model(source.root, step).backend
    tuned = replace(source, tuned=step, tuned_backend=backend, tuned_reason=reason)
    return replace(chosen, info=replace(info, source=tuned))


@dataclass(frozen=True)
class RunAsked:
    """What ``run`` and ``demo`` were asked to measure: the model (a file, a built-in one's
    export, or ``repository``), what it is sent, and the default plan's flags."""

    model: Path | None
    out_dir: Path
    name: str | None = None
    repository: RepositoryChoice | None = None
    shapes: tuple[str, ...] = ()
    input_data: Path | None = None
    fresh: bool = False
    configs: str = "auto"
    repeats: int = 3
    concurrency: int | None = None
    protocol: str = "grpc"
    max_batch_size: int = 64
    measurement: MeasurementSettings = field(default_factory=MeasurementSettings)
    load_trace: Path | None = None


def prepare_run(
    asked: RunAsked, options: ServerOptions, say: Callable[[str], None]
) -> tuple[ChosenModel, ExperimentPlan, tuple[Trace, ...]]:
    """Choose the model (an ensemble: the step that binds), build its default plan (the
    configuration set ``configs`` names or a repository model's one-change variants; a resume
    keeps its run's choice), and replay ``load_trace`` at the plan's load shapes; ``say`` tells
    the plan's notes. Returns the model chosen, its plan and the traces that plan replays."""
    a = asked
    chosen = choose_model(
        a.model, a.name, a.out_dir, options, a.repository, list(a.shapes), a.input_data
    )
    # an ensemble: the variants change the step that binds
    concurrency = a.concurrency or REPOSITORY_CONCURRENCY
    chosen = bind_step(chosen, options, a.out_dir, concurrency, a.protocol, a.fresh)
    basics = PlanBasics(
        chosen.name, a.repeats, a.concurrency, a.protocol, a.max_batch_size, a.measurement
    )
    plan = default_plan(
        chosen.info, chosen.inputs, basics, a.configs, None if a.fresh else a.out_dir
    )
    traces: tuple[Trace, ...] = ()
    if a.load_trace is not None:  # the plan's load shapes replay the trace instead
        trace = read_trace(a.load_trace)
        plan, traces = under_trace(plan, trace), (trace,)
        say(f"load: {trace.stats.words()}")
    for note in plan.notes:
        say(note)
    return chosen, plan, traces
