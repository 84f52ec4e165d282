"""One way to get a server for a command: the bundled binary, an external one, or a remote URL."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tritonlab.errors import ServerError
from tritonlab.server.auth_proxy import DEFAULT_MAX_BODY_BYTES, Exposure
from tritonlab.server.endpoint import RESTRICTED_HEADER, RemoteServer, ServerEndpoint
from tritonlab.server.locate import external_server, prepare_bundled_server
from tritonlab.server.process import LOOPBACK_HOSTS, ServerPorts, TritonServer


@dataclass(frozen=True)
class ServerOptions:
    """Where the server comes from (``url``: one someone else runs; ``server_bin``: an external
    tritonserver, with its own backends unless ``backend_dir``) and where it listens."""

    url: str | None = None
    grpc_url: str | None = None
    server_bin: Path | None = None
    backend_dir: Path | None = None
    host: str = "127.0.0.1"
    http_port: int = 0
    grpc_port: int = 0
    metrics_port: int = 0
    ready_timeout_s: float = 120.0
    # Required when ``host`` is not loopback: the restricted APIs then need this header value.
    api_key: str | None = field(default=None, repr=False)
    # Exposed (``auth_proxy``): key holders may also reach model control, shared memory, trace
    # and logging; and the largest request body the proxy takes.
    open_admin_api: bool = False
    max_request_bytes: int = DEFAULT_MAX_BODY_BYTES
    # Further tritonserver flags the served configurations need (``repository/knobs.py``: a
    # response cache's ``--cache-config``); ignored for a remote server, which has its own.
    server_args: tuple[str, ...] = ()
    # Whether a measuring session puts the server and perf_analyzer on disjoint CPUs
    # (``cpu_split.py``), and the server's CPUs it decided (empty: not pinned).
    cpu_split: bool = True
    server_cpus: tuple[int, ...] = ()

    @property
    def describe(self) -> str:
        """The server in words for the log: a remote URL, an external binary or the bundled one."""
        if self.url:
            return f"remote server at {self.url}"
        if self.server_bin:
            return f"external tritonserver {self.server_bin}"
        return "bundled tritonserver 2.51.0 (nvidia-pytriton)"


def make_server(
    options: ServerOptions, repository: Path, log_path: Path, explicit_model_control: bool
) -> ServerEndpoint:
    """Build (not start) the server described by ``options``."""
    if options.url:
        return RemoteServer(options.url, options.grpc_url)
    exposed = options.host not in LOOPBACK_HOSTS
    key = options.api_key
    if exposed and not key:
        raise ServerError(
            f"--host {options.host} exposes the server beyond this machine: set "
            "TRITONLAB_API_KEY in the environment, and every request but health then needs the "
            f"header '{RESTRICTED_HEADER}: <key>'"
        )
    install = (
        external_server(options.server_bin, options.backend_dir)
        if options.server_bin
        else prepare_bundled_server()
    )
    host, exposure = options.host, None
    if not exposed or not key:
        ports = ServerPorts.resolve(
            options.http_port, options.grpc_port, options.metrics_port, options.host
        )
    else:
        # Exposed: tritonserver on loopback (free ports; metrics where asked, on loopback), and
        # an authenticating proxy on the address and ports the user asked for (``auth_proxy``).
        public = ServerPorts.resolve(options.http_port, options.grpc_port, 0, options.host)
        host, ports = "127.0.0.1", ServerPorts.resolve(0, 0, options.metrics_port, "127.0.0.1")
        exposure = Exposure(
            options.host,
            public.http,
            public.grpc,
            key,
            open_admin_api=options.open_admin_api,
            max_body_bytes=options.max_request_bytes,
        )
    return TritonServer(
        install,
        repository,
        log_path,
        ports,
        host,
        explicit_model_control,
        extra_args=options.server_args,
        exposure=exposure,
        cpus=options.server_cpus,
    )


@contextlib.contextmanager
def running_server(
    options: ServerOptions, repository: Path, log_path: Path, explicit_model_control: bool = False
) -> Iterator[ServerEndpoint]:
    """Start (or reach) a server, yield it ready, and always stop what was started."""
    server = make_server(options, repository, log_path, explicit_model_control)
    if isinstance(server, TritonServer):
        with server.start(options.ready_timeout_s):
            yield server
    elif isinstance(server, RemoteServer):
        server.wait_ready(options.ready_timeout_s)
        yield server
    else:  # pragma: no cover - make_server returns one of the two
        raise ServerError(f"cannot run a server of type {type(server).__name__}")
