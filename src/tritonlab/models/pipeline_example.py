"""A built-in three-step Triton pipeline, written as a model repository in code.

``write_pipeline_repository(root)`` lays out an image classifier the way it is deployed in
practice: raw camera frames in, the k most likely classes out.

- ``preprocess`` (Python): ``IMAGE`` uint8 [batch, H, W, 3] -> ``PIXELS`` float32
  [batch, 3, S, S] (bilinear resize, ImageNet normalisation, HWC -> CHW);
- ``cnn`` (onnxruntime): ``image`` -> ``logits`` [batch, classes]: ``resnet18_cnn`` (S = 224,
  1000 classes, needs PyTorch to export) or ``tiny`` (S = 32, 10 classes; for tests);
- ``postprocess`` (Python): ``LOGITS`` -> ``TOPK_IDS`` int64 and ``TOPK_SCORES`` float32
  [batch, k] (softmax, the k largest, descending);
- ``pipeline`` (ensemble) chains the three; ``pipeline_bls`` (Python) calls them through BLS.

The Python models are copies of the static files in :mod:`tritonlab.models.pipeline_steps`:
nothing of the caller's reaches code (the sizes reach only the configurations). The same step
functions and an onnxruntime session compute ``<root>/reference.npz``, beside the model folders:
tritonserver 2.51 indexes the root's sub-folders only and skips plain files (verified), so the
repository and its reference travel as one folder.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

from tritonlab import gateway
from tritonlab.errors import ConfigError, ModelError
from tritonlab.models.pipeline_steps import STEPS_DIR, postprocess, preprocess
from tritonlab.models.resnet18 import (
    RESNET18_CLASSES,
    RESNET18_IMAGE_PIXELS,
    RESNET18_NAME,
    export_resnet18_cnn,
)
from tritonlab.models.tiny_cnn import (
    TINY_CNN_CLASSES,
    TINY_CNN_NAME,
    TINY_CNN_PIXELS,
    write_tiny_cnn,
)
from tritonlab.models.torch_export import ZOO_SEED, require_torch

PREPROCESS_MODEL = "preprocess"
CNN_MODEL = "cnn"
POSTPROCESS_MODEL = "postprocess"
ENSEMBLE_MODEL = "pipeline"
BLS_MODEL = "pipeline_bls"
STEP_MODELS = (PREPROCESS_MODEL, CNN_MODEL, POSTPROCESS_MODEL)
INPUT_NAME = preprocess.INPUT_NAME
OUTPUT_NAMES = (postprocess.IDS_NAME, postprocess.SCORES_NAME)
# The CNN's tensors: the same names in every CNN offered, so the steps (and bls.py) never change.
CNN_INPUT = "image"
CNN_OUTPUT = "logits"
REFERENCE_FILE = "reference.npz"
# Written first into a folder this module makes; a non-empty folder without it is refused.
MARKER_FILE = ".tritonlab-pipeline"
MODEL_VERSION = "1"
REFERENCE_BATCH = 2
# Each Python model's ``1/model.py`` is a copy of this file in ``pipeline_steps/``.
STEP_SOURCES = {
    PREPROCESS_MODEL: "preprocess.py",
    POSTPROCESS_MODEL: "postprocess.py",
    BLS_MODEL: "bls.py",
}


@dataclass(frozen=True)
class PipelineCnn:
    """A CNN the pipeline can serve: its input size S (pixels), classes and ONNX writer."""

    name: str
    pixels: int
    classes: int
    write_onnx: Callable[[Path, int], object]


PIPELINE_CNNS: dict[str, PipelineCnn] = {
    cnn.name: cnn
    for cnn in (
        PipelineCnn(RESNET18_NAME, RESNET18_IMAGE_PIXELS, RESNET18_CLASSES, export_resnet18_cnn),
        PipelineCnn(TINY_CNN_NAME, TINY_CNN_PIXELS, TINY_CNN_CLASSES, write_tiny_cnn),
    )
}


@dataclass(frozen=True)
class PipelineRepository:
    """A written pipeline repository: where everything is and what the pipeline takes."""

    root: Path
    image_hw: tuple[int, int]
    cnn_pixels: int
    top_k: int
    reference_path: Path

    input_name = INPUT_NAME
    output_names = OUTPUT_NAMES
    ensemble_model = ENSEMBLE_MODEL
    bls_model = BLS_MODEL
    step_models = STEP_MODELS

    @property
    def models_to_load(self) -> tuple[str, ...]:
        """Every model, called ones first: the order to load them in explicit model control."""
        return (*STEP_MODELS, ENSEMBLE_MODEL, BLS_MODEL)

    def folder(self, model_name: str) -> Path:
        """The model folder of ``model_name`` (one of ``models_to_load``)."""
        if model_name not in self.models_to_load:
            raise ModelError(f"the pipeline has no model '{model_name}'")
        return self.root / model_name

    def config_path(self, model_name: str) -> Path:
        """The ``config.pbtxt`` of ``model_name``."""
        return self.folder(model_name) / "config.pbtxt"


@dataclass(frozen=True)
class PipelineReference:
    """Frames and what each step answers for them, computed in-process."""

    images: npt.NDArray[np.uint8]
    pixels: npt.NDArray[np.float32]
    logits: npt.NDArray[np.float32]
    topk_ids: npt.NDArray[np.int64]
    topk_scores: npt.NDArray[np.float32]

    def save(self, path: Path) -> None:
        """Write the arrays to ``path`` (``.npz``) under the pipeline's tensor names."""
        arrays: dict[str, npt.NDArray[Any]] = {
            INPUT_NAME: self.images,
            preprocess.OUTPUT_NAME: self.pixels,
            postprocess.INPUT_NAME: self.logits,
            postprocess.IDS_NAME: self.topk_ids,
            postprocess.SCORES_NAME: self.topk_scores,
        }
        gateway.write_with(path, lambda out: np.savez(out, **arrays))

    @classmethod
    def load(cls, path: Path) -> PipelineReference:
        """Read a reference written by :meth:`save`."""
        with np.load(path, allow_pickle=False) as data:
            return cls(
                data[INPUT_NAME],
                data[preprocess.OUTPUT_NAME],
                data[postprocess.INPUT_NAME],
                data[postprocess.IDS_NAME],
                data[postprocess.SCORES_NAME],
            )


