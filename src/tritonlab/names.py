"""Names are names: a model, step, callee, variant or file name from any file is checked before
a path is built from it.

A name read from a user's ``config.pbtxt`` (an ensemble's step, a BLS model's callee), a plan, a
stored run or a Ray node's answer becomes a folder or file name below a root; joined with
``pathlib``, an absolute name replaces the root and ``..`` climbs out of it. ``check_path_name``
admits what Triton admits as a model name and is a single path part: letters, digits, ``_``,
``.``, ``-``, starting with a letter or digit (so never ``.``, ``..``, absolute, or holding a
separator, a NUL or a newline), at most 200 characters. Standard library only.
"""

from __future__ import annotations

import re
from typing import TypeGuard

from tritonlab.errors import ConfigError

MAX_NAME_CHARS = 200
PATH_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def is_path_name(name: object) -> TypeGuard[str]:
    """Whether ``name`` is a string that is one plain path part (see the module text)."""
    return (
        isinstance(name, str)
        and len(name) <= MAX_NAME_CHARS
        and PATH_NAME_RE.fullmatch(name) is not None
    )


def check_path_name(name: object, what: str) -> str:
    """``name`` when ``is_path_name``; else a one-line ``ConfigError`` naming ``what`` (where
    the name came from) and what a name may hold."""
    if not is_path_name(name):
        raise ConfigError(
            f"{what}: {name!r} is not a model name (letters, digits, '_', '.', '-', starting "
            f"with a letter or digit, at most {MAX_NAME_CHARS} characters: no '/', '..' or "
            "absolute path); nothing was read or written for it"
        )
    return name
