"""The kernel tier: OpenAI Triton's interpreter on CPU, and the demo model to check against."""

from __future__ import annotations

import os
from pathlib import Path

# Before triton is imported anywhere: run kernels in the interpreter (no GPU needed).
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest


@pytest.fixture(scope="session")
def demo_onnx() -> Path:
    path = Path(__file__).resolve().parents[2] / "examples" / "simple_mlp" / "simple_mlp.onnx"
    if not path.exists():
        pytest.skip(f"{path} is missing")
    return path
