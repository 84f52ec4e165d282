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


def test_onnxruntime_says_nothing_on_the_terminal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Before (issue 35): onnxruntime's own coloured error line ("[E:onnxruntime:...") reached
    the terminal ahead of tritonlab's one line; what it said is in that line instead."""
    info = inspect_onnx(write_traced_model(tmp_path / "traced.onnx"))
    capfd.readouterr()
    probe_inputs(info, derive_inputs(info), sized_by_user=False)  # fails at 128 first
    with pytest.raises(ModelError, match="Reshape node 'attention_reshape'"):
        probe_inputs(info, derive_inputs(info, {"x": (64, 8)}), sized_by_user=True)
    captured = capfd.readouterr()
    assert "onnxruntime" not in captured.err + captured.out


def _one_input_model(
    path: Path, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto]
) -> Path:
    graph = helper.make_graph(
        nodes,
        "ranged",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, "samples"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "c", "n"])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_a_model_that_needs_a_long_window_gets_the_ladders_first_size_that_runs(
    tmp_path: Path,
) -> None:
    """An audio front end with a 400-sample window fails at 128 samples (and at 64, 256, 32):
    the ladder finds 512, and the note says what failed."""
    kernel = numpy_helper.from_array(np.ones((4, 1, 400), dtype=np.float32), "kernel")
    conv = helper.make_node("Conv", ["x", "kernel"], ["y"], strides=[160], name="window")
    info = inspect_onnx(_one_input_model(tmp_path / "frontend.onnx", [conv], [kernel]))
    probed = probe_inputs(info, derive_inputs(info), sized_by_user=False)
    assert probed.shapes == {"x": (1, 512)}
    assert "Conv node 'window'" in probed.dims_note
    assert "256 in Conv node 'window'" in probed.dims_note and "ladder" in probed.dims_note


def test_a_size_that_runs_but_gives_an_empty_output_is_passed_over(tmp_path: Path) -> None:
    """y = x[..., 200:]: at 128 samples it runs and y is empty, which is no measurement."""
    starts = numpy_helper.from_array(np.array([200], dtype=np.int64), "starts")
    ends = numpy_helper.from_array(np.array([2**62], dtype=np.int64), "ends")
    axes = numpy_helper.from_array(np.array([2], dtype=np.int64), "axes")
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"], name="tail")
    info = inspect_onnx(_one_input_model(tmp_path / "tail.onnx", [node], [starts, ends, axes]))
    probed = probe_inputs(info, derive_inputs(info), sized_by_user=False)
    assert probed.shapes == {"x": (1, 256)}
    assert "an empty output" in probed.dims_note


def test_a_model_with_nothing_that_runs_names_what_was_tried_in_one_line(tmp_path: Path) -> None:
    """Adds a 3-element constant along the samples: runs only at 3, which no rule tries."""
    three = numpy_helper.from_array(np.ones(3, dtype=np.float32), "three")
    node = helper.make_node("Add", ["x", "three"], ["y"], name="fixed_add")
    info = inspect_onnx(_one_input_model(tmp_path / "three.onnx", [node], [three]))
    with pytest.raises(ModelError) as caught:
        probe_inputs(info, derive_inputs(info), sized_by_user=False)
    message = str(caught.value)
    assert "\n" not in message and "more sizes" in message and "--shape x:" in message
