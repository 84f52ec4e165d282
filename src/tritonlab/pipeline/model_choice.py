"""Which model a command measures, read and checked before any server starts: an ONNX file, a
built-in model (exported into the run folder), or a model of the user's Triton repository as it
is; for an ensemble, then, the step whose knobs the configurations change (``--step``, or the
one a short probe finds to bind); and the plan ``run`` and ``demo`` measure it with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonlab.errors import ConfigError
from tritonlab.experiments.plan import ExperimentPlan, MeasurementSettings, PlanBasics, under_trace
from tritonlab.experiments.repository_plan import REPOSITORY_CONCURRENCY
from tritonlab.models.inputs import ModelInputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.models.shape_probe import checked_inputs
from tritonlab.models.zoo import BUILTIN_MODELS, export_builtin
from tritonlab.perf.trace import Trace, read_trace
from tritonlab.pipeline.project import (
    check_model_name,
    default_plan,
    load_model_info,
    load_repository_info,
)
from tritonlab.pipeline.step_probe import choose_binding_step
from tritonlab.run_layout import RunLayout
from tritonlab.server.launch import ServerOptions


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


def bind_step(
    chosen: ChosenModel,
    options: ServerOptions,
    out_dir: Path,
    concurrency: int,
    protocol: str,
    fresh: bool,
) -> ChosenModel:
    """``chosen`` with, for an ensemble of the user's repository, the step the configurations
    change (``choose_binding_step``); any other model as it is."""
    info = choose_binding_step(
        chosen.info, chosen.name, options, chosen.inputs, out_dir, concurrency, protocol, fresh
    )
    return replace(chosen, info=info)


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
