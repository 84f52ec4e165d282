"""The OpenAI Triton kernel for the demo MLP's hot operator, checked in Triton's interpreter on
CPU (``TRITON_INTERPRET=1``; set by this tier's conftest) against numpy and onnxruntime.

The interpreter runs the kernel's Python semantics with numpy, hundreds of times slower than a
GPU would, so the shapes stay small except for the one test that runs the real demo model; no
speed is measured here (``benchmarks/triton_kernel_gpu.py`` does that on a GPU host)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tritonlab.kernels.fused_linear import (  # noqa: E402
    linear_bias_relu,
    linear_layers,
    mlp_forward,
)


def _reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, relu: bool) -> np.ndarray:
    y = x.astype(np.float64) @ w.astype(np.float64).T + b
    return np.maximum(y, 0.0) if relu else y


@pytest.mark.parametrize(
    ("m", "n", "k", "relu"),
    [
        (1, 64, 32, True),  # batch 1: one row in a 16-row tile, the rest masked
        (5, 70, 40, True),  # no dimension a multiple of its block: every edge masked
        (33, 10, 96, False),  # the MLP's second layer shape class: few outputs, no ReLU
    ],
)
def test_kernel_matches_numpy(m: int, n: int, k: int, relu: bool) -> None:
    rng = np.random.default_rng(m * 1000 + n)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32) / np.sqrt(k)
    b = rng.standard_normal(n).astype(np.float32)
    got = linear_bias_relu(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), relu)
    want = _reference(x, w, b, relu)
    assert got.shape == (m, n)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    if relu:
        # the ReLU really clipped: the pre-activation had negatives, the output has none
        assert (_reference(x, w, b, relu=False) < 0).any() and (got.numpy() >= 0).all()


def test_the_demo_mlp_runs_as_two_kernel_calls(demo_onnx: Path) -> None:
    """The built-in simple_mlp (256 -> 1024 -> ReLU -> 10) from its own ONNX weights, against
    onnxruntime on the same inputs."""
    import onnxruntime as ort

    layers = linear_layers(demo_onnx)
    assert [(w.shape, relu) for w, _, relu in layers] == [((1024, 256), True), ((10, 1024), False)]
    x = np.random.default_rng(0).standard_normal((4, 256)).astype(np.float32)
    torch_layers = [
        (torch.from_numpy(w.copy()), torch.from_numpy(b.copy()), r) for w, b, r in layers
    ]
    got = mlp_forward(torch.from_numpy(x), torch_layers).numpy()
    session = ort.InferenceSession(str(demo_onnx), providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_shapes_that_do_not_chain_are_refused() -> None:
    x, w, b = torch.zeros((2, 8)), torch.zeros((4, 9)), torch.zeros(4)
    with pytest.raises(ValueError, match="shapes do not chain"):
        linear_bias_relu(x, w, b)
