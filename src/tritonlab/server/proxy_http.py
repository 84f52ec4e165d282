"""The HTTP side of ``serve --host``'s proxy (``auth_proxy``): a bounded threaded server whose
handler checks a request from its request line and headers alone, then reads its body under a
cap and a deadline, and forwards it to the loopback tritonserver with a Content-Length.

In order, before a byte of the body is read: the path must be in normal form (else 400), the
key must match unless the path is health's (else 401), an admin endpoint must have been opened
(else 403), the framing must be one Content-Length or ``Transfer-Encoding: chunked`` (else 400;
a length over the cap: 413). Only then is a client's ``Expect: 100-continue`` answered and the
body read; a chunked body is read here, whole, and goes on with a Content-Length. Every refusal
is one line of JSON and closes the connection (the body stays unread).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from tritonlab.server.endpoint import RESTRICTED_HEADER
from tritonlab.server.proxy_rules import (
    ADMIN_REFUSED,
    OPEN_HTTP_PATHS,
    SHM_REGISTER_PATH,
    WITHHELD,
    is_admin_path,
    key_matches,
    names_internal_region,
    normal_path,
    shm_register_refusal,
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
    "expect",
    "content-length",
}
# A body must arrive at this average rate (after twice the read timeout's grace), so a slow
# sender cannot hold a worker for long: 64 MiB gets 60 s + 256 s.
MIN_BODY_RATE = 256 * 1024
UPSTREAM_TIMEOUT_S = 600.0
_LENGTH = re.compile(r"[0-9]{1,18}")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,15}")
_MAX_CHUNK_LINE = 1024
_MAX_TRAILERS = 32
_WRITE_PIECE = 1 << 20


class ProxySettings(Protocol):
    """What the handler needs of an ``Exposure``."""

    @property
    def key(self) -> str: ...
    @property
    def open_admin_api(self) -> bool: ...
    @property
    def max_body_bytes(self) -> int: ...
    @property
    def read_timeout_s(self) -> float: ...


class Refusal(Exception):
    """A request answered by the proxy itself (``status``, one line), never forwarded."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _busy_response() -> bytes:
    payload = b'{"error":"the server is busy: too many connections; try again"}'
    return (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: "
        + str(len(payload)).encode()
        + b"\r\n\r\n"
        + payload
    )


class BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_workers``; the next gets a 503 and is closed."""

    daemon_threads = True
    block_on_close = False

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_workers: int
    ) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_workers)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Start a worker when a slot is free; else answer 503 and close."""
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.settimeout(1.0)
                request.sendall(_busy_response())
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve the connection, then free its slot."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def http_handler(upstream: str, settings: ProxySettings) -> type[BaseHTTPRequestHandler]:
    """The request handler class of a proxy in front of ``upstream`` (``host:port``)."""
    host, _, port = upstream.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = settings.read_timeout_s  # every socket read and write of the connection
        _continue = False
        _deadline: threading.Timer | None = None

        def log_message(self, format: str, *args: Any) -> None:
            """Nothing to stderr: a request log could carry what a client sent."""

        def handle_one_request(self) -> None:
            """One request, its request line and headers within the read timeout."""
            self._continue = False
            self._arm(settings.read_timeout_s)
            try:
                super().handle_one_request()
            finally:
                self._arm(None)

        def handle_expect_100(self) -> bool:
            """Answer ``Expect: 100-continue`` only once the request has been admitted."""
            self._continue = True
            return True

        def _arm(self, seconds: float | None) -> None:
            """Cut the connection after ``seconds`` (None: no deadline)."""
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            if seconds is not None:
                self._deadline = threading.Timer(seconds, self._cut)
                self._deadline.daemon = True
                self._deadline.start()

        def _cut(self) -> None:
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def _forward(self) -> None:
            self._arm(None)
            try:
                body = self._admitted_body()
            except Refusal as refusal:
                self._refuse(refusal.status, refusal.message)
                return
            except (TimeoutError, OSError):
                self._refuse(408, "the request was not sent in time")
                return
            headers = {
                k: v
                for k, v in self.headers.items()
                if k.lower() not in HOP_BY_HOP and k.lower() != RESTRICTED_HEADER
            }
            conn = http.client.HTTPConnection(host, int(port), timeout=UPSTREAM_TIMEOUT_S)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
            except (OSError, http.client.HTTPException):
                self._refuse(502, "the server behind this proxy did not answer")
                return
            finally:
                conn.close()
            self._answer(answer.status, answer.reason, answer.getheaders(), data)

        do_GET = do_POST = do_HEAD = _forward

        def _admitted_body(self) -> bytes | None:
            """The body of an admitted request (None: none); ``Refusal`` otherwise."""
            path = normal_path(self.path)
            if path is None:
                raise Refusal(
                    400,
                    "the request path is not in normal form (no %-escapes, '.', '..', '//' "
                    "or trailing '/')",
                )
            open_path = path in OPEN_HTTP_PATHS
            if not open_path:
                sent = self.headers.get_all(RESTRICTED_HEADER) or []
                if len(sent) != 1 or not key_matches(sent[0], settings.key):
                    raise Refusal(401, f"this server needs the header {RESTRICTED_HEADER}: <key>")
            if is_admin_path(path) and not settings.open_admin_api:
                raise Refusal(403, ADMIN_REFUSED)
            length, chunked = self._framing()
            if open_path and (chunked or length):
                raise Refusal(400, "a health request has no body")
            if self._continue:
                self.send_response_only(100)
                self.end_headers()
            if not chunked and not length:
                return None
            # A backstop for a slow drip (a stall gets the socket timeout's 408 first).
            size = length or settings.max_body_bytes
            self._arm(2 * settings.read_timeout_s + size / MIN_BODY_RATE)
            try:
                body = self._read_chunked() if chunked else self._read_exact(length)
            finally:
                self._arm(None)
            if SHM_REGISTER_PATH.fullmatch(path):
                reason = shm_register_refusal(body)
                if reason is not None:
                    raise Refusal(403 if reason.startswith("refused") else 400, reason)
            return body

        def _framing(self) -> tuple[int, bool]:
            """(Content-Length, chunked) from the headers; ``Refusal`` for anything else."""
            encodings = self.headers.get_all("Transfer-Encoding") or []
            lengths = self.headers.get_all("Content-Length") or []
            if encodings and lengths:
                raise Refusal(
                    400, "a request has a Content-Length or a Transfer-Encoding, not both"
                )
            if encodings:
                codings = [c.strip().lower() for c in ",".join(encodings).split(",")]
                if codings != ["chunked"]:
                    raise Refusal(400, "the only transfer encoding taken is 'chunked'")
                return 0, True
            if not lengths:
                return 0, False
            if len(lengths) != 1 or not _LENGTH.fullmatch(lengths[0].strip()):
                raise Refusal(400, "the Content-Length is not one decimal number")
            length = int(lengths[0])
            if length > settings.max_body_bytes:
                raise Refusal(413, self._too_large())
            return length, False

        def _too_large(self) -> str:
            cap = settings.max_body_bytes
            return f"the request body is over this server's cap of {cap} bytes ({cap >> 20} MiB)"

        def _read_exact(self, length: int) -> bytes:
            parts, got = [], 0
            while got < length:
                piece = self.rfile.read1(min(length - got, 1 << 20))
                if not piece:
                    raise Refusal(400, "the body ended before its Content-Length")
                parts.append(piece)
                got += len(piece)
            return b"".join(parts)

        def _read_chunked(self) -> bytes:
            parts, got = [], 0
            while True:
                line = self.rfile.readline(_MAX_CHUNK_LINE + 1)
                if not line.endswith(b"\n"):
                    raise Refusal(400, "a chunk's size line is missing or too long")
                size_text = line.split(b";", 1)[0].strip()
                if not _CHUNK_SIZE.fullmatch(size_text):
                    raise Refusal(400, "a chunk's size is not a hexadecimal number")
                size = int(size_text, 16)
                if got + size > settings.max_body_bytes:
                    raise Refusal(413, self._too_large())
                if size == 0:
                    break
                parts.append(self._read_exact(size))
                got += size
                if self._read_exact(2) != b"\r\n":
                    raise Refusal(400, "a chunk does not end with CRLF")
            for _ in range(_MAX_TRAILERS):
                line = self.rfile.readline(_MAX_CHUNK_LINE + 1)
                if line in (b"\r\n", b"\n"):
                    return b"".join(parts)
                if not line.endswith(b"\n"):
                    break
            raise Refusal(400, "the chunked body does not end properly")

        def _answer(
            self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes
        ) -> None:
            if status >= 400 and names_internal_region(data):
                data = json.dumps({"error": WITHHELD}).encode()
                headers = [("Content-Type", "application/json")]
            self.send_response(status, reason)
            for k, v in headers:
                if k.lower() not in HOP_BY_HOP:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                for start in range(0, len(data), _WRITE_PIECE):
                    self.wfile.write(data[start : start + _WRITE_PIECE])

        def _refuse(self, status: int, message: str) -> None:
            """One line of JSON, then the connection is closed (a body may be left unread)."""
            self.close_connection = True
            payload = json.dumps({"error": message}).encode()
            with contextlib.suppress(OSError):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(payload)

    return Handler
