"""A traced export that runs only at its example's size (issue 20, 6): probed before serving."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from tritonlab.cli import app
from tritonlab.errors import ModelError
from tritonlab.models.inputs import derive_inputs
from tritonlab.models.inspect import inspect_onnx
from tritonlab.models.shape_probe import probe_inputs, reshape_sizes

TRACED = 16


def write_traced_model(path: Path, traced: int = TRACED) -> Path:
    """x [batch, seq, 8] -> Reshape to [0, traced, 2, 4] (seq baked in) -> [0, -1]: runs at
    seq == traced only, as a tracing export of an attention reshape does."""
    target = numpy_helper.from_array(np.array([0, traced, 2, 4], dtype=np.int64), "target")
    flat = numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "flat")
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["x", "target"], ["heads"], name="attention_reshape"),
            helper.make_node("Reshape", ["heads", "flat"], ["y"], name="merge"),
        ],
        "traced",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", traced * 8])],
        [target, flat],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_the_size_the_graph_runs_at_is_found_and_stated(tmp_path: Path) -> None:
    info = inspect_onnx(write_traced_model(tmp_path / "traced.onnx"))
    chosen = derive_inputs(info)
    assert chosen.shapes == {"x": (128, 8)}  # tritonlab's default: fails in onnxruntime
    assert TRACED in reshape_sizes(info)  # the traced size is read from the graph
    probed = probe_inputs(info, chosen, sized_by_user=False)
    assert probed.shapes == {"x": (TRACED, 8)}
    assert "Reshape node 'attention_reshape'" in probed.dims_note
    assert "set with --shape" in probed.dims_note


def test_a_size_the_user_chose_is_not_changed_but_explained_in_one_line(tmp_path: Path) -> None:
    info = inspect_onnx(write_traced_model(tmp_path / "traced.onnx"))
    chosen = derive_inputs(info, {"x": (64, 8)})
    with pytest.raises(ModelError) as caught:
        probe_inputs(info, chosen, sized_by_user=True)
    message = str(caught.value)
    assert "\n" not in message and "Reshape node 'attention_reshape'" in message
    assert "x [64, 8]" in message and "--shape x:" in message


def test_the_cli_stops_in_one_line_before_any_server_starts(tmp_path: Path) -> None:
    """Before: a full traceback ending in onnxruntime's Reshape error (2026-12-01)."""
    model = write_traced_model(tmp_path / "traced.onnx")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(model), "--out", str(out), "--shape", "x:64,8"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "Reshape node" in result.output
    assert not (out / "server").exists()
