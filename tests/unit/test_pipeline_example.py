"""The built-in pipeline repository (``models/pipeline_example.py``), written with the tiny CNN:
configurations through Triton's schema, an ensemble whose steps chain, a BLS model whose callees
are literals, a reference the step code reproduces, and no writing into someone else's folder."""

from __future__ import annotations

import ast
import filecmp
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from tritonlab.errors import ConfigError, ModelError
from tritonlab.models.pipeline_example import (
    MARKER_FILE,
    PIPELINE_CNNS,
    STEP_SOURCES,
    PipelineReference,
    PipelineRepository,
    compute_reference,
    model_configs,
    write_pipeline_repository,
)
from tritonlab.models.pipeline_steps import STEPS_DIR, postprocess, preprocess
from tritonlab.models.resnet18 import RESNET18_NAME
from tritonlab.models.tiny_cnn import TINY_CNN_CLASSES, TINY_CNN_NAME, TINY_CNN_PIXELS

HW = (24, 40)
TOP_K = 3
MAX_BATCH = 4


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> PipelineRepository:
    root = tmp_path_factory.mktemp("pipeline") / "models"
    return write_pipeline_repository(
        root, cnn=TINY_CNN_NAME, image_hw=HW, top_k=TOP_K, max_batch_size=MAX_BATCH, seed=3
    )


def _config(repo: PipelineRepository, name: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(repo.config_path(name).read_text(), model_config_pb2.ModelConfig())


def _signature(tensor: Any) -> tuple[int, list[int]]:
    return tensor.data_type, list(tensor.dims)


def test_every_model_folder_holds_a_valid_config_and_its_file(repo: PipelineRepository) -> None:
    folders = sorted(p.name for p in repo.root.iterdir() if p.is_dir())
    assert folders == sorted(repo.models_to_load)
    for name in repo.models_to_load:
        config = _config(repo, name)
        assert config.name == name
        assert config.max_batch_size == MAX_BATCH
    for name, source in STEP_SOURCES.items():
        assert _config(repo, name).backend == "python"
        assert filecmp.cmp(repo.folder(name) / "1" / "model.py", STEPS_DIR / source, shallow=False)
    cnn = _config(repo, "cnn")
    assert (cnn.backend, cnn.default_model_filename) == ("onnxruntime", "model.onnx")
    assert (repo.folder("cnn") / "1" / "model.onnx").is_file()
    assert [(g.count, g.kind) for g in cnn.instance_group] == [
        (1, model_config_pb2.ModelInstanceGroup.KIND_CPU)
    ]
    assert cnn.parameters["intra_op_thread_count"].string_value == "1"
    assert _signature(cnn.input[0]) == (model_config_pb2.TYPE_FP32, [3, 32, 32])
    pre = _config(repo, "preprocess")
    assert _signature(pre.input[0]) == (model_config_pb2.TYPE_UINT8, [*HW, 3])
    ensemble = _config(repo, repo.ensemble_model)
    assert ensemble.platform == "ensemble"
    assert [t.name for t in ensemble.input] == [repo.input_name]
    assert [t.name for t in ensemble.output] == list(repo.output_names)
    assert [_signature(t) for t in ensemble.output] == [
        (model_config_pb2.TYPE_INT64, [TOP_K]),
        (model_config_pb2.TYPE_FP32, [TOP_K]),
    ]


def test_the_ensemble_steps_chain_tensors_that_exist_with_matching_types(
    repo: PipelineRepository,
) -> None:
    ensemble = _config(repo, repo.ensemble_model)
    # ensemble tensor name -> (data type, dims), filled as the steps produce them
    known = {t.name: _signature(t) for t in ensemble.input}
    steps = ensemble.ensemble_scheduling.step
    assert [s.model_name for s in steps] == list(repo.step_models)
    for step in steps:
        model = _config(repo, step.model_name)
        inputs = {t.name: _signature(t) for t in model.input}
        outputs = {t.name: _signature(t) for t in model.output}
        assert set(step.input_map) == set(inputs), step.model_name
        for model_input, tensor in step.input_map.items():
            assert known[tensor] == inputs[model_input], (step.model_name, model_input)
        assert set(step.output_map) <= set(outputs), step.model_name
        for model_output, tensor in step.output_map.items():
            known[tensor] = outputs[model_output]
    for output in ensemble.output:
        assert known[output.name] == _signature(output)
    bls = _config(repo, repo.bls_model)
    assert [_signature(t) for t in bls.input] == [_signature(t) for t in ensemble.input]
    assert [_signature(t) for t in bls.output] == [_signature(t) for t in ensemble.output]


def test_the_bls_model_names_the_models_it_calls_as_string_literals(
    repo: PipelineRepository,
) -> None:
    tree = ast.parse((repo.folder(repo.bls_model) / "1" / "model.py").read_text())
    called = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "InferenceRequest"
        ):
            (name,) = [k.value for k in node.keywords if k.arg == "model_name"]
            assert isinstance(name, ast.Constant) and isinstance(name.value, str)
            called.append(name.value)
    assert called == list(repo.step_models)


def test_the_reference_is_what_the_step_code_computes(repo: PipelineRepository) -> None:
    ref = PipelineReference.load(repo.reference_path)
    assert repo.reference_path.parent == repo.root
    assert ref.images.dtype == np.uint8 and ref.images.shape == (2, *repo.image_hw, 3)
    again = compute_reference(
        ref.images, repo.folder("cnn") / "1" / "model.onnx", repo.cnn_pixels, repo.top_k
    )
    for field in ("pixels", "logits", "topk_ids", "topk_scores"):
        np.testing.assert_array_equal(getattr(ref, field), getattr(again, field), err_msg=field)
    assert ref.pixels.shape == (2, 3, TINY_CNN_PIXELS, TINY_CNN_PIXELS)
    assert ref.logits.shape == (2, TINY_CNN_CLASSES)
    # softmax is monotonic: the top-k ids are the largest logits, highest first
    np.testing.assert_array_equal(ref.topk_ids, np.argsort(-ref.logits, axis=1)[:, :TOP_K])
    assert ref.topk_ids.dtype == np.int64 and ref.topk_scores.dtype == np.float32
    assert np.all(np.diff(ref.topk_scores, axis=1) <= 0) and np.all(ref.topk_scores.sum(1) <= 1)


