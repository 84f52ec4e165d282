"""Pipeline step 3 (``postprocess``): CNN logits in, the k most likely classes out.

Served by Triton's Python backend as ``postprocess/1/model.py`` (a copy of this file), and
imported in-process by :mod:`tritonlab.models.pipeline_example` to compute the reference answer.

``LOGITS`` float32 [batch, classes] -> ``TOPK_IDS`` int64 [batch, k] and ``TOPK_SCORES`` float32
[batch, k]: softmax over the classes, then the k largest probabilities in descending order (ties
keep the lower class id first). k is read from the ``TOPK_IDS`` dims of the model's own
configuration, so this file has no settings.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import numpy.typing as npt

INPUT_NAME = "LOGITS"
IDS_NAME = "TOPK_IDS"
SCORES_NAME = "TOPK_SCORES"


def softmax(logits: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Softmax over the last axis (shifted by the maximum, so large logits do not overflow)."""
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities: npt.NDArray[np.float32] = shifted / shifted.sum(axis=-1, keepdims=True)
    return probabilities


def top_k(
    logits: npt.NDArray[np.float32], k: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """The ids and softmax scores of the ``k`` most likely classes, highest first."""
    if not 0 < k <= logits.shape[-1]:
        raise ValueError(f"k must be in 1..{logits.shape[-1]}, got {k}")
    probabilities = softmax(logits.astype(np.float32, copy=False))
    ids = np.argsort(-probabilities, axis=-1, kind="stable")[..., :k]
    scores = np.take_along_axis(probabilities, ids, axis=-1)
    return ids.astype(np.int64), scores.astype(np.float32)


class TritonPythonModel:
    """The Triton model: one response per request."""

    def initialize(self, args: dict[str, str]) -> None:
        """Read k from the configured ``TOPK_IDS`` dims [k]."""
        config = json.loads(args["model_config"])
        dims = next(o["dims"] for o in config["output"] if o["name"] == IDS_NAME)
        self.k = int(dims[0])

    def execute(self, requests: list[Any]) -> list[Any]:
        """Top-k of every request's logits; a failing request gets an error response."""
        import triton_python_backend_utils as pb_utils

        responses = []
        for request in requests:
            try:
                logits = pb_utils.get_input_tensor_by_name(request, INPUT_NAME).as_numpy()
                ids, scores = top_k(logits, self.k)
                outputs = [pb_utils.Tensor(IDS_NAME, ids), pb_utils.Tensor(SCORES_NAME, scores)]
                responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
            except Exception as exc:
                error = pb_utils.TritonError(f"postprocess: {exc}")
                responses.append(pb_utils.InferenceResponse(error=error))
        return responses
