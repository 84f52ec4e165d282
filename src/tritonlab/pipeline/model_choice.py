"""Which model a command measures, read and checked before any server starts: an ONNX file, a
built-in model (exported into the run folder), or a model of the user's Triton repository as it
is; for an ensemble, then, the step whose knobs the configurations change (``--step``, or the
one a short probe finds to bind)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tritonlab.errors import ConfigError
from tritonlab.models.inputs import ModelInputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.models.shape_probe import checked_inputs
from tritonlab.models.zoo import BUILTIN_MODELS, export_builtin
from tritonlab.pipeline.project import check_model_name, load_model_info, load_repository_info
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
