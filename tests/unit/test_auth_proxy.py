"""``serve --host``'s proxy against a fake upstream (issue 32): what reaches tritonserver.

The upstream is a tiny HTTP server (and a generic gRPC one) on 127.0.0.1 that records every
request it receives, so each test can say what the proxy let through: nothing on a wrong or
missing key, nothing chunked, no admin endpoint unless opened, no path that is not in normal
form; and what it sends back: 413 at once for a huge Content-Length (no body read), 400 for a
malformed one, a generic error instead of one that names the Python backend's shared memory.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import pytest

from tritonlab.server.auth_proxy import AuthProxy, Exposure
from tritonlab.server.endpoint import RESTRICTED_HEADER
from tritonlab.server.ports import find_free_ports

KEY = "unit-key"
GOOD = f"{RESTRICTED_HEADER}: {KEY}\r\n"
REGION = "triton_python_backend_shm_region_4f2a"


@dataclass
class Upstream:
    """What the fake tritonserver received: (method, path, headers, body) per request."""

    received: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    grpc_methods: list[str] = field(default_factory=list)
    answer_status: int = 200
    answer_body: bytes = b'{"ok":true}'

    def reset(self) -> None:
        """Forget what was received; answer 200 again."""
        self.received.clear()
        self.grpc_methods.clear()
        self.answer_status, self.answer_body = 200, b'{"ok":true}'


def _upstream_handler(upstream: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _any(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            if "chunked" in headers.get("transfer-encoding", ""):
                body = b"<chunked stream>"
            else:
                body = self.rfile.read(int(headers.get("content-length") or 0))
            upstream.received.append((self.command, self.path, headers, body))
            self.send_response(upstream.answer_status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(upstream.answer_body)))
            self.end_headers()
            self.wfile.write(upstream.answer_body)

        do_GET = do_POST = do_HEAD = _any

    return Handler


class _GrpcUpstream(grpc.GenericRpcHandler):
    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    def service(self, details: Any) -> Any:
        method = details.method

        def unary(request: bytes, context: Any) -> bytes:
            self.upstream.grpc_methods.append(method)
            if method.endswith("ModelConfig"):
                context.abort(grpc.StatusCode.INTERNAL, f"failed to map '{REGION}'")
            return b""

        return grpc.unary_unary_rpc_method_handler(unary)


@dataclass
class Rig:
    proxy: AuthProxy
    upstream: Upstream
    http: int
    grpc: int


def _rig(**settings: Any) -> Iterator[Rig]:
    from concurrent.futures import ThreadPoolExecutor

    upstream = Upstream()
    fake = ThreadingHTTPServer(("127.0.0.1", 0), _upstream_handler(upstream))
    fake.daemon_threads = True
    threading.Thread(target=fake.serve_forever, args=(0.05,), daemon=True).start()
    fake_grpc = grpc.server(ThreadPoolExecutor(max_workers=4))
    fake_grpc.add_generic_rpc_handlers([_GrpcUpstream(upstream)])
    grpc_port = fake_grpc.add_insecure_port("127.0.0.1:0")
    fake_grpc.start()
    http_port, public_grpc = find_free_ports(2, "127.0.0.1")
    known = {f.name for f in dataclasses.fields(Exposure)}  # the settings this proxy has
    exposure = Exposure(
        "127.0.0.1",
        http_port,
        public_grpc,
        KEY,
        **{k: v for k, v in settings.items() if k in known},
    )
    proxy = AuthProxy(
        exposure, f"127.0.0.1:{fake.server_address[1]}", f"127.0.0.1:{grpc_port}"
    ).start()
    try:
        yield Rig(proxy, upstream, http_port, public_grpc)
    finally:
        proxy.stop()
        fake.shutdown()
        fake.server_close()
        fake_grpc.stop(0)


@pytest.fixture(scope="module")
def _closed_rig() -> Iterator[Rig]:
    yield from _rig(max_body_bytes=1 << 20, read_timeout_s=2.0)


@pytest.fixture(scope="module")
def _open_rig() -> Iterator[Rig]:
    yield from _rig(max_body_bytes=1 << 20, read_timeout_s=2.0, open_admin_api=True)


def _fresh(rig: Rig) -> Rig:
    rig.upstream.reset()
    return rig


@pytest.fixture
def rig(_closed_rig: Rig) -> Rig:
    """A proxy (admin endpoints closed) whose upstream has received nothing yet."""
    return _fresh(_closed_rig)


@pytest.fixture
def open_rig(_open_rig: Rig) -> Rig:
    """A proxy with ``open_admin_api``, its upstream fresh."""
    return _fresh(_open_rig)


def _exchange(port: int, raw: bytes, wait_s: float = 10.0) -> tuple[int, bytes, float]:
    """Send ``raw`` on a fresh connection; (status, whole answer, seconds until it ended)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as sock:
        sock.sendall(raw)
        data = b""
        while not _complete(data):
            try:
                piece = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not piece:
                break
            data += piece
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    return status, data, time.monotonic() - started


