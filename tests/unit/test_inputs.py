"""Shapes and values derived from graphs: token ids, masks, dynamic dims, no batch axis, dtypes."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import onnx_factory as factory
import onnxruntime as ort
import pytest

from tritonlab.errors import ModelError
from tritonlab.experiments.plan import (
    LoadPoint,
    PlanBasics,
    compute_plan,
    for_unbatched_model,
    seed_comparison_plan,
)
from tritonlab.models.input_graph import parse_shape_args
from tritonlab.models.inputs import (
    DEFAULT_DYNAMIC_DIM,
    ModelInputs,
    derive_inputs,
    with_dynamic_dim,
)
from tritonlab.models.inspect import OnnxModelInfo, inspect_onnx
from tritonlab.models.shape_probe import probe_inputs
from tritonlab.perf.settings import PerfSettings


def _info(builder, tmp_path: Path) -> OnnxModelInfo:  # type: ignore[no-untyped-def]
    return inspect_onnx(builder(tmp_path / f"{builder.__name__}.onnx"))


def _rules(inputs: ModelInputs) -> dict[str, tuple[str, float | None, float | None]]:
    return {r.name: (r.kind, r.low, r.high) for r in inputs.rules}


def _runs_in_onnxruntime(info: OnnxModelInfo, inputs: ModelInputs, batch: int = 3) -> None:
    session = ort.InferenceSession(str(info.path), providers=["CPUExecutionProvider"])
    session.run(None, inputs.batch(batch))


def test_token_ids_stay_inside_the_embedding_and_masks_are_ones(tmp_path: Path) -> None:
    info = _info(factory.token_classifier, tmp_path)
    inputs = derive_inputs(info)
    assert _rules(inputs) == {
        "input_ids": ("int_range", 0, 1000),
        "attention_mask": ("ones", None, None),
        "token_type_ids": ("zeros", None, None),
    }
    assert inputs.shapes == {name: (DEFAULT_DYNAMIC_DIM,) for name in inputs.shapes}
    arrays = inputs.batch(4)
    assert arrays["input_ids"].dtype == np.int64 and arrays["input_ids"].shape == (4, 128)
    assert arrays["input_ids"].min() >= 0 and arrays["input_ids"].max() < 1000
    assert arrays["input_ids"].max() >= 8, "ids should span the table, not a tiny range"
    assert (arrays["attention_mask"] == 1).all() and (arrays["token_type_ids"] == 0).all()
    _runs_in_onnxruntime(info, inputs)
    assert "sequence" in inputs.dims_note and "128" in inputs.dims_note


def test_the_default_random_ids_would_fail(tmp_path: Path) -> None:
    """The counter-example: ids beyond the table are what the bound protects against."""
    info = _info(factory.token_classifier, tmp_path)
    feed = derive_inputs(info).batch(1)
    feed["input_ids"] = np.full_like(feed["input_ids"], 1000)
    session = ort.InferenceSession(str(info.path), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match="out of"):
        session.run(None, feed)


def test_index_through_a_cast_is_bounded(tmp_path: Path) -> None:
    info = _info(factory.cast_before_gather, tmp_path)
    inputs = derive_inputs(info)
    assert _rules(inputs) == {"ids": ("int_range", 0, 300)}
    assert inputs.batch(2)["ids"].dtype == np.int32
    _runs_in_onnxruntime(info, inputs)


def test_position_ids_are_positions_and_cap_the_default_length(tmp_path: Path) -> None:
    info = _info(factory.position_ids_model, tmp_path)
    inputs = derive_inputs(info)
    assert inputs.shapes == {"input_ids": (64,), "position_ids": (64,)}
    assert "capped at 64" in inputs.dims_note
    positions = inputs.batch(2)["position_ids"]
    assert (positions[0] == np.arange(64)).all() and (positions[1] == np.arange(64)).all()
    _runs_in_onnxruntime(info, inputs)
    with pytest.raises(ModelError, match="64-row table"):
        derive_inputs(info, {"position_ids": (100,)})


def test_shape_sets_a_shared_dim_for_every_input(tmp_path: Path) -> None:
    info = _info(factory.token_classifier, tmp_path)
    inputs = derive_inputs(info, parse_shape_args(["input_ids:32"]))
    assert inputs.shapes == {"input_ids": (32,), "attention_mask": (32,), "token_type_ids": (32,)}
    assert "sequence = 32" in inputs.dims_note
    _runs_in_onnxruntime(info, inputs)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["input_ids:32", "attention_mask:64"], "two sizes"),
        (["nope:3"], "not a model input"),
        (["input_ids:3,4"], "1 non-batch dims"),
    ],
)
def test_bad_shapes_are_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    info = _info(factory.token_classifier, tmp_path)
    with pytest.raises(ModelError, match=message) as exc:
        derive_inputs(info, parse_shape_args(args))
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("value", ["input_ids", "input_ids:", "input_ids:0", "x:a,b"])
def test_shape_syntax_errors(value: str) -> None:
    with pytest.raises(ModelError, match="NAME:D1,D2"):
        parse_shape_args([value])


def test_fixed_dims_cannot_be_overridden(tmp_path: Path) -> None:
    info = _info(factory.fp16_mlp, tmp_path)
    with pytest.raises(ModelError, match="fixed"):
        derive_inputs(info, {"x": (16,)})


def test_no_batch_axis_sends_the_fixed_shape(tmp_path: Path) -> None:
    info = _info(factory.no_batch_axis, tmp_path)
    assert not info.batched
    inputs = derive_inputs(info)
    assert inputs.shapes == {"x": (3, 8)} and not inputs.batched
    assert inputs.batch(5)["x"].shape == (3, 8), "no batch axis: the batch size does not apply"
    assert inputs.describe()[0].startswith("`x` FP32 [3, 8]")
    _runs_in_onnxruntime(info, inputs)


def test_dtypes_fp16_bool_int32_uint8(tmp_path: Path) -> None:
    fp16 = derive_inputs(_info(factory.fp16_mlp, tmp_path))
    assert fp16.batch(2)["x"].dtype == np.float16
    mixed_info = _info(factory.mixed_dtypes, tmp_path)
    mixed = derive_inputs(mixed_info)
    arrays = mixed.batch(3)
    assert arrays["flag"].dtype == np.bool_
    assert arrays["count"].dtype == np.int32 and arrays["pixels"].dtype == np.uint8
    assert _rules(mixed)["count"] == ("int_range", 0, 8)
    _runs_in_onnxruntime(mixed_info, mixed)


@pytest.mark.parametrize(
    ("builder", "message"), [(factory.string_input, "STRING"), (factory.bf16_input, "BFLOAT16")]
)
def test_unsupported_input_types_are_refused_in_one_line(
    tmp_path: Path, builder: object, message: str
) -> None:
    with pytest.raises(ModelError, match=message) as exc:
        _info(builder, tmp_path)
    assert "\n" not in str(exc.value)


def test_perf_data_json_matches_the_rules(tmp_path: Path) -> None:
    info = _info(factory.token_classifier, tmp_path)
    inputs = derive_inputs(info, {"input_ids": (16,)})
    path = inputs.write_perf_data(tmp_path / "data.json")
    data = json.loads(path.read_text())["data"]
    assert len(data) == inputs.perf_entries() > 1
    for entry in data:
        ids = np.frombuffer(base64.b64decode(entry["input_ids"]["b64"]), dtype=np.int64)
        assert entry["input_ids"]["shape"] == [16] and ids.shape == (16,)
        assert ids.min() >= 0 and ids.max() < 1000
        mask = np.frombuffer(base64.b64decode(entry["attention_mask"]["b64"]), dtype=np.int64)
        assert (mask == 1).all()
    settings = PerfSettings("m", "u", input_shapes={"input_ids": (16,)}, input_data=str(path))
    args = settings.to_args("out.csv")
    assert args[args.index("--input-data") + 1] == str(path)
    assert "input_ids:16" in args


def test_large_inputs_keep_the_data_file_small(tmp_path: Path) -> None:
    info = _info(factory.token_classifier, tmp_path)
    inputs = derive_inputs(info, {"input_ids": (200_000,)})
    assert inputs.perf_entries() == 1


def test_user_samples_from_npz_and_perf_json(tmp_path: Path) -> None:
    info = _info(factory.token_classifier, tmp_path)
    ids = np.arange(3 * 10, dtype=np.int64).reshape(3, 10)
    np.savez(
        tmp_path / "samples.npz",
        input_ids=ids,
        attention_mask=np.ones_like(ids),
        token_type_ids=np.zeros_like(ids),
    )
    from_npz = derive_inputs(info, input_data=tmp_path / "samples.npz")
    assert from_npz.shapes["input_ids"] == (10,)
    assert from_npz.rules[0].kind == "user" and from_npz.rules[0].high == 29
    assert (from_npz.batch(4)["input_ids"][3] == ids[0]).all(), "samples cycle"
    path = from_npz.write_perf_data(tmp_path / "perf.json")
    again = derive_inputs(info, input_data=path)
    assert (again.batch(3)["input_ids"] == ids).all()
    _runs_in_onnxruntime(info, again)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"input_ids": np.zeros((2, 4), dtype=np.int64)}, "no array for input"),
        (
            {
                "input_ids": np.zeros((2, 4), dtype=np.float64),
                "attention_mask": np.zeros((2, 4), dtype=np.int64),
                "token_type_ids": np.zeros((2, 4), dtype=np.int64),
            },
            "save it as int64",
        ),
    ],
)
def test_bad_user_samples(tmp_path: Path, content: dict[str, object], message: str) -> None:
    info = _info(factory.token_classifier, tmp_path)
    np.savez(tmp_path / "bad.npz", **content)  # type: ignore[arg-type]
    with pytest.raises(ModelError, match=message):
        derive_inputs(info, input_data=tmp_path / "bad.npz")


def test_sequence_length_load_resizes_every_dynamic_dim(tmp_path: Path) -> None:
    info = _info(factory.token_classifier, tmp_path)
    longer = with_dynamic_dim(derive_inputs(info), info, 512)
    assert set(longer.shapes.values()) == {(512,)}
    load = LoadPoint(sequence_length=512)
    assert load.key == "grpc_b1_c8_s512" and "sequence 512" in load.label
    assert "sequence_length" not in LoadPoint().to_dict(), "old plans keep their fingerprint"


def test_unbatched_models_drop_batching_with_a_reason() -> None:
    plan = for_unbatched_model(seed_comparison_plan(PlanBasics("m")), cores=2)
    assert [v.name for v in plan.variants] == ["baseline", "instances_2"]
    assert all(v.max_batch_size == 0 and not v.dynamic_batching for v in plan.variants)
    assert "cannot batch" in plan.notes[-1] and "batch_5ms_x1" in plan.notes[-1]
    plan.validate(model_batches=False)
    compute = for_unbatched_model(compute_plan(PlanBasics("m"), cores=2), cores=2)
    assert [v.name for v in compute.variants] == ["baseline", "threads_2", "instances_2"]


def test_compute_plan_is_threads_by_instances() -> None:
    plan = compute_plan(PlanBasics("m"), cores=4)
    by_name = {v.name: v for v in plan.variants}
    assert by_name["threads_4"].intra_op_threads == 4 and by_name["threads_4"].instance_count == 1
    assert by_name["instances_4"].instance_count == 4
    assert by_name["instances_4"].intra_op_threads == 1
    assert plan.loads[0].concurrency == 8
    plan.validate()


def _samples(path: Path) -> set[bytes]:
    return {
        base64.b64decode(t["b64"])
        for entry in json.loads(path.read_text())["data"]
        for t in entry.values()
    }


def test_fresh_inputs_draw_new_samples_for_every_cell(tmp_path: Path) -> None:
    """A plan's fresh_inputs: every call (cell) rewrites the data file with samples no earlier
    cell sent, as many as fresh_entries() says; without it the file is written once."""
    from tritonlab.experiments.session import InputFiles

    info = _info(factory.fp16_mlp, tmp_path)
    inputs = derive_inputs(info)
    fresh = InputFiles(inputs, info, tmp_path / "fresh", fresh=True)
    first = Path(fresh.for_load(LoadPoint()).data_file or "")
    one = _samples(first)
    two = _samples(Path(fresh.for_load(LoadPoint()).data_file or ""))
    assert len(one) == len(two) == inputs.fresh_entries() > inputs.perf_entries()
    assert not one & two
    fixed = InputFiles(inputs, info, tmp_path / "fixed")
    path = Path(fixed.for_load(LoadPoint()).data_file or "")
    written = path.stat().st_mtime_ns
    fixed.for_load(LoadPoint())
    assert path.stat().st_mtime_ns == written
    assert len(_samples(path)) == inputs.perf_entries()


def test_fresh_inputs_refuse_the_users_samples(tmp_path: Path) -> None:
    from tritonlab.experiments.session import InputFiles

    info = _info(factory.fp16_mlp, tmp_path)
    inputs = derive_inputs(info)
    sample = {"x": np.zeros((2, *inputs.rules[0].shape), dtype=np.float16)}
    user = ModelInputs(inputs.rules, inputs.batched, samples=sample)
    with pytest.raises(ModelError, match="leave out --input-data"):
        InputFiles(user, info, tmp_path, fresh=True)


def test_the_docs_state_the_fresh_sample_count() -> None:
    from tritonlab.models.inputs import FRESH_SAMPLES

    docs = Path(__file__).resolve().parents[2] / "docs" / "sweeps.md"
    assert f"{FRESH_SAMPLES:,} of them" in docs.read_text()


def test_a_control_input_gets_the_constant_the_graph_compares_it_with(tmp_path: Path) -> None:
    """Issue 35: a sample rate compared with 16000 before an ``If`` got ints in [0, 8), which
    sends the model down the branch meant for other inputs; now it gets 16000, said why."""
    info = inspect_onnx(factory.sample_rate_branch(tmp_path / "vad.onnx"))
    inputs = derive_inputs(info)
    sr = next(r for r in inputs.rules if r.name == "sr")
    assert (sr.kind, sr.low) == ("constant", factory.SAMPLE_RATE)
    assert "compares it with 16000 (Equal 'is_16k')" in sr.reason
    assert inputs.batch(1)["sr"].shape == () and int(inputs.batch(1)["sr"]) == 16000
    assert "`sr` INT64 []: 16000 (a control input" in "\n".join(inputs.describe())
    probe_inputs(info, inputs, sized_by_user=False)  # the model runs with it
