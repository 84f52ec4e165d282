"""The demo MLP's hot operator as one OpenAI Triton kernel: ``y = relu(x @ W^T + b)``.

onnxruntime fuses the exported ``Gemm(x, W, b, transB=1)`` and ``Relu`` into one ``FusedGemm``;
this kernel does the same in one pass: each program computes one ``BLOCK_M x BLOCK_N`` tile of
``y`` with ``tl.dot`` (fp32 accumulation) and applies bias and ReLU before the single store.
For M samples: ``2·M·N·K`` FLOP and at least ``4·(N·K + N + M·K + M·N)`` bytes, so the weights
dominate at small M (bandwidth-bound at batch 1, compute-bound as the batch grows).

``input_precision``: ``"ieee"`` is exact fp32 (the correctness tests); ``"tf32"`` runs the tensor
cores with 10-bit mantissas (as cuBLAS under ``allow_tf32``); the benchmark measures both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import triton
import triton.language as tl


@triton.jit
def _linear_bias_act_kernel(  # type: ignore[no-untyped-def]
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_xk,
    stride_wn,
    stride_wk,
    stride_ym,
    stride_yn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    APPLY_RELU: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        x = tl.load(
            x_ptr + offs_m[:, None] * stride_xm + k[None, :] * stride_xk,
            mask=(offs_m[:, None] < M) & (k[None, :] < K),
            other=0.0,
        )
        # W is [N, K] (Gemm's transB=1): read a [BLOCK_K, BLOCK_N] tile of W^T
        w = tl.load(
            w_ptr + offs_n[None, :] * stride_wn + k[:, None] * stride_wk,
            mask=(offs_n[None, :] < N) & (k[:, None] < K),
            other=0.0,
        )
        acc += tl.dot(x, w, input_precision=INPUT_PRECISION)
    bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)
    acc += bias[None, :]
    if APPLY_RELU:
        acc = tl.maximum(acc, 0.0)
    tl.store(
        y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn,
        acc,
        mask=(offs_m[:, None] < M) & (offs_n[None, :] < N),
    )


def linear_bias_relu(
    x: Any,
    weight: Any,
    bias: Any,
    relu: bool = True,
    blocks: tuple[int, int, int] = (16, 64, 32),
    input_precision: str = "ieee",
) -> Any:
    """``relu(x @ weight.T + bias)`` for torch tensors ``x [M, K]``, ``weight [N, K]``,
    ``bias [N]`` (fp32, on one device; on CPU only under ``TRITON_INTERPRET=1``)."""
    import torch

    if x.ndim != 2 or weight.ndim != 2 or bias.ndim != 1:
        raise ValueError("x must be [M, K], weight [N, K] and bias [N]")
    m, k = x.shape
    n, k_w = weight.shape
    if k != k_w or bias.shape[0] != n:
        raise ValueError(f"shapes do not chain: x {tuple(x.shape)}, weight {tuple(weight.shape)}")
    y = torch.empty((m, n), device=x.device, dtype=torch.float32)
    block_m, block_n, block_k = blocks
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    _linear_bias_act_kernel[grid](
        x,
        weight,
        bias,
        y,
        m,
        n,
        k,
        *x.stride(),
        *weight.stride(),
        *y.stride(),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        APPLY_RELU=relu,
        INPUT_PRECISION=input_precision,
    )
    return y


def linear_layers(onnx_path: Path) -> list[tuple[Any, Any, bool]]:
    """The ONNX file's ``Gemm`` layers in order: (weight [N, K], bias [N], followed by Relu)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(onnx_path)).graph
    init = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    consumers: dict[str, list[str]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node.op_type)
    layers = []
    for node in graph.node:
        if node.op_type != "Gemm":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        weight = init[node.input[1]]
        if not attrs.get("transB", 0):
            weight = weight.T
        if (
            attrs.get("transA", 0)
            or attrs.get("alpha", 1.0) != 1.0
            or attrs.get("beta", 1.0) != 1.0
        ):
            raise ValueError(f"Gemm {node.name}: only transB, alpha=beta=1 is supported")
        bias = init[node.input[2]] if len(node.input) > 2 else weight[:, 0] * 0
        relu = "Relu" in consumers.get(node.output[0], [])
        layers.append((weight, bias, relu))
    return layers


def mlp_forward(x: Any, layers: list[tuple[Any, Any, bool]], **kernel_args: Any) -> Any:
    """The whole MLP as one kernel call per layer (torch tensors on the target device)."""
    out = x
    for weight, bias, relu in layers:
        out = linear_bias_relu(out, weight, bias, relu=relu, **kernel_args)
    return out
