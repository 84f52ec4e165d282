"""The pipeline as one Python model (``pipeline_bls``): preprocess -> cnn -> postprocess via BLS.

Served by Triton's Python backend as ``pipeline_bls/1/model.py`` (a copy of this file); it has the
same inputs and outputs as the ``pipeline`` ensemble and calls the same three models through
Business Logic Scripting (``pb_utils.InferenceRequest(...).exec()``), one after the other.

The called models' names are string literals in the ``InferenceRequest`` calls below, so a
reader of this file (a person, or tritonlab with ``ast``) sees which models it depends on. An
error response from a called model raises ``TritonModelException``, which fails only the client
request that caused it.
"""

from __future__ import annotations

from typing import Any


def _outputs(pb_utils: Any, response: Any, model_name: str, names: list[str]) -> list[Any]:
    """The named output tensors of a BLS response; ``TritonModelException`` if it is an error."""
    if response.has_error():
        raise pb_utils.TritonModelException(f"{model_name} failed: {response.error().message()}")
    return [pb_utils.get_output_tensor_by_name(response, name) for name in names]


class TritonPythonModel:
    """The BLS pipeline: one chain of three inference calls per client request."""

    def execute(self, requests: list[Any]) -> list[Any]:
        """Run every request through the three models; an error fails only that request."""
        import triton_python_backend_utils as pb_utils

        responses = []
        for request in requests:
            try:
                responses.append(self._one(pb_utils, request))
            except pb_utils.TritonModelException as exc:
                error = pb_utils.TritonError(f"pipeline_bls: {exc}")
                responses.append(pb_utils.InferenceResponse(error=error))
        return responses

    def _one(self, pb_utils: Any, request: Any) -> Any:
        image = pb_utils.get_input_tensor_by_name(request, "IMAGE")
        response = pb_utils.InferenceRequest(
            model_name="preprocess", requested_output_names=["PIXELS"], inputs=[image]
        ).exec()
        (pixels,) = _outputs(pb_utils, response, "preprocess", ["PIXELS"])

        cnn_input = pb_utils.Tensor("image", pixels.as_numpy())
        response = pb_utils.InferenceRequest(
            model_name="cnn", requested_output_names=["logits"], inputs=[cnn_input]
        ).exec()
        (logits,) = _outputs(pb_utils, response, "cnn", ["logits"])

        post_input = pb_utils.Tensor("LOGITS", logits.as_numpy())
        response = pb_utils.InferenceRequest(
            model_name="postprocess",
            requested_output_names=["TOPK_IDS", "TOPK_SCORES"],
            inputs=[post_input],
        ).exec()
        ids, scores = _outputs(pb_utils, response, "postprocess", ["TOPK_IDS", "TOPK_SCORES"])
        return pb_utils.InferenceResponse(
            output_tensors=[
                pb_utils.Tensor("TOPK_IDS", ids.as_numpy()),
                pb_utils.Tensor("TOPK_SCORES", scores.as_numpy()),
            ]
        )
