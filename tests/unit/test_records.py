"""The typed-record base: symmetric to_dict/from_dict, a schema, one-line errors naming the file."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tritonlab.errors import ResultFileError
from tritonlab.records import Record, RecordError
from tritonlab.result_files import load_record, load_records, write_result


@dataclass(frozen=True)
class Inner(Record):
    name: str
    sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Outer(Record):
    latency_p99_us: float | None
    inner: Inner
    items: tuple[Inner, ...] = ()
    counts: dict[int, int] = field(default_factory=dict)


def test_a_record_round_trips_through_plain_json() -> None:
    record = Outer(812.5, Inner("a", (1, 8)), (Inner("b"),), {1: 3, 8: 2})
    data = json.loads(json.dumps(record.to_dict()))
    assert data["inner"] == {"name": "a", "sizes": [1, 8]}
    assert data["counts"] == {"1": 3, "8": 2}
    assert Outer.from_dict(data) == record
    assert Outer.json_schema()["properties"]["latency_p99_us"]


def test_a_dict_that_does_not_fit_names_the_field() -> None:
    with pytest.raises(RecordError, match=r"Outer: inner.sizes.0: "):
        Outer.from_dict({"latency_p99_us": 1.0, "inner": {"name": "a", "sizes": ["x"]}})


def test_files_are_read_through_their_record(tmp_path: Path) -> None:
    path = tmp_path / "results" / "outer.json"
    assert load_record(path, Outer) is None
    write_result(path, Outer(None, Inner("a")).to_dict())
    assert load_record(path, Outer) == Outer(None, Inner("a"))
    many = tmp_path / "results" / "many.json"
    write_result(many, [Inner("a").to_dict(), Inner("b", (2,)).to_dict()])
    assert load_records(many, Inner) == [Inner("a"), Inner("b", (2,))]
    assert load_records(tmp_path / "absent.json", Inner) == []
    path.write_text('{"schema_version": 2, "inner": {"name": 3}}')
    with pytest.raises(ResultFileError, match=r"outer.json does not hold what tritonlab wrote"):
        load_record(path, Outer)
