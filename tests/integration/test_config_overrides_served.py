"""A config section tritonlab does not model, passed through to the real server (issue 33, 3):
a variant's ``model_warmup`` override is written to ``config.pbtxt``, Triton 2.51 loads it, its
``/v2/models/<name>/config`` reports the section, and the model answers as before."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from integration_support import BASELINE

from tritonlab.client.infer import infer_and_check
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.repository.layout import build_repository
from tritonlab.repository.variants import ServingVariant

pytestmark = pytest.mark.integration


@pytest.mark.timeout(180)
def test_a_model_warmup_override_is_loaded_by_the_real_server(
    tmp_path: Path, demo_info: OnnxModelInfo, start_server: object
) -> None:
    (dims,) = [spec.dims for spec in demo_info.inputs]
    warmup = {
        "name": "tritonlab_warmup",
        "batch_size": 2,
        "count": 3,
        "inputs": {"input": {"data_type": "TYPE_FP32", "dims": list(dims), "zero_data": True}},
    }
    warmed = ServingVariant(
        "warmed", "warm-up samples at load", config_overrides={"model_warmup": [warmup]}
    )
    models = build_repository(tmp_path / "models", demo_info, "simple_mlp", [BASELINE, warmed])
    server = start_server(tmp_path / "models")  # type: ignore[operator]
    for model in models:
        url = f"http://{server.http_url}/v2/models/{model.model_name}/config"
        with urllib.request.urlopen(url, timeout=10) as response:
            served = json.load(response)
        if model.variant.config_overrides:
            (entry,) = served["model_warmup"]
            assert (entry["name"], entry["batch_size"], entry["count"]) == (
                "tritonlab_warmup",
                2,
                3,
            )
            assert entry["inputs"]["input"]["zero_data"] is True
        else:
            assert not served.get("model_warmup")
        check = infer_and_check(server, model.model_name, demo_info, "http")
        assert 0.0 <= check.max_abs_diff <= check.tolerance_abs
