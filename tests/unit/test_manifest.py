"""experiments/manifest.py: the typed manifest reads old files and writes the same keys back."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tritonlab.experiments.manifest import (
    SCHEMA_VERSION,
    AdaptiveEntry,
    Manifest,
    SweepEntry,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize("run", ["seed_run", "sweep_run"])
def test_old_manifests_round_trip_with_the_same_keys(run: Path) -> None:
    stored = json.loads((FIXTURES / run / "results" / "manifest.json").read_text())
    assert "schema_version" not in stored
    manifest = Manifest.from_dict(stored)
    assert manifest.schema_version == 1
    assert manifest.to_dict() == stored  # written back as it was: without a version


def test_seed_manifest_as_records() -> None:
    stored = json.loads((FIXTURES / "seed_run" / "results" / "manifest.json").read_text())
    manifest = Manifest.from_dict(stored)
    assert manifest.model.name == "simple_mlp"
    assert manifest.model.input_shapes == {"input": [256]}
    assert manifest.machine.cores == 2
    assert manifest.variant_order[0] == "baseline"
    assert manifest.plan.loads[0].key == "grpc_b1_c8"
    assert manifest.sweep is None and manifest.adaptive is None
    assert manifest.server.command is not None


def test_new_manifest_round_trips_with_schema_version_and_entries() -> None:
    stored = json.loads((FIXTURES / "seed_run" / "results" / "manifest.json").read_text())
    manifest = dataclasses.replace(
        Manifest.from_dict(stored),
        schema_version=SCHEMA_VERSION,
        sweep=SweepEntry("plan.yaml", "demo", 5000.0, None),
        adaptive=AdaptiveEntry(6, 600.0),
    )
    data = json.loads(json.dumps(manifest.to_dict()))
    assert data["schema_version"] == 2
    assert data["sweep"]["latency_budget_p99_us"] == 5000.0
    assert data["adaptive"] == {"max_repeats": 6, "budget_s": 600.0}
    assert Manifest.from_dict(data) == manifest
