"""``tiny``: a small CNN built with ``onnx.helper`` (no PyTorch), for fast pipeline tests.

Input ``image`` float32 [batch, 3, 32, 32], output ``logits`` [batch, 10] (the same tensor names
as ``resnet18_cnn``, so the pipeline's steps serve either unchanged): Conv 3x3/2 (3 -> 8) + ReLU,
Conv 3x3/2 (8 -> 16) + ReLU, global average pooling, Flatten, Gemm 16 -> 10. Weights are
He-scaled normal draws from ``numpy.random.default_rng(seed)``, so the same seed writes the same
bytes, and the logits of a normalised image spread over a few units (distinct top-k scores).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tritonlab import gateway

TINY_CNN_NAME = "tiny"
TINY_CNN_PIXELS = 32
TINY_CNN_CLASSES = 10
TINY_CNN_CHANNELS = (3, 8, 16)
_OPSET = 17
_IR_VERSION = 8


def write_tiny_cnn(onnx_path: Path, seed: int = 0) -> Path:
    """Write the tiny CNN to ``onnx_path`` (checked with ``onnx.checker``); return the path."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def he_normal(name: str, shape: tuple[int, ...], fan_in: int) -> onnx.TensorProto:
        values = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        return numpy_helper.from_array(values.astype(np.float32), name)

    def small(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array((0.1 * rng.standard_normal(shape)).astype(np.float32), name)

    rgb, hidden, features = TINY_CNN_CHANNELS
    initializers = [
        he_normal("conv1_w", (hidden, rgb, 3, 3), rgb * 9),
        small("conv1_b", (hidden,)),
        he_normal("conv2_w", (features, hidden, 3, 3), hidden * 9),
        small("conv2_b", (features,)),
        he_normal("fc_w", (TINY_CNN_CLASSES, features), features),
        small("fc_b", (TINY_CNN_CLASSES,)),
    ]

    def conv(inputs: list[str], output: str) -> onnx.NodeProto:
        return helper.make_node(
            "Conv", inputs, [output], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]
        )

    nodes = [
        conv(["image", "conv1_w", "conv1_b"], "c1"),
        helper.make_node("Relu", ["c1"], ["r1"]),
        conv(["r1", "conv2_w", "conv2_b"], "c2"),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    image_shape: list[str | int] = ["batch", rgb, TINY_CNN_PIXELS, TINY_CNN_PIXELS]
    graph = helper.make_graph(
        nodes,
        "tiny_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, image_shape)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", TINY_CNN_CLASSES])],
        initializer=initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", _OPSET)],
        producer_name="tritonlab",
        ir_version=_IR_VERSION,
    )
    onnx.checker.check_model(model, full_check=True)
    gateway.write_file(onnx_path, lambda path: onnx.save(model, str(path)))
    return onnx_path