def test_bilinear_resize_keeps_sizes_and_linear_ramps() -> None:
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, size=(2, 9, 7, 3), dtype=np.uint8)
    np.testing.assert_array_equal(preprocess.resize_bilinear(frames, 9, 7), frames)
    # a ramp along the columns stays a ramp away from the clamped borders (half-pixel centres)
    ramp = np.broadcast_to(np.arange(16, dtype=np.uint8)[None, None, :, None] * 10, (1, 4, 16, 3))
    out = preprocess.resize_bilinear(ramp, 4, 8)[0, 0, 1:-1, 0]
    np.testing.assert_allclose(out, 10 * (np.arange(1, 7) * 2 + 0.5), rtol=1e-6)
    pixels = preprocess.preprocess(frames, 5, 6)
    assert pixels.shape == (2, 3, 5, 6) and pixels.dtype == np.float32
    white = preprocess.preprocess(np.full((1, 4, 4, 3), 255, dtype=np.uint8), 2, 2)
    expected = (1 - preprocess.IMAGENET_MEAN) / preprocess.IMAGENET_STD
    np.testing.assert_allclose(white[0, :, 0, 0], expected, rtol=1e-6)


class _Tensor:
    def __init__(self, name: str, array: np.ndarray) -> None:
        self._name, self._array = name, array

    def as_numpy(self) -> np.ndarray:
        return self._array


class _Response:
    def __init__(self, output_tensors: list[_Tensor] | None = None, error: str = "") -> None:
        self.outputs = {t._name: t.as_numpy() for t in output_tensors or []}
        self.error = error


def _fake_backend() -> types.SimpleNamespace:
    """The part of ``triton_python_backend_utils`` the step models use; a request is a dict."""
    return types.SimpleNamespace(
        Tensor=_Tensor,
        InferenceResponse=_Response,
        TritonError=str,
        get_input_tensor_by_name=lambda request, name: _Tensor(name, request[name]),
    )


def test_the_step_models_answer_each_request_of_a_list_on_its_own(
    repo: PipelineRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", _fake_backend())
    ref = PipelineReference.load(repo.reference_path)
    pre = preprocess.TritonPythonModel()
    pre.initialize({"model_config": _json_config(repo, "preprocess")})
    one, two, bad = (
        {"IMAGE": ref.images[:1]},
        {"IMAGE": ref.images},
        {"IMAGE": ref.images[..., :2]},
    )
    answers = pre.execute([one, two, bad])
    np.testing.assert_array_equal(answers[0].outputs["PIXELS"], ref.pixels[:1])
    np.testing.assert_array_equal(answers[1].outputs["PIXELS"], ref.pixels)
    assert "preprocess" in answers[2].error and not answers[2].outputs
    post = postprocess.TritonPythonModel()
    post.initialize({"model_config": _json_config(repo, "postprocess")})
    answers = post.execute([{"LOGITS": ref.logits[1:]}, {"LOGITS": ref.logits}])
    np.testing.assert_array_equal(answers[0].outputs["TOPK_IDS"], ref.topk_ids[1:])
    np.testing.assert_array_equal(answers[1].outputs["TOPK_SCORES"], ref.topk_scores)


def _json_config(repo: PipelineRepository, name: str) -> str:
    from google.protobuf import json_format

    return json_format.MessageToJson(_config(repo, name), preserving_proto_field_name=True)


def test_a_folder_it_did_not_make_is_refused_and_one_it_made_is_rewritten(
    tmp_path: Path, repo: PipelineRepository
) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    with pytest.raises(ConfigError, match="did not make it"):
        write_pipeline_repository(foreign, cnn=TINY_CNN_NAME)
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        write_pipeline_repository(a_file, cnn=TINY_CNN_NAME)
    assert (repo.root / MARKER_FILE).is_file()
    again = write_pipeline_repository(
        repo.root, cnn=TINY_CNN_NAME, image_hw=HW, top_k=TOP_K, max_batch_size=MAX_BATCH, seed=3
    )
    assert again == repo


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"cnn": "vgg"}, ModelError, "choose one of: resnet18_cnn, tiny"),
        ({"cnn": TINY_CNN_NAME, "top_k": 11}, ConfigError, r"top_k must be in 1\.\.10"),
        ({"cnn": TINY_CNN_NAME, "max_batch_size": 0}, ConfigError, "max_batch_size"),
        ({"cnn": TINY_CNN_NAME, "image_hw": (0, 8)}, ConfigError, "image_hw"),
    ],
)
def test_bad_settings_are_refused_before_anything_is_written(
    tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        write_pipeline_repository(tmp_path / "repo", **kwargs)
    assert not (tmp_path / "repo").exists()


def test_the_resnet_configs_take_224_pixels_and_give_1000_classes() -> None:
    configs = model_configs(PIPELINE_CNNS[RESNET18_NAME], (240, 320), 5, 8)
    assert configs["cnn"]["input"][0]["dims"] == [3, 224, 224]
    assert configs["cnn"]["output"][0]["dims"] == [1000]
    assert configs["preprocess"]["output"][0]["dims"] == [3, 224, 224]
    assert configs["postprocess"]["input"][0]["dims"] == [1000]
