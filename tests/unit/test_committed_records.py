"""Every committed results file of a typed record loads into it and dumps back to the same
JSON (as text, so an int turned float, or the reverse, shows): what the writers store and what
the readers read is one record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonlab.decisions.recommend_records import StoredRecommendations
from tritonlab.decisions.tune_record import TuneRecord
from tritonlab.records import Record
from tritonlab.result_files import load_record, read_result

ROOT = Path(__file__).parents[2]
RECORDS: dict[str, type[Record]] = {
    "tune.json": TuneRecord,
    "recommendations.json": StoredRecommendations,
}
FILES = sorted(
    path
    for name in RECORDS
    for folder in ("examples", "tests/fixtures")
    for path in ROOT.glob(f"{folder}/*/results/{name}")
)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_each_record_has_committed_files(name: str) -> None:
    assert len([p for p in FILES if p.name == name]) >= 3


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_file_dumps_back_byte_identical(path: Path) -> None:
    record = load_record(path, RECORDS[path.name])
    assert record is not None
    assert json.dumps(record.to_dict(), indent=2, sort_keys=True) == json.dumps(
        read_result(path), indent=2, sort_keys=True
    )
