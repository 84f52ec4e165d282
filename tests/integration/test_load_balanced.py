"""``tritonlab perf --url`` against two real tritonservers behind nginx (HTTP and gRPC).

The load must reach both servers (each one's own statistics show requests), and the output must
say it measured a service: no server CPU, per-replica figures unknown.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from integration_support import DemoRepository, StartServer, cli_env, tritonlab_command
from nginx_lb import available, load_balancer

from tritonlab.server.stats import StatsSnapshot

pytestmark = [pytest.mark.integration]
if available():
    pytestmark.append(pytest.mark.skip(reason=str(available())))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_perf_url_measures_a_balanced_service(
    protocol: str,
    demo_onnx: Path,
    demo_repository: DemoRepository,
    start_server: StartServer,
    tmp_path: Path,
) -> None:
    servers = [start_server(demo_repository.path) for _ in range(2)]
    name = demo_repository.baseline.model_name
    before = [StatsSnapshot.from_triton(s.model_statistics(name)) for s in servers]
    with load_balancer(
        tmp_path / "nginx", [s.http_url for s in servers], [s.grpc_url for s in servers]
    ) as lb:
        done = subprocess.run(
            [
                *tritonlab_command(),
                *("perf", str(demo_onnx), "--name", name, "--protocol", protocol),
                *("--url", lb.http_url, "--grpc-url", lb.grpc_url, "--concurrency", "4"),
                *("--window-ms", "500", "--stability", "60", "--out", str(tmp_path / "perf")),
            ],
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "infer/s" in done.stdout
    assert f"measured the service at {lb.http_url}" in done.stdout
    assert "per-replica figures are unknown" in done.stdout
    after = [StatsSnapshot.from_triton(s.model_statistics(name)) for s in servers]
    served = [a.inference_count - b.inference_count for a, b in zip(after, before, strict=True)]
    assert all(n > 0 for n in served), f"nginx did not spread the load: {served}"
