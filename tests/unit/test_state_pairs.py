"""State pairs of streaming models (issue 35): found by name, dtype and dims; never sent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tritonlab.models.inputs import derive_inputs
from tritonlab.models.inspect import OnnxModelInfo, TensorSpec, inspect_onnx
from tritonlab.models.state_pairs import state_pairs

STATE = (2, 1, 128)


def _info(
    inputs: list[tuple[str, tuple[int, ...]]], outputs: list[tuple[str, tuple[int, ...]]]
) -> OnnxModelInfo:
    return OnnxModelInfo(
        Path("m.onnx"),
        tuple(TensorSpec(n, "TYPE_FP32", d) for n, d in inputs),
        tuple(TensorSpec(n, "TYPE_FP32", d) for n, d in outputs),
        batched=False,
        opset=17,
        file_size_bytes=0,
    )


@pytest.mark.parametrize(
    ("input_name", "output_name"),
    [
        ("state", "stateN"),
        ("h", "hn"),
        ("c", "cn"),
        ("h0", "hn"),
        ("hidden_in", "hidden_out"),
        ("in_cache", "out_cache"),
        ("state", "state_next"),
    ],
)
def test_a_state_pair_is_found(input_name: str, output_name: str) -> None:
    info = _info(
        [("audio", (1, 512)), (input_name, STATE)], [("prob", (1, 1)), (output_name, STATE)]
    )
    assert state_pairs(info) == {input_name: output_name}


@pytest.mark.parametrize(
    ("inputs", "outputs"),
    [
        ([("audio", (1, 512))], [("audio_out", (1, 512))]),  # a denoiser: not a state
        ([("state", STATE)], [("stateN", (2, 1, 64))]),  # other dims
        ([("state", STATE)], [("stateN", (2, 128))]),  # another rank
        ([("past_key", (1, 8, 16))], [("present_key", (1, 8, 17))]),  # a growing cache
    ],
)
def test_what_is_not_a_state_pair(
    inputs: list[tuple[str, tuple[int, ...]]], outputs: list[tuple[str, tuple[int, ...]]]
) -> None:
    assert state_pairs(_info(inputs, outputs)) == {}


def _streaming_model(path: Path) -> Path:
    """prob = mean(audio) [1, 1]; stateN = state + 1 [2, 1, 128]: a stateful model's shape."""
    nodes = [
        helper.make_node("ReduceMean", ["audio"], ["prob"], keepdims=1),
        helper.make_node("Add", ["state", "one"], ["stateN"]),
    ]
    graph = helper.make_graph(
        nodes,
        "streaming",
        [
            helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, 512]),
            helper.make_tensor_value_info("state", TensorProto.FLOAT, list(STATE)),
        ],
        [
            helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 1]),
            helper.make_tensor_value_info("stateN", TensorProto.FLOAT, list(STATE)),
        ],
        [numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_a_state_input_starts_at_zeros_and_is_never_sent(tmp_path: Path) -> None:
    info = inspect_onnx(_streaming_model(tmp_path / "vad.onnx"))
    inputs = derive_inputs(info)
    rule = next(r for r in inputs.rules if r.name == "state")
    assert rule.kind == "state" and "output 'stateN' gives its next value" in rule.reason
    assert not inputs.batch(1)["state"].any()  # in-process: zeros, the start of a sequence
    assert "state" not in inputs.sent_shapes  # the server keeps it per sequence
    assert all("state" not in entry for entry in inputs.perf_data(2)["data"])


def test_unknown_output_dims_still_pair_as_silero_exports_them() -> None:
    """silero_vad.onnx (silero-vad 6.2.3): ``state`` [2, ?, 128] in, ``stateN`` [?, ?, ?] out."""
    info = _info([("input", (-1, -1)), ("state", (2, -1, 128))], [("stateN", (-1, -1, -1))])
    assert state_pairs(info) == {"state": "stateN"}


def test_sweep_and_tune_refuse_a_model_that_carries_state_in_one_line(tmp_path: Path) -> None:
    """sweep's and tune's configurations use the dynamic batcher and their loads send no
    sequences: a model with state would get random state inputs. Both refuse it with one line
    that names the state and the command that measures it; a stateless model passes."""
    from tritonlab.errors import ConfigError
    from tritonlab.models.state_pairs import refuse_state

    info = inspect_onnx(_streaming_model(tmp_path / "vad.onnx"))
    for command in ("sweep", "tune"):
        with pytest.raises(ConfigError) as caught:
            refuse_state(info, command)
        message = str(caught.value)
        assert "\n" not in message and f"`tritonlab {command}` cannot serve it" in message
        assert "measure it with `tritonlab run`" in message
        assert "vad.onnx carries state (state -> stateN)" in message
    refuse_state(_info([], []), "sweep")  # nothing to refuse


def test_the_users_samples_of_a_model_with_state_leave_the_state_to_the_server(
    tmp_path: Path,
) -> None:
    """``--input-data`` of a model that carries state: the file holds the inputs a client sends
    (the state is not asked for); the state input stays a "state" rule, from zeros, never sent.
    Before, the file had to hold the state, and it was sent as a user's input."""
    info = inspect_onnx(_streaming_model(tmp_path / "vad.onnx"))
    data = tmp_path / "audio.npz"
    samples = np.linspace(-1, 1, 3 * 512, dtype=np.float32).reshape(3, 1, 512)
    np.savez(data, audio=samples)
    inputs = derive_inputs(info, input_data=data)
    kinds = {r.name: r.kind for r in inputs.rules}
    assert kinds == {"audio": "user", "state": "state"}
    assert "state" not in inputs.sent_shapes and set(inputs.samples) == {"audio"}
    assert all("state" not in entry for entry in inputs.perf_data()["data"])
    assert inputs.perf_entries() == 3
    assert not inputs.batch(1)["state"].any()
    np.testing.assert_array_equal(inputs.batch(1, offset=1)["audio"], samples[1])
