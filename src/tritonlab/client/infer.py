"""Send one real request through tritonclient and check it against in-process onnxruntime.

Before sending, the server's model metadata is compared with the ONNX graph (names, dtypes,
shapes), so a repository that drifted from its model file is caught with the tensor named.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tritonlab.errors import ClientError
from tritonlab.models.inputs import ModelInputs, derive_inputs
from tritonlab.models.inspect import OnnxModelInfo, TensorSpec
from tritonlab.records import Record, later
from tritonlab.server.endpoint import ServerEndpoint

TOLERANCE_ABS = {"TYPE_FP16": 1e-2, "TYPE_FP32": 1e-4, "TYPE_FP64": 1e-9}
# A backend computing in reduced precision is held to a share of the output's largest magnitude
# (bf16 keeps 8 significant bits, f16 11; errors grow through the layers), on top of the above.
TOLERANCE_REL_OF_MAX = {"bf16": 5e-2, "f16": 1e-2}
# What a Python model's or an ensemble's answer is checked against without a reference file.
SHAPES_ONLY = "shapes and dtypes only"


@dataclass(frozen=True)
class InferCheck(Record):
    """One validated request: what was sent, what came back, and how close it was."""

    protocol: str
    model_name: str
    input_shapes: dict[str, list[int]]
    output_shapes: dict[str, list[int]]
    max_abs_diff: float
    tolerance_abs: float
    round_trip_ms: float
    # What computed the answer; onnxruntime at f32 (the default) is the reference's own engine.
    engine: str = later("onnxruntime", group="engine")
    # max abs diff over the reference output's largest magnitude.
    max_rel_diff: float | None = later(group="engine")
    # The cluster node that checked it (``distributed/``); None for a local run.
    node: str | None = later()
    # What the answer was checked against: "onnxruntime" (the graph run in-process), the user's
    # reference file (``--reference``: inputs and expected outputs), or "shapes and dtypes
    # only" (a Python model or an ensemble without a reference file).
    reference: str = later("onnxruntime")
    # A model that carries state is checked over one sequence of this many requests, the state
    # carried by the server and by onnxruntime alike (``sequence_check``); None: one request.
    sequence_requests: int | None = later()


def _triton_type(spec: TensorSpec) -> str:
    return spec.triton_dtype.removeprefix("TYPE_")


def check_metadata(metadata: dict[str, Any], info: OnnxModelInfo, model_name: str) -> None:
    """Compare the server's view of the model with the ONNX graph; raise on any mismatch."""
    for kind, specs in (("inputs", info.inputs), ("outputs", info.outputs)):
        served = {t["name"]: t for t in metadata.get(kind, [])}
        for spec in specs:
            tensor = served.get(spec.name)
            if tensor is None:
                raise ClientError(
                    f"model '{model_name}' on the server has no {kind[:-1]} '{spec.name}' "
                    "that the ONNX graph has; rebuild the repository from this ONNX file"
                )
            want_type = _triton_type(spec)
            if tensor["datatype"] != want_type:
                raise ClientError(
                    f"{kind[:-1]} '{spec.name}': server says {tensor['datatype']}, ONNX says "
                    f"{want_type}; rebuild the repository from this ONNX file"
                )
            shape = [int(d) for d in tensor["shape"]]
            # A per-sample scalar is declared [1] to Triton (reshaped to the graph's []).
            want = ([-1] if info.batched else []) + (list(spec.dims) or [1])
            if len(shape) != len(want) or any(
                w != -1 and s != -1 and w != s for s, w in zip(shape, want, strict=True)
            ):
                raise ClientError(
                    f"{kind[:-1]} '{spec.name}': server shape {shape} does not match ONNX "
                    f"shape {want}; rebuild the repository from this ONNX file"
                )


def reference_outputs(
    info: OnnxModelInfo, inputs: dict[str, np.ndarray[Any, Any]]
) -> dict[str, np.ndarray[Any, Any]]:
    """Output name -> what onnxruntime on the CPU computes for ``inputs`` (the expected values)."""
    from tritonlab.models.ort_session import cpu_session

    session = cpu_session(info.path)
    names = [s.name for s in info.outputs]
    return dict(zip(names, session.run(names, inputs), strict=True))


