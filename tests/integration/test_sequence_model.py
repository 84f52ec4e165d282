"""A model that carries state, on the real server (issue 35, item 4): served by Triton's
sequence batcher with the state kept in the backend adapter, its answers checked over a whole
sequence against onnxruntime carrying the state, measured by perf_analyzer as sequences, the
sequence batcher's strategies compared and explained, and the run folder's client working."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx_factory as factory
import pytest
from integration_support import FAST_RUN_FLAGS, StartServer, run_cli

from tritonlab.client.sequence_check import SEQUENCE_CHECK_REQUESTS
from tritonlab.repository.config import read_config
from tritonlab.result_files import read_result

pytestmark = pytest.mark.integration


@pytest.mark.timeout(420)
def test_a_streaming_model_is_served_checked_and_measured_as_sequences(
    start_server: StartServer, tmp_path: Path
) -> None:
    model = factory.streaming_state(tmp_path / "stream.onnx")
    out_dir = tmp_path / "stream"
    result = run_cli(["run", str(model), "--out", str(out_dir), *FAST_RUN_FLAGS], tmp_path, 360)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "measured 4 cells, reused 0" in result.stdout  # 3 configurations and the A/A control

    baseline = read_config(out_dir / "models" / "stream" / "config.pbtxt")
    assert [t.name for t in baseline.input] == ["x"] and [t.name for t in baseline.output] == [
        "prob"
    ]
    assert baseline.sequence_batching.HasField("direct")
    oldest = read_config(out_dir / "models" / "stream__seq_oldest" / "config.pbtxt")
    assert oldest.sequence_batching.oldest.max_candidate_sequences == 4

    checks = read_result(out_dir / "results" / "infer_check.json")
    assert {c["protocol"] for c in checks} == {"http", "grpc"}
    assert all(c["sequence_requests"] == SEQUENCE_CHECK_REQUESTS for c in checks)
    assert all(c["input_shapes"] == {"x": [1, 32]} for c in checks)

    for path in sorted((out_dir / "results" / "cells").glob("*.json")):
        cell = json.loads(path.read_text())
        command = cell["perf"]["command"]
        assert command[command.index("--sequence-length") + 1] == "20", command
        assert not any(arg.startswith("state:") for arg in command)  # never sent
        assert cell["server"]["request_count"] > 0

    log = (out_dir / "docs" / "experiment_log.md").read_text()
    assert "so it is served by Triton's sequence batcher" in log
    assert f"a sequence of {SEQUENCE_CHECK_REQUESTS} requests, each of shape" in log
    assert "sequence_batching strategy direct -> oldest (max_candidate_sequences = 4)" in log
    assert "direct -> oldest: throughput " in log  # the strategy rule's figures
    assert "Backlog: 4 sequences were open for 1 slot" in log

    # The run folder's own client sends a sequence of one request and checks it.
    server = start_server(out_dir / "models", explicit_model_control=True)
    server.load_model("stream")
    client = subprocess.run(
        [sys.executable, "client/infer_client.py", "--url", server.grpc_url, "--model", "stream"],
        cwd=out_dir,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert client.returncode == 0, client.stdout + client.stderr
    assert "OK" in client.stdout and "output prob: shape [1, 1]" in client.stdout


@pytest.mark.timeout(300)
def test_a_stateful_model_with_a_batch_axis_is_served_and_measured(tmp_path: Path) -> None:
    """The review of 81a9ab5: its state started without the batch axis, so every request
    failed; and the serving-path probes (dynamic batching) are not for such a model."""
    model = factory.batched_state(tmp_path / "gru.onnx")
    out_dir = tmp_path / "gru"
    result = run_cli(["run", str(model), "--out", str(out_dir), *FAST_RUN_FLAGS], tmp_path, 240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "measured 4 cells, reused 0" in result.stdout
    config = read_config(out_dir / "models" / "gru" / "config.pbtxt")
    assert config.max_batch_size == 64 and config.sequence_batching.HasField("direct")
    checks = read_result(out_dir / "results" / "infer_check.json")
    assert all(c["sequence_requests"] == SEQUENCE_CHECK_REQUESTS for c in checks)
    assert not (out_dir / "results" / "serving_path").exists()
