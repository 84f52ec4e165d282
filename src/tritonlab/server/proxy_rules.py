"""What ``serve --host``'s proxy (``auth_proxy``) lets through, as pure functions of what a
client sent: the key, the request path (normal form only), the admin endpoints, shared-memory
keys that name the Python backend's own regions, and error messages that name them.

HTTP and gRPC share these rules (``proxy_http``, ``proxy_grpc``).
"""

from __future__ import annotations

import hmac
import json
import posixpath
import re
import urllib.parse
from typing import Any

# Health answers anyone (a load balancer's probe); everything else needs the key.
OPEN_HTTP_PATHS = frozenset({"/v2/health/live", "/v2/health/ready"})
# The first path segment after /v2/ of the admin endpoints: model control (loading a Python
# model with file overrides runs its code as the tritonlab user), shared memory, trace and
# log settings. Refused unless ``serve --open-admin-api``; matched as prefixes, any case.
ADMIN_HTTP_SEGMENTS = ("repository", "systemsharedmemory", "cudasharedmemory", "trace", "logging")
SHM_REGISTER_PATH = re.compile(r"/v2/systemsharedmemory/region/[^/]+/register")

GRPC_SERVICE = "/inference.GRPCInferenceService/"
OPEN_GRPC_METHODS = frozenset({GRPC_SERVICE + "ServerLive", GRPC_SERVICE + "ServerReady"})
ADMIN_GRPC_METHODS = frozenset(
    GRPC_SERVICE + name
    for name in (
        "RepositoryIndex",
        "RepositoryModelLoad",
        "RepositoryModelUnload",
        "SystemSharedMemoryStatus",
        "SystemSharedMemoryRegister",
        "SystemSharedMemoryUnregister",
        "CudaSharedMemoryStatus",
        "CudaSharedMemoryRegister",
        "CudaSharedMemoryUnregister",
        "TraceSetting",
        "LogSettings",
    )
)
# Every other method a client may call (with the key); anything else is refused.
SERVED_GRPC_METHODS = OPEN_GRPC_METHODS | frozenset(
    GRPC_SERVICE + name
    for name in (
        "ModelReady",
        "ServerMetadata",
        "ModelMetadata",
        "ModelInfer",
        "ModelStreamInfer",
        "ModelConfig",
        "ModelStatistics",
    )
)
STREAMING_GRPC_METHOD = GRPC_SERVICE + "ModelStreamInfer"
SHM_REGISTER_METHOD = GRPC_SERVICE + "SystemSharedMemoryRegister"

# Characters a normal path may hold: RFC 3986's path characters without '%' (an escape decodes
# to something else) and ';' (path parameters).
_PATH_CHARS = re.compile(r"[A-Za-z0-9._~!$&'()*+,=:@/-]+")
_QUERY_CHARS = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@/?%-]*")
# The Python backend's own shared-memory regions (default prefix
# ``triton_python_backend_shm_region_``) and the words its errors name them with. A client
# that learns such a name can map the backend's memory through the shared-memory API
# (the chain of CVE-2025-23319/23320/23334).
_INTERNAL_REGION = re.compile(r"backend_shm_region|shared memory region name", re.IGNORECASE)
WITHHELD = (
    "the server failed this request; its message named the server's internal shared memory "
    "and is withheld (the server log has it)"
)
ADMIN_REFUSED = (
    "refused: model control, shared memory, trace and logging are closed on this server "
    "(tritonlab serve --open-admin-api opens them to key holders)"
)


def key_matches(given: str | None, key: str) -> bool:
    """True when ``given`` equals ``key``, compared in constant time; False when no key was sent."""
    return given is not None and hmac.compare_digest(given.encode(), key.encode())


def normal_path(target: str) -> str | None:
    """The path of a request target (``/v2/...?query``) when it is in normal form, else None.
    Normal: absolute, no percent-escapes, no ``.`` or ``..`` segment, no ``//``, no trailing
    ``/``, only plain characters; i.e. percent-decoding and ``posixpath.normpath`` leave it as
    it was sent. Anything else is refused rather than normalised, so the proxy and Triton can
    never disagree about which endpoint a request is for (``/v2/health/../repository/...``)."""
    path, _, query = target.partition("?")
    if not path.startswith("/") or not _QUERY_CHARS.fullmatch(query):
        return None
    try:
        normal = posixpath.normpath(urllib.parse.unquote(path, errors="strict"))
    except UnicodeDecodeError:
        return None
    if normal != path or not _PATH_CHARS.fullmatch(path):
        return None
    return path


def is_admin_path(path: str) -> bool:
    """True for an admin endpoint (model control, shared memory, trace, logging) of a path in
    normal form: ``/v2/repository/...``, ``/v2/systemsharedmemory/...``,
    ``/v2/cudasharedmemory/...``, ``/v2/trace/...``, ``/v2/logging``, ``/v2/models/*/trace/...``
    (any case, any further characters after those names)."""
    segments = path.lower().split("/")
    if len(segments) < 3 or segments[1] != "v2":
        return False
    if segments[2].startswith(ADMIN_HTTP_SEGMENTS):
        return True
    return segments[2] == "models" and any(s.startswith("trace") for s in segments[4:])


def names_internal_region(text: str | bytes) -> bool:
    """True when ``text`` names one of the Python backend's own shared-memory regions."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return _INTERNAL_REGION.search(text) is not None


def shm_register_refusal(body: bytes) -> str | None:
    """Why an HTTP shared-memory registration body is refused (None: it may go on).
    Only with ``--open-admin-api``: a ``key`` naming the backend's own regions is refused, as is
    a body that is not one JSON object with one string ``key`` (duplicate fields would let
    Triton's parser and this one read different keys)."""

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        names = [k for k, _ in pairs]
        if len(names) != len(set(names)):
            raise ValueError("duplicate field")
        return dict(pairs)

    try:
        data = json.loads(body, object_pairs_hook=no_duplicates)
    except (ValueError, UnicodeDecodeError):
        return "a shared-memory registration must be one JSON object without duplicate fields"
    if not isinstance(data, dict) or not isinstance(data.get("key"), str):
        return "a shared-memory registration needs a string 'key'"
    if names_internal_region(data["key"]):
        return "refused: that key names the server's internal shared memory"
    return None
