"""Read an ONNX graph into typed tensor specifications, with clear errors for bad files.

Only what Triton needs is kept: names, element types, dims, and whether the leading dim is a
batch dimension (symbolic in every input and output), which becomes ``max_batch_size``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonlab.errors import ModelError
from tritonlab.models.source import OnnxFile, RepositorySource

# ONNX TensorProto element type -> (Triton data type name, numpy dtype).
_ONNX_TO_TRITON: dict[int, tuple[str, str]] = {
    1: ("TYPE_FP32", "float32"),
    2: ("TYPE_UINT8", "uint8"),
    3: ("TYPE_INT8", "int8"),
    5: ("TYPE_INT16", "int16"),
    6: ("TYPE_INT32", "int32"),
    7: ("TYPE_INT64", "int64"),
    9: ("TYPE_BOOL", "bool"),
    10: ("TYPE_FP16", "float16"),
    11: ("TYPE_FP64", "float64"),
}

TRITON_TO_NUMPY: dict[str, str] = dict(_ONNX_TO_TRITON.values())


@dataclass(frozen=True)
class TensorSpec:
    """One graph input or output. ``dims`` excludes the batch dim when the model batches."""

    name: str
    triton_dtype: str
    dims: tuple[int, ...]

    @property
    def numpy_dtype(self) -> np.dtype[np.generic]:
        """The numpy dtype of the Triton dtype; ``KeyError`` for one with no numpy equivalent."""
        return np.dtype(TRITON_TO_NUMPY[self.triton_dtype])

    @property
    def is_float(self) -> bool:
        """True for FP16, FP32 and FP64 (BF16 is not counted)."""
        return self.triton_dtype in ("TYPE_FP16", "TYPE_FP32", "TYPE_FP64")


@dataclass(frozen=True)
class OnnxModelInfo:
    """What tritonlab knows about an ONNX model after reading its graph."""

    path: Path
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    batched: bool
    opset: int
    file_size_bytes: int
    # A model of a user's Triton repository (``--repository``): where it comes from. ``path`` is
    # then its ONNX file, or (a Python model, an ensemble) its ``config.pbtxt``.
    source: RepositorySource | None = None

    @property
    def origin(self) -> OnnxFile | RepositorySource:
        """Where the model comes from: a file or a model of a user's repository (``source.py``)."""
        return self.source or OnnxFile(self.path)

    @property
    def runs_onnx(self) -> bool:
        """Whether ``path`` is an ONNX graph onnxruntime can run in-process."""
        return self.origin.runs_onnx


def value_dims(value_info: object) -> list[int | str]:
    """A graph tensor's dims: an int, or the symbolic name ('?' if unnamed)."""
    shape = value_info.type.tensor_type.shape  # type: ignore[attr-defined]
    return [
        int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else d.dim_param or "?"
        for d in shape.dim
    ]


def _spec(value_info: object, batched: bool, kind: str) -> TensorSpec:
    name = value_info.name  # type: ignore[attr-defined]
    elem_type = value_info.type.tensor_type.elem_type  # type: ignore[attr-defined]
    if elem_type not in _ONNX_TO_TRITON:
        import onnx

        type_name = onnx.TensorProto.DataType.Name(elem_type)
        supported = ", ".join(t.removeprefix("TYPE_") for t, _ in _ONNX_TO_TRITON.values())
        if type_name == "STRING":
            raise ModelError(
                f"{kind} '{name}' is a STRING tensor, which tritonlab cannot generate valid data "
                "for or measure; tokenize outside the graph and export it with int64 token ids"
            )
        if type_name == "BFLOAT16":
            raise ModelError(
                f"{kind} '{name}' is BFLOAT16, which the served backend's numpy path cannot "
                "carry (numpy has no bfloat16); export the model with FP16 or FP32 inputs and "
                "outputs (casts inside the graph are fine)"
            )
        raise ModelError(
            f"{kind} '{name}' has element type {type_name}, which tritonlab cannot serve; "
            f"convert it to one of {supported}"
        )
    dims = value_dims(value_info)[1 if batched else 0 :]
    triton_dims = tuple(d if isinstance(d, int) else -1 for d in dims)
    return TensorSpec(name, _ONNX_TO_TRITON[elem_type][0], triton_dims)


def inspect_onnx(path: Path) -> OnnxModelInfo:
    """Read ``path`` and describe its inputs and outputs; raise ``ModelError`` for a bad file."""
    import onnx

    if not path.exists():
        raise ModelError(f"ONNX file not found: {path}; pass the path of an existing .onnx file")
    if path.is_dir():
        raise ModelError(f"{path} is a directory; pass the path of an .onnx file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:
        raise ModelError(
            f"{path} is not a readable ONNX model ({type(exc).__name__}); re-export it"
        ) from exc
    graph = model.graph
    if not graph.node or not graph.output:
        raise ModelError(f"{path} has an empty graph; re-export it")
    initializers = {init.name for init in graph.initializer}
    graph_inputs = [vi for vi in graph.input if vi.name not in initializers]
    if not graph_inputs:
        raise ModelError(f"{path} has no inputs; tritonlab needs at least one graph input")

    leading = [value_dims(vi)[:1] for vi in [*graph_inputs, *graph.output]]
    batched = all(lead and isinstance(lead[0], str) for lead in leading)
    inputs = tuple(_spec(vi, batched, "input") for vi in graph_inputs)
    outputs = tuple(_spec(vi, batched, "output") for vi in graph.output)
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    return OnnxModelInfo(path, inputs, outputs, batched, opset, path.stat().st_size)


def check_with_onnxruntime(path: Path) -> None:
    """Build an onnxruntime session once, so a model ORT cannot run fails before serving."""
    from tritonlab.models.ort_session import cpu_session

    try:
        cpu_session(path)
    except Exception as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"onnxruntime cannot load {path}: {first_line[:300]}") from exc
