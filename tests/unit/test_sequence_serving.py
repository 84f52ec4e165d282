"""A model that carries state, served by Triton's sequence batcher (issue 35, item 4): its
config, its inputs, perf_analyzer's sequence options, the plan and the rules that explain it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import onnx_factory as factory
import pytest

from tritonlab.errors import ConfigError
from tritonlab.experiments.plan import PlanBasics
from tritonlab.experiments.sequence_plan import (
    CONCURRENT_SEQUENCES,
    REQUESTS_PER_SEQUENCE,
    sequence_plan,
    without_batching,
)
from tritonlab.models.inputs import derive_inputs
from tritonlab.models.inspect import inspect_onnx
from tritonlab.models.state_pairs import served_view, state_tensors
from tritonlab.perf.settings import PerfSettings
from tritonlab.repository.config import (
    SEQUENCE_CONTROLS,
    SEQUENCE_PARAMETER,
    build_model_config,
    config_dict,
)
from tritonlab.repository.knobs import KNOB_BY_PLAN_NAME, knob_description, knob_slug
from tritonlab.repository.variants import ServingVariant, seed_comparison_variants


@pytest.fixture
def stateful(tmp_path: Path):  # type: ignore[no-untyped-def]
    return inspect_onnx(factory.streaming_state(tmp_path / "stream.onnx"))


def _variant(**knobs: object) -> ServingVariant:
    return ServingVariant("v", "v", max_batch_size=0, **knobs)  # type: ignore[arg-type]


def test_the_state_leaves_the_served_interface_and_starts_at_one_stream(stateful) -> None:  # type: ignore[no-untyped-def]
    (state,) = state_tensors(stateful)
    assert (state.input, state.output, state.shape, state.dtype) == (
        "state",
        "stateN",
        (2, 1, 16),
        "float32",
    )
    served = served_view(stateful)
    assert [s.name for s in served.inputs] == ["x"]
    assert [s.name for s in served.outputs] == ["prob"]
    inputs = derive_inputs(stateful)
    assert inputs.shapes == {"x": (1, 32), "state": (2, 1, 16)}
    assert inputs.sent_shapes == {"x": (1, 32)}
    assert "the open leading dim of x = 1" in inputs.dims_note


def test_the_config_uses_the_sequence_batcher_with_control_inputs(stateful) -> None:  # type: ignore[no-untyped-def]
    config = config_dict(stateful, _variant(), "stream")
    assert [t["name"] for t in config["input"]] == ["x"]
    assert [t["name"] for t in config["output"]] == ["prob"]
    batcher = config["sequence_batching"]
    assert batcher["direct"] == {} and batcher["max_sequence_idle_microseconds"] == 1_000_000
    kinds = {c["name"]: c["control"][0]["kind"] for c in batcher["control_input"]}
    assert kinds == {
        SEQUENCE_CONTROLS["start"]: "CONTROL_SEQUENCE_START",
        SEQUENCE_CONTROLS["end"]: "CONTROL_SEQUENCE_END",
        SEQUENCE_CONTROLS["id"]: "CONTROL_SEQUENCE_CORRID",
    }
    adapter = json.loads(config["parameters"][SEQUENCE_PARAMETER]["string_value"])
    assert adapter["states"] == [
        {"input": "state", "output": "stateN", "shape": [2, 1, 16], "dtype": "float32"}
    ]
    assert adapter["controls"] == SEQUENCE_CONTROLS
    oldest = config_dict(
        stateful,
        _variant(sequence_strategy="oldest", max_candidate_sequences=8, max_sequence_idle_us=5),
        "stream",
    )["sequence_batching"]
    assert oldest["oldest"] == {"max_candidate_sequences": 8} and "direct" not in oldest
    assert oldest["max_sequence_idle_microseconds"] == 5
    build_model_config(stateful, _variant(sequence_strategy="oldest"), "stream")  # the schema


def test_sequence_knobs_are_refused_where_they_cannot_apply(stateful, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    stateless = inspect_onnx(factory.no_batch_axis(tmp_path / "plain.onnx"))
    with pytest.raises(ConfigError, match="sequence_strategy applies to a model that carries"):
        config_dict(stateless, _variant(sequence_strategy="oldest"), "plain")
    assert "sequence_batching" not in config_dict(stateless, _variant(), "plain")
    with pytest.raises(ConfigError, match="strategy must be one of direct, oldest"):
        _variant(sequence_strategy="newest").validate(model_batches=False)
    with pytest.raises(ConfigError, match="max_candidate_sequences must be >= 1"):
        _variant(max_candidate_sequences=0).validate(model_batches=False)


def test_a_batched_stateful_model_refuses_the_dynamic_batcher(tmp_path: Path) -> None:
    info = replace(inspect_onnx(factory.streaming_state(tmp_path / "s.onnx")), batched=True)
    batching = ServingVariant("b", "b", dynamic_batching=True)
    with pytest.raises(ConfigError, match="served by the sequence batcher; turn dynamic_batching"):
        config_dict(info, batching, "s")


def test_perf_analyzer_sends_fixed_length_sequences() -> None:
    settings = PerfSettings("m", "127.0.0.1:1", requests_per_sequence=20)
    args = settings.to_args("out.csv")
    assert args[args.index("--sequence-length") + 1] == "20"
    assert args[args.index("--sequence-length-variation") + 1] == "0"
    assert "--sequence-length" not in PerfSettings("m", "127.0.0.1:1").to_args("out.csv")


def test_the_sequence_plan_compares_the_strategies_one_change_each(stateful) -> None:  # type: ignore[no-untyped-def]
    plan = sequence_plan(PlanBasics("stream"), state_tensors(stateful), batched=False)
    names = [v.name for v in plan.variants]
    assert names == ["baseline", "seq_oldest", "instances_2"]
    baseline, oldest, two = plan.variants
    assert all(v.max_batch_size == 0 and not v.dynamic_batching for v in plan.variants)
    assert oldest.sequence_strategy == "oldest"
    assert oldest.max_candidate_sequences == CONCURRENT_SEQUENCES
    assert two.instance_count == 2 and two.sequence_strategy == "direct"
    assert plan.loads[0].concurrency == CONCURRENT_SEQUENCES
    assert plan.measurement.requests_per_sequence == REQUESTS_PER_SEQUENCE
    assert "sequence batcher" in plan.notes[-1] and "state -> stateN" in plan.notes[-1]
    assert knob_slug(oldest, baseline) == "nobatch_seq_oldest"
    assert knob_description(oldest, baseline) == "no batching, count=1, oldest of 4 sequences"
    knob = KNOB_BY_PLAN_NAME["sequence_strategy"]
    assert knob.change(baseline, oldest).startswith("sequence_batching strategy direct -> oldest")


def test_another_set_loses_its_batching_configurations(stateful) -> None:  # type: ignore[no-untyped-def]
    basics = PlanBasics("stream")
    seed = basics.plan(seed_comparison_variants(), 8)
    plan = without_batching(seed, state_tensors(stateful), batched=True)
    assert [v.name for v in plan.variants] == ["baseline"]
    assert "Dropped for it: batch_5ms_x1, batch_5ms_x2, batch_0ms_x1." in plan.notes[-1]
    assert plan.measurement.requests_per_sequence == REQUESTS_PER_SEQUENCE


def test_a_sequence_answer_that_parts_from_the_reference_names_its_request() -> None:
    import numpy as np

    from tritonlab.client.infer import Against, compare_outputs
    from tritonlab.errors import ClientError
    from tritonlab.models.inspect import TensorSpec

    class Result:
        def as_numpy(self, name: str) -> np.ndarray:  # type: ignore[type-arg]
            return np.full((1, 1), 0.5, dtype=np.float32)

    spec = (TensorSpec("prob", "TYPE_FP32", (-1, 1)),)
    against = Against("onnxruntime", "stream", "grpc", "onnxruntime")
    same = {"prob": np.full((1, 1), 0.5, dtype=np.float32)}
    assert compare_outputs(Result(), same, spec, against, "request 1").max_abs_diff == 0
    moved = {"prob": np.full((1, 1), 0.7, dtype=np.float32)}  # the state was not carried
    with pytest.raises(ClientError, match="request 2 of a 6-request sequence: output 'prob'"):
        compare_outputs(Result(), moved, spec, against, "request 2 of a 6-request sequence")


def test_the_models_page_states_the_settings_the_code_uses() -> None:
    from tritonlab.client.sequence_check import SEQUENCE_CHECK_REQUESTS

    page = " ".join(
        (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text().split()
    )
    assert f"sends one sequence of {SEQUENCE_CHECK_REQUESTS} requests" in page
    assert f"perf_analyzer sends sequences of {REQUESTS_PER_SEQUENCE} requests" in page
    assert f"--sequence-length {REQUESTS_PER_SEQUENCE} --sequence-length-variation 0" in page
    assert f"at {CONCURRENT_SEQUENCES} open sequences" in page
    assert f"`oldest` with {CONCURRENT_SEQUENCES} candidate sequences" in page


def test_a_batched_stateful_models_state_carries_its_batch_of_one(tmp_path: Path) -> None:
    """The review of 81a9ab5: a model with a batch axis started its state without that axis,
    so every request failed ("Invalid rank for input: h")."""
    import numpy as np

    from tritonlab.models.ort_session import cpu_session

    info = inspect_onnx(factory.batched_state(tmp_path / "gru.onnx"))
    assert info.batched
    (state,) = state_tensors(info)
    assert state.shape == (1, 8)  # what one request's engine run takes
    inputs = derive_inputs(info)
    assert inputs.shapes == {"x": (8,), "h": (8,)} and inputs.sent_shapes == {"x": (8,)}
    session = cpu_session(info.path)
    held = {"h": np.zeros(state.shape, dtype=state.dtype)}
    for k in range(3):  # a sequence, the state carried as the adapter carries it
        y, hn = session.run(["y", "hn"], inputs.batch(1, seed=k) | held)
        assert y.shape == (1, 1) and hn.shape == state.shape
        held = {"h": hn}
    assert config_dict(info, ServingVariant("b", "b"), "gru")["max_batch_size"] == 64