def client_module(protocol: str) -> Any:
    """``tritonclient.grpc`` or ``tritonclient.http`` (``ClientError`` for another name)."""
    if protocol not in ("grpc", "http"):
        raise ClientError(f"protocol must be 'http' or 'grpc', got {protocol!r}")
    return importlib.import_module(f"tritonclient.{protocol}")


def served_metadata(client: Any, model_name: str, protocol: str) -> dict[str, Any]:
    """The server's metadata of ``model_name`` as a dict (gRPC's message converted)."""
    metadata = client.get_model_metadata(model_name)
    if protocol == "grpc":
        from google.protobuf import json_format

        metadata = json_format.MessageToDict(metadata, preserving_proto_field_name=True)
    return dict(metadata)


def request_tensors(
    module: Any, info: OnnxModelInfo, arrays: dict[str, np.ndarray[Any, Any]]
) -> list[Any]:
    """The request's input tensors: one per input of ``info``, from ``arrays``."""
    tensors = []
    for spec in info.inputs:
        array = arrays[spec.name]
        if not spec.dims:  # a per-sample scalar is declared [1] to Triton
            array = array.reshape((*array.shape, 1))
        tensor = module.InferInput(spec.name, list(array.shape), _triton_type(spec))
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return tensors


def infer_and_check(
    endpoint: ServerEndpoint,
    model_name: str,
    info: OnnxModelInfo,
    protocol: str = "grpc",
    batch_size: int = 2,
    inputs: ModelInputs | None = None,
    engine: str = "onnxruntime",
    precision: str = "f32",
) -> InferCheck:
    """One request over ``protocol``; fails if shapes or values disagree with onnxruntime.
    ``engine`` (recorded) serves the model in ``precision``: bf16 and f16 are held to
    ``TOLERANCE_REL_OF_MAX`` of the largest reference value on top of the dtype's tolerance."""
    from tritonclient.utils import InferenceServerException

    module = client_module(protocol)
    client = module.InferenceServerClient(endpoint.url(protocol))
    try:
        check_metadata(served_metadata(client, model_name, protocol), info, model_name)
        reference = _user_reference(info)
        arrays = reference[0] if reference else (inputs or derive_inputs(info)).batch(batch_size)
        request_inputs = request_tensors(module, info, arrays)
        outputs = [module.InferRequestedOutput(s.name) for s in info.outputs]
        started = time.perf_counter()
        result = client.infer(model_name, request_inputs, outputs=outputs)
        round_trip_ms = (time.perf_counter() - started) * 1e3
    except InferenceServerException as exc:
        raise ClientError(f"{protocol} request to '{model_name}' failed: {exc.message()}") from exc
    finally:
        client.close()

    sent = {k: list(v.shape) for k, v in arrays.items()}
    check = InferCheck(protocol, model_name, sent, {}, 0.0, 0.0, round_trip_ms, engine=engine)
    if reference is None and not info.runs_onnx:
        declared = _declared_check(result, info, arrays)
        return replace(check, output_shapes=declared, reference=SHAPES_ONLY)
    if reference is not None:
        expected, against = reference[1], reference[2]
    else:
        expected, against = reference_outputs(info, arrays), "onnxruntime"
    compared = compare_outputs(
        result, expected, info.outputs, Against(against, model_name, protocol, engine, precision)
    )
    return replace(
        check,
        output_shapes=compared.output_shapes,
        max_abs_diff=compared.max_abs_diff,
        tolerance_abs=compared.tolerance_abs,
        max_rel_diff=compared.max_rel_diff,
        reference=against,
    )


@dataclass(frozen=True)
class Against:
    """What an answer is compared with, and for the message: the model, protocol and engine."""

    reference: str
    model_name: str
    protocol: str
    engine: str
    precision: str = "f32"


@dataclass(frozen=True)
class Comparison:
    """How close one response was: shapes, the largest differences, the tolerance held to."""

    output_shapes: dict[str, list[int]]
    max_abs_diff: float
    max_rel_diff: float
    tolerance_abs: float


