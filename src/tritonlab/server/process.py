"""Run tritonserver as a child process: start on free loopback ports, wait, stop, no orphans.

The server runs in its own process group and is told to die with its parent
(``PR_SET_PDEATHSIG``), so a crash or ``kill -9`` of tritonlab takes the server and its Python
backend stubs down with it. ``stop()`` sends SIGINT (Triton's graceful shutdown), waits, then
kills the whole group.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import psutil

from tritonlab import gateway
from tritonlab.cpu_split import pinned
from tritonlab.errors import ServerError
from tritonlab.procenv import child_environment, raise_if_interrupted
from tritonlab.server.auth_proxy import AuthProxy, Exposure
from tritonlab.server.endpoint import UNLOAD_WAIT_S, ServerEndpoint
from tritonlab.server.locate import ServerInstall
from tritonlab.server.ports import ensure_port_free, find_free_ports

STOP_GRACE_S = 15.0
# Characters a path may hold and still pass unquoted through the Python backend's shell.
_SHELL_SAFE = re.compile(r"[A-Za-z0-9_./+:@%,=-]+")
# Hosts that keep a server on this machine; any other exposes it (behind ``auth_proxy``'s key).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# A model load that takes longer than this is treated as hung (the server is then restarted).
LOAD_DEADLINE_S = 300.0


@dataclass(frozen=True)
class ServerPorts:
    """The HTTP, gRPC and metrics ports one server listens on."""

    http: int
    grpc: int
    metrics: int

    @classmethod
    def resolve(
        cls, http: int = 0, grpc: int = 0, metrics: int = 0, host: str = "127.0.0.1"
    ) -> ServerPorts:
        """Use the ports asked for (checking they are free); pick free ones for any left at 0."""
        free = iter(find_free_ports(3, host))
        chosen = []
        for port, flag in (
            (http, "--http-port"),
            (grpc, "--grpc-port"),
            (metrics, "--metrics-port"),
        ):
            if port:
                ensure_port_free(port, host, flag)
            chosen.append(port or next(free))
        return cls(*chosen)


def relevant_log_lines(log_text: str, limit: int = 6) -> list[str]:
    """The lines of a Triton log that explain a failure (errors first, else the last lines)."""
    # Every GPU-less host logs these start-up failures (NVML, DCGM, CUDA's pinned memory and
    # driver helper); they never explain a failure here.
    noise = ("nvml", "dcgm", "pinned system memory", "cudadriverhelper")
    lines = [
        ln.rstrip()
        for ln in log_text.splitlines()
        if ln.strip() and not any(n in ln.lower() for n in noise)
    ]
    markers = ("error", "failed", "exception", "unable", "modulenotfound", "traceback")
    picked = [ln for ln in lines if ln.startswith("E") or any(m in ln.lower() for m in markers)]
    return list(dict.fromkeys(picked or lines))[-limit:]


class TritonServer(ServerEndpoint):
    """A tritonserver child process serving one model repository."""

    def __init__(
        self,
        install: ServerInstall,
        repository: Path,
        log_path: Path,
        ports: ServerPorts | None = None,
        host: str = "127.0.0.1",
        explicit_model_control: bool = False,
        extra_args: tuple[str, ...] = (),
        exposure: Exposure | None = None,
        cpus: tuple[int, ...] = (),
    ) -> None:
        self.install = install
        # The CPUs the server and its stubs run on (``cpu_split.py``; empty: any).
        self.cpus = cpus
        self.repository = repository.resolve()
        self.log_path = log_path
        self.host = host
        self.ports = ports or ServerPorts.resolve(host=host)
        self.explicit_model_control = explicit_model_control
        self.extra_args = extra_args
        # An exposed server stays on loopback; ``auth_proxy`` answers where it is exposed.
        self.exposure = exposure
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: object | None = None
        self._log_start = 0  # where the running process's lines start in the (appended) log
        self._link_dir: gateway.Gateway | None = None  # served_repository's private folder
        self._proxy: AuthProxy | None = None
        connect_host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        super().__init__(
            http_url=f"{connect_host}:{self.ports.http}",
            grpc_url=f"{connect_host}:{self.ports.grpc}",
            metrics_url=f"http://{connect_host}:{self.ports.metrics}/metrics",
        )

    def command(self, redact: bool = False) -> list[str]:
        """The command line, as a list (never through a shell, never holding a key); ``redact``
        names the real repository, not the link it may be served by."""
        cmd = [
            str(self.install.binary),
            # shown as the real folder; run through a plain-named link where it needs one
            f"--model-repository={self.repository if redact else self.served_repository}",
            f"--backend-directory={self.install.backend_dir}",
            f"--http-address={self.host}",
            f"--http-port={self.ports.http}",
            f"--grpc-address={self.host}",
            f"--grpc-port={self.ports.grpc}",
            f"--metrics-address={self.host}",
            f"--metrics-port={self.ports.metrics}",
            "--allow-metrics=true",
            "--log-verbose=0",
            "--exit-timeout-secs=10",
        ]
        if self.install.cache_dir is not None:
            cmd.append(f"--cache-directory={self.install.cache_dir}")
        if self.explicit_model_control:
            cmd.append("--model-control-mode=explicit")
        return cmd + list(self.extra_args)

    @property
    def served_repository(self) -> Path:
        """The repository path tritonserver is given.
        Triton 2.51's Python backend starts each stub through a shell without quoting the
        model's path (seen here: a space, '"' or '$' in it makes the load hang or the server
        abort with ``stol``). A path with any such character is served through a symlink with a
        plain name in a private temporary folder, pointing at the real repository."""
        text = str(self.repository)
        if _SHELL_SAFE.fullmatch(text):
            return self.repository
        # In a private folder (mkdtemp: an unpredictable name, mode 0700), so no other user can
        # plant or swap the link; removed when the server stops.
        if self._link_dir is None or not (self._link_dir.root / "models").is_symlink():
            self._link_dir = gateway.temporary_root("tritonlab-repo-")
            self._link_dir.make_link(self.repository, self._link_dir.root / "models")
        return self._link_dir.root / "models"

    @property
    def pid(self) -> int | None:
        """The server process's id, or None before :meth:`start`."""
        return self._process.pid if self._process else None

    def start(self, ready_timeout_s: float = 120.0) -> TritonServer:
        """Launch tritonserver, wait ``ready_timeout_s`` for it to be ready, start the proxy;
        return self. ``ServerError`` (the process stopped first) if it cannot start in time."""
        if self._process is not None:
            raise ServerError("server already started")
        # closed in stop(); a resume appends. A server started on its own (no command opened a
        # folder for it) writes its log in the log's folder only.
        log = gateway.ensure_root(self.log_path.parent).open_append(self.log_path)
        self._log_file = log
        self._log_start = self.log_size()  # this process's lines start here
        try:
            self._process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_environment(self.install.environment()),  # without the API key
                start_new_session=True,
                preexec_fn=pinned(self.cpus),
            )
        except OSError as exc:
            log.close()
            raise ServerError(f"cannot start {self.install.binary}: {exc}") from exc
        try:
            self.wait_ready(ready_timeout_s)
            if self.exposure is not None:
                self._proxy = AuthProxy(self.exposure, self.http_url, self.grpc_url).start()
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def public_urls(self) -> tuple[str, str]:
        """(HTTP, gRPC) where clients reach it: the proxy's when exposed, else its own."""
        if self.exposure is None:
            return self.http_url, self.grpc_url
        return self.exposure.http_url, self.exposure.grpc_url

    def log_size(self) -> int:
        """Bytes in the server's log so far (0 when there is none yet)."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_text(self, since: int = 0) -> str:
        """The server's log from byte ``since`` on ("" if it cannot be read)."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(since)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def failure_detail(self) -> str:
        """The lines this process logged that explain a failure, joined by `` | `` ("" when
        none stands out; a resumed run's earlier processes are not this one's)."""
        return " | ".join(relevant_log_lines(self.log_text(self._log_start)))

    def is_alive(self) -> bool:
        """True while the started process has not exited."""
        return self._process is not None and self._process.poll() is None

    def exited_within(self, seconds: float) -> bool:
        """True when the process has exited or does so within ``seconds``: a killed server
        closes its sockets a moment before the kernel reports its exit, so a refused
        connection can come first."""
        if not self.is_alive():
            return True
        if seconds <= 0 or self._process is None:
            return False
        try:
            self._process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def wait_ready(self, timeout_s: float) -> None:
        """Poll ``/v2/health/ready`` until 200, the process dies, or the deadline passes."""
        deadline = time.monotonic() + timeout_s
        url = f"http://{self.http_url}/v2/health/ready"
        while time.monotonic() < deadline:
            if not self.is_alive():
                code = self._process.returncode if self._process else None
                raise self._failure(f"tritonserver exited (code {code}) before it was ready")
            with (
                contextlib.suppress(urllib.error.URLError, OSError),
                urllib.request.urlopen(url, timeout=1.0) as resp,
            ):
                if resp.status == 200:
                    return
            time.sleep(0.2)
        raise self._failure(f"tritonserver not ready after {timeout_s:.0f} s")

    def _failure(self, what: str) -> ServerError:
        """``what`` went wrong, with the log's path and the lines in it that explain it."""
        return ServerError(f"{what}; log {self.log_path}: {self.failure_detail()}")

    def process_tree(self) -> list[psutil.Process]:
        """The server and its children (the Python backend stubs), for CPU accounting."""
        if not self.is_alive() or self.pid is None:
            return []
        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> None:
        """SIGINT, wait up to ``STOP_GRACE_S``, then SIGKILL the whole process group."""
        if self._proxy is not None:
            with contextlib.suppress(Exception):
                self._proxy.stop()
            self._proxy = None
        proc = self._process
        if proc is not None:
            pgid = proc.pid
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGINT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=STOP_GRACE_S)
            # The stubs share the group; take down anything left, including the server.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            self._process = None
        if self._log_file is not None:
            with contextlib.suppress(Exception):
                self._log_file.close()  # type: ignore[attr-defined]
            self._log_file = None
        if self._link_dir is not None:
            gateway.remove_temporary(self._link_dir)
            self._link_dir = None

    def restart(self, ready_timeout_s: float = 120.0) -> None:
        """Stop whatever is left of the server (stubs included) and start it again, ready."""
        self.stop()
        self.start(ready_timeout_s)

    def _watched(self, what: str, call: Callable[[], None], deadline_s: float) -> None:
        """Run ``call`` in a helper thread; fail at once if the server dies, or at the deadline.
        A blocking client call to a server killed mid-call can otherwise wait for its socket
        timeout (minutes) while a backend stub lingers."""
        outcome: list[BaseException | None] = []

        def run() -> None:
            try:
                call()
                outcome.append(None)
            except BaseException as exc:  # handed to the caller's thread
                outcome.append(exc)

        worker = threading.Thread(target=run, name=f"tritonlab-{what}", daemon=True)
        worker.start()
        deadline = time.monotonic() + deadline_s
        while worker.is_alive():
            worker.join(0.2)
            raise_if_interrupted()
            if not worker.is_alive():
                break
            if not self.is_alive():
                code = self._process.returncode if self._process else None
                raise self._failure(f"tritonserver died (code {code}) while {what}")
            if time.monotonic() > deadline:
                raise self._failure(f"{what} took over {deadline_s:.0f} s")
        if outcome and outcome[0] is not None:
            raise outcome[0]

    def load_model(self, model_name: str) -> None:
        """Load ``model_name``; ``ServerError`` if it fails, the server dies or it hangs."""
        self._watched(
            f"loading model '{model_name}'",
            lambda: ServerEndpoint.load_model(self, model_name),
            LOAD_DEADLINE_S,
        )

    def unload_model(self, model_name: str, wait_s: float = UNLOAD_WAIT_S) -> None:
        """Unload ``model_name``; ``ServerError`` if the server dies or the unload hangs."""
        self._watched(
            f"unloading model '{model_name}'",
            lambda: ServerEndpoint.unload_model(self, model_name, wait_s),
            wait_s + 30.0,
        )

    def __enter__(self) -> TritonServer:
        if self._process is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
