"""Reading a file a user named, or one a run folder holds, in bounded time and memory.

``read_capped`` refuses anything but a regular file of at most ``cap`` bytes before reading a
byte of it: a FIFO (which would block until a writer comes), a character device such as
``/dev/zero`` (which never ends), a folder, a socket, or a file over the cap. It checks the path
(``os.stat``), opens without blocking (a FIFO swapped in after the check cannot hang the open),
checks the opened descriptor again (``os.fstat``), and never reads more than ``cap + 1`` bytes,
so a file that grows while it is read is refused too. ``FileRefused``'s message is the reason
without the file's name; the caller names the file in its own one-line error.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_CHUNK = 1 << 20
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class FileRefused(Exception):
    """A file that is not a regular file, or is over the cap; the message says which."""


def size_words(size: int) -> str:
    """A byte count in words: ``64 MiB``, ``1.5 KiB``, ``12 bytes``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):,.4g} {unit}"
    return f"{size} bytes"


def _check(mode: int, size: int, cap: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((words for test, words in _KINDS if test(mode)), "not a regular file")
        raise FileRefused(f"is {kind}, not a regular file")
    if size > cap:
        raise FileRefused(f"is {size:,} bytes; at most {size_words(cap)}")


def read_capped(path: Path, cap: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``cap`` of them; ``FileRefused`` for
    anything else, ``OSError`` when it cannot be opened or read (missing, no permission)."""
    found = os.stat(path)
    _check(found.st_mode, found.st_size, cap)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        opened = os.fstat(fd)
        _check(opened.st_mode, opened.st_size, cap)
        data = bytearray()
        while len(data) <= cap:
            chunk = os.read(fd, min(_CHUNK, cap + 1 - len(data)))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > cap:
        raise FileRefused(f"grew past {size_words(cap)} while it was read; at most that")
    return bytes(data)
