"""A Triton server reachable over HTTP/gRPC, whether tritonlab started it or not.

``TritonServer`` (a child process) and ``RemoteServer`` (``--url``) share this interface:
readiness, model load/unload in explicit mode, metadata and the statistics extension.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from tritonlab.errors import ServerError

# A URL where nothing answers at all is wrong, not slow: fail after this, not the full timeout.
UNREACHABLE_TIMEOUT_S = 10.0
# How long an unload is waited for before the run stops (a model that will not go).
UNLOAD_WAIT_S = 30.0
# The header a server bound beyond loopback requires for its restricted APIs (see process.py).
RESTRICTED_HEADER = "tritonlab-key"


def one_line(message: str) -> str:
    """A server message on one line, without the traceback the Python backend appends."""
    return " ".join(message.split("\n\nAt:")[0].split())


class ServerEndpoint:
    """Addresses of a server (``host:port`` for HTTP and gRPC) and the calls made to it."""

    def __init__(self, http_url: str, grpc_url: str, metrics_url: str | None = None) -> None:
        self.http_url = http_url
        self.grpc_url = grpc_url
        self.metrics_url = metrics_url

    def url(self, protocol: str) -> str:
        """The ``host:port`` for ``protocol`` (``grpc``, else HTTP)."""
        return self.grpc_url if protocol == "grpc" else self.http_url

    def failure_detail(self) -> str:
        """Log lines that explain a failure; a remote server has none to show."""
        return ""

    def log_size(self) -> int:
        """Bytes in the server's log so far; a remote server's log is not ours to read (0)."""
        return 0

    def log_text(self, since: int = 0) -> str:
        """The server's log from byte ``since`` on; "" for a remote server."""
        return ""

    @contextlib.contextmanager
    def _calling(self, what: str) -> Iterator[None]:
        """Turn a failed call (refused connection, server error, timeout) into one line."""
        from tritonclient.utils import InferenceServerException

        try:
            yield
        except InferenceServerException as exc:
            raise self._failed(what, one_line(exc.message() or str(exc))) from exc
        except Exception as exc:
            # an OSError (timeouts too), or geventhttpclient's own types for resets and timeouts
            gevent = type(exc).__module__.startswith(("gevent", "geventhttpclient", "grpc"))
            if isinstance(exc, OSError) or gevent:
                raise self._failed(what, f"{type(exc).__name__}: {exc}") from exc
            raise

    def _failed(self, what: str, reason: str) -> ServerError:
        detail = self.failure_detail()
        return ServerError(
            f"{what} at {self.http_url} failed: {reason}" + (f" | log: {detail}" if detail else "")
        )

    def http_client(self, timeout_s: float = 60.0) -> Any:
        """A new tritonclient HTTP client with ``timeout_s`` for connecting and for each call."""
        import tritonclient.http as httpclient

        return httpclient.InferenceServerClient(
            self.http_url, connection_timeout=timeout_s, network_timeout=timeout_s
        )

    def server_version(self) -> str:
        """Triton's version (``unknown`` if unsaid); ``ServerError`` if it cannot be reached."""
        try:
            return str(self.http_client().get_server_metadata().get("version", "unknown"))
        except Exception as exc:
            raise ServerError(f"cannot reach Triton at {self.http_url}: {exc}") from exc

    def load_model(self, model_name: str) -> None:
        """Load (or reload) a model in explicit model-control mode; fail with the log's reason."""
        from tritonclient.utils import InferenceServerException

        client = self.http_client(timeout_s=300.0)
        try:
            with self._calling(f"loading model '{model_name}'"):
                try:
                    client.load_model(model_name)
                except InferenceServerException as exc:
                    detail = self.failure_detail()
                    raise ServerError(
                        f"Triton failed to load model '{model_name}': {one_line(exc.message())}"
                        + (f" | log: {detail}" if detail else "")
                    ) from exc
        finally:
            client.close()

    def unload_model(self, model_name: str, wait_s: float = UNLOAD_WAIT_S) -> None:
        """Unload a model and wait until its instances are gone, so the next cell runs alone."""
        client = self.http_client()
        try:
            with self._calling(f"unloading model '{model_name}'"):
                client.unload_model(model_name)
                deadline = time.monotonic() + wait_s
                while time.monotonic() < deadline:
                    index = client.get_model_repository_index()
                    states = {m.get("name"): m.get("state") for m in index}
                    if states.get(model_name) in (None, "UNAVAILABLE"):
                        return
                    time.sleep(0.1)
        finally:
            client.close()
        # Another configuration must not run beside this one: a model that will not unload
        # stops the run instead of being measured against.
        raise self._failed(f"unloading model '{model_name}'", f"still loaded after {wait_s:.0f} s")

    def model_statistics(self, model_name: str) -> dict[str, Any]:
        """The statistics extension's record for ``model_name`` (cumulative since load)."""
        client = self.http_client()
        try:
            with self._calling(f"reading statistics of model '{model_name}'"):
                stats = client.get_inference_statistics(model_name)
        finally:
            client.close()
        for entry in stats.get("model_stats", []):
            if entry.get("name") == model_name:
                return dict(entry)
        raise ServerError(f"Triton returned no statistics for model '{model_name}'")


class RemoteServer(ServerEndpoint):
    """A server someone else runs (``--url host:port`` for HTTP; gRPC given or port + 1)."""

    def __init__(self, http_url: str, grpc_url: str | None = None) -> None:
        http_url = http_url.removeprefix("http://").rstrip("/")
        if grpc_url is None:
            host, _, port = http_url.rpartition(":")
            if not port.isdigit():
                raise ServerError(f"--url {http_url} needs a port, e.g. 127.0.0.1:8000")
            grpc_url = f"{host}:{int(port) + 1}"
        super().__init__(http_url, grpc_url)

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Wait for readiness; give up early if nothing ever answers at the URL (a wrong --url)."""
        started = time.monotonic()
        deadline = started + timeout_s
        unreachable_deadline = started + min(timeout_s, UNREACHABLE_TIMEOUT_S)
        last_error = "no answer"
        answered = False
        while time.monotonic() < deadline:
            try:
                client = self.http_client(timeout_s=2.0)
                try:
                    if client.is_server_ready():
                        return
                    answered = True
                finally:
                    client.close()
            except Exception as exc:
                last_error = str(exc)
            if not answered and time.monotonic() > unreachable_deadline:
                break
            time.sleep(0.5)
        raise ServerError(
            f"Triton at {self.http_url} is not ready after {time.monotonic() - started:.0f} s "
            f"({last_error}); check --url and that the server is running"
        )

    def load_model(self, model_name: str) -> None:
        """A remote server keeps its own models: use one that is ready, else ask it to load."""
        client = self.http_client()
        try:
            ready = client.is_model_ready(model_name)
        finally:
            client.close()
        if not ready:
            super().load_model(model_name)

    def unload_model(self, model_name: str, wait_s: float = UNLOAD_WAIT_S) -> None:
        """Never unload from a server tritonlab does not own."""