def compare_outputs(
    result: Any,
    expected: dict[str, np.ndarray[Any, Any]],
    specs: tuple[TensorSpec, ...],
    against: Against,
    step: str = "",
) -> Comparison:
    """Compare a response's outputs with ``expected``; ``ClientError`` naming the output (and
    ``step``, e.g. a sequence's request) where a shape, dtype or value differs."""
    model_name, protocol, engine, precision = (
        against.model_name,
        against.protocol,
        against.engine,
        against.precision,
    )
    where, ref = f"{step}: " if step else "", against.reference
    max_diff = max_rel = tolerance = 0.0
    output_shapes: dict[str, list[int]] = {}
    for spec in specs:
        got = result.as_numpy(spec.name)
        want = expected[spec.name]
        if got is not None and not spec.dims and got.size == want.size:
            got = got.reshape(want.shape)  # served as [batch, 1], the graph says [batch]
        if got is None or not _same_shape(got.shape, want.shape):
            raise ClientError(
                f"{where}output '{spec.name}' has shape "
                f"{None if got is None else list(got.shape)}, {ref} gives {list(want.shape)}"
            )
        if got.dtype != want.dtype:
            raise ClientError(
                f"{where}output '{spec.name}' is {got.dtype}, {ref} gives {want.dtype}"
            )
        output_shapes[spec.name] = list(got.shape)
        tol = TOLERANCE_ABS.get(spec.triton_dtype, 0.0)
        scale = float(np.max(np.abs(want.astype(np.float64)))) if want.size else 0.0
        if precision in TOLERANCE_REL_OF_MAX and spec.triton_dtype in TOLERANCE_ABS:
            tol += TOLERANCE_REL_OF_MAX[precision] * scale
        tolerance = max(tolerance, tol)
        if got.size:
            if want.dtype.kind != "f" and not np.array_equal(got, want):
                raise ClientError(
                    f"{where}output '{spec.name}' of {model_name} differs from {ref} over "
                    f"{protocol}"
                )
            diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
            if not diff <= tol:  # NaN fails too
                raise ClientError(
                    f"{where}output '{spec.name}' "
                    + (
                        f"served by {engine} differs from onnxruntime in-process"
                        if ref == "onnxruntime"
                        else f"of '{model_name}' differs from {ref}"
                    )
                    + f" by {diff:.3g} "
                    f"(tolerance {tol:g}) over {protocol}"
                )
            max_diff = max(max_diff, diff)
            max_rel = max(max_rel, diff / scale if scale else 0.0)
    return Comparison(output_shapes, max_diff, max_rel, tolerance)


def _same_shape(got: tuple[int, ...], want: tuple[int, ...]) -> bool:
    """Shapes agree, -1 in ``want`` (a dim the config leaves dynamic) matching any size."""
    return len(got) == len(want) and all(w in (-1, g) for g, w in zip(got, want, strict=True))


def _user_reference(
    info: OnnxModelInfo,
) -> tuple[dict[str, np.ndarray[Any, Any]], dict[str, np.ndarray[Any, Any]], str] | None:
    """The user's ``--reference`` file: the inputs to send, the outputs expected, its name."""
    path = info.origin.reference
    if path is None:
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            stored = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise ClientError(f"--reference {path}: not a readable .npz file ({exc})") from exc
    missing = [s.name for s in (*info.inputs, *info.outputs) if s.name not in stored]
    if missing:
        raise ClientError(
            f"--reference {path}: no array named {', '.join(missing)}; store every input and "
            "expected output under its tensor name (numpy.savez)"
        )
    sent = {s.name: stored[s.name] for s in info.inputs}
    return sent, {s.name: stored[s.name] for s in info.outputs}, path.name


def _declared_check(
    result: Any, info: OnnxModelInfo, arrays: dict[str, np.ndarray[Any, Any]]
) -> dict[str, list[int]]:
    """Check each output against its config's shape (-1: any) and dtype; the shapes returned."""
    batch = [len(next(iter(arrays.values())))] if info.batched and arrays else []
    shapes: dict[str, list[int]] = {}
    for spec in info.outputs:
        got = result.as_numpy(spec.name)
        want = (*batch, *spec.dims)
        if got is None or not _same_shape(got.shape, want):
            raise ClientError(
                f"output '{spec.name}' has shape {None if got is None else list(got.shape)}, "
                f"its config declares {list(want)}"
            )
        if got.dtype != spec.numpy_dtype:
            raise ClientError(
                f"output '{spec.name}' is {got.dtype}, its config declares {spec.numpy_dtype}"
            )
        shapes[spec.name] = list(got.shape)
    return shapes
