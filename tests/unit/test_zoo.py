"""models/zoo.py: the built-in model registry; each model exported, verified and inspected.

The models live in resnet18.py and bert_encoder.py, the export and check in torch_export.py.

The two large models are exported once per module (a few seconds each) into a temporary folder;
the determinism test exports them a second time and compares the files' sha256.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from tritonlab.errors import ModelError
from tritonlab.models.bert_encoder import (
    ENCODER_HIDDEN,
    ENCODER_MAX_POSITIONS,
    ENCODER_NAME,
    ENCODER_TOKEN_TYPES,
    ENCODER_VOCAB_SIZE,
    EncoderShape,
    _build_encoder,
    encoder_inputs,
)
from tritonlab.models.demo import ExportCheck, export_simple_mlp
from tritonlab.models.inspect import OnnxModelInfo, inspect_onnx
from tritonlab.models.resnet18 import RESNET18_NAME, _build_resnet18
from tritonlab.models.torch_export import VerifyCase, export_verified
from tritonlab.models.zoo import BUILTIN_MODELS, DEFAULT_MODEL, builtin_model, export_builtin

ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ExportCheck]:
    """The CNN and the encoder, exported and verified once for the whole module."""
    folder = tmp_path_factory.mktemp("zoo")
    return {
        name: export_builtin(name, folder / f"{name}.onnx")
        for name in (RESNET18_NAME, ENCODER_NAME)
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _spec(info: OnnxModelInfo, kind: str) -> list[tuple[str, str, tuple[int, ...]]]:
    specs = info.inputs if kind == "inputs" else info.outputs
    return [(s.name, s.triton_dtype, s.dims) for s in specs]


def test_registry_names_and_default() -> None:
    assert list(BUILTIN_MODELS) == ["simple_mlp", "resnet18_cnn", "bert_encoder"]
    assert DEFAULT_MODEL == "simple_mlp"
    assert builtin_model(DEFAULT_MODEL).export is export_simple_mlp
    for name, model in BUILTIN_MODELS.items():
        assert model.name == name
        assert model.summary and "\n" not in model.summary
    assert "3.6 GFLOP (1.8 GMAC)" in BUILTIN_MODELS[RESNET18_NAME].summary
    assert "11.7 M parameters" in BUILTIN_MODELS[RESNET18_NAME].summary
    assert "22.7 M parameters" in BUILTIN_MODELS[ENCODER_NAME].summary


def test_unknown_name_lists_the_valid_names(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as info:
        builtin_model("resnet50")
    message = str(info.value)
    assert "'resnet50'" in message and "\n" not in message
    assert all(name in message for name in BUILTIN_MODELS)
    with pytest.raises(ModelError, match="simple_mlp, resnet18_cnn, bert_encoder"):
        export_builtin("nope", tmp_path / "nope.onnx")
    assert not (tmp_path / "nope.onnx").exists()


def test_export_builtin_exports_the_default_model(tmp_path: Path) -> None:
    check = export_builtin(DEFAULT_MODEL, tmp_path / "mlp.onnx")
    info = inspect_onnx(check.onnx_path)
    assert info.batched
    assert _spec(info, "inputs") == [("input", "TYPE_FP32", (256,))]
    assert _spec(info, "outputs") == [("output", "TYPE_FP32", (10,))]


def test_cnn_exports_verifies_and_has_a_dynamic_batch(exported: dict[str, ExportCheck]) -> None:
    check = exported[RESNET18_NAME]
    assert check.batch_sizes_checked == (1, 2)
    assert check.max_abs_diff <= check.tolerance_abs
    assert check.onnx_path.exists() and not check.onnx_path.with_suffix(".onnx.tmp").exists()
    info = inspect_onnx(check.onnx_path)
    assert info.batched and info.opset == 17
    assert _spec(info, "inputs") == [("image", "TYPE_FP32", (3, 224, 224))]
    assert _spec(info, "outputs") == [("logits", "TYPE_FP32", (1000,))]
    assert 40e6 < info.file_size_bytes < 50e6  # 11.7 M float32 parameters


def test_cnn_is_resnet18_sized_with_outputs_of_order_one() -> None:
    model = _build_resnet18(seed=0)
    assert sum(p.numel() for p in model.parameters()) == 11_689_512
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 20  # stem + 16 in the blocks + 3 downsampling shortcuts
    with torch.no_grad():
        logits = model(torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1)))
    assert logits.shape == (2, 1000)
    assert float(logits.std()) > 0.01 and float(logits.abs().max()) < 10.0


def test_encoder_exports_verifies_and_has_dynamic_batch_and_sequence(
    exported: dict[str, ExportCheck],
) -> None:
    check = exported[ENCODER_NAME]
    assert check.batch_sizes_checked == (1, 2)
    assert check.max_abs_diff <= check.tolerance_abs
    info = inspect_onnx(check.onnx_path)
    assert info.batched and info.opset == 17
    assert _spec(info, "inputs") == [(name, "TYPE_INT64", (-1,)) for name in ENCODER_INPUTS]
    assert _spec(info, "outputs") == [
        ("last_hidden_state", "TYPE_FP32", (-1, ENCODER_HIDDEN)),
        ("pooler_output", "TYPE_FP32", (ENCODER_HIDDEN,)),
    ]
    graph = onnx.load(str(check.onnx_path), load_external_data=False).graph
    for value in [*graph.input, *graph.output]:
        dims = [d.dim_param for d in value.type.tensor_type.shape.dim]
        assert dims[0] == "batch"
        if value.name != "pooler_output":
            assert dims[1] == "sequence"


def test_encoder_embedding_gathers_read_initializer_tables(
    exported: dict[str, ExportCheck],
) -> None:
    graph = onnx.load(str(exported[ENCODER_NAME].onnx_path)).graph
    rows = {init.name: init.dims[0] for init in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    # index -> rows of the initializer table a Gather (axis 0) reads with it
    lookups = {
        node.input[1]: rows[node.input[0]]
        for node in graph.node
        if node.op_type == "Gather" and node.input[0] in rows
    }
    assert lookups.pop("input_ids") == ENCODER_VOCAB_SIZE
    assert lookups.pop("token_type_ids") == ENCODER_TOKEN_TYPES
    # the third table: positions, indexed by Unsqueeze(Range(0, sequence)), not by an input
    ((positions, position_rows),) = lookups.items()
    assert position_rows == ENCODER_MAX_POSITIONS
    assert producers[positions].op_type == "Unsqueeze"
    assert producers[producers[positions].input[0]].op_type == "Range"
    # the mask feeds no Gather: it only becomes an additive attention bias
    mask_consumers = [n.op_type for n in graph.node if "attention_mask" in n.input]
    assert mask_consumers == ["Unsqueeze"]


def test_encoder_masks_padding_in_onnxruntime(exported: dict[str, ExportCheck]) -> None:
    session = ort.InferenceSession(
        str(exported[ENCODER_NAME].onnx_path), providers=["CPUExecutionProvider"]
    )
    feeds = encoder_inputs(np.random.default_rng(1), 2, 40, (0, 10), ENCODER_VOCAB_SIZE)
    hidden, pooled = session.run(None, feeds)
    assert hidden.shape == (2, 40, ENCODER_HIDDEN) and pooled.shape == (2, ENCODER_HIDDEN)
    assert np.isfinite(hidden).all() and np.abs(pooled).max() <= 1.0

    changed = {name: value.copy() for name, value in feeds.items()}
    changed["input_ids"][1, 30:] = 1234
    changed["token_type_ids"][1, 30:] = 1
    hidden_changed, pooled_changed = session.run(None, changed)
    # padded tokens are invisible to the unpadded ones ...
    np.testing.assert_array_equal(hidden_changed[:, :30], hidden[:, :30])
    np.testing.assert_array_equal(pooled_changed, pooled)
    # ... because of the mask: unmasked, the same change moves every position
    changed["attention_mask"][:] = 1
    hidden_unmasked, _ = session.run(None, changed)
    assert np.abs(hidden_unmasked[1, :30] - hidden[1, :30]).min(axis=-1).max() > 0


def test_encoder_shape_counts_match_the_torch_model() -> None:
    shape = EncoderShape()
    model = _build_encoder(shape, seed=0)
    assert sum(p.numel() for p in model.parameters()) == shape.parameters == 22_713_216
    assert shape.macs_per_sample(128) == 1_434_599_424


def test_exports_are_bit_identical_with_the_same_seed(
    exported: dict[str, ExportCheck], tmp_path: Path
) -> None:
    for name, first in exported.items():
        again = export_builtin(name, tmp_path / f"{name}.onnx")
        assert _sha256(again.onnx_path) == _sha256(first.onnx_path), name


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning")
def test_export_verified_raises_on_a_mismatch(tmp_path: Path) -> None:
    class TraceDependent(torch.nn.Module):
        """Traced with zeros (else branch, x3); eager on ones takes the other branch (x2)."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 if bool(x.sum() > 0) else x * 3

    cases = [VerifyCase({"x": np.ones((1, 4), dtype=np.float32)})]
    with pytest.raises(ModelError, match="differs"):
        export_verified(
            TraceDependent().eval(),
            tmp_path / "bad.onnx",
            {"x": np.zeros((1, 4), dtype=np.float32)},
            ["y"],
            {"x": {0: "batch"}, "y": {0: "batch"}},
            cases,
            1e-4,
            (1,),
        )
