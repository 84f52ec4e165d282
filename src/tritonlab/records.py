"""Typed records on disk: dataclasses written and read through one schema each.

A results file is a frozen dataclass that inherits ``Record``: ``to_dict`` dumps it to plain JSON
types (tuples as lists, nested records as objects) and ``from_dict`` validates a loaded dict
back into it, nested records, tuples and optional fields included, through pydantic's
``TypeAdapter`` on the dataclass itself. ``json_schema`` gives the JSON schema users' own tooling
can check a file against. A file that does not fit its record is a ``ResultFileError`` naming the
file and the first field that failed (``result_files.load_record``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

R = TypeVar("R", bound="Record")


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[Any]) -> TypeAdapter[Any]:
    """One pydantic adapter per record class, built on first use (building one is slow)."""
    if cls not in _ADAPTERS:
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


class Record:
    """Mix into a (frozen) dataclass to give it a symmetric ``to_dict`` / ``from_dict``."""

    def to_dict(self) -> dict[str, Any]:
        """The record as plain JSON types (field names as keys)."""
        data: dict[str, Any] = _adapter(type(self)).dump_python(self, mode="json")
        return data

    @classmethod
    def from_dict(cls: type[R], data: Any) -> R:
        """Validate ``data`` (a loaded JSON object) into the record; raises ``RecordError``."""
        try:
            record: R = _adapter(cls).validate_python(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top)"
            raise RecordError(f"{cls.__name__}: {where}: {first['msg']}") from exc
        return record

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON schema of the record's ``to_dict`` form."""
        schema: dict[str, Any] = _adapter(cls).json_schema(mode="serialization")
        return schema


class RecordError(ValueError):
    """A dict that does not fit its record (the message names the record and the field)."""
