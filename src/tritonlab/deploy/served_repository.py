"""The pick's native model repository for a deployment: its measured ``config.pbtxt`` under
the model's own name, and ``model.onnx`` where the run folder has it."""

from __future__ import annotations

import shutil
from pathlib import Path

from tritonlab.deploy.pick import DeployPick
from tritonlab.errors import ConfigError
from tritonlab.repository.config import MODEL_FILENAME
from tritonlab.repository.layout import MODEL_VERSION
from tritonlab.repository.variants import is_model_name, variant_model_name
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


def write_repository(pick: DeployPick, run_dir: Path, repo: Path) -> int:
    """The native repository of the pick; returns the bytes it holds (the model's, if found)."""
    checked_model_name(pick.model_name)
    served = RunLayout(run_dir).model_dir(variant_model_name(pick.model_name, pick.variant))
    config = served / "config.pbtxt"
    if not config.exists():
        raise ConfigError(
            f"{config} is missing: deploy needs the run's model repository (run the same "
            "command that made the run, or `tritonlab report` after restoring models/)"
        )
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
