"""Where a measured model comes from: one ONNX file, or a model of a user's Triton repository.

Each origin answers what differs between them (``OnnxModelInfo.origin`` picks one), so the
rest of tritonlab asks the origin, not which origin it is: the file a manifest names, the
digest of what is served, the repository a run must not write into, the user's reference
answers, whether onnxruntime can run the model in-process. ``RepositorySource`` is plain data
too (the ``models`` layer sits below the repository writer that reads it): the user's
repository, the model measured in it, what kind of model that is, the model whose knobs the
variants change (the model itself, or an ensemble's step), and the models it calls (an
ensemble's steps, or the models a BLS model names), whose Triton statistics every cell reads
beside the measured model's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field, PlainSerializer

from tritonlab.records import Record

# What the measured model is: an ONNX model (served by tritonlab's Python-based onnxruntime or
# OpenVINO backend), a Python-backend model, a Python model that calls others through BLS, or
# an ensemble of steps.
KIND_ONNX = "onnx"
KIND_PYTHON = "python"
KIND_BLS = "bls"
KIND_ENSEMBLE = "ensemble"
_KIND_WORDS = {
    KIND_ONNX: "an ONNX model",
    KIND_PYTHON: "a Python-backend model",
    KIND_BLS: "a Python model that calls {called} through BLS",
    KIND_ENSEMBLE: "an ensemble of {called}",
}


def kind_words(kind: str, called: list[str] | tuple[str, ...], quote: str = "`") -> str:
    """What a repository model is, in words for the log (``quote`` around model names)."""
    names = ", ".join(f"{quote}{n}{quote}" for n in called)
    return _KIND_WORDS.get(kind, "a model").format(called=names)


def file_sha256(path: Path) -> str:
    """The sha256 of one file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class OnnxFile:
    """A model given as one ONNX file, served from a repository tritonlab writes."""

    path: Path
    kind: ClassVar[str] = "onnx file"
    runs_onnx: ClassVar[bool] = True  # onnxruntime runs it in-process (reference, profile)
    called: ClassVar[tuple[str, ...]] = ()  # it calls no other model
    needed: ClassVar[tuple[str, ...]] = ()  # no other model to load beside it
    reference: ClassVar[Path | None] = None  # its answers come from onnxruntime, not a file
    root: ClassVar[Path | None] = None  # no repository of the user's to keep unwritten
    tuned_reason: ClassVar[str] = ""  # the variants change the model itself

    @property
    def model(self) -> str:
        """The model's name where none is given: the file's stem."""
        return self.path.stem

    @property
    def tuned(self) -> str:
        """The model whose knobs the variants change: this one."""
        return self.model

    def stored_name(self, path: Path) -> str:
        """The model file as the manifest names it."""
        return path.name

    def sha256(self) -> str:
        """The digest of what is served: the file's."""
        return file_sha256(self.path)

    def manifest_entry(self) -> dict[str, Any] | None:
        """The manifest's ``repository`` entry: none."""
        return None


@dataclass(frozen=True)
class RepositorySource(Record):
    """A model of a user's Triton repository, read as it is (never written): ``tuned`` is the
    model whose knobs the variants change (itself, or an ensemble's step), ``called`` the models
    it calls in order, ``needed`` every model it needs loaded, its own name last. A manifest
    stores ``root`` as its ``repository`` entry and ``reference`` by the file's name only."""

    root: Annotated[Path, Field(alias="repository")]
    model: str
    kind: str
    tuned: str
    tuned_backend: str
    called: tuple[str, ...] = ()
    needed: tuple[str, ...] = ()
    # Why ``tuned`` was chosen (an ensemble's bottleneck figure, or "--step"), for the log.
    tuned_reason: str = ""
    # The user's reference (``--reference``): an .npz of inputs and expected outputs by tensor
    # name, what the served answer is checked against; None: shapes and dtypes only.
    reference: Annotated[Path | None, PlainSerializer(lambda p: p and p.name)] = None

    @property
    def runs_onnx(self) -> bool:
        """Whether the measured model is itself an ONNX graph onnxruntime can run in-process."""
        return self.kind == KIND_ONNX

    def stored_name(self, path: Path) -> str:
        """The model file (its ONNX file or ``config.pbtxt``), under the model's folder."""
        return f"{self.model}/{path.name}"

    def sha256(self) -> str:
        """The digest of every file (names and contents) of every folder the model needs."""
        digest = hashlib.sha256()
        for name in sorted(self.needed):
            for file in sorted(p for p in (self.root / name).rglob("*") if p.is_file()):
                digest.update(file.relative_to(self.root).as_posix().encode() + b"\0")
                digest.update(file_sha256(file).encode())
        return digest.hexdigest()

    def manifest_entry(self) -> dict[str, Any] | None:
        """The manifest's ``repository`` entry: this record, the repository by its name."""
        return self.to_dict() | {"repository": self.root.name}
