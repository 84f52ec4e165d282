"""The manifest's record of the measured model: the ONNX file, or a model of a user's
repository (where it came from, what it calls), and its tensors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonlab.models.inspect import TensorSpec
from tritonlab.records import Record, later


@dataclass(frozen=True)
class ModelRecord(Record):
    """The ONNX file that was served."""

    name: str
    onnx_file: str = ""
    sha256: str = ""
    size_bytes: int = 0
    opset: int | None = None
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    # A model of a user's repository (``RepositorySource.to_dict``): what it is, which model
    # the variants change and why, what it calls. None for an ONNX file given on its own.
    repository: dict[str, Any] | None = later()

    @property
    def is_graph(self) -> bool:
        """Whether the measured model is an ONNX graph (not a repository's Python model, BLS
        model or ensemble)."""
        return not self.repository or self.repository.get("kind") == "onnx"

    @property
    def input_shapes(self) -> dict[str, list[int]]:
        """Input name -> its dims as in the graph (-1 where dynamic)."""
        return {t.name: list(t.dims) for t in self.inputs}

    @property
    def output_shapes(self) -> dict[str, list[int]]:
        """Output name -> its dims as in the graph (-1 where dynamic)."""
        return {t.name: list(t.dims) for t in self.outputs}
