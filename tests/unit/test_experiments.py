"""experiments/: plan validation and round trips, cell ids, fingerprints, the result store."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tritonlab import gateway
from tritonlab.errors import PlanError, TritonlabError
from tritonlab.experiments.manifest import Manifest, utc_now
from tritonlab.experiments.opening import plan_fingerprint
from tritonlab.experiments.plan import (
    ExperimentPlan,
    LoadPoint,
    MeasurementSettings,
    PlanBasics,
    seed_comparison_plan,
)
from tritonlab.experiments.store import (
    CellResult,
    cell_path,
    load_cells,
    load_manifest,
    save_cell,
    save_manifest,
)
from tritonlab.repository.variants import ServingVariant, seed_comparison_variants
from tritonlab.result_files import write_json_atomic
from tritonlab.run_layout import cell_id

SHA = "0" * 64


def _plan(**changes: object) -> ExperimentPlan:
    return dataclasses.replace(seed_comparison_plan(PlanBasics("m")), **changes)  # type: ignore[arg-type]


def test_seed_plan_is_valid() -> None:
    plan = seed_comparison_plan(
        PlanBasics("m", repeats=2, concurrency=4, protocol="http", max_batch_size=16)
    )
    plan.validate()
    assert [v.name for v in plan.variants] == [
        "baseline",
        "batch_5ms_x1",
        "batch_5ms_x2",
        "batch_0ms_x1",
    ]
    assert plan.loads == (LoadPoint(protocol="http", batch_size=1, concurrency=4),)
    assert plan.repeats == 2
    assert all(v.max_batch_size == 16 for v in plan.variants)


@pytest.mark.parametrize(
    ("plan_changes", "match"),
    [
        ({"variants": ()}, "at least one variant"),
        ({"variants": tuple(seed_comparison_variants()[1:])}, "first variant must be named"),
        (
            {"variants": (*seed_comparison_variants(), seed_comparison_variants()[1])},
            "unique",
        ),
        ({"repeats": 0}, "repeats must be >= 1"),
        ({"loads": (LoadPoint(batch_size=128),)}, "client batch_size 128 exceeds max_batch_size"),
        ({"loads": (LoadPoint(protocol="udp"),)}, "protocol must be one of"),
        ({"loads": (LoadPoint(batch_size=0),)}, "batch_size must be >= 1"),
        ({"loads": (LoadPoint(concurrency=0),)}, "concurrency must be >= 1"),
        (
            {"loads": (LoadPoint(concurrency=None, request_rate_per_s=-5.0),)},
            "request rate must be > 0",
        ),
    ],
)
def test_plan_validate_errors(plan_changes: dict[str, object], match: str) -> None:
    with pytest.raises(PlanError, match=match):
        _plan(**plan_changes).validate()


def test_plan_validate_checks_each_variant() -> None:
    bad = ServingVariant("broken", "broken", instance_count=0)
    from tritonlab.errors import ConfigError

    with pytest.raises(ConfigError, match="instance_group count"):
        _plan(variants=(*seed_comparison_variants(), bad)).validate()


def test_client_batch_is_checked_against_the_smallest_max_batch_size() -> None:
    variants = (*seed_comparison_variants(), ServingVariant("small", "small", max_batch_size=4))
    with pytest.raises(PlanError, match="exceeds max_batch_size 4"):
        _plan(variants=variants, loads=(LoadPoint(batch_size=8),)).validate()
    _plan(variants=variants, loads=(LoadPoint(batch_size=4),)).validate()


def test_plan_round_trip() -> None:
    plan = ExperimentPlan(
        model_name="m",
        variants=tuple(seed_comparison_variants(32)),
        loads=(
            LoadPoint(),
            LoadPoint(protocol="http", batch_size=4, concurrency=16),
            LoadPoint(concurrency=None, request_rate_per_s=250.0),
        ),
        repeats=5,
        measurement=MeasurementSettings(measurement_interval_ms=500, stability_percentage=10.0),
    )
    data = json.loads(json.dumps(plan.to_dict()))
    assert ExperimentPlan.from_dict(data) == plan


def test_load_point_keys_and_labels() -> None:
    assert LoadPoint().key == "grpc_b1_c8"
    assert LoadPoint(protocol="http", batch_size=4, concurrency=16).key == "http_b4_c16"
    rate = LoadPoint(concurrency=None, request_rate_per_s=250.0)
    assert rate.key == "grpc_b1_r250"
    assert "250 req/s Poisson" in rate.label
    assert LoadPoint().label == "grpc, batch 1, concurrency 8"


def test_perf_settings_from_plan() -> None:
    plan = _plan(measurement=MeasurementSettings(measurement_interval_ms=1000, max_trials=5))
    settings = plan.perf_settings(
        LoadPoint(protocol="http", batch_size=2, concurrency=4), "m__x", "h:1", {"x": (3,)}
    )
    assert (settings.model_name, settings.url, settings.protocol) == ("m__x", "h:1", "http")
    assert settings.batch_size == 2
    assert settings.concurrency == 4
    assert settings.request_rate_per_s is None
    assert settings.measurement_interval_ms == 1000
    assert settings.max_trials == 5
    assert settings.input_shapes == {"x": (3,)}
    open_loop = plan.perf_settings(
        LoadPoint(concurrency=8, request_rate_per_s=100.0), "m", "g:2", {}
    )
    assert open_loop.concurrency is None
    assert open_loop.request_rate_per_s == 100.0


def test_cell_id_format() -> None:
    """One cell id (issue 33): the variant, the load's key and the round, counted from 1."""
    assert cell_id("baseline", LoadPoint().key, 1) == "baseline__grpc_b1_c8__r1"
    assert (
        cell_id("batch_5ms_x2", LoadPoint(protocol="http", concurrency=16).key, 3)
        == "batch_5ms_x2__http_b1_c16__r3"
    )


