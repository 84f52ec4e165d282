"""The built-in demo model ``simple_mlp``: 256 -> 1024 -> ReLU -> 10, float32.

Weights are random from a fixed seed, so every export is bit-identical and nothing is downloaded.
PyTorch is imported lazily: it is only needed to export this model, not to serve or measure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonlab import gateway
from tritonlab.errors import ModelError

DEMO_MODEL_NAME = "simple_mlp"
DEMO_INPUT_FEATURES = 256
DEMO_HIDDEN_FEATURES = 1024
DEMO_OUTPUT_FEATURES = 10
DEMO_SEED = 0
# float32 matmul with a 256- and a 1024-long reduction: ORT and PyTorch may sum in another order.
EXPORT_TOLERANCE_ABS = 1e-4


@dataclass(frozen=True)
class ExportCheck:
    """The result of comparing onnxruntime's output with PyTorch's on the same input."""

    onnx_path: Path
    batch_sizes_checked: tuple[int, ...]
    max_abs_diff: float
    tolerance_abs: float


def export_simple_mlp(onnx_path: Path, seed: int = DEMO_SEED) -> ExportCheck:
    """Export the demo MLP with a dynamic batch axis; verify it with ORT (else ``ModelError``)."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelError(
            "PyTorch is needed to export the demo model: pip install 'tritonlab[demo]'"
        ) from exc
    import onnxruntime as ort

    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(DEMO_INPUT_FEATURES, DEMO_HIDDEN_FEATURES),
        torch.nn.ReLU(),
        torch.nn.Linear(DEMO_HIDDEN_FEATURES, DEMO_OUTPUT_FEATURES),
    ).eval()
    example = torch.zeros(1, DEMO_INPUT_FEATURES)
    gateway.write_file(
        onnx_path,
        lambda tmp_path: torch.onnx.export(
            model,
            (example,),
            str(tmp_path),
            input_names=["input"],
            output_names=["output"],
            dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        ),
    )

    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    batch_sizes = (1, 8, 64)
    max_diff = 0.0
    for batch in batch_sizes:
        x = rng.standard_normal((batch, DEMO_INPUT_FEATURES), dtype=np.float32)
        with torch.no_grad():
            expected = model(torch.from_numpy(x)).numpy()
        (actual,) = session.run(["output"], {"input": x})
        max_diff = max(max_diff, float(np.max(np.abs(actual - expected))))
    if max_diff > EXPORT_TOLERANCE_ABS:
        raise ModelError(
            f"exported {onnx_path.name} differs from PyTorch by {max_diff:.3g} "
            f"(tolerance {EXPORT_TOLERANCE_ABS:g}); re-export with a different opset"
        )
    return ExportCheck(onnx_path, batch_sizes, max_diff, EXPORT_TOLERANCE_ABS)
