"""The pick's native model repository for a deployment: its measured ``config.pbtxt`` under
the model's own name, and ``model.onnx`` where the run folder has it.

A model of a user's repository deploys as the whole pipeline: the picked configuration of the
measured model (an ensemble's tuned step under its own name again), and every model it calls,
copied from the run folder's ``models/``, where they sit under their own names.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tritonlab.deploy.pick import DeployPick
from tritonlab.errors import ConfigError
from tritonlab.models.source import RepositorySource
from tritonlab.repository.config import MODEL_FILENAME, read_config, write_config
from tritonlab.repository.layout import MODEL_VERSION
from tritonlab.repository.user_repo import served_names
from tritonlab.repository.variants import MODEL_NAME_RE, is_model_name, variant_model_name
from tritonlab.run_layout import RunLayout


def checked_model_name(name: str) -> str:
    """``name`` from a run's manifest, when it is one tritonlab writes: a manifest naming
    anything else is damaged or forged, and its name must not become a path."""
    if not is_model_name(name):
        raise ConfigError(
            f"the run's manifest names the model {name!r}, which is not a model name tritonlab "
            "writes (letters, digits, '_', '.', '-'); the manifest is damaged: restore it"
        )
    return name


def _missing(config: Path) -> ConfigError:
    return ConfigError(
        f"{config} is missing: deploy needs the run's model repository (run the same "
        "command that made the run, or `tritonlab report` after restoring models/)"
    )


def write_repository(pick: DeployPick, run_dir: Path, repo: Path) -> int:
    """The native repository of the pick; returns the bytes it holds (the model's, if found)."""
    checked_model_name(pick.model_name)
    if pick.repository is not None:
        return write_pipeline(pick, pick.repository, run_dir, repo)
    served = RunLayout(run_dir).model_dir(variant_model_name(pick.model_name, pick.variant))
    config = served / "config.pbtxt"
    if not config.exists():
        raise _missing(config)
    target = repo / pick.model_name
    (target / "1").mkdir(parents=True, exist_ok=True)
    lines = config.read_text().splitlines()
    lines = [f'name: "{pick.model_name}"' if ln.startswith("name:") else ln for ln in lines]
    (target / "config.pbtxt").write_text("\n".join(lines) + "\n")
    model = model_file(run_dir, pick)
    if model is not None:
        shutil.copy2(model, target / "1" / "model.onnx")
        return model.stat().st_size
    (target / "1" / "PUT_model.onnx_HERE").write_text(
        f"The run folder holds no model.onnx (examples keep it out of git); export "
        f"{pick.model_name}.onnx again (scripts/ in the run folder) and copy it here as "
        "model.onnx.\n"
    )
    return 0


def model_file(run_dir: Path, pick: DeployPick) -> Path | None:
    """The picked variant's ONNX file in ``run_dir`` (else the run's model), or None."""
    layout = RunLayout(run_dir)
    served = layout.model_dir(variant_model_name(pick.model_name, pick.variant))
    for candidate in (
        served / MODEL_VERSION / MODEL_FILENAME,
        layout.exported_model(pick.model_name),
    ):
        if candidate.exists():
            return candidate
    return None


def pipeline_models(pick: DeployPick) -> tuple[str, ...]:
    """The model folders a deployment of ``pick`` holds: the model itself, then every model it
    calls (for an ONNX file, the model alone)."""
    if pick.repository is None:
        return (pick.model_name,)
    return (pick.model_name, *pick.repository.called)


def checked_callee_name(name: str) -> str:
    """A called model's name from a run's manifest, when it is safe as one folder name."""
    if not MODEL_NAME_RE.fullmatch(name):
        raise ConfigError(
            f"the run's manifest names a called model {name!r}, which is not a folder name "
            "tritonlab copies (letters, digits, '_', '.', '-'); the manifest is damaged: restore it"
        )
    return name


def write_pipeline(pick: DeployPick, source: RepositorySource, run_dir: Path, repo: Path) -> int:
    """The whole pipeline of a repository model's pick in ``repo``: the measured model under
    the pick's model name, an ensemble's tuned step and every called model under their own
    names, each folder copied from the run's ``models/``; returns the bytes written."""
    layout = RunLayout(run_dir)
    served, tuned_served = served_names(source, pick.model_name, pick.variant)
    # (folder in the run's models/, name deployed): names from the manifest are checked first
    placed = [(served, pick.model_name)]
    for name in source.called:
        checked_callee_name(name)
        placed.append((tuned_served if name == source.tuned else name, name))
    for run_name, _ in placed:
        if not (layout.model_dir(run_name) / "config.pbtxt").is_file():
            raise _missing(layout.model_dir(run_name) / "config.pbtxt")
    renamed = dict(placed)
    for run_name, name in placed:
        target = repo / name
        shutil.copytree(
            layout.model_dir(run_name),
            target,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__"),  # what the Python backend compiled
        )
        config = read_config(target / "config.pbtxt")
        config.name = name
        for step in config.ensemble_scheduling.step:
            step.model_name = renamed.get(step.model_name, step.model_name)
        write_config(config, target / "config.pbtxt")
    return sum(
        f.stat().st_size for _, name in placed for f in (repo / name).rglob("*") if f.is_file()
    )
