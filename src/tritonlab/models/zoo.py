"""The built-in models ``tritonlab demo --model NAME`` can export: the registry.

From cheap to heavy: ``simple_mlp`` (:mod:`tritonlab.models.demo`), ``resnet18_cnn``
(:mod:`tritonlab.models.resnet18`) and ``bert_encoder`` (:mod:`tritonlab.models.bert_encoder`),
all float32, exported at ONNX opset 17 and checked against onnxruntime. Every weight comes from
``torch.manual_seed(seed)``, never from data, so two exports with the same seed are
bit-identical. PyTorch is imported lazily: only exporting needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tritonlab.errors import ModelError
from tritonlab.models.bert_encoder import ENCODER_NAME, encoder_summary, export_bert_encoder
from tritonlab.models.demo import DEMO_MODEL_NAME, ExportCheck, export_simple_mlp
from tritonlab.models.resnet18 import RESNET18_NAME, export_resnet18_cnn, resnet18_summary

DEFAULT_MODEL = DEMO_MODEL_NAME


@dataclass(frozen=True)
class BuiltinModel:
    """A model ``tritonlab demo`` can export: its name, a one-line summary and its exporter."""

    name: str
    summary: str
    export: Callable[[Path], ExportCheck]


BUILTIN_MODELS: dict[str, BuiltinModel] = {
    model.name: model
    for model in (
        BuiltinModel(
            DEMO_MODEL_NAME,
            "MLP 256 -> 1024 -> ReLU -> 10, input float32 [batch,256] -> output [batch,10]; "
            "~0.54 MFLOP per sample, 274 K parameters",
            export_simple_mlp,
        ),
        BuiltinModel(RESNET18_NAME, resnet18_summary(), export_resnet18_cnn),
        BuiltinModel(ENCODER_NAME, encoder_summary(), export_bert_encoder),
    )
}


def builtin_model(name: str) -> BuiltinModel:
    """The built-in model called ``name``; ``ModelError`` naming the valid ones otherwise."""
    try:
        return BUILTIN_MODELS[name]
    except KeyError:
        valid = ", ".join(BUILTIN_MODELS)
        raise ModelError(f"unknown built-in model '{name}'; choose one of: {valid}") from None


def export_builtin(name: str, onnx_path: Path) -> ExportCheck:
    """Export the built-in model ``name`` to ``onnx_path`` and verify it with onnxruntime."""
    return builtin_model(name).export(onnx_path)
