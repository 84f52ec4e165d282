"""Config sections tritonlab does not model, passed through as given (issue 33, 3): a plan's
``config_overrides`` reach ``config.pbtxt`` through Triton's own schema, and every misuse is one
line naming the key to change, before any server starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tritonlab.errors import ConfigError, PlanError
from tritonlab.experiments.plan_file import parse_plan
from tritonlab.models.inspect import OnnxModelInfo, TensorSpec
from tritonlab.repository.config import (
    build_model_config,
    config_to_text,
    knob_sections,
    parse_config_text,
)
from tritonlab.repository.variants import ServingVariant

WARMUP: dict[str, Any] = {
    "model_warmup": [
        {
            "name": "warm",
            "batch_size": 1,
            "inputs": {"input": {"data_type": "TYPE_FP32", "dims": [16], "random_data": True}},
        }
    ]
}


def _plan(baseline: Any = None, combined: Any = None) -> Any:
    data: dict[str, Any] = {"model": "demo", "baseline": baseline or {}}
    if combined is not None:
        data["combined"] = combined
    return parse_plan(data, "plan.yaml", Path(".")).experiment


def _info() -> OnnxModelInfo:
    spec = TensorSpec("input", "TYPE_FP32", (16,))
    return OnnxModelInfo(
        Path("m.onnx"), (spec,), (TensorSpec("output", "TYPE_FP32", (4,)),), True, 17, 1
    )


def test_an_override_reaches_config_pbtxt_and_names_its_variant() -> None:
    plan = _plan(combined=[{"changes": {"config_overrides": WARMUP}}])
    baseline, warmed = plan.variants[0], plan.variants[1]
    assert baseline.config_overrides == {} and warmed.config_overrides == WARMUP
    assert warmed.name == "nobatch_cfg_model_warmup"
    assert warmed.description == "no batching, count=1, config model_warmup overridden"
    config = build_model_config(_info(), warmed, "m__nobatch_cfg_model_warmup")
    assert config.model_warmup[0].name == "warm"
    assert config.model_warmup[0].inputs["input"].random_data
    assert "model_warmup" not in config_to_text(build_model_config(_info(), baseline, "m"))
    # stored only where set, so records from before the field stay byte-identical
    assert "config_overrides" not in baseline.to_dict()
    assert ServingVariant.from_dict(warmed.to_dict()) == warmed


def test_overrides_on_the_anchor_and_a_combined_variant_add_up() -> None:
    plan = parse_plan(
        {
            "model": "demo",
            "anchor": {"config_overrides": WARMUP},
            "combined": [{"changes": {"config_overrides": {"optimization": {"priority": 1}}}}],
        },
        "plan.yaml",
        Path("."),
    ).experiment
    combined = plan.variants[2]
    assert combined.config_overrides == WARMUP | {"optimization": {"priority": 1}}


def test_a_string_value_stays_a_quoted_string_in_config_pbtxt() -> None:
    """A hostile value with config syntax in it is written escaped, never as config."""
    hostile = 'x" } name: "other'
    variant = ServingVariant(
        "v", "", config_overrides={"model_warmup": [{"name": hostile, "batch_size": 1}]}
    )
    text = config_to_text(build_model_config(_info(), variant, "m"))
    parsed = parse_config_text(text)
    assert parsed.name == "m" and parsed.model_warmup[0].name == hostile


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"instance_group": [{"count": 4}]},
            "baseline.config_overrides.instance_group: tritonlab writes it; set it through "
            "the knobs instance_count, instance_kind",
        ),
        (
            {"input": []},
            "baseline.config_overrides.input: tritonlab writes it; set it through the "
            "model's graph (or --shape)",
        ),
        (
            {"warmup": []},
            "baseline.config_overrides.warmup: not a field of Triton's ModelConfig; one of ",
        ),
        (
            {"model_warmup": [{"batch_size": "one"}]},
            "baseline.config_overrides.model_warmup: Triton's schema refuses it",
        ),
        ([1], "baseline.config_overrides: must map config sections to values, got [1]"),
        ({}, "baseline.config_overrides: must map config sections to values, got {}"),
    ],
)
def test_a_misused_override_is_one_line_naming_the_key(overrides: Any, expected: str) -> None:
    with pytest.raises(PlanError) as info:
        _plan({"config_overrides": overrides})
    message = str(info.value)
    assert message.startswith(f"plan.yaml: {expected}"), message
    assert "\n" not in message


def test_a_variant_built_in_code_is_checked_too() -> None:
    variant = ServingVariant("v", "", config_overrides={"response_cache": {"enable": True}})
    with pytest.raises(ConfigError, match=r"config_overrides\.response_cache: tritonlab writes"):
        knob_sections(variant)