def reference_images(count: int, image_hw: tuple[int, int], seed: int) -> npt.NDArray[np.uint8]:
    """``count`` camera-like uint8 frames [count, H, W, 3] (smooth colours, a little noise)."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, size=(count, 6, 8, 3), dtype=np.uint8)
    smooth = preprocess.resize_bilinear(coarse, *image_hw)
    noisy = smooth + rng.normal(0.0, 6.0, size=smooth.shape)
    return np.clip(np.rint(noisy), 0, 255).astype(np.uint8)


def compute_reference(
    images: npt.NDArray[np.uint8], cnn_onnx: Path, cnn_pixels: int, top_k: int
) -> PipelineReference:
    """What the pipeline answers for ``images``: the step functions the server runs, and the CNN
    in onnxruntime on one thread (as the served ``cnn`` runs it)."""
    import onnxruntime as ort

    pixels = preprocess.preprocess(images, cnn_pixels, cnn_pixels)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(cnn_onnx), options, providers=["CPUExecutionProvider"])
    (logits,) = session.run([CNN_OUTPUT], {CNN_INPUT: pixels})
    ids, scores = postprocess.top_k(logits, top_k)
    return PipelineReference(images, pixels, logits, ids, scores)


def _tensor(name: str, data_type: str, dims: list[int]) -> dict[str, Any]:
    return {"name": name, "data_type": data_type, "dims": dims}


def model_configs(
    cnn: PipelineCnn, image_hw: tuple[int, int], top_k: int, max_batch_size: int
) -> dict[str, dict[str, Any]]:
    """Every model's configuration, by model name, as dicts in protobuf's JSON mapping."""
    size = cnn.pixels
    image = _tensor(INPUT_NAME, "TYPE_UINT8", [*image_hw, 3])
    pixels = _tensor(preprocess.OUTPUT_NAME, "TYPE_FP32", [3, size, size])
    ids = _tensor(postprocess.IDS_NAME, "TYPE_INT64", [top_k])
    scores = _tensor(postprocess.SCORES_NAME, "TYPE_FP32", [top_k])
    one_cpu_instance = [{"count": 1, "kind": "KIND_CPU"}]

    def python_model(name: str, inputs: list[Any], outputs: list[Any]) -> dict[str, Any]:
        return {
            "name": name,
            "backend": "python",
            "max_batch_size": max_batch_size,
            "input": inputs,
            "output": outputs,
            "instance_group": one_cpu_instance,
        }

    def step(name: str, inputs: dict[str, str], outputs: dict[str, str]) -> dict[str, Any]:
        return {"model_name": name, "model_version": -1, "input_map": inputs, "output_map": outputs}

    return {
        PREPROCESS_MODEL: python_model(PREPROCESS_MODEL, [image], [pixels]),
        CNN_MODEL: {
            "name": CNN_MODEL,
            "backend": "onnxruntime",
            "default_model_filename": "model.onnx",
            "max_batch_size": max_batch_size,
            "input": [_tensor(CNN_INPUT, "TYPE_FP32", [3, size, size])],
            "output": [_tensor(CNN_OUTPUT, "TYPE_FP32", [cnn.classes])],
            "instance_group": one_cpu_instance,
            "parameters": {"intra_op_thread_count": {"string_value": "1"}},
        },
        POSTPROCESS_MODEL: python_model(
            POSTPROCESS_MODEL,
            [_tensor(postprocess.INPUT_NAME, "TYPE_FP32", [cnn.classes])],
            [ids, scores],
        ),
        ENSEMBLE_MODEL: {
            "name": ENSEMBLE_MODEL,
            "platform": "ensemble",
            "max_batch_size": max_batch_size,
            "input": [image],
            "output": [ids, scores],
            "ensemble_scheduling": {
                "step": [
                    step(
                        PREPROCESS_MODEL,
                        {INPUT_NAME: INPUT_NAME},
                        {preprocess.OUTPUT_NAME: "pixels"},
                    ),
                    step(CNN_MODEL, {CNN_INPUT: "pixels"}, {CNN_OUTPUT: "logits"}),
                    step(
                        POSTPROCESS_MODEL,
                        {postprocess.INPUT_NAME: "logits"},
                        {name: name for name in OUTPUT_NAMES},
                    ),
                ]
            },
        },
        BLS_MODEL: python_model(BLS_MODEL, [image], [ids, scores]),
    }


def _write_config(config: dict[str, Any], path: Path) -> None:
    """Parse ``config`` into Triton's ``ModelConfig`` and write it as ``config.pbtxt`` text."""
    try:
        message = json_format.ParseDict(config, model_config_pb2.ModelConfig())
    except json_format.ParseError as exc:
        raise ConfigError(f"invalid configuration for '{config.get('name')}': {exc}") from exc
    gateway.write_text(path, text_format.MessageToString(message))