def test_recorded_cell_ids_follow_the_format(seed_cells: list[CellResult]) -> None:
    for cell in seed_cells:
        assert cell.cell_id == f"{cell.variant.name}__{cell.load_key}__r{cell.repeat}"


def test_plan_fingerprint() -> None:
    plan = seed_comparison_plan(PlanBasics("m"))
    fp = plan_fingerprint(plan, SHA)
    assert len(fp) == 16
    assert fp == plan_fingerprint(seed_comparison_plan(PlanBasics("m")), SHA)
    assert fp != plan_fingerprint(dataclasses.replace(plan, repeats=5), SHA)
    assert fp != plan_fingerprint(seed_comparison_plan(PlanBasics("m", concurrency=16)), SHA)
    assert fp != plan_fingerprint(seed_comparison_plan(PlanBasics("other")), SHA)
    assert fp != plan_fingerprint(plan, "1" * 64)


# --- store ----------------------------------------------------------------------------------


def test_cell_result_json_round_trip(seed_run_dir: Path, seed_cells: list[CellResult]) -> None:
    for cell in seed_cells:
        data = json.loads(json.dumps(cell.to_dict()))
        assert CellResult.from_dict(data) == cell
        raw = json.loads(cell_path(seed_run_dir, cell.cell_id).read_text())
        assert data == raw


def test_cell_cores_used(seed_cells: list[CellResult]) -> None:
    cell = seed_cells[0]
    assert cell.server_cores_used == pytest.approx(cell.server_cpu_s / cell.perf.wall_s)
    assert cell.perf_analyzer_cores_used == pytest.approx(
        cell.perf.perf_analyzer_cpu_s / cell.perf.wall_s
    )
    no_time = dataclasses.replace(cell, perf=dataclasses.replace(cell.perf, wall_s=0.0))
    assert no_time.server_cores_used == 0.0


def test_save_and_load_cells(tmp_path: Path, seed_cells: list[CellResult]) -> None:
    assert load_cells(tmp_path) == []
    for cell in seed_cells[:3]:
        path = save_cell(tmp_path, cell)
        assert path == tmp_path / "results" / "cells" / f"{cell.cell_id}.json"
    loaded = load_cells(tmp_path)
    assert sorted(c.cell_id for c in loaded) == sorted(c.cell_id for c in seed_cells[:3])
    assert {c.cell_id: c for c in loaded} == {c.cell_id: c for c in seed_cells[:3]}


def test_cell_without_server_stats_round_trips(seed_cells: list[CellResult]) -> None:
    cell = dataclasses.replace(seed_cells[0], server=None)
    assert CellResult.from_dict(json.loads(json.dumps(cell.to_dict()))) == cell


def test_write_json_atomic_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "data.json"
    write_json_atomic(target, {"b": 1, "a": [1, 2]})
    write_json_atomic(target, {"b": 2, "a": []})
    assert [p.name for p in target.parent.iterdir()] == ["data.json"]
    text = target.read_text()
    assert json.loads(text) == {"a": [], "b": 2}
    assert text.index('"a"') < text.index('"b"')  # keys sorted: stable files
    assert text.endswith("\n")


def test_write_text_atomic_failure_keeps_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "log.md"
    gateway.write_text(target, "old\n")
    with pytest.raises(UnicodeEncodeError):
        gateway.write_text(target, "new \udcff cannot be encoded")
    assert [p.name for p in tmp_path.iterdir()] == ["log.md"]
    assert target.read_text() == "old\n"


def test_manifest_round_trip(tmp_path: Path, seed_manifest: Manifest) -> None:
    with pytest.raises(TritonlabError, match="not a tritonlab run folder"):
        load_manifest(tmp_path)
    save_manifest(
        tmp_path, dataclasses.replace(seed_manifest, plan_fingerprint="abc", created_utc=utc_now())
    )
    manifest = load_manifest(tmp_path)
    assert manifest.plan_fingerprint == "abc"
    assert len(manifest.created_utc) == len("2026-01-01T00:00:00Z")
    assert manifest.created_utc.endswith("Z")
