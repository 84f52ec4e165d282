"""The gRPC side of ``serve --host``'s proxy (``auth_proxy``): a generic handler that forwards
the known methods of Triton's ``GRPCInferenceService`` as raw bytes after the key check.

Each call's metadata is checked before its message is looked at: the key (``UNAUTHENTICATED``
without it, but for ``ServerLive`` and ``ServerReady``), then the admin methods
(``PERMISSION_DENIED`` unless ``--open-admin-api``), then the method (any other:
``UNIMPLEMENTED``). Messages are capped by gRPC itself (``grpc.max_receive_message_length``).
Every method but ``ModelStreamInfer`` is forwarded as a unary call; errors and stream responses
that name the Python backend's own shared-memory regions come back as a generic message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tritonlab.server.endpoint import RESTRICTED_HEADER
from tritonlab.server.proxy_http import UPSTREAM_TIMEOUT_S, ProxySettings
from tritonlab.server.proxy_rules import (
    ADMIN_GRPC_METHODS,
    ADMIN_REFUSED,
    OPEN_GRPC_METHODS,
    SERVED_GRPC_METHODS,
    SHM_REGISTER_METHOD,
    STREAMING_GRPC_METHOD,
    WITHHELD,
    key_matches,
    names_internal_region,
)

# What the proxy accepts from tritonserver (responses): large outputs pass.
MAX_ANSWER_BYTES = 1 << 30


class GrpcForwarder:
    """A generic gRPC handler: the served methods, forwarded as bytes after the checks."""

    def __init__(self, upstream: str, settings: ProxySettings) -> None:
        import grpc

        self.grpc = grpc
        self.settings = settings
        options = [
            ("grpc.max_send_message_length", settings.max_body_bytes),
            ("grpc.max_receive_message_length", MAX_ANSWER_BYTES),
        ]
        self.channel = grpc.insecure_channel(upstream, options=options)

    def service(self, details: Any) -> Any:
        """The handler of one call: unary for every method but ``ModelStreamInfer``."""
        method = details.method
        if method == STREAMING_GRPC_METHOD:
            return self.grpc.stream_stream_rpc_method_handler(self._stream(method))
        return self.grpc.unary_unary_rpc_method_handler(self._unary(method))

    def _admit(self, method: str, context: Any) -> list[tuple[str, Any]]:
        """The metadata to forward, once the call passes every check (else the call aborts)."""
        codes = self.grpc.StatusCode
        metadata = list(context.invocation_metadata())
        if method not in OPEN_GRPC_METHODS:
            sent = [v for k, v in metadata if k == RESTRICTED_HEADER]
            if len(sent) != 1 or not isinstance(sent[0], str):
                sent = [None]
            if not key_matches(sent[0], self.settings.key):
                context.abort(
                    codes.UNAUTHENTICATED,
                    f"this server needs the metadata {RESTRICTED_HEADER}: <key>",
                )
        if method in ADMIN_GRPC_METHODS and not self.settings.open_admin_api:
            context.abort(codes.PERMISSION_DENIED, ADMIN_REFUSED)
        if method not in SERVED_GRPC_METHODS | ADMIN_GRPC_METHODS:
            context.abort(codes.UNIMPLEMENTED, f"{method} is not served here")
        return [(k, v) for k, v in metadata if k != RESTRICTED_HEADER]

    def _failed(self, exc: Any, context: Any) -> None:
        details = exc.details() or ""
        context.abort(exc.code(), WITHHELD if names_internal_region(details) else details)

    def _unary(self, method: str) -> Any:
        timeout = (
            self.settings.read_timeout_s if method in OPEN_GRPC_METHODS else UPSTREAM_TIMEOUT_S
        )

        def behaviour(request: bytes, context: Any) -> bytes:
            forwarded = self._admit(method, context)
            if method == SHM_REGISTER_METHOD:
                self._check_registration(request, context)
            try:
                answer: bytes = self.channel.unary_unary(method)(
                    request, metadata=forwarded, timeout=timeout
                )
            except self.grpc.RpcError as exc:
                self._failed(exc, context)
                raise  # not reached: abort raises
            return answer

        return behaviour

    def _stream(self, method: str) -> Any:
        def behaviour(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
            forwarded = self._admit(method, context)
            call = self.channel.stream_stream(method)
            try:
                for answer in call(requests, metadata=forwarded):
                    yield _scrubbed_stream_answer(answer)
            except self.grpc.RpcError as exc:
                self._failed(exc, context)

        return behaviour

    def _check_registration(self, request: bytes, context: Any) -> None:
        """A registration whose key names the backend's own regions is refused."""
        from google.protobuf.message import DecodeError
        from tritonclient.grpc import service_pb2

        try:
            message = service_pb2.SystemSharedMemoryRegisterRequest.FromString(request)
        except DecodeError:
            context.abort(self.grpc.StatusCode.INVALID_ARGUMENT, "not a registration request")
        if names_internal_region(message.key):
            context.abort(
                self.grpc.StatusCode.PERMISSION_DENIED,
                "refused: that key names the server's internal shared memory",
            )

    def close(self) -> None:
        """Close the channel to tritonserver."""
        self.channel.close()


def _scrubbed_stream_answer(answer: bytes) -> bytes:
    """A ``ModelStreamInferResponse`` whose error names internal regions, made generic."""
    if not names_internal_region(answer):
        return answer
    from google.protobuf.message import DecodeError
    from tritonclient.grpc import service_pb2

    try:
        message = service_pb2.ModelStreamInferResponse.FromString(answer)
    except DecodeError:  # not one: pass it on as it came
        return answer
    if not names_internal_region(message.error_message):
        return answer
    return bytes(service_pb2.ModelStreamInferResponse(error_message=WITHHELD).SerializeToString())
