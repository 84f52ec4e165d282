"""Where a measured model comes from when it is not one ONNX file: a user's Triton repository.

``RepositorySource`` is plain data (the ``models`` layer sits below the repository writer that
reads it): the user's repository, the model measured in it, what kind of model that is, the
model whose knobs the variants change (the model itself, or an ensemble's step), and the models
it calls (an ensemble's steps, or the models a BLS model names), whose Triton statistics every
cell reads beside the measured model's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, PlainSerializer

from tritonlab.records import Record

# What the measured model is: an ONNX model (served by tritonlab's Python-based onnxruntime or
# OpenVINO backend), a Python-backend model, a Python model that calls others through BLS, or
# an ensemble of steps.
KIND_ONNX = "onnx"
KIND_PYTHON = "python"
KIND_BLS = "bls"
KIND_ENSEMBLE = "ensemble"
SOURCE_KINDS = (KIND_ONNX, KIND_PYTHON, KIND_BLS, KIND_ENSEMBLE)
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


@dataclass(frozen=True)
class RepositorySource(Record):
    """A model of a user's Triton repository, read as it is (the repository is never written).

    ``tuned`` is the model whose knobs the variants change: the measured model itself, or, for
    an ensemble, the step named by ``--step`` or found to bind; ``tuned_backend`` is its
    backend (``python``, ``onnxruntime`` or ``openvino``). ``called`` are the models the
    measured one calls, in order (an ensemble's steps, a BLS model's callees); ``needed`` every
    model the measured one needs loaded, its own name last. As a manifest stores it, ``root``
    is its ``repository`` entry (the path as given) and ``reference`` the file's name only.
    """

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
