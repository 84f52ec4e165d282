"""The adapter's planted work (``tritonlab_planted_work_iterations``), served for real: the same
answers, and a fixed amount of extra compute per request that the server's own statistics see.
The calibration benchmark plants its effects of known size with it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from integration_support import StartServer

from tritonlab.models.inspect import inspect_onnx
from tritonlab.repository.layout import add_model
from tritonlab.repository.variants import ServingVariant

pytestmark = pytest.mark.integration

PLANTED = 200_000  # loop turns: a few ms of CPU per request, far above the model's own 0.2 ms
REQUESTS = 10


def _compute_us_per_request(client: httpclient.InferenceServerClient, model: str) -> float:
    stats = client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]
    return stats["compute_infer"]["ns"] / stats["compute_infer"]["count"] / 1e3


@pytest.mark.timeout(240)
def test_planted_work_adds_compute_per_request_and_keeps_the_answers(
    start_server: StartServer, demo_onnx: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    info = inspect_onnx(demo_onnx)
    plain_model = add_model(repo, info, "mlp", ServingVariant("plain", "no planted work"))
    planted_model = add_model(
        repo,
        info,
        "mlp",
        ServingVariant(
            "planted",
            "planted work",
            extra_parameters={"tritonlab_planted_work_iterations": str(PLANTED)},
        ),
    )
    server = start_server(repo)
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60.0)
    x = np.random.default_rng(0).standard_normal((1, 256)).astype(np.float32)
    names = {"plain": plain_model.model_name, "planted": planted_model.model_name}
    answers = {}
    for side, model in names.items():
        for _ in range(REQUESTS):
            tensor = httpclient.InferInput("input", list(x.shape), "FP32")
            tensor.set_data_from_numpy(x)
            answers[side] = client.infer(model, [tensor]).as_numpy("output")
    np.testing.assert_array_equal(answers["plain"], answers["planted"])
    plain, planted = (_compute_us_per_request(client, m) for m in names.values())
    client.close()
    # 200,000 turns of an empty loop take milliseconds in CPython on any machine this runs on
    assert planted - plain > 1000.0, (plain, planted)
