"""tests/onnx_factory.py: every model passes the ONNX checker and runs in onnxruntime (CPU)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx_factory import (
    ALL_MODELS,
    CAST_BEFORE_GATHER_VOCAB,
    IR_VERSION,
    OPSET,
    POSITION_IDS_MAX_POSITIONS,
    POSITION_IDS_VOCAB,
    TOKEN_CLASSIFIER_TYPES,
    TOKEN_CLASSIFIER_VOCAB,
    bf16_input,
    cast_before_gather,
    fp16_mlp,
    fp16_multi_output,
    mixed_dtypes,
    multi_output,
    no_batch_axis,
    position_ids_model,
    string_input,
    token_classifier,
)

BATCH = 2
SEQ = 5


def _session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 4  # expected failures below need not print onnxruntime errors
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _ids(high: int, seed: int = 0, dtype: type = np.int64) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, high, size=(BATCH, SEQ)).astype(dtype)


def _token_feed(input_ids: np.ndarray, token_type_ids: np.ndarray | None = None) -> dict:
    mask = np.ones_like(input_ids)
    mask[1, 3:] = 0  # padding in the second row
    if token_type_ids is None:
        token_type_ids = np.zeros_like(input_ids)
    return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": token_type_ids}


@pytest.mark.parametrize("name", sorted(ALL_MODELS))
def test_model_passes_checker_and_loads(name: str, tmp_path: Path) -> None:
    path = ALL_MODELS[name](tmp_path / f"{name}.onnx")
    assert path == tmp_path / f"{name}.onnx"
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == IR_VERSION
    assert [(o.domain, o.version) for o in model.opset_import] == [("", OPSET)]
    _session(path)


def test_models_are_deterministic(tmp_path: Path) -> None:
    a = token_classifier(tmp_path / "a.onnx").read_bytes()
    b = token_classifier(tmp_path / "b.onnx").read_bytes()
    assert a == b


def test_token_classifier_runs(tmp_path: Path) -> None:
    session = _session(token_classifier(tmp_path / "m.onnx"))
    inputs = {i.name: (i.type, i.shape) for i in session.get_inputs()}
    ids_meta = ("tensor(int64)", ["batch", "sequence"])
    assert inputs == {n: ids_meta for n in ("input_ids", "attention_mask", "token_type_ids")}
    types = _ids(TOKEN_CLASSIFIER_TYPES, seed=1)
    (logits,) = session.run(None, _token_feed(_ids(TOKEN_CLASSIFIER_VOCAB), types))
    assert logits.dtype == np.float32 and logits.shape == (BATCH, 4)
    assert np.isfinite(logits).all()


def test_token_classifier_all_padding_is_finite(tmp_path: Path) -> None:
    session = _session(token_classifier(tmp_path / "m.onnx"))
    feed = _token_feed(_ids(TOKEN_CLASSIFIER_VOCAB))
    feed["attention_mask"] = np.zeros_like(feed["input_ids"])
    (logits,) = session.run(None, feed)
    np.testing.assert_array_equal(logits, np.zeros((BATCH, 4), dtype=np.float32))


@pytest.mark.parametrize("which", ["input_ids", "token_type_ids"])
def test_token_classifier_out_of_range_ids_fail(which: str, tmp_path: Path) -> None:
    session = _session(token_classifier(tmp_path / "m.onnx"))
    feed = _token_feed(_ids(TOKEN_CLASSIFIER_VOCAB))
    limit = TOKEN_CLASSIFIER_VOCAB if which == "input_ids" else TOKEN_CLASSIFIER_TYPES
    feed[which][0, 0] = limit
    with pytest.raises(Exception, match="indices element out of data bounds"):
        session.run(None, feed)


def test_no_batch_axis_runs(tmp_path: Path) -> None:
    session = _session(no_batch_axis(tmp_path / "m.onnx"))
    assert session.get_inputs()[0].shape == [3, 8]
    (y,) = session.run(None, {"x": np.ones((3, 8), dtype=np.float32)})
    assert y.dtype == np.float32 and y.shape == (3, 2)


def test_fp16_mlp_runs(tmp_path: Path) -> None:
    session = _session(fp16_mlp(tmp_path / "m.onnx"))
    x = np.random.default_rng(0).standard_normal((BATCH, 32)).astype(np.float16)
    (y,) = session.run(None, {"x": x})
    assert y.dtype == np.float16 and y.shape == (BATCH, 16)
    assert (y >= 0).all()


def test_fp16_multi_output_runs(tmp_path: Path) -> None:
    session = _session(fp16_multi_output(tmp_path / "m.onnx"))
    x = np.random.default_rng(0).standard_normal((3, 32)).astype(np.float16)
    y, argmax, norm = session.run(None, {"x": x})
    assert (y.dtype, argmax.dtype, norm.dtype) == (np.float16, np.int64, np.float32)
    assert y.shape == (3, 16) and argmax.shape == (3,) and norm.shape == (3, 1)
    np.testing.assert_allclose(norm[:, 0], np.linalg.norm(y.astype(np.float32), axis=1), rtol=1e-3)


def test_multi_output_runs(tmp_path: Path) -> None:
    session = _session(multi_output(tmp_path / "m.onnx"))
    x = np.random.default_rng(0).standard_normal((BATCH, 16)).astype(np.float32)
    y, argmax, norm = session.run(["y", "argmax", "norm"], {"x": x})
    assert y.dtype == np.float32 and y.shape == (BATCH, 8)
    assert argmax.dtype == np.int64 and argmax.shape == (BATCH,)
    assert norm.dtype == np.float32 and norm.shape == (BATCH, 1)
    np.testing.assert_array_equal(argmax, y.argmax(axis=1))
    np.testing.assert_allclose(norm[:, 0], np.linalg.norm(y, axis=1), rtol=1e-5)


def test_mixed_dtypes_runs(tmp_path: Path) -> None:
    session = _session(mixed_dtypes(tmp_path / "m.onnx"))
    flag = np.array([[True, False, True, False]] * BATCH)
    count = np.full((BATCH, 4), 3, dtype=np.int32)
    pixels = np.full((BATCH, 4), 255, dtype=np.uint8)
    (out,) = session.run(None, {"flag": flag, "count": count, "pixels": pixels})
    assert out.dtype == np.float32 and out.shape == (BATCH, 4)
    np.testing.assert_allclose(out, np.array([[4.0, 1.0, 4.0, 1.0]] * BATCH))


def test_string_input_runs(tmp_path: Path) -> None:
    session = _session(string_input(tmp_path / "m.onnx"))
    assert session.get_inputs()[0].type == "tensor(string)"
    text = np.array([["hello"], ["wörld"]], dtype=object)
    (out,) = session.run(None, {"text": text})
    assert out.shape == (BATCH, 1) and out.tolist() == [["hello"], ["wörld"]]


def test_bf16_input_runs_through_ortvalue(tmp_path: Path) -> None:
    """numpy has no bfloat16: feed the bit pattern (uint16) as an OrtValue typed BFLOAT16."""
    session = _session(bf16_input(tmp_path / "m.onnx"))
    assert session.get_inputs()[0].type == "tensor(bfloat16)"
    x = np.array([[1.5, -2.0, 3.25, 0.0]] * BATCH, dtype=np.float32)
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)  # exact: these values fit in bfloat16
    value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, TensorProto.BFLOAT16)
    (y,) = session.run(None, {"x": value})
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, x)


def test_position_ids_model_ranges(tmp_path: Path) -> None:
    session = _session(position_ids_model(tmp_path / "m.onnx"))
    ids = _ids(POSITION_IDS_VOCAB)
    positions = np.broadcast_to(np.arange(SEQ, dtype=np.int64), (BATCH, SEQ)).copy()
    (h,) = session.run(None, {"input_ids": ids, "position_ids": positions})
    assert h.dtype == np.float32 and h.shape == (BATCH, 8)
    # A token id that is valid for input_ids is out of range as a position.
    positions[0, 0] = POSITION_IDS_MAX_POSITIONS
    with pytest.raises(Exception, match="indices element out of data bounds"):
        session.run(None, {"input_ids": ids, "position_ids": positions})


def test_cast_before_gather_runs(tmp_path: Path) -> None:
    session = _session(cast_before_gather(tmp_path / "m.onnx"))
    assert session.get_inputs()[0].type == "tensor(int32)"
    ids = _ids(CAST_BEFORE_GATHER_VOCAB, dtype=np.int32)
    (h,) = session.run(None, {"ids": ids})
    assert h.dtype == np.float32 and h.shape == (BATCH, 8)
    ids[0, 0] = CAST_BEFORE_GATHER_VOCAB
    with pytest.raises(Exception, match="indices element out of data bounds"):
        session.run(None, {"ids": ids})


def test_all_models_listed() -> None:
    factories: list[Callable[[Path], Path]] = [
        token_classifier,
        no_batch_axis,
        fp16_mlp,
        multi_output,
        mixed_dtypes,
        string_input,
        bf16_input,
        position_ids_model,
        cast_before_gather,
    ]
    assert list(ALL_MODELS.values()) == factories
