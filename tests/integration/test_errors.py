"""Error paths against the real binaries: each is one line that says what to change."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from integration_support import BASELINE, StartServer, run_cli

from tritonlab.errors import PortInUseError, ServerError
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.repository.config import read_config, write_config
from tritonlab.repository.layout import build_repository
from tritonlab.server.ports import find_free_ports
from tritonlab.server.process import ServerPorts

pytestmark = pytest.mark.integration


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port another socket is listening on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def _single_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    return lines[0]


def test_port_in_use_names_the_flag(busy_port: int) -> None:
    with pytest.raises(PortInUseError) as caught:
        ServerPorts.resolve(http=busy_port)
    message = str(caught.value)
    assert f"port {busy_port}" in message
    assert "--http-port" in message
    assert "\n" not in message
    # The other two ports are picked freely and are not the busy one.
    with pytest.raises(PortInUseError, match="--grpc-port"):
        ServerPorts.resolve(grpc=busy_port)


@pytest.mark.timeout(60)
def test_cli_serve_on_a_busy_port_is_one_line(
    busy_port: int, demo_onnx: Path, tmp_path: Path
) -> None:
    proc = run_cli(
        ["serve", str(demo_onnx), "--http-port", str(busy_port), "--grpc-port", "0"],
        tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _single_error_line(proc.stderr)
    assert str(busy_port) in line
    assert "--http-port" in line


@pytest.mark.timeout(120)
def test_model_that_fails_to_load_reports_the_backend_reason(
    start_server: StartServer, demo_info: OnnxModelInfo, tmp_path: Path
) -> None:
    """A config naming an input the ONNX graph does not have: the load error says so."""
    repo = tmp_path / "models"
    (model,) = build_repository(repo, demo_info, "broken", [BASELINE])
    config = read_config(model.config_path)
    assert config.input[0].name == "input"
    config.input[0].name = "not_in_graph"
    write_config(config, model.config_path)
    assert 'name: "not_in_graph"' in model.config_path.read_text()

    server = start_server(repo, explicit_model_control=True)
    with pytest.raises(ServerError) as caught:
        server.load_model("broken")
    message = str(caught.value)
    assert "Triton failed to load model 'broken'" in message
    assert "config names tensors the ONNX graph does not have" in message
    assert "not_in_graph" in message
    assert "\n" not in message
    # The server survives a model that fails to load.
    assert server.is_alive()


@pytest.mark.timeout(60)
def test_cli_infer_on_a_corrupt_onnx_file(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(np.random.default_rng(0).bytes(4096))
    proc = run_cli(["infer", str(corrupt)], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _single_error_line(proc.stderr)
    assert "corrupt.onnx" in line
    assert "not a readable ONNX model" in line


@pytest.mark.timeout(90)
def test_cli_perf_against_a_closed_url_fails_fast(demo_onnx: Path, tmp_path: Path) -> None:
    (port,) = find_free_ports(1)
    url = f"127.0.0.1:{port}"
    proc = run_cli(
        ["perf", str(demo_onnx), "--url", url, "--out", str(tmp_path / "perf")], tmp_path, 60
    )
    assert proc.returncode != 0, proc.stdout + proc.stderr
    line = _single_error_line(proc.stderr)
    assert url in line
    assert "--url" in line
