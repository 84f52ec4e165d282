"""How the report's text writes a figure (shared by the experiment log and the HTML report)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonlab.client.infer import SHAPES_ONLY
from tritonlab.models.source import kind_words

if TYPE_CHECKING:
    from tritonlab.client.infer import InferCheck
    from tritonlab.experiments.manifest import ModelRecord


def num(value: float | None, digits: int = 0) -> str:
    """A figure with thousands separators and ``digits`` decimals, or 'n/a' for None."""
    return "n/a" if value is None else f"{value:,.{digits}f}"


def model_source(model: ModelRecord, code: str = "`") -> str:
    """Where the measured model came from, for the conditions: the ONNX file (opset, sha256),
    or the user's repository, the model's kind and what it calls (``code`` quotes names)."""
    q, repository = code, model.repository
    if not repository:
        return (
            f"{q}{model.name}{q} from {q}{model.onnx_file}{q} (opset {model.opset}, "
            f"sha256 {q}{model.sha256[:12]}{q})"
        )
    kind = kind_words(str(repository.get("kind")), repository.get("called", []), q)
    return (
        f"{q}{model.name}{q}: model {q}{repository.get('model')}{q} of the Triton repository "
        f"{q}{repository.get('repository')}{q}, {kind} (sha256 of its folders "
        f"{q}{model.sha256[:12]}{q})"
    )


def check_against(check: InferCheck) -> str:
    """What a correctness check compared the answer with, and how close it was."""
    if check.reference == SHAPES_ONLY:
        return (
            "output shapes and dtypes as the config declares them (no expected values: pass "
            "--reference to compare values)"
        )
    over = (
        " over the sequence (the state carried by the server and by the reference alike)"
        if check.sequence_requests
        else ""
    )
    return f"max abs diff against {check.reference} {check.max_abs_diff:.3g}{over}"
