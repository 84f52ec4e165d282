"""models/inspect.py: ONNX graphs built here with onnx.helper, read back as TensorSpecs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tritonlab.errors import ModelError
from tritonlab.models.inspect import TensorSpec, check_with_onnxruntime, inspect_onnx

OPSET = 17

DimT = int | str | None


def _vi(name: str, elem_type: int, shape: list[DimT]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


def _save(
    path: Path,
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    initializers: list[onnx.TensorProto] | None = None,
    opset: int = OPSET,
) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=initializers or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _identity(path: Path, elem_type: int, shape: list[DimT]) -> Path:
    return _save(
        path,
        [helper.make_node("Identity", ["x"], ["y"])],
        [_vi("x", elem_type, shape)],
        [_vi("y", elem_type, shape)],
    )


@pytest.mark.parametrize(
    ("elem_type", "triton", "numpy_dtype", "is_float"),
    [
        (TensorProto.FLOAT, "TYPE_FP32", np.float32, True),
        (TensorProto.FLOAT16, "TYPE_FP16", np.float16, True),
        (TensorProto.INT32, "TYPE_INT32", np.int32, False),
        (TensorProto.INT64, "TYPE_INT64", np.int64, False),
        (TensorProto.BOOL, "TYPE_BOOL", np.bool_, False),
    ],
)
def test_element_types_map_to_triton(
    tmp_path: Path, elem_type: int, triton: str, numpy_dtype: type, is_float: bool
) -> None:
    info = inspect_onnx(_identity(tmp_path / "m.onnx", elem_type, ["batch", 3, 5]))
    assert info.inputs == (TensorSpec("x", triton, (3, 5)),)
    assert info.outputs == (TensorSpec("y", triton, (3, 5)),)
    assert info.inputs[0].numpy_dtype == np.dtype(numpy_dtype)
    assert info.outputs[0].is_float is is_float


def test_batched_add_model(tmp_path: Path) -> None:
    path = _save(
        tmp_path / "add.onnx",
        [helper.make_node("Add", ["a", "b"], ["sum"])],
        [_vi("a", TensorProto.FLOAT, ["N", 4]), _vi("b", TensorProto.FLOAT, ["N", 4])],
        [_vi("sum", TensorProto.FLOAT, ["N", 4])],
    )
    info = inspect_onnx(path)
    assert info.batched is True
    assert [s.name for s in info.inputs] == ["a", "b"]
    assert [s.dims for s in info.inputs] == [(4,), (4,)]
    assert info.outputs == (TensorSpec("sum", "TYPE_FP32", (4,)),)
    assert info.opset == OPSET
    assert info.path == path
    assert info.file_size_bytes == path.stat().st_size > 0


def test_matmul_initializer_is_not_an_input(tmp_path: Path) -> None:
    weight = helper.make_tensor("W", TensorProto.FLOAT, [3, 2], [0.5] * 6)
    # Older exporters list initializers among graph inputs too; they are not served inputs.
    path = _save(
        tmp_path / "mm.onnx",
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        [_vi("x", TensorProto.FLOAT, ["batch", 3]), _vi("W", TensorProto.FLOAT, [3, 2])],
        [_vi("y", TensorProto.FLOAT, ["batch", 2])],
        initializers=[weight],
    )
    info = inspect_onnx(path)
    assert info.batched is True
    assert info.inputs == (TensorSpec("x", "TYPE_FP32", (3,)),)
    assert info.outputs == (TensorSpec("y", "TYPE_FP32", (2,)),)


def test_fixed_shape_model_is_not_batched(tmp_path: Path) -> None:
    info = inspect_onnx(_identity(tmp_path / "fixed.onnx", TensorProto.FLOAT, [2, 3]))
    assert info.batched is False
    assert info.inputs[0].dims == (2, 3)
    assert info.outputs[0].dims == (2, 3)


def test_variable_non_batch_dims_become_minus_one(tmp_path: Path) -> None:
    info = inspect_onnx(_identity(tmp_path / "seq.onnx", TensorProto.INT64, ["N", "T", 8]))
    assert info.batched is True
    assert info.inputs[0].dims == (-1, 8)
    assert info.outputs[0].dims == (-1, 8)


def test_unknown_dim_counts_as_symbolic(tmp_path: Path) -> None:
    # A dim with neither value nor name (shape [None, 4]) is still a variable leading dim.
    info = inspect_onnx(_identity(tmp_path / "anon.onnx", TensorProto.FLOAT, [None, 4]))
    assert info.batched is True
    assert info.inputs[0].dims == (4,)


def test_batched_only_when_every_tensor_has_symbolic_leading_dim(tmp_path: Path) -> None:
    # The output's first dim is fixed, so the leading dim cannot be Triton's batch dim:
    # nothing is stripped and the symbolic input dim stays as -1.
    path = _save(
        tmp_path / "mixed.onnx",
        [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=1)],
        [_vi("x", TensorProto.FLOAT, ["N", 4])],
        [_vi("y", TensorProto.FLOAT, [1, 1])],
    )
    info = inspect_onnx(path)
    assert info.batched is False
    assert info.inputs[0].dims == (-1, 4)
    assert info.outputs[0].dims == (1, 1)


def _assert_one_line(exc: pytest.ExceptionInfo[ModelError]) -> str:
    message = str(exc.value)
    assert message
    assert "\n" not in message
    return message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as exc:
        inspect_onnx(tmp_path / "nope.onnx")
    message = _assert_one_line(exc)
    assert "not found" in message
    assert "nope.onnx" in message


def test_directory(tmp_path: Path) -> None:
    folder = tmp_path / "model.onnx"
    folder.mkdir()
    with pytest.raises(ModelError) as exc:
        inspect_onnx(folder)
    assert "is a directory" in _assert_one_line(exc)


def test_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.onnx"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(ModelError) as exc:
        inspect_onnx(path)
    message = _assert_one_line(exc)
    assert "corrupt.onnx" in message
    assert "re-export" in message


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(ModelError) as exc:
        inspect_onnx(path)
    assert "empty.onnx" in _assert_one_line(exc)


@pytest.mark.parametrize(
    ("elem_type", "type_name"),
    [
        (TensorProto.STRING, "STRING"),
        (TensorProto.BFLOAT16, "BFLOAT16"),
        (TensorProto.COMPLEX64, "COMPLEX64"),
    ],
)
def test_unsupported_element_type(tmp_path: Path, elem_type: int, type_name: str) -> None:
    path = _identity(tmp_path / "odd.onnx", elem_type, ["N", 2])
    with pytest.raises(ModelError) as exc:
        inspect_onnx(path)
    message = _assert_one_line(exc)
    assert "'x'" in message
    assert type_name in message
    # says what to change: token ids for text, FP16/FP32 for bfloat16, a list otherwise
    assert ("int64 token ids" if type_name == "STRING" else "FP32") in message


def test_unsupported_output_type_names_the_output(tmp_path: Path) -> None:
    path = _save(
        tmp_path / "cast.onnx",
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.DOUBLE)],
        [_vi("x", TensorProto.FLOAT, ["N", 2])],
        [_vi("y", TensorProto.COMPLEX128, ["N", 2])],
    )
    with pytest.raises(ModelError) as exc:
        inspect_onnx(path)
    message = _assert_one_line(exc)
    assert message.startswith("output 'y'")
    assert "COMPLEX128" in message


def test_empty_graph(tmp_path: Path) -> None:
    path = _save(tmp_path / "empty_graph.onnx", [], [], [])
    with pytest.raises(ModelError) as exc:
        inspect_onnx(path)
    assert "empty graph" in _assert_one_line(exc)


def test_graph_without_inputs(tmp_path: Path) -> None:
    value = helper.make_tensor("v", TensorProto.FLOAT, [2], [1.0, 2.0])
    path = _save(
        tmp_path / "const.onnx",
        [helper.make_node("Constant", [], ["y"], value=value)],
        [],
        [_vi("y", TensorProto.FLOAT, [2])],
    )
    with pytest.raises(ModelError) as exc:
        inspect_onnx(path)
    assert "no inputs" in _assert_one_line(exc)


def test_check_with_onnxruntime_accepts_a_valid_model(tmp_path: Path) -> None:
    check_with_onnxruntime(_identity(tmp_path / "ok.onnx", TensorProto.FLOAT, ["N", 3]))


def test_check_with_onnxruntime_rejects_unknown_operator(tmp_path: Path) -> None:
    path = _save(
        tmp_path / "bad_op.onnx",
        [helper.make_node("NoSuchOperatorXyz", ["x"], ["y"])],
        [_vi("x", TensorProto.FLOAT, ["N", 3])],
        [_vi("y", TensorProto.FLOAT, ["N", 3])],
    )
    # The graph itself reads fine; only onnxruntime can tell it cannot run it.
    assert inspect_onnx(path).batched is True
    with pytest.raises(ModelError) as exc:
        check_with_onnxruntime(path)
    message = _assert_one_line(exc)
    assert message.startswith("onnxruntime cannot load")
    assert "bad_op.onnx" in message


def test_check_with_onnxruntime_rejects_type_mismatch(tmp_path: Path) -> None:
    path = _save(
        tmp_path / "mismatch.onnx",
        [helper.make_node("Add", ["a", "b"], ["c"])],
        [_vi("a", TensorProto.FLOAT, ["N", 2]), _vi("b", TensorProto.INT64, ["N", 2])],
        [_vi("c", TensorProto.FLOAT, ["N", 2])],
    )
    with pytest.raises(ModelError) as exc:
        check_with_onnxruntime(path)
    assert "onnxruntime cannot load" in _assert_one_line(exc)
