"""Results files the report reads but does not rewrite (operators.json, adaptive.json,
stopping.json, infer_check.json, manifest.json): every committed copy loads into its record and
dumps back to the very JSON it holds, so writing through the records keeps the files' bytes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tritonlab.client.infer import InferCheck
from tritonlab.errors import PlanError, ResultFileError
from tritonlab.experiments.blocks import EngineRecord, Reload
from tritonlab.experiments.manifest import FaultRecord, MachineInfo, Manifest, NodeEntry
from tritonlab.experiments.opening import check_resume
from tritonlab.experiments.rounds import AdaptiveRound, StoppingRecord, append_round
from tritonlab.experiments.store import CellResult, save_manifest
from tritonlab.perf.machine import MachineCeilings
from tritonlab.perf.operator_profile import OperatorsRecord
from tritonlab.records import Record, RecordError
from tritonlab.result_files import load_record, load_records, read_result, write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted([*ROOT.glob("examples/*/results"), *ROOT.glob("tests/fixtures/*/results")])


def _copies(name: str) -> list[Path]:
    found = [r / name for r in RUNS if (r / name).exists()]
    assert found, f"no committed {name}"
    return found


def _same_json(a: Any, b: Any) -> bool:
    """Equal as stored: 1 and 1.0 differ, as they do in the file."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _label(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize(
    ("name", "record"),
    [
        ("operators.json", OperatorsRecord),
        ("stopping.json", StoppingRecord),
        ("adaptive.json", AdaptiveRound),
        ("infer_check.json", InferCheck),
    ],
)
def test_every_committed_copy_dumps_back_as_stored(name: str, record: type[Record]) -> None:
    for path in _copies(name):
        stored = read_result(path)  # without schema_version
        items = stored if isinstance(stored, list) else [stored]
        dumped = [record.from_dict(item).to_dict() for item in items]
        assert _same_json(dumped, items), _label(path)


def test_every_committed_manifest_dumps_back_as_stored() -> None:
    for path in _copies("manifest.json"):
        stored = json.loads(path.read_text())
        dumped = Manifest.from_dict(stored).to_dict()  # schema 1 (no version) stays without
        assert _same_json(dumped, stored), _label(path)


def test_every_committed_cell_dumps_back_as_stored() -> None:
    cells = [p for r in RUNS for p in sorted((r / "cells").glob("*.json"))]
    assert len(cells) > 100
    for path in cells:
        stored = json.loads(path.read_text())
        assert _same_json(CellResult.from_dict(stored).to_dict(), stored), _label(path)


def test_every_committed_engine_record_dumps_back_as_stored() -> None:
    for path in _copies("engine.json"):
        stored = read_result(path)
        assert _same_json(EngineRecord.from_dict(stored).to_dict(), stored), _label(path)


def test_a_manifest_from_a_newer_tritonlab_is_refused_in_one_line(tmp_path: Path) -> None:
    stored = json.loads((ROOT / "tests/fixtures/cnn_run/results/manifest.json").read_text())
    with pytest.raises(RecordError, match=r"schema 3, this tritonlab reads up to 2"):
        Manifest.from_dict({**stored, "schema_version": 3})
    write_json_atomic(tmp_path / "results" / "manifest.json", {**stored, "schema_version": 3})
    with pytest.raises(ResultFileError, match="schema 3, this tritonlab reads up to 2") as exc:
        check_resume(tmp_path, "any")  # a resume reads the fingerprint through the record
    assert "\n" not in str(exc.value)
    save_manifest(tmp_path, Manifest.from_dict(stored))
    check_resume(tmp_path, stored["plan_fingerprint"])
    with pytest.raises(PlanError):
        check_resume(tmp_path, "another plan")


MACHINE = MachineInfo("EPYC", 2, 2, 7.7, (), "Linux", "3.11.9")


