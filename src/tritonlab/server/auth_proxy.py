"""An authenticating proxy in front of a loopback-only tritonserver (``serve --host``).

Triton 2.51 takes its restricted-API key only on its own command line, where every local user
can read it with ``ps``. So an exposed ``serve`` keeps tritonserver on 127.0.0.1 with no key at
all, and this proxy, in tritonlab's own process (the key stays in its memory: never on a
command line, on disk or in a log), listens on the address the user asked for:

- HTTP/REST: every request but ``/v2/health/*`` needs the header ``tritonlab-key: <key>``
  (compared in constant time); otherwise 401 and nothing reaches Triton. The header is removed
  before the request is forwarded.
- gRPC: every call but ``ServerLive`` and ``ServerReady`` needs the metadata
  ``tritonlab-key``; otherwise ``UNAUTHENTICATED``. Calls are forwarded as raw bytes (a generic
  handler), streaming ones included.

Inference, metadata, model configuration, statistics and model control are all covered. Not
covered: TLS (the key and the data cross the network in clear text: put a TLS terminator in
front), and the metrics port, which stays on loopback.
"""

from __future__ import annotations

import hmac
import http.client
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tritonlab.server.endpoint import RESTRICTED_HEADER

OPEN_HTTP_PREFIX = "/v2/health/"
OPEN_GRPC_METHODS = (
    "/inference.GRPCInferenceService/ServerLive",
    "/inference.GRPCInferenceService/ServerReady",
)
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
}
MAX_MESSAGE_BYTES = 1 << 30


@dataclass(frozen=True)
class Exposure:
    """Where an exposed server answers, through the proxy, and the key it asks for (never
    shown: it is left out of the record's repr)."""

    host: str
    http_port: int
    grpc_port: int
    key: str = field(repr=False)

    @property
    def http_url(self) -> str:
        """``host:port`` where the proxy answers HTTP."""
        return f"{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """``host:port`` where the proxy answers gRPC."""
        return f"{self.host}:{self.grpc_port}"


def key_matches(given: str | None, key: str) -> bool:
    """True when ``given`` equals ``key``, compared in constant time; False when no key was sent."""
    return given is not None and hmac.compare_digest(given.encode(), key.encode())


def _http_handler(upstream: str, key: str) -> type[BaseHTTPRequestHandler]:
    host, _, port = upstream.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Nothing to stderr: a request log could carry what a client sent."""

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if not self.path.startswith(OPEN_HTTP_PREFIX) and not key_matches(
                self.headers.get(RESTRICTED_HEADER), key
            ):
                payload = (
                    b'{"error":"this server needs the header '
                    + RESTRICTED_HEADER.encode()
                    + b': <key>"}'
                )
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            headers = {
                k: v
                for k, v in self.headers.items()
                if k.lower() not in HOP_BY_HOP and k.lower() != RESTRICTED_HEADER
            }
            conn = http.client.HTTPConnection(host, int(port), timeout=600)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                self.send_response(answer.status, answer.reason)
                for k, v in answer.getheaders():
                    if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            finally:
                conn.close()

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

    return Handler


class _GrpcForwarder:
    """A generic gRPC handler: every method, forwarded as bytes after the key check."""

    def __init__(self, upstream: str, key: str) -> None:
        import grpc

        self.grpc = grpc
        self.key = key
        options = [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ]
        self.channel = grpc.insecure_channel(upstream, options=options)

    def service(self, details: Any) -> Any:
        method = details.method

        def behaviour(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
            metadata = dict(context.invocation_metadata())
            if method not in OPEN_GRPC_METHODS and not key_matches(
                metadata.get(RESTRICTED_HEADER), self.key
            ):
                context.abort(
                    self.grpc.StatusCode.UNAUTHENTICATED,
                    f"this server needs the metadata {RESTRICTED_HEADER}: <key>",
                )
            forwarded = [(k, v) for k, v in metadata.items() if k != RESTRICTED_HEADER]
            call = self.channel.stream_stream(method)
            try:
                yield from call(requests, metadata=forwarded)
            except self.grpc.RpcError as exc:
                context.abort(exc.code(), exc.details() or "")

        return self.grpc.stream_stream_rpc_method_handler(behaviour)


class AuthProxy:
    """Listens where ``exposure`` says and forwards requests that carry its key to the loopback
    server at ``upstream_http`` / ``upstream_grpc``."""

    def __init__(self, exposure: Exposure, upstream_http: str, upstream_grpc: str) -> None:
        self.exposure = exposure
        self.upstream_http, self.upstream_grpc = upstream_http, upstream_grpc
        self._http: ThreadingHTTPServer | None = None
        self._grpc: Any = None

    def start(self) -> AuthProxy:
        """Start the HTTP and gRPC listeners in background threads; return ``self``.

        ``OSError`` (or gRPC's ``RuntimeError``) when a port cannot be bound.
        """
        import grpc

        where, key = self.exposure, self.exposure.key
        self._http = ThreadingHTTPServer(
            (where.host, where.http_port), _http_handler(self.upstream_http, key)
        )
        self._http.daemon_threads = True
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        options = [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ]
        self._grpc = grpc.server(ThreadPoolExecutor(max_workers=16), options=options)
        self._grpc.add_generic_rpc_handlers([_GrpcForwarder(self.upstream_grpc, key)])
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
