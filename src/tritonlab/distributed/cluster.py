"""Reaching a Ray cluster: Ray's optional import, a reachability check before ``ray.init``
(which would wait for ever on an unreachable head), the connection, and the measuring nodes."""

from __future__ import annotations

import socket
from typing import Any

from tritonlab.errors import ConfigError

from .nodes import RESOURCE

INSTALL_HINT = "--ray needs the optional extra: pip install 'tritonlab[ray]'"
CONNECT_TIMEOUT_S = 10.0  # the TCP check of the head's address


def ray_module() -> Any:
    """The ray package; ``ConfigError`` naming the optional extra when it is not installed."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(INSTALL_HINT) from exc
    return ray


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """A ``host:port`` address must answer a TCP connect first: ``ray.init`` would otherwise
    wait for an unreachable head for ever."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(
            f"--ray {address}: give the head's host:port (e.g. 10.0.0.1:6379) or auto"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConfigError(
            f"--ray {address}: nothing answers there ({exc.strerror or exc}); start the head "
            "with `ray start --head` or pass its address"
        ) from exc


def connect(address: str) -> Any:
    """``ray.init`` on ``address`` ("auto": the cluster this machine belongs to)."""
    ray = ray_module()
    if address != "auto" and "://" not in address:
        check_reachable(address)
    if not ray.is_initialized():
        try:
            ray.init(address=address, logging_level="WARNING", log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise ConfigError(
                f"--ray {address}: no Ray cluster answered ({' '.join(str(exc).split())[:200]});"
                " start one with `ray start --head --resources '{\"tritonlab\": 1}'` or pass "
                "its address"
            ) from exc
    return ray


def measuring_nodes(ray: Any, address: str) -> list[dict[str, Any]]:
    """Ray's live nodes that offer the measuring resource; ``ConfigError`` when there are none."""
    found = [
        n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(RESOURCE, 0) >= 1
    ]
    if not found:
        raise ConfigError(
            f"no node of the Ray cluster at {address} offers the '{RESOURCE}' resource: start "
            f"each measuring node with `ray start ... --resources '{{\"{RESOURCE}\": 1}}'`"
        )
    return found
