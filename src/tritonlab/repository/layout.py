"""Lay out a Triton model repository: ``<repo>/<model>/config.pbtxt`` and ``1/model.onnx``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tritonlab import gateway
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.repository.config import (
    CONFIG_FILE,
    MODEL_FILENAME,
    build_model_config,
    write_config,
)
from tritonlab.repository.user_repo import write_repository_variant
from tritonlab.repository.variants import ServingVariant, variant_model_name

MODEL_VERSION = "1"


@dataclass(frozen=True)
class RepositoryModel:
    """One model folder in a repository, serving one variant."""

    model_name: str
    variant: ServingVariant
    folder: Path
    # The models it calls (a repository's ensemble steps or BLS callees): (the name in the
    # user's repository, the name served), whose statistics every cell reads beside its own.
    called: tuple[tuple[str, str], ...] = ()

    @property
    def config_path(self) -> Path:
        """The model's ``config.pbtxt`` in its repository folder."""
        return self.folder / CONFIG_FILE


def place_model_file(source: Path, target: Path) -> None:
    """Place the ONNX file for reading through the gateway: a hard link when possible (large
    models; tritonlab never writes into it), else a copy; an equal file there is kept."""
    gateway.link_in(source, target)


def add_model(
    repo_dir: Path, info: OnnxModelInfo, model_name: str, variant: ServingVariant
) -> RepositoryModel:
    """Write one variant of the model into ``repo_dir``; return where it went."""
    if info.source is not None:
        written = write_repository_variant(repo_dir, info.source, model_name, variant)
        return RepositoryModel(written.served_name, variant, written.folder, written.called)
    served_name = variant_model_name(model_name, variant)
    folder = repo_dir / served_name
    config = build_model_config(info, variant, served_name)
    place_model_file(info.path, folder / MODEL_VERSION / MODEL_FILENAME)
    write_config(config, folder / CONFIG_FILE)
    return RepositoryModel(served_name, variant, folder)


def build_repository(
    repo_dir: Path, info: OnnxModelInfo, model_name: str, variants: list[ServingVariant]
) -> list[RepositoryModel]:
    """Write every variant; validation of all happens before any file is written."""
    for variant in variants:
        variant.validate(model_batches=info.batched)
    names = [variant_model_name(model_name, v) for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"variant names must be unique: {names}")
    gateway.mkdir(repo_dir)
    return [add_model(repo_dir, info, model_name, v) for v in variants]


def load_order(model: RepositoryModel) -> list[str]:
    """The served names to load for ``model``, callees first (a BLS model's callees must be
    loaded before it; Triton loads an ensemble's steps itself, loading them first is the same)."""
    callees = [served for _, served in model.called if served != model.model_name]
    return [*dict.fromkeys(callees), model.model_name]
