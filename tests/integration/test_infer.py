"""One validated request over HTTP and gRPC against the real server, checked with onnxruntime."""

from __future__ import annotations

from pathlib import Path

import pytest
from integration_support import DemoRepository, write_renamed_input_model

from tritonlab.client.infer import infer_and_check
from tritonlab.errors import ClientError
from tritonlab.models.inspect import OnnxModelInfo, inspect_onnx
from tritonlab.server.process import TritonServer

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_infer_matches_onnxruntime_on_both_protocols(
    demo_server: TritonServer, demo_repository: DemoRepository, demo_info: OnnxModelInfo
) -> None:
    for model in (demo_repository.baseline, demo_repository.batching):
        for protocol in ("http", "grpc"):
            check = infer_and_check(demo_server, model.model_name, demo_info, protocol)
            assert check.protocol == protocol
            assert check.model_name == model.model_name
            assert check.input_shapes == {"input": [2, 256]}
            assert check.output_shapes == {"output": [2, 10]}
            assert check.tolerance_abs == pytest.approx(1e-4)
            assert 0.0 <= check.max_abs_diff <= check.tolerance_abs
            assert check.round_trip_ms > 0


@pytest.mark.timeout(120)
def test_metadata_mismatch_is_a_client_error(
    demo_server: TritonServer, demo_repository: DemoRepository, tmp_path: Path
) -> None:
    """An ONNX file whose input is named differently from the served model is caught by name."""
    other = tmp_path / "renamed.onnx"
    write_renamed_input_model(other, input_name="features")
    info = inspect_onnx(other)
    for protocol in ("http", "grpc"):
        with pytest.raises(ClientError) as caught:
            infer_and_check(demo_server, demo_repository.baseline.model_name, info, protocol)
        message = str(caught.value)
        assert "'features'" in message
        assert "rebuild the repository" in message
        assert "\n" not in message
