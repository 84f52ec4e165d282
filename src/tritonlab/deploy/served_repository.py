"""The pick's native model repository for a deployment: its measured ``config.pbtxt`` under
the model's own name, and ``model.onnx`` where the run folder has it.

A model of a user's repository deploys as the whole pipeline: the picked configuration of the
measured model (an ensemble's tuned step under its own name again), and every model it calls,
copied from the run folder's ``models/``, where they sit under their own names.

Every name read from the run's stored files that becomes a path (the model's, the variant's,
the repository's tuned and called models', the served names made of them) is checked first
(``check_stored_names``): a name with ``/``, ``\\``, ``..``, NUL or a newline, an absolute one, or
one outside a model name's characters is a one-line ``ConfigError`` naming the file it came
from, before any path is built. Every file is written through the out folder's ``Gateway``.
"""

from __future__ import annotations

import re
from pathlib import Path

from tritonlab.deploy.pick import DeployPick
from tritonlab.errors import ConfigError
from tritonlab.gateway import Gateway
from tritonlab.models.source import RepositorySource
from tritonlab.repository.config import MODEL_FILENAME, config_to_text, read_config
from tritonlab.repository.layout import MODEL_VERSION
from tritonlab.repository.user_repo import served_names
from tritonlab.repository.variants import MODEL_NAME_RE, is_model_name, variant_model_name
from tritonlab.run_layout import RunLayout

# A variant's name as tritonlab writes it (``ServingVariant.validate``): it joins a model name.
VARIANT_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_]*")
MAX_NAME = 200  # a folder name, with room for a variant's suffix, under 255 bytes


def _compiled(path: Path) -> bool:
    return path.name == "__pycache__"


def _refuse(name: str, source: Path, what: str, rule: str) -> ConfigError:
    return ConfigError(
        f"{source}: {what} {name!r} is not {rule} (letters, digits, '_', '.', '-', from a "
        "letter or digit; no '/', '\\', '..', NUL or newline); the file is damaged or forged: "
        "restore it"
    )


def checked_model_name(name: str, source: Path | str = "the run's manifest") -> str:
    """``name`` from a run's manifest (``source``), when it is one tritonlab writes: a manifest
    naming anything else is damaged or forged, and its name must not become a path."""
    if not is_model_name(name) or len(name) > MAX_NAME:
        raise _refuse(name, Path(source), "the model name", "a model name tritonlab writes")
    return name


def checked_callee_name(name: str, source: Path | str = "the run's manifest") -> str:
    """A called (or tuned) model's name from a run's manifest, when it is safe as one folder
    name (a user's repository may name its models with '__')."""
    if not MODEL_NAME_RE.fullmatch(name) or len(name) > MAX_NAME:
        raise _refuse(name, Path(source), "a called model", "a folder name tritonlab copies")
    return name


def checked_variant_name(name: str, source: Path | str) -> str:
    """A variant's name from the run's cells, when it is one tritonlab writes."""
    if not VARIANT_NAME_RE.fullmatch(name) or len(name) > MAX_NAME:
        raise ConfigError(
            f"{source}: the variant name {name!r} is not one tritonlab writes (lower-case "
            "letters, digits and '_'); the file is damaged or forged: restore it"
        )
    return name


def check_stored_names(pick: DeployPick, run_dir: Path) -> None:
    """Check every stored name ``write_repository`` will make a path of (see the module text)."""
    layout = RunLayout(run_dir)
    checked_model_name(pick.model_name, layout.manifest)
    checked_variant_name(pick.variant.name, layout.cells)
    source = pick.repository
    if source is None:
        return
    for name in (
        source.tuned,
        *source.called,
        *served_names(source, pick.model_name, pick.variant),
    ):
        checked_callee_name(name, layout.manifest)


def _missing(config: Path) -> ConfigError:
    return ConfigError(
        f"{config} is missing: deploy needs the run's model repository (run the same "
        "command that made the run, or `tritonlab report` after restoring models/)"
    )


def write_repository(pick: DeployPick, run_dir: Path, repo: Path, gate: Gateway) -> int:
    """The pick's native repository in ``repo`` (stored names checked first); its bytes."""
    check_stored_names(pick, run_dir)
    if pick.repository is not None:
        return write_pipeline(pick, pick.repository, run_dir, repo, gate)
    served = RunLayout(run_dir).model_dir(variant_model_name(pick.model_name, pick.variant))
    config = served / "config.pbtxt"
    if not config.exists():
        raise _missing(config)
    target = repo / pick.model_name
    gate.remove_tree(target)  # an earlier deployment's files (another model.onnx) go
    gate.mkdir(target / MODEL_VERSION)
    lines = config.read_text().splitlines()
    lines = [f'name: "{pick.model_name}"' if ln.startswith("name:") else ln for ln in lines]
    gate.write_text(target / "config.pbtxt", "\n".join(lines) + "\n")
    if (model := model_file(run_dir, pick)) is not None:
        gate.copy_in(model, target / MODEL_VERSION / MODEL_FILENAME)
        return model.stat().st_size
    gate.write_text(
        target / MODEL_VERSION / "PUT_model.onnx_HERE",
        f"The run folder holds no model.onnx (examples keep it out of git); export "
        f"{pick.model_name}.onnx again (scripts/ in the run folder) and copy it here as "
        "model.onnx.\n",
    )
    return 0


def model_file(run_dir: Path, pick: DeployPick) -> Path | None:
    """The picked variant's ONNX file in ``run_dir`` (else the run's model), or None."""
    layout = RunLayout(run_dir)
    served = layout.model_dir(variant_model_name(pick.model_name, pick.variant))
    candidates = (served / MODEL_VERSION / MODEL_FILENAME, layout.exported_model(pick.model_name))
    return next((c for c in candidates if c.exists()), None)


def pipeline_models(pick: DeployPick) -> tuple[str, ...]:
    """The model folders a deployment of ``pick`` holds: the model, then those it calls."""
    return (pick.model_name, *(pick.repository.called if pick.repository else ()))


def write_pipeline(
    pick: DeployPick, source: RepositorySource, run_dir: Path, repo: Path, gate: Gateway
) -> int:
    """A repository model's whole pipeline in ``repo``, each folder copied from the run's
    ``models/`` under the name it is deployed by; returns the bytes written."""
    layout = RunLayout(run_dir)
    served, tuned_served = served_names(source, pick.model_name, pick.variant)
    # (folder in the run's models/, name deployed): every name was checked before
    placed = [(served, pick.model_name)]
    placed += [(tuned_served if name == source.tuned else name, name) for name in source.called]
    for run_name, _ in placed:
        if not (layout.model_dir(run_name) / "config.pbtxt").is_file():
            raise _missing(layout.model_dir(run_name) / "config.pbtxt")
    renamed = dict(placed)
    for run_name, name in placed:
        target = repo / name
        # links in it followed for reading, what the Python backend compiled left out
        gate.copy_tree_in(layout.model_dir(run_name), target, skip=_compiled)
        config = read_config(target / "config.pbtxt")
        config.name = name
        for step in config.ensemble_scheduling.step:
            step.model_name = renamed.get(step.model_name, step.model_name)
        gate.write_text(target / "config.pbtxt", config_to_text(config))
    return sum(
        f.stat().st_size for _, name in placed for f in (repo / name).rglob("*") if f.is_file()
    )
