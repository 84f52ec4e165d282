"""The adapter's planted work (``tritonlab_planted_work_iterations``), served for real: the same
answers, and a fixed amount of extra time per request. The calibration benchmark plants its
effects of known size with it."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from integration_support import StartServer

from tritonlab.models.inspect import inspect_onnx
from tritonlab.repository.layout import add_model
from tritonlab.repository.variants import ServingVariant

pytestmark = pytest.mark.integration

PLANTED = 1_000_000  # loop turns: 7-15 ms of CPU per request, far above the model's own 0.2 ms
WARMUP, REQUESTS = 3, 15


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
    names = {"plain": plain_model.model_name, "planted": planted_model.model_name}
    x = np.random.default_rng(0).standard_normal((1, 256)).astype(np.float32)
    answers: dict[str, np.ndarray] = {}
    seconds: dict[str, list[float]] = {side: [] for side in names}

    def infer(side: str) -> float:
        tensor = httpclient.InferInput("input", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        started = time.perf_counter()
        answers[side] = client.infer(names[side], [tensor]).as_numpy("output")
        return time.perf_counter() - started

    for side in names:  # a cold session's first runs are not what the plant adds
        for _ in range(WARMUP):
            infer(side)
    for _ in range(REQUESTS):  # interleaved, so a slow stretch of the machine falls on both
        for side in names:
            seconds[side].append(infer(side))
    client.close()
    np.testing.assert_array_equal(answers["plain"], answers["planted"])
    added_ms = 1e3 * (statistics.median(seconds["planted"]) - statistics.median(seconds["plain"]))
    # a million turns of an empty loop take milliseconds in CPython on any machine this runs on
    assert added_ms > 3.0, seconds
