"""Free-port discovery and port checks (bind to port 0 and let the kernel choose)."""

from __future__ import annotations

import socket

from tritonlab.errors import PortInUseError


def find_free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``count`` distinct ports that were free a moment ago on ``host``."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def ensure_port_free(port: int, host: str, flag: str) -> None:
    """Raise ``PortInUseError`` naming the flag to change if ``port`` is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise PortInUseError(
                f"port {port} on {host} is in use; pass {flag} with a free port "
                "(or 0 to pick one) or stop the process holding it"
            ) from exc