def test_a_cluster_manifest_keeps_its_nodes_and_faults_as_records() -> None:
    stored = json.loads((ROOT / "tests/fixtures/cnn_run/results/manifest.json").read_text())
    node = NodeEntry("abcdef0123", "10.0.0.1", "host", MACHINE, "0.1.0",
                     {"onnxruntime": "1.20.1"}, "2.51.0", "2.51.0")  # fmt: skip
    lost = dataclasses.replace(node, lost_utc="2026-01-01T00:00:00Z", lost_why="ActorDiedError")
    fault = FaultRecord("cell", "server died", "restarted, re-measuring", ("line",), "now")
    manifest = dataclasses.replace(
        Manifest.from_dict(stored),
        nodes=(node, dataclasses.replace(lost, profiled=True)),
        faults=(fault,),
    )
    data = json.loads(json.dumps(manifest.to_dict()))
    assert data["nodes"][0]["label"] == "10.0.0.1/abcdef01"
    assert "lost_utc" not in data["nodes"][0] and "profiled" not in data["nodes"][0]
    assert data["nodes"][1]["lost_why"] == "ActorDiedError" and data["nodes"][1]["profiled"]
    assert data["nodes"][0]["machine"]["gpus"] == []
    assert Manifest.from_dict(data) == manifest
    with pytest.raises(RecordError, match=r"Manifest: no 'nodes.0.node_id' entry"):
        Manifest.from_dict({**data, "nodes": [{"label": "10.0.0.1/abcdef01"}]})


def test_a_cluster_check_names_its_node_and_a_local_one_leaves_it_out() -> None:
    path = _copies("infer_check.json")[0]
    check = InferCheck.from_dict(read_result(path)[0])
    assert check.node is None and "node" not in check.to_dict()
    on_node = dataclasses.replace(check, node="10.0.0.1/abcdef01")
    assert on_node.to_dict()["node"] == "10.0.0.1/abcdef01"
    assert InferCheck.from_dict(on_node.to_dict()) == on_node


def test_rounds_and_reloads_are_written_and_read_through_their_records(tmp_path: Path) -> None:
    path = tmp_path / "results" / "adaptive.json"
    first = AdaptiveRound(4, ("a vs b: undecided",), ("a__grpc_b1_c8__r4",))
    append_round(path, first)
    append_round(path, dataclasses.replace(first, round=5))
    assert [r["round"] for r in read_result(path)] == [4, 5]
    assert load_records(path, AdaptiveRound) == [first, dataclasses.replace(first, round=5)]
    stopping = StoppingRecord("every verdict was decided", 6, None, 1.5, 0.84, 30.0)
    assert StoppingRecord.from_dict(stopping.to_dict()) == stopping
    engine = EngineRecord("blocks", "seed", reloads=[Reload(10, ("a", "b"), 2.5)])
    data = json.loads(json.dumps(engine.to_dict()))
    assert data["reloads"] == [{"before_block": 10, "load_order": ["a", "b"], "seconds": 2.5}]
    assert EngineRecord.from_dict(data).reloads == engine.reloads


def test_ceilings_patches_operators_json_through_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from typer.testing import CliRunner

    import tritonlab.perf.machine as machine_module
    from tritonlab.cli import app

    run = tmp_path / "cnn_run"
    shutil.copytree(ROOT / "tests/fixtures/cnn_run", run)
    path = run / "results" / "operators.json"
    before = OperatorsRecord.from_dict(read_result(path))
    measured = MachineCeilings(20e9, 15e9, 20e9, 40e9, 1024, 128 << 20, 1, "cpu", "now", {})
    monkeypatch.setattr(machine_module, "measure_ceilings", lambda: measured)
    monkeypatch.setattr(machine_module, "store_ceilings", lambda root, m: None)
    result = CliRunner().invoke(app, ["ceilings", str(run)])
    assert result.exit_code == 0, result.output
    after = load_record(path, OperatorsRecord)
    assert after == dataclasses.replace(before, machine_ceilings=measured)
    assert read_result(path)["machine_ceilings"] == measured.to_dict()
