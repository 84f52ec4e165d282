"""repository/: config.pbtxt through protobuf, variant validation, repository layout."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from tritonlab.errors import ConfigError
from tritonlab.models.inspect import OnnxModelInfo, TensorSpec, inspect_onnx
from tritonlab.repository.config import (
    MODEL_FILENAME,
    build_model_config,
    config_dict,
    config_to_text,
    parse_config_text,
    read_config,
    write_config,
)
from tritonlab.repository.layout import build_repository
from tritonlab.repository.variants import (
    ServingVariant,
    seed_comparison_variants,
    variant_model_name,
)


def _info(batched: bool = True, path: Path = Path("model.onnx")) -> OnnxModelInfo:
    return OnnxModelInfo(
        path=path,
        inputs=(TensorSpec("input", "TYPE_FP32", (256,)), TensorSpec("ids", "TYPE_INT64", (-1,))),
        outputs=(TensorSpec("output", "TYPE_FP16", (10,)),),
        batched=batched,
        opset=17,
        file_size_bytes=123,
    )


BATCH_5MS = ServingVariant(
    "batch_5ms",
    "batching 5 ms",
    dynamic_batching=True,
    max_queue_delay_us=5000,
    preferred_batch_sizes=(4, 8),
    max_batch_size=32,
    instance_count=2,
    intra_op_threads=2,
    extra_parameters={"custom_key": "v"},
)


def test_config_dict_fields() -> None:
    config = config_dict(_info(), BATCH_5MS, "m__batch_5ms")
    assert config["name"] == "m__batch_5ms"
    assert config["backend"] == "onnxruntime"
    assert config["default_model_filename"] == MODEL_FILENAME
    assert config["max_batch_size"] == 32
    assert config["input"] == [
        {"name": "input", "data_type": "TYPE_FP32", "dims": [256]},
        {"name": "ids", "data_type": "TYPE_INT64", "dims": [-1]},
    ]
    assert config["output"] == [{"name": "output", "data_type": "TYPE_FP16", "dims": [10]}]
    assert config["instance_group"] == [{"count": 2, "kind": "KIND_CPU"}]
    assert config["dynamic_batching"] == {
        "max_queue_delay_microseconds": 5000,
        "preferred_batch_size": [4, 8],
    }
    assert config["parameters"] == {
        "custom_key": {"string_value": "v"},
        "intra_op_thread_count": {"string_value": "2"},
    }


def test_baseline_has_no_dynamic_batching() -> None:
    baseline = seed_comparison_variants()[0]
    config = config_dict(_info(), baseline, "m")
    assert "dynamic_batching" not in config
    assert config["max_batch_size"] == 64
    proto = build_model_config(_info(), baseline, "m")
    assert not proto.HasField("dynamic_batching")


def test_zero_delay_batching_still_writes_dynamic_batching() -> None:
    variant = seed_comparison_variants()[3]
    assert variant.name == "batch_0ms_x1"
    proto = build_model_config(_info(), variant, "m")
    assert proto.HasField("dynamic_batching")
    assert proto.dynamic_batching.max_queue_delay_microseconds == 0
    assert list(proto.dynamic_batching.preferred_batch_size) == []


def test_no_threads_no_parameters() -> None:
    variant = ServingVariant("plain", "plain", intra_op_threads=None)
    assert "parameters" not in config_dict(_info(), variant, "m")


def test_round_trip_through_text() -> None:
    proto = build_model_config(_info(), BATCH_5MS, "m__batch_5ms")
    text = config_to_text(proto)
    assert parse_config_text(text) == proto
    assert 'backend: "onnxruntime"' in text
    assert "max_queue_delay_microseconds: 5000" in text
    assert "preferred_batch_size: 4" in text
    assert "preferred_batch_size: 8" in text
    assert "kind: KIND_CPU" in text
    assert "count: 2" in text
    assert 'key: "intra_op_thread_count"' in text
    assert "data_type: TYPE_INT64" in text
    assert "dims: -1" in text


def test_protobuf_fields_match_variant() -> None:
    proto = build_model_config(_info(), BATCH_5MS, "m__batch_5ms")
    assert proto.max_batch_size == 32
    assert len(proto.instance_group) == 1
    assert proto.instance_group[0].count == 2
    assert proto.instance_group[0].kind == proto.instance_group[0].KIND_CPU
    assert list(proto.dynamic_batching.preferred_batch_size) == [4, 8]
    assert proto.parameters["intra_op_thread_count"].string_value == "2"
    assert [i.name for i in proto.input] == ["input", "ids"]
    assert list(proto.input[1].dims) == [-1]


def test_non_batched_model_gets_max_batch_size_zero() -> None:
    variant = ServingVariant("fixed", "fixed", max_batch_size=0)
    proto = build_model_config(_info(batched=False), variant, "m")
    assert proto.max_batch_size == 0
    assert parse_config_text(config_to_text(proto)) == proto


def test_parse_config_text_error_names_source() -> None:
    with pytest.raises(ConfigError, match=r"^my\.pbtxt: "):
        parse_config_text("max_batch_size: banana", source="my.pbtxt")
    with pytest.raises(ConfigError):
        parse_config_text('unknown_field: "x"')


def test_read_config_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config\.pbtxt"):
        read_config(tmp_path / "config.pbtxt")


def test_write_config_is_atomic_and_readable(tmp_path: Path) -> None:
    proto = build_model_config(_info(), BATCH_5MS, "m")
    path = tmp_path / "config.pbtxt"
    write_config(proto, path)
    assert read_config(path) == proto
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.pbtxt"]


@pytest.mark.parametrize(
    ("changes", "model_batches", "field_name"),
    [
        (
            {"max_queue_delay_us": -1, "dynamic_batching": True},
            True,
            "max_queue_delay_microseconds",
        ),
        (
            {"dynamic_batching": True, "preferred_batch_sizes": (128,), "max_batch_size": 64},
            True,
            "preferred_batch_size",
        ),
        ({"dynamic_batching": True, "preferred_batch_sizes": (0,)}, True, "preferred_batch_size"),
        ({"instance_count": 0}, True, "instance_group count"),
        ({"instance_kind": "KIND_TPU"}, True, "instance_group kind"),
        ({"max_queue_delay_us": 100}, True, "dynamic_batching"),
        ({"preferred_batch_sizes": (4,)}, True, "dynamic_batching"),
        ({"dynamic_batching": True, "max_batch_size": 0}, True, "max_batch_size > 0"),
        ({"dynamic_batching": True}, False, "cannot batch its requests"),
        ({"max_batch_size": -1}, True, "max_batch_size must be >= 0"),
        ({"name": "Bad-Name"}, True, "name"),
        ({"name": "_leading"}, True, "name"),
        ({"intra_op_threads": -1}, True, "intra_op_thread_count"),
    ],
)
def test_validate_rejects(changes: dict[str, object], model_batches: bool, field_name: str) -> None:
    variant = dataclasses.replace(ServingVariant("v1", "v"), **changes)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as exc:
        variant.validate(model_batches=model_batches)
    message = str(exc.value)
    assert field_name in message
    assert f"variant '{variant.name}'" in message
    assert "\n" not in message


def test_validate_accepts_good_variants() -> None:
    for variant in seed_comparison_variants():
        variant.validate(model_batches=True)
    BATCH_5MS.validate()
    ServingVariant("fixed", "fixed", max_batch_size=0).validate(model_batches=False)
    ServingVariant("gpu", "gpu", instance_kind="KIND_GPU").validate()


def test_build_model_config_validates() -> None:
    bad = ServingVariant("v", "v", instance_count=0)
    with pytest.raises(ConfigError, match="instance_group count"):
        build_model_config(_info(), bad, "m")


def test_variant_model_name() -> None:
    baseline, batch5, *_ = seed_comparison_variants()
    assert variant_model_name("simple_mlp", baseline) == "simple_mlp"
    assert variant_model_name("simple_mlp", batch5) == "simple_mlp__batch_5ms_x1"


def test_variant_dict_round_trip() -> None:
    data = BATCH_5MS.to_dict()
    assert data["preferred_batch_sizes"] == [4, 8]
    assert ServingVariant.from_dict(data) == BATCH_5MS


def test_seed_variants_are_single_variable_changes() -> None:
    variants = {v.name: v for v in seed_comparison_variants(max_batch_size=16)}
    assert list(variants) == ["baseline", "batch_5ms_x1", "batch_5ms_x2", "batch_0ms_x1"]
    assert all(v.max_batch_size == 16 for v in variants.values())
    assert not variants["baseline"].dynamic_batching
    assert variants["batch_5ms_x1"].max_queue_delay_us == 5000
    assert variants["batch_5ms_x2"].instance_count == 2
    assert variants["batch_0ms_x1"].dynamic_batching
    assert variants["batch_0ms_x1"].max_queue_delay_us == 0


def _onnx_file(path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_build_repository_layout(tmp_path: Path) -> None:
    onnx_path = _onnx_file(tmp_path / "m.onnx")
    info = inspect_onnx(onnx_path)
    repo = tmp_path / "repo" / "models"
    models = build_repository(repo, info, "m", seed_comparison_variants())
    assert [m.model_name for m in models] == [
        "m",
        "m__batch_5ms_x1",
        "m__batch_5ms_x2",
        "m__batch_0ms_x1",
    ]
    assert sorted(p.name for p in repo.iterdir()) == sorted(m.model_name for m in models)
    for model in models:
        assert model.folder == repo / model.model_name
        assert model.config_path == model.folder / "config.pbtxt"
        model_file = model.folder / "1" / "model.onnx"
        assert model_file.read_bytes() == onnx_path.read_bytes()
        config = read_config(model.config_path)
        assert config.name == model.model_name
        assert config == build_model_config(info, model.variant, model.model_name)
    second = read_config(models[2].config_path)
    assert second.instance_group[0].count == 2
    assert second.dynamic_batching.max_queue_delay_microseconds == 5000
    assert list(second.input[0].dims) == [4]

    # Re-running over the same folder is idempotent.
    again = build_repository(repo, info, "m", seed_comparison_variants())
    assert [m.model_name for m in again] == [m.model_name for m in models]
    assert read_config(again[2].config_path) == second


def test_build_repository_validates_before_writing(tmp_path: Path) -> None:
    info = inspect_onnx(_onnx_file(tmp_path / "m.onnx"))
    variants = [*seed_comparison_variants(), ServingVariant("bad", "bad", instance_count=0)]
    repo = tmp_path / "models"
    with pytest.raises(ConfigError, match="instance_group count"):
        build_repository(repo, info, "m", variants)
    assert not repo.exists()


def test_build_repository_rejects_duplicate_names(tmp_path: Path) -> None:
    info = inspect_onnx(_onnx_file(tmp_path / "m.onnx"))
    variants = [ServingVariant("baseline", "a"), ServingVariant("baseline", "b")]
    with pytest.raises(ValueError, match="unique"):
        build_repository(tmp_path / "models", info, "m", variants)