def _complete(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def _request(method: str, path: str, headers: str = "", body: bytes = b"") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode() + body


def test_a_missing_or_wrong_key_reaches_nothing_and_no_body_is_read(rig: Rig) -> None:
    for key_line in ("", f"{RESTRICTED_HEADER}: wrong\r\n", GOOD + f"{RESTRICTED_HEADER}: x\r\n"):
        # a gigabyte announced, nothing sent: the 401 comes from the headers alone
        raw = _request("POST", "/v2/models/m/infer", key_line + "Content-Length: 1000000000\r\n")
        status, answer, took = _exchange(rig.http, raw)
        assert status == 401, answer
        assert took < 1.5
    status, _, _ = _exchange(rig.http, _request("GET", "/v2/models/m"))
    assert status == 401
    assert rig.upstream.received == []


def test_a_huge_content_length_is_413_at_once_without_reading_the_body(rig: Rig) -> None:
    raw = _request("POST", "/v2/models/m/infer", GOOD + "Content-Length: 1000000000\r\n")
    status, answer, took = _exchange(rig.http, raw)
    assert status == 413 and b"cap" in answer
    assert took < 1.5, "answered before any body arrived"
    assert rig.upstream.received == []


@pytest.mark.parametrize(
    "framing",
    [
        "Content-Length: -1\r\n",
        "Content-Length: abc\r\n",
        "Content-Length: 1e3\r\n",
        "Content-Length: 3\r\nContent-Length: 3\r\n",
        "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
        "Transfer-Encoding: chunked, chunked\r\n",
    ],
)
def test_malformed_framing_is_400(rig: Rig, framing: str) -> None:
    status, answer, took = _exchange(
        rig.http, _request("POST", "/v2/models/m/infer", GOOD + framing)
    )
    assert status == 400, answer
    assert took < 1.5
    assert rig.upstream.received == []


def test_a_chunked_body_arrives_with_a_content_length(rig: Rig) -> None:
    chunks = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nTrailer: x\r\n\r\n"
    raw = _request("POST", "/v2/models/m/infer", GOOD + "Transfer-Encoding: chunked\r\n", chunks)
    status, answer, _ = _exchange(rig.http, raw)
    assert status == 200, answer
    [(method, path, headers, body)] = rig.upstream.received
    assert (method, path, body) == ("POST", "/v2/models/m/infer", b"hello, world")
    assert headers["content-length"] == "12" and "transfer-encoding" not in headers
    assert RESTRICTED_HEADER not in headers, "the key is not forwarded"


def test_a_chunked_body_over_the_cap_is_413(rig: Rig) -> None:
    size = (1 << 20) + 1
    raw = _request(
        "POST",
        "/v2/models/m/infer",
        GOOD + "Transfer-Encoding: chunked\r\n",
        f"{size:x}\r\n".encode(),
    )
    status, _, took = _exchange(rig.http, raw)
    assert status == 413 and took < 1.5
    assert rig.upstream.received == []


def test_a_bad_chunk_is_400(rig: Rig) -> None:
    raw = _request(
        "POST", "/v2/x", GOOD + "Transfer-Encoding: chunked\r\n", b"zz\r\nhello\r\n0\r\n\r\n"
    )
    assert _exchange(rig.http, raw)[0] == 400
    assert rig.upstream.received == []


@pytest.mark.parametrize(
    "path",
    [
        "/v2/health/../repository/index",
        "/v2/health/%2e%2e/repository/index",
        "/v2/health/ready/../../repository/index",
        "/v2//repository/index",
        "/v2/./repository/index",
        "/v2/models/m/",
        "/v2/repository%2Findex",
        "v2/health/ready",
        "http://127.0.0.1/v2/health/ready",
    ],
)
def test_a_path_not_in_normal_form_is_refused_even_with_the_key(rig: Rig, path: str) -> None:
    for key_line in ("", GOOD):
        assert _exchange(rig.http, _request("POST", path, key_line))[0] == 400
    assert rig.upstream.received == []


def test_health_is_open_and_has_no_body(rig: Rig) -> None:
    assert _exchange(rig.http, _request("GET", "/v2/health/ready"))[0] == 200
    assert rig.upstream.received[0][:2] == ("GET", "/v2/health/ready")
    chunked = _request("POST", "/v2/health/live", "Transfer-Encoding: chunked\r\n", b"0\r\n\r\n")
    assert _exchange(rig.http, chunked)[0] == 400
    assert _exchange(rig.http, _request("GET", "/v2/health/other"))[0] == 401
    assert len(rig.upstream.received) == 1


ADMIN_PATHS = [
    "/v2/repository/index",
    "/v2/repository/models/m/load",
    "/v2/repository/models/m/unload",
    "/v2/systemsharedmemory/status",
    "/v2/systemsharedmemory/region/r/register",
    "/v2/cudasharedmemory/region/r/register",
    "/v2/trace/setting",
    "/v2/models/m/trace/setting",
    "/v2/models/m/versions/1/trace/setting",
    "/v2/logging",
    "/V2/Repository/index",
]


@pytest.mark.parametrize("path", ADMIN_PATHS)
def test_admin_endpoints_are_403_with_a_valid_key_unless_opened(rig: Rig, path: str) -> None:
    status, answer, _ = _exchange(
        rig.http, _request("POST", path, GOOD + "Content-Length: 2\r\n", b"{}")
    )
    assert status == 403 and b"--open-admin-api" in answer
    assert rig.upstream.received == []


def test_admin_endpoints_are_forwarded_to_key_holders_only_when_opened(
    rig: Rig, open_rig: Rig
) -> None:
    raw = _request("POST", "/v2/repository/index", GOOD + "Content-Length: 2\r\n", b"{}")
    assert _exchange(rig.http, raw)[0] == 403
    assert _exchange(open_rig.http, raw)[0] == 200
    assert _exchange(open_rig.http, _request("POST", "/v2/repository/index"))[0] == 401
    assert [r[1] for r in open_rig.upstream.received] == ["/v2/repository/index"]
    assert rig.upstream.received == []


def test_an_opened_registration_of_an_internal_region_is_refused(open_rig: Rig) -> None:
    path = "/v2/systemsharedmemory/region/r/register"
    for body, status in (
        (
            json.dumps({"key": REGION, "offset": 0, "byte_size": 64}).encode(),
            403,
        ),
        (b'{"key": "/mine", "key": "' + REGION.encode() + b'"}', 400),
        (b"not json", 400),
    ):
        raw = _request("POST", path, GOOD + f"Content-Length: {len(body)}\r\n", body)
        assert _exchange(open_rig.http, raw)[0] == status
    assert open_rig.upstream.received == []
    mine = json.dumps({"key": "/mine", "offset": 0, "byte_size": 64}).encode()
    raw = _request("POST", path, GOOD + f"Content-Length: {len(mine)}\r\n", mine)
    assert _exchange(open_rig.http, raw)[0] == 200


def test_an_error_naming_internal_shared_memory_is_withheld(rig: Rig) -> None:
    rig.upstream.answer_status = 400
    rig.upstream.answer_body = json.dumps({"error": f"unable to map '{REGION}'"}).encode()
    status, answer, _ = _exchange(rig.http, _request("GET", "/v2/models/m/config", GOOD))
    assert status == 400
    assert REGION.encode() not in answer and b"withheld" in answer
    rig.upstream.answer_body = b'{"error":"model m not found"}'
    assert b"model m not found" in _exchange(rig.http, _request("GET", "/v2/models/m", GOOD))[1]


def test_a_stalled_body_or_request_line_times_out(rig: Rig) -> None:
    raw = _request("POST", "/v2/models/m/infer", GOOD + "Content-Length: 10\r\n", b"abc")
    status, answer, took = _exchange(rig.http, raw)
    assert status == 408 and 1.5 < took < 8, answer  # read timeout 2 s
    _, _, took = _exchange(rig.http, b"GET /v2/health/re")
    assert took < 8
    assert rig.upstream.received == []


def test_an_expect_100_continue_is_answered_only_after_the_key_check(rig: Rig) -> None:
    raw = _request("POST", "/v2/models/m/infer", "Expect: 100-continue\r\nContent-Length: 5\r\n")
    status, answer, _ = _exchange(rig.http, raw)
    assert status == 401 and b"100 Continue" not in answer


def test_connections_over_the_worker_bound_get_503() -> None:
    for made in _rig(max_workers=2, read_timeout_s=5.0):
        idle = [socket.create_connection(("127.0.0.1", made.http)) for _ in range(2)]
        try:
            time.sleep(0.3)
            status, answer, took = _exchange(made.http, _request("GET", "/v2/health/ready"))
            assert status == 503 and took < 2, answer
        finally:
            for s in idle:
                s.close()
        time.sleep(0.3)
        assert _exchange(made.http, _request("GET", "/v2/health/ready"))[0] == 200


def _grpc_call(port: int, method: str, key: str | None) -> grpc.StatusCode:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(method)
        metadata = [(RESTRICTED_HEADER, key)] if key is not None else None
        try:
            call(b"", metadata=metadata, timeout=10)
        except grpc.RpcError as exc:
            return exc.code()  # type: ignore[no-any-return]
        return grpc.StatusCode.OK


def test_grpc_admin_methods_are_refused_with_a_valid_key_unless_opened(rig: Rig) -> None:
    service = "/inference.GRPCInferenceService/"
    for name in (
        "RepositoryModelLoad",
        "SystemSharedMemoryRegister",
        "TraceSetting",
        "LogSettings",
    ):
        assert _grpc_call(rig.grpc, service + name, KEY) == grpc.StatusCode.PERMISSION_DENIED
        assert _grpc_call(rig.grpc, service + name, None) == grpc.StatusCode.UNAUTHENTICATED
    assert _grpc_call(rig.grpc, "/other.Service/Call", KEY) == grpc.StatusCode.UNIMPLEMENTED
    assert _grpc_call(rig.grpc, service + "ModelInfer", "wrong") == grpc.StatusCode.UNAUTHENTICATED
    assert rig.upstream.grpc_methods == []
    assert _grpc_call(rig.grpc, service + "ServerLive", None) == grpc.StatusCode.OK
    assert _grpc_call(rig.grpc, service + "ModelInfer", KEY) == grpc.StatusCode.OK
    assert rig.upstream.grpc_methods == [service + "ServerLive", service + "ModelInfer"]


def test_grpc_admin_methods_are_forwarded_only_when_opened(rig: Rig, open_rig: Rig) -> None:
    method = "/inference.GRPCInferenceService/RepositoryIndex"
    assert _grpc_call(rig.grpc, method, KEY) == grpc.StatusCode.PERMISSION_DENIED
    assert _grpc_call(open_rig.grpc, method, KEY) == grpc.StatusCode.OK
    assert _grpc_call(open_rig.grpc, method, None) == grpc.StatusCode.UNAUTHENTICATED
    assert open_rig.upstream.grpc_methods == [method] and rig.upstream.grpc_methods == []


def test_grpc_errors_naming_internal_shared_memory_are_withheld(rig: Rig) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{rig.grpc}") as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelConfig")
        with pytest.raises(grpc.RpcError) as caught:
            call(b"", metadata=[(RESTRICTED_HEADER, KEY)], timeout=10)
    assert REGION not in (caught.value.details() or "")  # type: ignore[attr-defined]
    assert "withheld" in (caught.value.details() or "")  # type: ignore[attr-defined]


