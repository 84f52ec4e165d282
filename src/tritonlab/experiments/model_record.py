"""The manifest's record of the measured model: the ONNX file, or a model of a user's
repository (where it came from, what it calls), and its tensors."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from tritonlab.models.inspect import TensorSpec


def _tensor(data: dict[str, Any]) -> TensorSpec:
    return TensorSpec(data["name"], data["triton_dtype"], tuple(data["dims"]))


def _tensor_dict(spec: TensorSpec) -> dict[str, Any]:
    return {"name": spec.name, "triton_dtype": spec.triton_dtype, "dims": list(spec.dims)}


@dataclass(frozen=True)
class ModelRecord:
    """The ONNX file that was served."""

    name: str
    onnx_file: str
    sha256: str
    size_bytes: int
    opset: int | None
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    # A model of a user's repository (``RepositorySource.to_dict``): what it is, which model
    # the variants change and why, what it calls. None for an ONNX file given on its own.
    repository: dict[str, Any] | None = None

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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelRecord:
        """The model stored by :meth:`to_dict`; ``KeyError`` without ``name``."""
        return cls(
            name=data["name"],
            onnx_file=data.get("onnx_file", ""),
            sha256=data.get("sha256", ""),
            size_bytes=int(data.get("size_bytes", 0)),
            opset=data.get("opset"),
            inputs=tuple(_tensor(t) for t in data.get("inputs", [])),
            outputs=tuple(_tensor(t) for t in data.get("outputs", [])),
            repository=data.get("repository"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The model as JSON: file, sha256, size in bytes, opset and tensors (and, for a model
        of a user's repository, where it came from)."""
        data = asdict(self) | {
            "inputs": [_tensor_dict(t) for t in self.inputs],
            "outputs": [_tensor_dict(t) for t in self.outputs],
        }
        if self.repository is None:
            del data["repository"]  # records of ONNX files stay byte-identical
        return data
