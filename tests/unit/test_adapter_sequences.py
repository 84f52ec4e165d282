"""The backend adapter's sequences, without a server: a START begins from zeros, each request
carries its sequence's state to the next, an END drops it, a request whose start was not seen is
answered with an error (the model lives on), and state is held for at most
``MAX_HELD_SEQUENCES`` sequences (a sequence that never ends does not hold it for ever).

The adapter imports Triton's ``triton_python_backend_utils``, which exists only inside the
Python backend's stub: a minimal stand-in with the calls the adapter makes is put in its place.
What the real server does with it is the integration tier's (``test_sequence_serving``, real
tritonserver)."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

import numpy as np
import pytest


class _Tensor:
    def __init__(self, name: str, value: np.ndarray) -> None:
        self.name, self.value = name, value

    def as_numpy(self) -> np.ndarray:
        return self.value


class _Response:
    def __init__(self, output_tensors: list[_Tensor] | None = None, error: Any = None) -> None:
        self.output_tensors, self.error = output_tensors or [], error


def _fake_pb_utils() -> types.ModuleType:
    pb = types.ModuleType("triton_python_backend_utils")
    pb.Tensor = _Tensor  # type: ignore[attr-defined]
    pb.InferenceResponse = _Response  # type: ignore[attr-defined]
    pb.TritonError = str  # type: ignore[attr-defined]
    pb.TritonModelException = RuntimeError  # type: ignore[attr-defined]
    pb.get_input_tensor_by_name = lambda request, name: request.get(name)  # type: ignore[attr-defined]
    return pb


@pytest.fixture
def adapter(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", _fake_pb_utils())
    sys.modules.pop("tritonlab.backends.adapter", None)
    module = importlib.import_module("tritonlab.backends.adapter")
    yield module
    sys.modules.pop("tritonlab.backends.adapter", None)


class _Summing:
    """An engine whose output is its input plus its state, and whose next state is that sum."""

    def __init__(self, adapter: types.ModuleType) -> None:
        self.model = adapter.EngineModel()
        self.model.input_names = ["x"]
        self.model.output_names = ["y"]
        self.model.output_dtypes = [np.dtype("float32")]
        self.model.served_outputs = 1
        self.model.scalar_inputs = set()
        self.model.scalar_outputs = []
        self.model.planted = 0
        params = {
            adapter.SEQUENCE_PARAM: {
                "string_value": '{"states": [{"input": "state", "output": "state_out", '
                '"shape": [1, 2], "dtype": "float32"}], "controls": {"start": "START", '
                '"end": "END", "id": "CORRID"}}'
            }
        }
        self.model.sequence = self.model._sequence_setup(params)
        self.model.run = lambda feed: [feed["x"] + feed["state"], feed["x"] + feed["state"]]

    def send(self, sequence: int, value: float, start: bool = False, end: bool = False) -> Any:
        request = {
            "x": _Tensor("x", np.full((1, 2), value, np.float32)),
            "START": _Tensor("START", np.array([int(start)])),
            "END": _Tensor("END", np.array([int(end)])),
            "CORRID": _Tensor("CORRID", np.array([sequence])),
        }
        (response,) = self.model._sequence_execute([request])
        return response


def test_a_sequence_starts_from_zeros_carries_its_state_and_drops_it_at_its_end(
    adapter: types.ModuleType,
) -> None:
    m = _Summing(adapter)
    first = m.send(7, 1.0, start=True)
    assert first.error is None and first.output_tensors[0].as_numpy().tolist() == [[1.0, 1.0]]
    assert m.send(8, 10.0, start=True).output_tensors[0].as_numpy().tolist() == [[10.0, 10.0]]
    second = m.send(7, 2.0)  # sequence 7's state (1), not sequence 8's (10)
    assert second.output_tensors[0].as_numpy().tolist() == [[3.0, 3.0]]
    assert len(second.output_tensors) == 1  # the state is kept, not served
    last = m.send(7, 1.0, end=True)
    assert last.output_tensors[0].as_numpy().tolist() == [[4.0, 4.0]]
    assert 7 not in m.model.states and 8 in m.model.states
    again = m.send(7, 5.0, start=True)  # a new sequence on the same id starts from zeros
    assert again.output_tensors[0].as_numpy().tolist() == [[5.0, 5.0]]


def test_a_request_without_its_start_is_an_error_and_the_model_lives_on(
    adapter: types.ModuleType,
) -> None:
    m = _Summing(adapter)
    lost = m.send(3, 1.0)
    assert lost.output_tensors == [] and "sequence 3 has no state here" in lost.error
    assert m.send(4, 2.0, start=True).error is None


def test_state_is_held_for_at_most_the_limit_of_sequences(
    adapter: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adapter, "MAX_HELD_SEQUENCES", 3)
    m = _Summing(adapter)
    for sequence in (1, 2, 3):
        m.send(sequence, 1.0, start=True)
    m.send(1, 1.0)  # 1 used again: 2 is now the least recently used
    m.send(4, 1.0, start=True)
    assert sorted(m.model.states) == [1, 3, 4]
    assert "sequence 2 has no state here" in m.send(2, 1.0).error
