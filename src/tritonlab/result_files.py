"""Results files on disk, the ground floor every stage reads and writes through.

A results file is JSON written atomically (through the run folder's gateway) and read back in
bounded time and memory; ``write_result``/``read_result`` add and check its ``schema_version``;
``load_record``/``load_records`` read one into typed records (``records.py``). A damaged,
planted or newer file is one ``ResultFileError`` line naming it and what to do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from tritonlab import gateway
from tritonlab.bounded_read import FileRefused, read_capped
from tritonlab.errors import ResultFileError
from tritonlab.records import Record, RecordError

R = TypeVar("R", bound=Record)
T = TypeVar("T")

# The other files under results/ (operators, infer check, faults, adaptive rounds, cost model,
# summary, recommendations): 1 = before they carried a version (still read), 2 = versioned.
RESULT_SCHEMA_VERSION = 2
# The most a stored results file (a cell, the manifest, any results/*.json) may hold: tritonlab
# writes kilobytes; a bigger file is damaged or planted, and is refused unread.
MAX_RESULT_BYTES = 64 * 1024 * 1024


def stored_json(path: Path) -> Any:
    """The JSON in the stored file at ``path``, read in bounded time and memory: a regular file
    of at most ``MAX_RESULT_BYTES`` (``bounded_read``; else ``FileRefused``), no deeper than
    Python's recursion limit (else ``RecursionError``). ``OSError``, ``ValueError`` (not UTF-8,
    not JSON, an int of over 4,300 digits) for the rest."""
    return json.loads(read_capped(path, MAX_RESULT_BYTES).decode("utf-8"))


def read_json(path: Path, default: Any = None) -> Any:
    """A stored JSON file, ``default`` when absent; a corrupt one, one over
    ``MAX_RESULT_BYTES`` or one that is not a regular file (a FIFO, a device) is a one-line
    error naming it."""
    if not path.exists():
        return default
    try:
        return stored_json(path)
    except FileRefused as exc:
        raise ResultFileError(
            f"{path} {exc}, so it is not what tritonlab wrote there; restore it or delete it "
            "(a re-run measures or derives what it held again)"
        ) from None
    except (OSError, ValueError, RecursionError) as exc:
        raise ResultFileError(
            f"{path} is unreadable ({type(exc).__name__}: {error_line(exc)}); restore it or "
            "delete it (a re-run measures or derives what it held again)"
        ) from exc


def error_line(exc: BaseException) -> str:
    """An error's message on one line of at most 200 characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as indented, key-sorted JSON through a temporary file and a rename."""
    gateway.write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def load_record(path: Path, record: type[R], default: R | None = None) -> R | None:
    """The results file at ``path`` read into ``record`` (``default`` when absent); a damaged
    file, or one that does not fit the record, is a one-line ``ResultFileError`` naming it."""
    data = read_result(path)
    if data is None:
        return default
    return _parsed(path, lambda: record.from_dict(data))


def load_records(path: Path, record: type[R]) -> list[R]:
    """A results file holding a list (``write_result`` of a list) read into ``record``s; an
    absent file is an empty list, a damaged one a one-line ``ResultFileError`` naming it."""
    data = read_result(path, default=[])
    if not isinstance(data, list):
        data = [data]  # lets the record's own check name what is wrong
    return _parsed(path, lambda: [record.from_dict(item) for item in data])


def _parsed(path: Path, parse: Callable[[], T]) -> T:
    try:
        return parse()
    except RecordError as exc:
        raise ResultFileError(
            f"{path} does not hold what tritonlab wrote there ({exc}); restore it or delete it "
            "(a re-run measures or derives what it held again)"
        ) from exc


def write_result(path: Path, payload: dict[str, Any] | list[Any]) -> None:
    """Write a results file with its schema version: an object gains ``schema_version``, a list
    is stored as ``{"schema_version": N, "records": [...]}``."""
    if isinstance(payload, list):
        write_json_atomic(path, {"schema_version": RESULT_SCHEMA_VERSION, "records": payload})
    else:
        write_json_atomic(path, payload | {"schema_version": RESULT_SCHEMA_VERSION})


def read_result(path: Path, default: Any = None) -> Any:
    """What ``write_result`` stored (or an unversioned file of schema 1), ``default`` when absent;
    a corrupt file or one from a newer tritonlab is a one-line error naming it."""
    data = read_json(path)
    if data is None:
        return default
    if isinstance(data, list):  # schema 1: lists were stored bare
        return data
    if not isinstance(data, dict):
        raise ResultFileError(
            f"{path} is not a tritonlab results file (a JSON {type(data).__name__}); restore it "
            "or delete it (a re-run measures or derives what it held again)"
        )
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version > RESULT_SCHEMA_VERSION:
        raise ResultFileError(
            f"{path} has schema {version!r}, this tritonlab reads up to {RESULT_SCHEMA_VERSION}; "
            "upgrade tritonlab, or delete the file (a re-run measures or derives it again)"
        )
    if "records" in data and version >= 2:
        return data["records"]
    return {k: v for k, v in data.items() if k != "schema_version"}
