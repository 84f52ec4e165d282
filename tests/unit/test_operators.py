"""Operator profile (FLOPs, bytes, intensity) and the in-process cost fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tritonlab.explanation.operators import ExecutionCostFit, operator_paragraph
from tritonlab.perf.operator_profile import OperatorProfile, profile_operators


def _mlp(path: Path, k: int = 256, n: int = 1024) -> Path:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((n, k)).astype(np.float32), "w")
    b = numpy_helper.from_array(np.zeros(n, np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1, name="fc")],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", n])],
        [w, b],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def _conv(path: Path) -> Path:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], name="conv")],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8, 16, 16])],
        [w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_gemm_flops_bytes_and_intensity(tmp_path: Path) -> None:
    profile = profile_operators(_mlp(tmp_path / "mlp.onnx"))
    (op,) = profile.operators
    assert op.op_type == "Gemm" and op.name == "fc"
    assert op.flops_per_sample == 2 * 256 * 1024
    assert op.weight_bytes == (1024 * 256 + 1024) * 4
    assert op.activation_bytes_per_sample == (256 + 1024) * 4
    expected_1 = 2 * 256 * 1024 / ((1024 * 256 + 1024) * 4 + (256 + 1024) * 4)
    assert profile.intensity(1) == pytest.approx(expected_1)
    # weights are read once per execution: intensity grows with the batch
    assert profile.intensity(8) > 7 * profile.intensity(1)


def test_conv_flops_count_the_kernel(tmp_path: Path) -> None:
    profile = profile_operators(_conv(tmp_path / "conv.onnx"))
    (op,) = profile.operators
    assert op.flops_per_sample == 2 * (8 * 16 * 16) * (3 * 3 * 3)
    assert op.weight_bytes == 8 * 3 * 3 * 3 * 4
    assert op.activation_bytes_per_sample == (3 * 16 * 16 + 8 * 16 * 16) * 4


def test_fit_recovers_a_linear_cost() -> None:
    fit = ExecutionCostFit.fit({b: 30.0 + 6.0 * b for b in (1, 2, 4, 8, 16, 32, 64)})
    assert fit is not None
    assert fit.fixed_us == pytest.approx(30.0)
    assert fit.per_sample_us == pytest.approx(6.0)
    assert fit.max_relative_error == pytest.approx(0.0, abs=1e-9)
    assert fit.fixed_share_at_batch_1 == pytest.approx(30 / 36)
    assert fit.per_sample_at(10) == pytest.approx(9.0)
    assert ExecutionCostFit.fit({1: 10.0}) is None
    # nothing left after the empty model's time was taken off: a zero fit, not none
    zero = ExecutionCostFit.fit({1: 0.0, 8: 0.0, 64: 0.0})
    assert zero is not None and (zero.fixed_us, zero.per_sample_us) == (0.0, 0.0)


def test_paragraph_weight_bound_model(tmp_path: Path) -> None:
    profile = profile_operators(_mlp(tmp_path / "mlp.onnx"))
    text = operator_paragraph(
        profile, {"batching": 4.0, "baseline": 1.0}, {1: 36.0, 2: 42.0, 4: 54.0, 8: 78.0}
    )
    assert "batching raises the intensity" in text
    assert "30.0 µs fixed + 6.0 µs per sample" in text
    assert "batching: mean batch 4.0 -> 13.5 µs per sample" in text
    assert "baseline: mean batch" not in text  # batch 1 forms no batches to explain


def test_paragraph_activation_bound_model(tmp_path: Path) -> None:
    profile = profile_operators(_conv(tmp_path / "conv.onnx"))
    text = operator_paragraph(profile, {}, None)
    assert "Activations dominate the bytes" in text
    assert "fixed +" not in text  # no timings, no fit


def test_empty_profile() -> None:
    assert "no MatMul" in operator_paragraph(OperatorProfile(()), {}, None)


def _attention(path: Path) -> Path:
    """Q.K^T of an input split into 2 heads by a Reshape whose shape the graph computes (Shape,
    Slice, Concat), as an exported encoder does: [batch, seq, 8] -> [batch, 2, seq, seq]."""
    heads = numpy_helper.from_array(np.array([2, 4], np.int64), "heads")
    starts = numpy_helper.from_array(np.array([0], np.int64), "starts")
    ends = numpy_helper.from_array(np.array([2], np.int64), "ends")
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Slice", ["shape", "starts", "ends"], ["lead"]),
        helper.make_node("Concat", ["lead", "heads"], ["split"], axis=0),
        helper.make_node("Reshape", ["x", "split"], ["xh"]),
        helper.make_node("Transpose", ["xh"], ["q"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["xh"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
    ]
    graph = helper.make_graph(
        nodes,
        "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)],
        [heads, starts, ends],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))
    return path


def test_shapes_the_graph_computes_are_counted_not_taken_as_one(tmp_path: Path) -> None:
    """Issue 36 audit: the encoder's attention MatMuls, behind a computed Reshape, counted 2
    FLOPs (every unresolved dim read as 1), so the profile said 2,491.72 MFLOP per sample where
    its layers hold 2,869. Q.K^T of 2 heads of 4 over 16 positions: 2 x 2 x 16 x 16 x 4."""
    profile = profile_operators(_attention(tmp_path / "a.onnx"), {"x": (16, 8)})
    (qk,) = profile.operators
    assert qk.flops_per_sample == 2 * 2 * 16 * 16 * 4
    assert qk.activation_bytes_per_sample == (2 * 16 * 4 + 2 * 16 * 16) * 4
