"""Export a ``torch.nn.Module`` to ONNX and check onnxruntime against PyTorch on chosen inputs.

The machinery under every built-in model (:mod:`tritonlab.models.zoo`): TorchScript exporter at
ONNX opset 17, an atomic write, and a comparison within a tolerance relative to the largest
output. PyTorch is imported lazily: it is only needed to export, not to serve or measure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tritonlab import gateway
from tritonlab.errors import ModelError
from tritonlab.models.demo import ExportCheck

if TYPE_CHECKING:
    import torch

ZOO_SEED = 0
ONNX_OPSET = 17


@dataclass(frozen=True)
class VerifyCase:
    """One verification input: the feeds, and per output a boolean mask of what to compare.
    Outputs without a mask are compared everywhere; a mask broadcasts to the output's shape."""

    feeds: Mapping[str, np.ndarray[Any, Any]]
    compare: Mapping[str, np.ndarray[Any, Any]] = field(default_factory=dict)


def require_torch() -> None:
    """Raise ``ModelError`` with the install hint if PyTorch is missing."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelError(
            "PyTorch is needed to export the built-in models: pip install 'tritonlab[demo]'"
        ) from exc


def export_verified(
    model: torch.nn.Module,
    onnx_path: Path,
    example: Mapping[str, np.ndarray[Any, Any]],
    output_names: Sequence[str],
    dynamic_axes: Mapping[str, Mapping[int, str]],
    cases: Sequence[VerifyCase],
    tolerance_rel: float,
    batch_sizes: tuple[int, ...],
) -> ExportCheck:
    """Export ``model`` (eval mode) to ``onnx_path`` and compare ORT with PyTorch on ``cases``
    (inputs passed positionally in ``example``'s order), within ``tolerance_rel`` of the largest
    |PyTorch output| (at least 1); ``ModelError`` on a mismatch."""
    require_torch()
    import onnxruntime as ort
    import torch

    input_names = list(example)

    def export(tmp_path: Path) -> None:
        with torch.no_grad():
            torch.onnx.export(  # gateway: the fresh path gateway.write_file gives
                model,
                tuple(torch.from_numpy(example[name]) for name in input_names),
                str(tmp_path),
                input_names=input_names,
                output_names=list(output_names),
                dynamic_axes={name: dict(axes) for name, axes in dynamic_axes.items()},
                opset_version=ONNX_OPSET,
                do_constant_folding=True,
                dynamo=False,
            )

    gateway.write_file(onnx_path, export)

    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    max_diff, scale = 0.0, 1.0
    for case in cases:
        with torch.no_grad():
            expected = model(*(torch.from_numpy(case.feeds[name]) for name in input_names))
        if isinstance(expected, torch.Tensor):
            expected = (expected,)
        actual = session.run(list(output_names), dict(case.feeds))
        for name, want, got in zip(output_names, expected, actual, strict=True):
            want_np = want.numpy()
            where = np.broadcast_to(case.compare.get(name, True), want_np.shape)
            scale = max(scale, float(np.max(np.abs(want_np[where]))))
            max_diff = max(max_diff, float(np.max(np.abs(got[where] - want_np[where]))))
    tolerance = tolerance_rel * scale
    if not max_diff <= tolerance:  # also catches NaN
        raise ModelError(
            f"exported {onnx_path.name} differs from PyTorch by {max_diff:.3g} "
            f"(tolerance {tolerance:.3g}); re-export with a different opset"
        )
    return ExportCheck(onnx_path, batch_sizes, max_diff, tolerance)
