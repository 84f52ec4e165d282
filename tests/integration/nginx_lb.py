"""nginx on loopback in front of several tritonservers: HTTP and gRPC, round robin.

The rehearsal of a scaled service on one machine (Debian's ``nginx-light``): every request
goes to the next server in turn, so a client sees one endpoint and cannot tell the replicas
apart, which is what ``tritonlab perf --url`` must then say.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tritonlab.server.ports import find_free_ports

CONF = """
daemon off;
master_process on;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  upstream triton_http {{ {http_servers} keepalive 16; }}
  upstream triton_grpc {{ {grpc_servers} }}
  server {{
    listen 127.0.0.1:{http_port};
    location / {{
      proxy_pass http://triton_http;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
  server {{
    listen 127.0.0.1:{grpc_port} http2;
    location / {{ grpc_pass grpc://triton_grpc; }}
  }}
}}
"""


def available() -> str | None:
    return None if shutil.which("nginx") else "needs nginx (apt-get install nginx-light)"


@dataclass(frozen=True)
class Balancer:
    http_url: str
    grpc_url: str


def _wait_listening(port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nginx did not listen on {port}")


@contextlib.contextmanager
def load_balancer(
    tmp: Path, http_backends: list[str], grpc_backends: list[str]
) -> Iterator[Balancer]:
    """nginx round-robin over ``host:port`` backends; stopped (and waited for) on the way out."""
    tmp.mkdir(parents=True, exist_ok=True)
    http_port, grpc_port = find_free_ports(2)
    conf = tmp / "nginx.conf"
    conf.write_text(
        CONF.format(
            tmp=tmp,
            http_port=http_port,
            grpc_port=grpc_port,
            http_servers=" ".join(f"server {b};" for b in http_backends),
            grpc_servers=" ".join(f"server {b};" for b in grpc_backends),
        )
    )
    proc = subprocess.Popen(
        ["nginx", "-c", str(conf), "-p", str(tmp)],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp / "nginx.stderr", "w"),  # noqa: SIM115 - closed with the process
    )
    try:
        _wait_listening(http_port)
        _wait_listening(grpc_port)
        yield Balancer(f"127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
