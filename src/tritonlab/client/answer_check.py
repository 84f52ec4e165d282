"""The correctness check a served model gets: one request (``infer.infer_and_check``), or, for a
model that carries state, one sequence of requests (``sequence_check.sequence_check``)."""

from __future__ import annotations

from tritonlab.client.infer import InferCheck, infer_and_check
from tritonlab.client.sequence_check import sequence_check
from tritonlab.models.inputs import ModelInputs, derive_inputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.models.state_pairs import state_tensors
from tritonlab.server.endpoint import ServerEndpoint


def check_answer(
    endpoint: ServerEndpoint,
    model_name: str,
    info: OnnxModelInfo,
    protocol: str = "grpc",
    batch_size: int = 2,
    inputs: ModelInputs | None = None,
    engine: str = "onnxruntime",
    precision: str = "f32",
) -> InferCheck:
    """Check ``model_name``'s answers over ``protocol`` against onnxruntime (or the user's
    reference file); ``ClientError`` where they disagree."""
    if state_tensors(info) and info.origin.reference is None:
        inputs = inputs or derive_inputs(info)
        return sequence_check(endpoint, model_name, info, protocol, inputs, engine, precision)
    return infer_and_check(
        endpoint, model_name, info, protocol, batch_size, inputs, engine, precision
    )
