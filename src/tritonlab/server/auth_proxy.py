"""An authenticating proxy in front of a loopback-only tritonserver (``serve --host``).

Triton 2.51 takes its restricted-API key only on its own command line, where every local user
can read it with ``ps``. So an exposed ``serve`` keeps tritonserver on 127.0.0.1 with no key at
all, and this proxy, in tritonlab's own process, listens on the address the user asked for. The
key (``TRITONLAB_API_KEY``) stays in tritonlab's memory: it is on no command line, on disk or in
a log, in the environment of no child (tritonserver, the Python backend stubs that run a
model's ``model.py``, perf_analyzer: ``procenv.child_environment``), and never sent to a Ray
node.

- HTTP/REST (``proxy_http``) and gRPC (``proxy_grpc``): every request but health's needs the
  key (``tritonlab-key``, compared in constant time; removed before forwarding), judged before
  any of its body is read. HTTP paths must be in normal form; bodies are capped
  (``--max-request-mib``, 64 MiB by default), a chunked body is read here and forwarded with a
  Content-Length; reads time out (30 s for headers and each body read); at most 64 connections
  (gRPC: calls) at once. gRPC forwards only Triton's known methods, as raw bytes.
- Admin endpoints (model control, shared memory, trace, logging: ``proxy_rules``), with a valid
  key too, are refused unless ``serve --open-admin-api``: loading a Python model with file
  overrides runs its code as the tritonlab user. Even when opened, a system shared-memory
  registration whose key names the Python backend's own regions is refused.
- Error messages that name those regions are always replaced by a generic one (HTTP and gRPC).

Against the bundled server's August 2025 advisories (fixed in Triton 25.07, not in 2.51.0): the
chunked-encoding stack overflow (CVE-2025-23310/23311) is out of a remote client's reach, since
no chunked request goes through the proxy; the Python-backend shared-memory chain
(CVE-2025-23319/23320/23334) loses its first two steps (the region names in error messages, and
the registration API, closed by default). A local user can still reach the loopback
tritonserver directly, unauthenticated. Not covered: TLS (the key and the data cross the
network in clear text: put a TLS terminator in front), the metrics port (it stays on loopback),
and anything a key holder can do with inference itself.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tritonlab.server.proxy_grpc import MAX_ANSWER_BYTES, GrpcForwarder
from tritonlab.server.proxy_http import BoundedHTTPServer, http_handler
from tritonlab.server.proxy_rules import key_matches

__all__ = ["DEFAULT_MAX_BODY_BYTES", "AuthProxy", "Exposure", "key_matches"]

DEFAULT_MAX_BODY_BYTES = 64 << 20
DEFAULT_MAX_WORKERS = 64
DEFAULT_READ_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Exposure:
    """Where an exposed server answers, through the proxy, the key it asks for (never shown:
    it is left out of the record's repr) and what the proxy lets through."""

    host: str
    http_port: int
    grpc_port: int
    key: str = field(repr=False)
    # Model control, shared memory, trace and logging for key holders (``--open-admin-api``).
    open_admin_api: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_workers: int = DEFAULT_MAX_WORKERS
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S

    @property
    def http_url(self) -> str:
        """``host:port`` where the proxy answers HTTP."""
        return f"{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """``host:port`` where the proxy answers gRPC."""
        return f"{self.host}:{self.grpc_port}"


class AuthProxy:
    """Forwards requests that carry the exposure's key to the loopback server."""

    def __init__(self, exposure: Exposure, upstream_http: str, upstream_grpc: str) -> None:
        self.exposure = exposure
        self.upstream_http, self.upstream_grpc = upstream_http, upstream_grpc
        self._http: BoundedHTTPServer | None = None
        self._grpc: Any = None
        self._forwarder: GrpcForwarder | None = None

    def start(self) -> AuthProxy:
        """Start the HTTP and gRPC listeners in background threads; return ``self``."""
        import grpc

        where = self.exposure
        self._http = BoundedHTTPServer(
            (where.host, where.http_port),
            http_handler(self.upstream_http, where),
            where.max_workers,
        )
        threading.Thread(target=self._http.serve_forever, args=(0.1,), daemon=True).start()
        options = [
            ("grpc.max_send_message_length", MAX_ANSWER_BYTES),
            ("grpc.max_receive_message_length", where.max_body_bytes),
        ]
        self._forwarder = GrpcForwarder(self.upstream_grpc, where)
        self._grpc = grpc.server(
            ThreadPoolExecutor(max_workers=where.max_workers),
            options=options,
            maximum_concurrent_rpcs=where.max_workers,
        )
        self._grpc.add_generic_rpc_handlers([self._forwarder])
        self._grpc.add_insecure_port(where.grpc_url)
        self._grpc.start()
        return self

    def stop(self) -> None:
        """Stop both listeners (gRPC with a 2 s grace); safe to call twice."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._grpc is not None:
            self._grpc.stop(grace=2).wait()
            self._grpc = None
        if self._forwarder is not None:
            self._forwarder.close()
            self._forwarder = None