def _claim(root: Path, settings: dict[str, Any]) -> None:
    """Make ``root`` (or take an empty folder, or one this module wrote) and mark it."""
    marker = root / MARKER_FILE
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{root} is a file; choose a new folder for the pipeline repository")
    if root.is_dir() and not marker.is_file() and any(root.iterdir()):
        raise ConfigError(
            f"{root} is not empty and tritonlab did not make it (no {MARKER_FILE} file), so "
            "nothing was written; choose a new or empty folder for the pipeline repository"
        )
    gateway.write_text(
        marker, json.dumps({"made_by": "tritonlab", **settings}, sort_keys=True) + "\n"
    )


def _checked(cnn: str, image_hw: Sequence[int], top_k: int, max_batch_size: int) -> PipelineCnn:
    if cnn not in PIPELINE_CNNS:
        raise ModelError(f"unknown pipeline CNN '{cnn}'; choose one of: {', '.join(PIPELINE_CNNS)}")
    spec = PIPELINE_CNNS[cnn]
    if len(image_hw) != 2 or not all(isinstance(n, int) and n > 0 for n in image_hw):
        raise ConfigError(f"image_hw must be two positive integers (height, width), got {image_hw}")
    if not 1 <= top_k <= spec.classes:
        raise ConfigError(f"top_k must be in 1..{spec.classes} for '{cnn}', got {top_k}")
    if max_batch_size < 1:
        raise ConfigError(f"max_batch_size must be at least 1, got {max_batch_size}")
    if cnn == RESNET18_NAME:
        require_torch()  # its exporter needs PyTorch: say so before anything is written
    return spec


def write_pipeline_repository(
    root: Path,
    cnn: str = RESNET18_NAME,
    image_hw: tuple[int, int] = (240, 320),
    top_k: int = 5,
    max_batch_size: int = 8,
    seed: int = ZOO_SEED,
) -> PipelineRepository:
    """Write the pipeline's repository and ``reference.npz`` into ``root``; a non-empty folder this
    function did not write is refused (nothing written), one it wrote is rewritten."""
    spec = _checked(cnn, image_hw, top_k, max_batch_size)
    image_hw = (image_hw[0], image_hw[1])
    gateway.open_root(root)
    settings = {
        "what": "pipeline_example",
        "cnn": cnn,
        "image_hw": list(image_hw),
        "top_k": top_k,
        "max_batch_size": max_batch_size,
        "seed": seed,
    }
    _claim(root, settings)
    for name, config in model_configs(spec, image_hw, top_k, max_batch_size).items():
        gateway.mkdir(root / name / MODEL_VERSION)
        _write_config(config, root / name / "config.pbtxt")
        if name in STEP_SOURCES:
            gateway.copy_in(
                STEPS_DIR / STEP_SOURCES[name], root / name / MODEL_VERSION / "model.py"
            )
    onnx_path = root / CNN_MODEL / MODEL_VERSION / "model.onnx"
    gateway.write_file(onnx_path, lambda path: spec.write_onnx(path, seed))
    images = reference_images(min(REFERENCE_BATCH, max_batch_size), image_hw, seed)
    compute_reference(images, onnx_path, spec.pixels, top_k).save(root / REFERENCE_FILE)
    return PipelineRepository(root, image_hw, spec.pixels, top_k, root / REFERENCE_FILE)