def test_the_rules_in_words() -> None:
    """The pure rules both sides share: normal form, admin paths, internal region names."""
    from tritonlab.server.proxy_rules import is_admin_path, names_internal_region, normal_path

    assert normal_path("/v2/models/m/infer?x=1") == "/v2/models/m/infer"
    for path in ("/v2/health/../repository", "/v2/%68ealth/ready", "/v2//x", "/v2/x/", "x"):
        assert normal_path(path) is None
    assert all(is_admin_path(p) for p in ADMIN_PATHS)
    for path in ("/v2/models/trace/infer", "/v2/models/m/ready", "/v2/health/ready", "/v2"):
        assert not is_admin_path(path)
    assert names_internal_region(f"cannot map {REGION}".encode())
    assert not names_internal_region("unable to find model 'm'")


def test_a_slow_drip_body_is_cut_at_its_deadline() -> None:
    """One byte every 0.3 s never trips the 1 s read timeout; the body's deadline (2 x 1 s
    plus its size at 256 KiB/s) cuts it."""
    for made in _rig(read_timeout_s=1.0):
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", made.http), timeout=10) as sock:
            sock.sendall(_request("POST", "/v2/models/m/infer", GOOD + "Content-Length: 100\r\n"))
            cut = False
            for _ in range(40):
                try:
                    sock.sendall(b"x")
                    time.sleep(0.3)
                    sock.settimeout(0.01)
                    if sock.recv(65536) == b"":
                        cut = True
                        break
                except TimeoutError:
                    pass
                except OSError:
                    cut = True
                    break
                finally:
                    sock.settimeout(10)
        assert cut and time.monotonic() - started < 5
        assert made.upstream.received == []
