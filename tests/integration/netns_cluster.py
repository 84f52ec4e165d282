"""A two-host Ray cluster on one machine: two network namespaces joined by a veth pair.

Ray refuses a multi-node cluster on loopback (it resolves 127.0.0.1 to the machine's own
address), so each "host" is a network namespace of its own with a private address on a veth
link (iproute2), and a ``ray start`` process inside it. Traffic stays between the two
namespaces; each node's tritonserver listens on its namespace's loopback. Killing a host is
SIGKILL to every process in its namespace (``ip netns pids``), as a power cut would.

Needs root and iproute2; ``available()`` says why not where it cannot run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

RAY_PORT = 6380
SUBNET = "10.231.{n}"  # the test hosts' own addresses, inside their namespaces only


def _ip(*args: str) -> None:
    _run(["ip", *args])


def _run(command: list[str], env: dict[str, str] | None = None, timeout_s: float = 120) -> None:
    """Run a set-up command; a failure says what it printed."""
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[:6])} ... exited {done.returncode}: "
            f"{(done.stderr or done.stdout)[-2000:]}"
        )


def available() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None:
        return "needs iproute2 (ip)"
    try:
        import ray  # noqa: F401
    except ImportError:
        return "needs ray (pip install 'tritonlab[ray]')"
    return None


@dataclass
class Host:
    name: str
    address: str
    temp_dir: Path

    def pids(self) -> list[int]:
        out = subprocess.run(
            ["ip", "netns", "pids", self.name], capture_output=True, text=True, check=False
        ).stdout
        return [int(p) for p in out.split()]

    def kill(self) -> None:
        """Every process of this host, at once (SIGKILL)."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def command(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.name, *args]


@dataclass
class Cluster:
    head: Host
    worker: Host
    env: dict[str, str]

    @property
    def address(self) -> str:
        return f"{self.head.address}:{RAY_PORT}"

    def node_count(self) -> int:
        """Alive nodes, asked from inside the head's namespace."""
        code = (
            "import ray, json; ray.init(address='auto', logging_level='ERROR');"
            "print(json.dumps(sum(1 for n in ray.nodes() if n['Alive'])))"
        )
        out = subprocess.run(
            self.head.command(sys.executable, "-c", code),
            capture_output=True,
            text=True,
            env=self.env | {"RAY_ADDRESS": self.address},
            timeout=60,
            check=True,
        ).stdout
        return int(json.loads(out.strip().splitlines()[-1]))


def ray_env(base: dict[str, str]) -> dict[str, str]:
    """Quiet, quick to notice a dead node, and never phoning home."""
    return base | {
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_health_check_period_ms": "1000",
        "RAY_health_check_timeout_ms": "1000",
        "RAY_health_check_failure_threshold": "3",
    }


@contextlib.contextmanager
def two_host_cluster(tmp_path: Path, tag: str) -> Iterator[Cluster]:
    """Namespaces ``tl<tag><pid>a``/``...b`` with a Ray head and a worker, one ``tritonlab``
    slot and one CPU each; everything is killed and removed on the way out.

    The names carry this process's id, so two test sessions on one machine (a CI run beside a
    developer's) never meet; one left by a killed session with the same id is removed first."""
    n = 10 + (os.getpid() % 200)
    tag = f"{tag}{os.getpid() % 100000}"  # interface names hold at most 15 characters
    # Ray's sockets live under its temp dir, and a Unix socket path has at most 107 bytes:
    # pytest's tmp_path is too deep for that, so the nodes get a short folder of their own.
    del tmp_path
    short = Path(tempfile.mkdtemp(prefix=f"tl{tag}", dir="/tmp"))
    hosts = [
        Host(f"tl{tag}a", SUBNET.format(n=n) + ".1", short / "a"),
        Host(f"tl{tag}b", SUBNET.format(n=n) + ".2", short / "b"),
    ]
    veth = (f"tl{tag}va", f"tl{tag}vb")
    env = ray_env(dict(os.environ))
    bin_dir = Path(sys.executable).parent
    try:
        subprocess.run(["ip", "link", "del", veth[0]], capture_output=True, check=False)
        for host in hosts:
            subprocess.run(["ip", "netns", "del", host.name], capture_output=True, check=False)
            _ip("netns", "add", host.name)
            _ip("-n", host.name, "link", "set", "lo", "up")
        _ip("link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
        for host, end in zip(hosts, veth, strict=True):
            _ip("link", "set", end, "netns", host.name)
            _ip("-n", host.name, "addr", "add", f"{host.address}/24", "dev", end)
            _ip("-n", host.name, "link", "set", end, "up")
        common = [
            "--num-cpus",
            "1",
            "--resources",
            json.dumps({"tritonlab": 1}),
            "--object-store-memory",
            str(100 * 2**20),
            "--disable-usage-stats",
        ]
        head, worker = hosts
        _run(
            head.command(
                str(bin_dir / "ray"),
                "start",
                "--head",
                "--node-ip-address",
                head.address,
                "--port",
                str(RAY_PORT),
                "--include-dashboard",
                "false",
                "--temp-dir",
                str(head.temp_dir),
                *common,
            ),
            env,
        )
        _run(
            worker.command(
                str(bin_dir / "ray"),
                "start",
                "--address",
                f"{head.address}:{RAY_PORT}",
                "--node-ip-address",
                worker.address,
                *common,
            ),
            env,
        )
        cluster = Cluster(head, worker, env)
        deadline = time.monotonic() + 60
        while cluster.node_count() < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the worker node never joined the head")
            time.sleep(1)
        yield cluster
    finally:
        for host in reversed(hosts):
            host.kill()
        time.sleep(0.5)
        for host in hosts:
            subprocess.run(["ip", "netns", "del", host.name], capture_output=True, check=False)
        shutil.rmtree(short, ignore_errors=True)
