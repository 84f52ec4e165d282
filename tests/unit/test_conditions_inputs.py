"""The log's model line writes a batch axis only for a model that has one (found on silero_vad:
a model without batching was shown as `sr` INT64 [batch])."""

from __future__ import annotations

from dataclasses import replace

from tritonlab.experiments.manifest import Manifest
from tritonlab.models.inputs import ModelInputs
from tritonlab.report.experiment_log import _conditions
from tritonlab.stats.run_trust import run_trust


def _model_line(manifest: Manifest) -> str:
    return next(
        line
        for line in _conditions(manifest, [], [], run_trust([], []))
        if line.startswith("- Model:")
    )


def test_a_batch_axis_is_written_only_where_the_model_has_one(seed_manifest: Manifest) -> None:
    name = seed_manifest.model.inputs[0].name
    assert f"`{name}` FP32 [batch, " in _model_line(seed_manifest)
    unbatched = replace(seed_manifest, inputs=ModelInputs(batched=False))
    line = _model_line(unbatched)
    assert f"`{name}` FP32 [" in line and "batch" not in line.split("inputs:")[1]


def test_the_html_conditions_write_a_batch_axis_only_where_the_model_has_one(
    seed_manifest: Manifest,
) -> None:
    from tritonlab.report.html import _condition_items

    name = seed_manifest.model.inputs[0].name
    model = dict(_condition_items(seed_manifest, []))["Model"]
    assert f"{name} FP32 [batch, " in model
    unbatched = replace(seed_manifest, inputs=ModelInputs(batched=False))
    model = dict(_condition_items(unbatched, []))["Model"]
    assert "batch" not in model.split("inputs:")[1]
