"""The real tritonserver's lifecycle: ready, loopback only, and no process left behind."""

from __future__ import annotations

import ipaddress
import json
import signal
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import psutil
import pytest
from integration_support import (
    DemoRepository,
    StartServer,
    describe,
    kill_tree,
    living,
    names,
    process_tree,
    wait_gone,
)

from tritonlab.server.locate import ServerInstall

pytestmark = pytest.mark.integration


def _is_loopback(ip: str) -> bool:
    """127.0.0.1, also as gRPC reports it (the IPv4-mapped ``::ffff:127.0.0.1``)."""
    address = ipaddress.ip_address(ip)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address) == "127.0.0.1"


@pytest.mark.timeout(180)
def test_start_ready_stop_leaves_no_process(
    start_server: StartServer, demo_repository: DemoRepository
) -> None:
    server = start_server(demo_repository.path)
    assert server.is_alive()
    with urllib.request.urlopen(f"http://{server.http_url}/v2/health/ready", timeout=5) as resp:
        assert resp.status == 200

    command = server.command()
    for flag in ("--http-address", "--grpc-address", "--metrics-address"):
        assert f"{flag}=127.0.0.1" in command
    assert server.http_url.startswith("127.0.0.1:")
    assert server.grpc_url.startswith("127.0.0.1:")
    # Every listening socket of the server is on loopback.
    listening = [
        c.laddr
        for c in psutil.Process(server.pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]
    assert {a.port for a in listening} >= {server.ports.http, server.ports.grpc}
    assert all(_is_loopback(a.ip) for a in listening), listening

    assert server.pid is not None
    tree = process_tree(server.pid)
    # One Python backend stub per loaded model instance (baseline + batching variant).
    stubs = [p for p, n in zip(tree, names(tree), strict=True) if "python_backend_stub" in n]
    assert len(stubs) >= 2, describe(tree)

    server.stop()
    assert not server.is_alive()
    leftover = wait_gone(tree, timeout_s=5)
    assert not leftover, f"still running after stop(): {describe(leftover)}"


_STARTER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from tritonlab.server.locate import prepare_bundled_server
    from tritonlab.server.process import TritonServer

    server = TritonServer(prepare_bundled_server(), Path(sys.argv[1]), Path(sys.argv[2]))
    server.start(120)
    tree = server.process_tree()
    print(json.dumps([p.pid for p in tree]), flush=True)
    time.sleep(600)
    """
)


@pytest.mark.timeout(180)
def test_server_dies_with_its_killed_parent(
    server_install: ServerInstall, demo_repository: DemoRepository, tmp_path: Path
) -> None:
    """kill -9 of the process that started the server takes the server down (PR_SET_PDEATHSIG)."""
    log = tmp_path / "tritonserver.log"
    parent = subprocess.Popen(
        [sys.executable, "-c", _STARTER, str(demo_repository.path), str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    tree: list[psutil.Process] = []
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        if not line:
            parent.wait(timeout=10)
            pytest.fail(f"the starter exited without a server: {parent.stderr.read()}")  # type: ignore[union-attr]
        pids = json.loads(line)
        tree = [psutil.Process(pid) for pid in pids]
        server = tree[0]
        assert server.name() == "tritonserver"
        assert server.ppid() == parent.pid

        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)

        assert not wait_gone([server], timeout_s=10), "tritonserver outlived its parent"
        # Its backend stubs notice the server is gone and exit as well.
        leftover = wait_gone(tree, timeout_s=20)
        assert not leftover, f"still running after the parent died: {describe(leftover)}"
    finally:
        # Only if the test failed: do not leave this test's server behind.
        for proc in living(tree):
            proc.kill()
        if parent.poll() is None:
            kill_tree(parent)
        if log.exists() and living(tree):
            print(log.read_text(errors="replace")[-4000:])
