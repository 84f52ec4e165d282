"""Typed records on disk: dataclasses written and read through one schema each.

A results file is a frozen dataclass that inherits ``Record``: ``to_dict`` dumps it to plain JSON
types (tuples as lists, nested records as objects) and ``from_dict`` validates a loaded dict
back into it, nested records, tuples and optional fields included, through pydantic's
``TypeAdapter`` on the dataclass itself. ``json_schema`` gives the JSON schema users' own tooling
can check a file against. A file that does not fit its record is a ``ResultFileError`` naming the
file and the first field that failed (``result_files.load_record``).

One rule for fields added after files were written: declare them with ``later(default)``. A
file without the field reads as the default, and the field is left out of the file while it
holds its default, so files written before it stay byte-identical (nested records too). A
record's ``DERIVED`` properties are written for readers of the file and ignored when read
back; a field typed ``Annotated[..., NOT_STORED]`` stays in memory only. A record with a
``schema_version`` field reads a file without one as version 1 (and writes it back without),
and refuses a file newer than its default.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, field, fields
from enum import Enum
from typing import Any, ClassVar, TypeVar, get_type_hints

from pydantic import Field as PydanticField
from pydantic import GetCoreSchemaHandler, TypeAdapter, ValidationError
from pydantic_core import CoreSchema, core_schema, to_jsonable_python

R = TypeVar("R", bound="Record")


class Worded(str, Enum):
    """An enum whose value is how files and reports spell it: ``str()`` gives the value."""

    def __str__(self) -> str:
        return str(self.value)


# A field kept in memory only (``Annotated[T, NOT_STORED]``): not written, not read.
NOT_STORED = PydanticField(exclude=True)

_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[Any]) -> TypeAdapter[Any]:
    """One pydantic adapter per record class, built on first use (building one is slow)."""
    if cls not in _ADAPTERS:
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


def later(default: Any = None, *, factory: Any = None, group: str = "") -> Any:
    """A field added after the first files were written: read as ``default`` (or ``factory()``)
    where a file lacks it, left out of the file while it holds that value (fields of one
    ``group``, added together, are left out only while every one of them does)."""
    meta = {"later": group or True}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _default(spec: Field[Any]) -> Any:
    if spec.default is not MISSING:
        return spec.default
    return spec.default_factory()  # type: ignore[misc,operator]


def _stored_names(source: type[Any]) -> dict[str, str]:
    """Field name -> the key the file stores it under (its pydantic alias, if it has one)."""
    hints = get_type_hints(source, include_extras=True)
    names = {}
    for spec in fields(source):
        metadata = getattr(hints.get(spec.name), "__metadata__", ())
        aliases = [
            getattr(m, "serialization_alias", None) or getattr(m, "alias", None) for m in metadata
        ]
        names[spec.name] = next((a for a in aliases if a), spec.name)
    return names


def _at_default(record: Any, spec: Field[Any]) -> bool:
    """Whether the record's field holds its default (a list and a tuple of the same items
    count as one: the file cannot tell them apart)."""
    value, default = getattr(record, spec.name), _default(spec)
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return tuple(value) == tuple(default)
    return bool(value == default)


class Record:
    """Mix into a (frozen) dataclass to give it a symmetric ``to_dict`` / ``from_dict``."""

    # Properties (or methods without arguments) written into the file for its readers and
    # ignored when it is read back: a name, or a (stored key, attribute) pair where the file
    # names it otherwise.
    DERIVED: ClassVar[tuple[str | tuple[str, str], ...]] = ()

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        """The dataclass's schema, its serializer wrapped to apply ``later`` and ``DERIVED``."""
        schema = handler(source)
        groups: dict[str, list[Field[Any]]] = {}  # fields left out together
        for spec in fields(source):
            if group := spec.metadata.get("later"):
                groups.setdefault(spec.name if group is True else group, []).append(spec)
        stored = _stored_names(source)
        versioned = any(f.name == "schema_version" for f in fields(source))
        pairs = [(d, d) if isinstance(d, str) else d for d in cls.DERIVED]
        if not groups and not pairs and not versioned:
            return schema

        def serialize(value: Any, serialize_fields: Any) -> Any:
            data = serialize_fields(value)
            for specs in groups.values():
                if all(_at_default(value, f) for f in specs):
                    for spec in specs:
                        data.pop(stored[spec.name], None)
            if versioned and data.get("schema_version") == 1:
                del data["schema_version"]  # version 1 files were written without one
            return data | {key: _plain(_derived(value, attr)) for key, attr in pairs}

        wrapped = dict(schema)
        wrapped["serialization"] = core_schema.wrap_serializer_function_ser_schema(serialize)
        return wrapped  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        """The record as plain JSON types (field names as keys)."""
        data: dict[str, Any] = _adapter(type(self)).dump_python(self, mode="json", by_alias=True)
        return data

    @classmethod
    def from_dict(cls: type[R], data: Any) -> R:
        """Validate ``data`` (a loaded JSON object) into the record; raises ``RecordError``."""
        data = _versioned(cls, data)
        try:
            record: R = _adapter(cls).validate_python(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top)"
            if first["type"] == "missing":
                raise RecordError(f"{cls.__name__}: no {where!r} entry") from exc
            raise RecordError(f"{cls.__name__}: {where}: {first['msg']}") from exc
        return record

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON schema of the record's ``to_dict`` form."""
        schema: dict[str, Any] = _adapter(cls).json_schema(mode="serialization")
        return schema


def _versioned(cls: type[Any], data: Any) -> Any:
    """``data`` with its ``schema_version`` (1 where a file has none), for a record that has
    one; a file newer than the record reads (its ``schema_version`` default) is refused."""
    spec = next((f for f in fields(cls) if f.name == "schema_version"), None)
    if spec is None or not isinstance(data, dict):
        return data
    version = data.get("schema_version", 1)
    newest = _default(spec)
    if not isinstance(version, int) or version > newest:
        raise RecordError(
            f"{cls.__name__} has schema {version!r}, this tritonlab reads up to {newest}; "
            "upgrade tritonlab"
        )
    return {"schema_version": 1, **data}


def _derived(record: Any, attr: str) -> Any:
    """A derived value: the property's, or what the method returns when called bare."""
    value = getattr(record, attr)
    return value() if callable(value) else value


def _plain(value: Any) -> Any:
    """A derived value as JSON types: records through their own ``to_dict``, the rest as
    pydantic writes it (numbers as they are, mapping keys as strings)."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return to_jsonable_python(value)


class RecordError(ValueError):
    """A dict that does not fit its record (the message names the record and the field)."""
