"""Pipeline step 1 (``preprocess``): raw RGB frames in, normalised CNN input out.

Served by Triton's Python backend as ``preprocess/1/model.py`` (a copy of this file), and imported
in-process by :mod:`tritonlab.models.pipeline_example` to compute the reference answer.

``IMAGE`` uint8 [batch, H, W, 3] (a frame as a camera or decoder gives it) -> ``PIXELS`` float32
[batch, 3, S, S]: bilinear resize to S x S (half-pixel centres, no antialiasing: what PyTorch's
``interpolate(mode="bilinear", align_corners=False)`` and OpenCV's ``INTER_LINEAR`` compute), scale
to [0, 1], normalise with the ImageNet mean and standard deviation, HWC -> CHW. The output size
is read from the ``PIXELS`` dims of the model's own configuration, so this file has no settings.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import numpy.typing as npt

INPUT_NAME = "IMAGE"
OUTPUT_NAME = "PIXELS"
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

FloatArray = npt.NDArray[np.float32]


def _taps(
    source: int, target: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], FloatArray]:
    """For each output position along one axis: the two source indices and the second's weight."""
    centres = (np.arange(target, dtype=np.float64) + 0.5) * (source / target) - 0.5
    centres = np.clip(centres, 0.0, source - 1)
    low = np.floor(centres).astype(np.intp)
    high = np.minimum(low + 1, source - 1)
    return low, high, (centres - low).astype(np.float32)


def resize_bilinear(images: npt.NDArray[Any], height: int, width: int) -> FloatArray:
    """Resize [batch, H, W, C] images to [batch, height, width, C] float32, rows then columns."""
    pixels = images.astype(np.float32, copy=False)
    top, bottom, row_weight = _taps(pixels.shape[1], height)
    left, right, column_weight = _taps(pixels.shape[2], width)
    upper, lower = pixels[:, top], pixels[:, bottom]
    rows = upper + (lower - upper) * row_weight[None, :, None, None]
    west, east = rows[:, :, left], rows[:, :, right]
    resized: FloatArray = west + (east - west) * column_weight[None, None, :, None]
    return resized


def preprocess(images: npt.NDArray[np.uint8], height: int, width: int) -> FloatArray:
    """uint8 [batch, H, W, 3] frames -> float32 [batch, 3, height, width] normalised CNN input."""
    if images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"{INPUT_NAME} must be [batch, H, W, 3], got {list(images.shape)}")
    resized = resize_bilinear(images, height, width)
    normalised = (resized * np.float32(1.0 / 255.0) - IMAGENET_MEAN) / IMAGENET_STD
    return np.ascontiguousarray(normalised.transpose(0, 3, 1, 2), dtype=np.float32)


class TritonPythonModel:
    """The Triton model: one response per request (Triton hands one request per client call
    unless dynamic batching merges several; each is preprocessed on its own)."""

    def initialize(self, args: dict[str, str]) -> None:
        """Read the output size S from the configured ``PIXELS`` dims [3, S, S]."""
        config = json.loads(args["model_config"])
        dims = next(o["dims"] for o in config["output"] if o["name"] == OUTPUT_NAME)
        self.height, self.width = int(dims[1]), int(dims[2])

    def execute(self, requests: list[Any]) -> list[Any]:
        """Preprocess every request's frames; a failing request gets an error response."""
        import triton_python_backend_utils as pb_utils

        responses = []
        for request in requests:
            try:
                images = pb_utils.get_input_tensor_by_name(request, INPUT_NAME).as_numpy()
                pixels = preprocess(images, self.height, self.width)
                outputs = [pb_utils.Tensor(OUTPUT_NAME, pixels)]
                responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
            except Exception as exc:
                error = pb_utils.TritonError(f"preprocess: {exc}")
                responses.append(pb_utils.InferenceResponse(error=error))
        return responses
