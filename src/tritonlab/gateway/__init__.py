"""The one gateway to the file system: every write, move, link and delete tritonlab makes.

A ``Gateway`` owns one folder (its root: a run folder, the cache, a private temporary folder).
Every path it is handed must lie inside the root, and no part of it below the root may be a
symbolic link, so nothing written, moved or deleted can land outside the root, whatever a planted
link or a hostile name says. Files are never written in place: a new file (``mkstemp``) in the
same folder is renamed over the name, so a file another path shares (a hard link to a user's
file, a planted link) is replaced, never written through. Folders are created one part at a
time; files the run will not change may be hard-linked in, anything it changes is copied. A
refusal is a ``GatewayError``: one line naming the path and what to change.

Roots are opened once per command (``open_root``, after the check that ``--out`` overlaps no
input) and registered; the module's functions act through the innermost open root that holds
the path and refuse any other, so a stage that forgot to open its folder fails loudly.

``tests/unit/test_gateway_only.py`` reads ``src/`` and fails on a destructive call (rmtree,
unlink, remove, rename/replace, link, copytree, move, a write) anywhere but here.
Standard library only, so every layer may import it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from tritonlab.gateway.folder import Gateway, GatewayError, absolute_path, overlaps, refuse_overlap

# the open roots

_ROOTS: dict[Path, Gateway] = {}
_TEMPORARY: set[Path] = set()  # roots temporary_root made: the only ones deleted whole
_LOCK = threading.Lock()


def open_root(
    root: Path | str, inputs: dict[str, Path | str | None] | None = None, out_option: str = "--out"
) -> Gateway:
    """Open ``root`` for writing, after ``refuse_overlap`` with each of ``inputs`` (a file input
    may lie directly in it, where nothing is written or moved, but nowhere below)."""
    gateway = Gateway(root)
    if os.path.lexists(gateway.given) and not os.path.isdir(gateway.given):
        raise GatewayError(
            f"{out_option} {root} is a file, not a folder; choose a folder (new, or one "
            "tritonlab wrote) for it"
        )
    for option, path in (inputs or {}).items():
        if path is None:
            continue
        if os.path.isfile(path) and not os.path.islink(path):
            parent = Path(os.path.realpath(path)).parent
            if parent == gateway.root:
                continue  # a model file beside the run's folders: read, never written
        refuse_overlap(gateway.given, {option: path}, out_option)
    with _LOCK:
        _ROOTS[gateway.root] = gateway
    return gateway


def close_all() -> None:
    """Close every open root (between the commands of one process: tests)."""
    with _LOCK:
        _ROOTS.clear()


def gate(path: Path | str) -> Gateway:
    """The innermost open root holding ``path``; ``GatewayError`` when none does."""
    absolute = absolute_path(path)
    with _LOCK:
        roots = sorted(_ROOTS.values(), key=lambda g: len(g.root.parts), reverse=True)
    for gateway in roots:
        for base in (gateway.given, gateway.root):
            if absolute.is_relative_to(base):
                return gateway
    raise GatewayError(
        f"{path}: no folder this command writes holds it (open ones: "
        f"{', '.join(str(g.given) for g in roots) or 'none'}); nothing was changed"
    )


def ensure_root(folder: Path | str) -> Gateway:
    """The open root holding ``folder``, else ``folder`` opened as a root of its own (a library
    call made outside any command, such as a server started on its own)."""
    try:
        return gate(folder)
    except GatewayError:
        return open_root(folder)


def temporary_root(prefix: str, parent: Path | str | None = None) -> Gateway:
    """A new private folder (``mkdtemp``, mode 0700) opened as a root."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    gateway = open_root(folder)
    with _LOCK:
        _TEMPORARY.add(gateway.root)
    return gateway


def remove_temporary(gateway: Gateway) -> None:
    """Delete a ``temporary_root`` folder and close it; any other root is refused (only a folder
    this process made with ``mkdtemp`` is ever deleted whole)."""
    with _LOCK:
        if gateway.root not in _TEMPORARY:
            raise GatewayError(f"{gateway.root}: not a temporary folder tritonlab made; kept")
        _TEMPORARY.discard(gateway.root)
        _ROOTS.pop(gateway.root, None)  # closed: nothing more is written there
    shutil.rmtree(gateway.root, ignore_errors=True)


@contextlib.contextmanager
def temporary_folder(prefix: str, parent: Path | str | None = None) -> Iterator[Gateway]:
    """A ``temporary_root`` for the block, deleted when it ends."""
    gateway = temporary_root(prefix, parent)
    try:
        yield gateway
    finally:
        remove_temporary(gateway)


def mkdir(path: Path | str) -> Path:
    """``Gateway.mkdir`` through the open root holding ``path``."""
    return gate(path).mkdir(path)


def write_text(path: Path | str, text: str, mode: int | None = None) -> Path:
    """``Gateway.write_text`` through the open root holding ``path``."""
    return gate(path).write_text(path, text, mode=mode)


def write_bytes(path: Path | str, data: bytes, mode: int | None = None) -> Path:
    """``Gateway.write_bytes`` through the open root holding ``path``."""
    return gate(path).write_bytes(path, data, mode=mode)


def write_with(
    path: Path | str, writer: Callable[[IO[Any]], object], *, binary: bool = True
) -> Path:
    """``Gateway.write_with`` through the open root holding ``path``."""
    return gate(path).write_with(path, writer, binary=binary)


def write_file(path: Path | str, producer: Callable[[Path], object]) -> Path:
    """``Gateway.write_file`` through the open root holding ``path``."""
    return gate(path).write_file(path, producer)


def open_new(path: Path | str) -> contextlib.AbstractContextManager[IO[bytes]]:
    """``Gateway.open_new`` through the open root holding ``path``."""
    return gate(path).open_new(path)


def open_append(path: Path | str) -> IO[bytes]:
    """``Gateway.open_append`` through the open root holding ``path``."""
    return gate(path).open_append(path)


def copy_in(source: Path | str, path: Path | str) -> Path:
    """``Gateway.copy_in`` through the open root holding ``path``."""
    return gate(path).copy_in(source, path)


def link_in(source: Path | str, path: Path | str) -> Path:
    """``Gateway.link_in`` through the open root holding ``path``."""
    return gate(path).link_in(source, path)


def copy_tree_in(source: Path | str, path: Path | str, *, link: Callable[[Path], bool]) -> Path:
    """``Gateway.copy_tree_in`` through the open root holding ``path``."""
    return gate(path).copy_tree_in(source, path, link=link)


def move(source: Path | str, path: Path | str) -> Path:
    """``Gateway.move`` through the open root holding ``path``."""
    return gate(path).move(source, path)


def remove(path: Path | str, *, missing_ok: bool = True) -> None:
    """``Gateway.remove`` through the open root holding ``path``."""
    gate(path).remove(path, missing_ok=missing_ok)


def remove_tree(path: Path | str) -> None:
    """``Gateway.remove_tree`` through the open root holding ``path``."""
    gate(path).remove_tree(path)


__all__ = [
    "Gateway",
    "GatewayError",
    "close_all",
    "copy_in",
    "copy_tree_in",
    "ensure_root",
    "gate",
    "link_in",
    "mkdir",
    "move",
    "open_append",
    "open_new",
    "open_root",
    "overlaps",
    "refuse_overlap",
    "remove",
    "remove_temporary",
    "remove_tree",
    "temporary_folder",
    "temporary_root",
    "write_bytes",
    "write_file",
    "write_text",
    "write_with",
]
