"""The built-in pipeline (tiny CNN) on the real tritonserver: the ensemble and the BLS model
answer the reference frames as computed in-process, and each path runs every step once."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from integration_support import StartServer, describe, wait_gone

from tritonlab.models.pipeline_example import PipelineReference, write_pipeline_repository
from tritonlab.models.tiny_cnn import TINY_CNN_NAME
from tritonlab.server.process import TritonServer

pytestmark = pytest.mark.integration

# The served CNN runs the same onnxruntime on one thread with the same batch: equal in practice.
SCORE_TOLERANCE = 1e-6


def _executions(server: TritonServer, models: tuple[str, ...]) -> dict[str, int]:
    return {m: int(server.model_statistics(m).get("execution_count", 0)) for m in models}


def _executions_reaching(
    server: TritonServer, models: tuple[str, ...], expected: dict[str, int], timeout_s: float = 5.0
) -> dict[str, int]:
    """The execution counts once they equal ``expected``, or as they stand at the deadline.
    Triton counts an ensemble's (and its last step's) execution after the response has gone
    out, so a read right after the answer may still miss it (a fresh-clone CI run, loaded by
    three test workers, read 0 for the ensemble and its postprocess step)."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = _executions(server, models)
        if seen == expected or time.monotonic() > deadline:
            return seen
        time.sleep(0.05)


def _infer(client: httpclient.InferenceServerClient, model: str, images: np.ndarray) -> list:
    image = httpclient.InferInput("IMAGE", list(images.shape), "UINT8")
    image.set_data_from_numpy(images)
    result = client.infer(model, [image])
    return [result.as_numpy("TOPK_IDS"), result.as_numpy("TOPK_SCORES")]


@pytest.mark.timeout(120)
def test_the_ensemble_and_the_bls_pipeline_answer_the_reference(
    start_server: StartServer, tmp_path: Path
) -> None:
    repo = write_pipeline_repository(tmp_path / "models", cnn=TINY_CNN_NAME)
    ref = PipelineReference.load(repo.reference_path)
    server = start_server(repo.root, explicit_model_control=True)
    # Loading the ensemble loads its steps; the BLS model's callees are not declared to Triton,
    # so they are there because the ensemble needs them too.
    server.load_model(repo.ensemble_model)
    server.load_model(repo.bls_model)
    client = server.http_client()
    try:
        # the marker and reference.npz beside the model folders are not models to Triton
        index = {m["name"]: m.get("state") for m in client.get_model_repository_index()}
        assert index == dict.fromkeys(repo.models_to_load, "READY")
        before = _executions(server, repo.models_to_load)
        assert set(before.values()) == {0}

        counts = dict(before)
        for path in (repo.ensemble_model, repo.bls_model):
            ids, scores = _infer(client, path, ref.images)
            np.testing.assert_array_equal(ids, ref.topk_ids, err_msg=path)
            np.testing.assert_allclose(scores, ref.topk_scores, atol=SCORE_TOLERANCE, err_msg=path)
            for model in (path, *repo.step_models):
                counts[model] += 1
            assert _executions_reaching(server, repo.models_to_load, counts) == counts, path
    finally:
        client.close()  # an open keep-alive connection holds Triton's shutdown for its timeout

    tree = server.process_tree()
    assert len(tree) >= 5, describe(tree)  # the server and four Python backend stubs
    server.stop()
    left = wait_gone(tree, 10)
    assert not left, describe(left)
