"""A node's answer is untrusted input: plain JSON the driver parses and checks (issue 20, 4)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from tritonlab.distributed.nodes import NodeFacts
from tritonlab.distributed.wire import (
    NodeAnswerError,
    decode_answer,
    encode,
    encode_answer,
)
from tritonlab.experiments.store import CellResult

CELLS = Path(__file__).resolve().parents[1] / "fixtures" / "sweep_run" / "results" / "cells"
CID = "baseline__grpc_b1_c8__r1"


def _cell() -> CellResult:
    return CellResult.from_dict(json.loads((CELLS / f"{CID}.json").read_text()))


def test_a_well_formed_answer_round_trips(tmp_path: Path) -> None:
    raw = encode_answer(_cell(), {"benchmarks/baseline/r1.csv": b"a,b\n"}, [])
    answer = decode_answer(raw, "node n1", tmp_path, CID)
    assert answer.cell is not None and answer.cell.cell_id == CID
    assert answer.files == {"benchmarks/baseline/r1.csv": b"a,b\n"}


@pytest.mark.parametrize(
    "rel", ["../outside.txt", "/etc/passwd", "a/../../b", "", ".", "a\\..\\b", "x\0y"]
)
def test_a_path_that_leaves_the_run_folder_is_refused(tmp_path: Path, rel: str) -> None:
    raw = encode_answer(None, {rel: b"x"}, [])
    with pytest.raises(NodeAnswerError):
        decode_answer(raw, "node n1", tmp_path, None)


def test_a_path_through_a_symlink_out_of_the_run_folder_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "benchmarks").symlink_to(tmp_path, target_is_directory=True)
    raw = encode_answer(None, {"benchmarks/x.csv": b"x"}, [])
    with pytest.raises(NodeAnswerError, match="resolves outside"):
        decode_answer(raw, "node n1", run, None)


def test_another_cell_than_the_one_asked_for_is_refused(tmp_path: Path) -> None:
    raw = encode_answer(_cell(), {}, [])
    with pytest.raises(NodeAnswerError, match="was asked for"):
        decode_answer(raw, "node n1", tmp_path, "batch_0us__grpc_b1_c8__r1")
    forged = json.loads(raw)
    forged["cell"]["cell_id"] = "../../evil"
    with pytest.raises(NodeAnswerError):
        decode_answer(json.dumps(forged).encode(), "node n1", tmp_path, "../../evil")


@pytest.mark.parametrize(
    "raw",
    [
        pickle.dumps({"cell": None}),  # not JSON: a Python object stream
        b"[1, 2]",
        encode({"files": {"a.csv": "***not base64***"}}),
        encode({"faults": "many"}),
        {"cell": None},  # not bytes at all
    ],
)
def test_malformed_answers_are_refused(tmp_path: Path, raw: object) -> None:
    with pytest.raises(NodeAnswerError):
        decode_answer(raw, "node n1", tmp_path, None)


def test_node_facts_are_checked_against_where_the_measurer_was_placed() -> None:
    facts = NodeFacts.current("abcdef0123", "10.0.0.2", "2.51.0")
    assert NodeFacts.reported(encode(facts.to_dict()), "abcdef0123") == facts
    with pytest.raises(NodeAnswerError, match="reported node id"):
        NodeFacts.reported(encode(facts.to_dict()), "another")
    with pytest.raises(NodeAnswerError):
        NodeFacts.reported(encode({"address": 1}), "abcdef0123")


@pytest.mark.parametrize(
    "rel",
    [
        "scripts/start_server.sh",
        "client/infer_client.py",
        "results/manifest.json",
        "results/cells/baseline__grpc_b1_c8__r1.json",
        "models/simple_mlp/1/model.py",
        "models/../x/config.pbtxt",
        "docs/experiment_log.md",
        "README.md",
        ".tritonlab",
        "benchmarks/.hidden",
        "benchmarks",
    ],
)
def test_a_node_may_write_only_its_outputs(tmp_path: Path, rel: str) -> None:
    """Issue 32, 10: a node could overwrite any file of the driver's run folder, scripts the
    user runs later included; now only files under benchmarks/."""
    raw = encode_answer(None, {rel: b"#!/bin/sh\nevil\n"}, [])
    with pytest.raises(NodeAnswerError):
        decode_answer(raw, "node n1", tmp_path, None)
