"""Triton's rules for inputs and outputs, applied before any server starts (issue 35: a scalar
input of a model without batching was written as an empty reshape, which Triton refuses)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnx_factory as factory
import pytest
from google.protobuf import json_format

from tritonlab.errors import ConfigError
from tritonlab.models.inspect import TensorSpec, inspect_onnx
from tritonlab.repository import config as config_module
from tritonlab.repository.config import SCALARS_PARAMETER, ModelConfig, build_model_config
from tritonlab.repository.triton_rules import io_problem, tensor_problem
from tritonlab.repository.variants import ServingVariant

FP32 = 11  # TYPE_FP32 in model_config.proto
SEED = ServingVariant(name="seed", description="one instance, no batching")


@pytest.mark.parametrize(
    ("dims", "reshape", "max_batch", "refused"),
    [
        ([1], [], 8, None),  # a per-sample scalar of a batching model: the standard idiom
        ([1], [], 0, "empty reshape in a model without batching"),
        ([1], None, 0, None),  # the same scalar declared [1] without a reshape
        ([], None, 0, "has no dims"),
        ([0, 4], None, 8, "each must be >= 1, or -1"),
        ([2, 4], [8], 8, None),
        ([2, 4], [6], 8, "differ in size"),
        ([2, 4, -1, 6], [8, -1, 1, 6], 8, None),  # Triton's own example of a valid reshape
        ([2, 4, -1, 6], [4, -1, 2, 6], 8, "differ in size"),
        ([4, -1], [4], 8, "differ in size"),
        ([3], [], 8, "differ in size"),  # an empty reshape needs one element
        ([3], [0, 3], 8, "reshape [0, 3]"),
    ],
)
def test_tensor_rules_follow_triton(
    dims: list[int], reshape: list[int] | None, max_batch: int, refused: str | None
) -> None:
    problem = tensor_problem("input", "x", FP32, dims, reshape, max_batch)
    if refused is None:
        assert problem is None
    else:
        assert problem is not None and refused in problem


def test_a_tensor_without_name_or_type_and_a_negative_batch_are_refused() -> None:
    assert "no name" in str(tensor_problem("output", "", FP32, [1], None, 0))
    assert "no data_type" in str(tensor_problem("output", "y", 0, [1], None, 0))
    config = json_format.ParseDict({"name": "m", "max_batch_size": -1}, ModelConfig())
    assert "max_batch_size -1" in str(io_problem(config))


def test_a_scalar_without_batching_is_served_as_one_and_named_for_the_adapter(
    tmp_path: Path,
) -> None:
    info = inspect_onnx(factory.scalar_control(tmp_path / "m.onnx"))
    assert not info.batched
    config = build_model_config(info, SEED, "m")
    sr = next(t for t in config.input if t.name == "sr")
    assert list(sr.dims) == [1] and not sr.HasField("reshape")
    names = json.loads(config.parameters[SCALARS_PARAMETER].string_value)
    assert names == ["sr", "energy"]
    assert io_problem(config) is None


def test_a_batching_model_keeps_the_reshape_idiom_and_no_scalar_parameter(
    tmp_path: Path,
) -> None:
    info = inspect_onnx(factory.fp16_multi_output(tmp_path / "m.onnx"))
    config = build_model_config(info, SEED, "m")
    argmax = next(t for t in config.output if t.name == "argmax")
    assert list(argmax.dims) == [1] and argmax.HasField("reshape")
    assert SCALARS_PARAMETER not in config.parameters


def test_the_old_empty_reshape_stops_before_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written as before issue 35 (dims [1], empty reshape, no batching), the configuration is
    refused in one line naming the tensor, before any server starts."""
    info = inspect_onnx(factory.scalar_control(tmp_path / "m.onnx"))

    def old(spec: TensorSpec, batched: bool) -> dict[str, Any]:
        dims = (
            {"dims": [1], "reshape": {"shape": []}} if not spec.dims else {"dims": list(spec.dims)}
        )
        return {"name": spec.name, "data_type": spec.triton_dtype, **dims}

    monkeypatch.setattr(config_module, "_tensor", old)
    with pytest.raises(ConfigError, match="would not load in Triton: input 'sr' has an empty"):
        build_model_config(info, SEED, "m")


def test_the_adapter_reads_the_parameter_the_config_writes() -> None:
    """The adapter runs inside the server's stub and cannot import this module: one name, two
    files, kept equal here."""
    import tritonlab.backends

    adapter = Path(tritonlab.backends.__file__).with_name("adapter.py").read_text()
    assert f'SCALARS_PARAM = "{SCALARS_PARAMETER}"' in adapter
