"""The models bench's page (issue 35, item 6): a failed model's line names no machine path, the
table says how each model was served, and the committed results, their page and docs/models.md's
table are in step."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _bench() -> ModuleType:
    return load_script("benchmarks/models_bench.py")


def _entry(name: str, **fields: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": name,
        "kind": "a kind",
        "package": "pkg",
        "version": "1.0",
        "rc": 0,
        "wall_s": 61.0,
        "traceback": False,
        "error": "",
        "servers_left": 0,
        "checked_against": ["onnxruntime"],
        "sequence_requests": None,
        "cells": 40,
        "dims": "",
        "controls": [],
        "throughput": ["x2: higher (+5%, CI +1% to +9%)"],
    }
    return base | fields


def test_a_failed_models_line_names_no_machine_path(tmp_path: Path) -> None:
    bench = _bench()
    model, folder = tmp_path / "m.onnx", tmp_path / "work" / "run"
    line = f"Error: {model} failed; see {folder}/server/tritonserver.log or {Path.home()}/x"
    assert bench._portable(line, model, folder) == (
        "Error: MODEL failed; see RUN/server/tritonserver.log or $HOME/x"
    )


def test_the_table_says_how_each_model_was_served() -> None:
    report = {
        "models": [
            _entry("plain", dims="dynamic dims (unnamed) = 128", controls=["sr = 16000"]),
            _entry("stream", sequence_requests=6, cells_stored_disturbed=1),
            _entry("broken", rc=2, error="Error: no size runs", cells=None),
        ]
    }
    lines = _bench().table_lines(report)
    plain, stream, broken = lines[2:5]
    assert "| yes, answers = onnxruntime |" in plain
    assert "dynamic dims (unnamed) = 128; sr = 16000" in plain
    assert "over a 6-request sequence (state kept) | 40 (1 disturbed) |" in stream
    assert "| no (exit 2): Error: no size runs |" in broken
    assert lines[-1] == (
        "2 of 3 served, checked and measured; tracebacks: 0; servers left running: 0; cells "
        "the interference monitor stored as disturbed (other work on the machine): 1 of 80."
    )


def test_the_committed_results_page_and_docs_are_in_step() -> None:
    bench = _bench()
    report = json.loads((RESULTS / "models.json").read_text())
    assert (RESULTS / "models.md").read_text() == bench.render_md(report)
    docs = (ROOT / "docs" / "models.md").read_text()
    assert bench.rewritten_docs(docs, report) == docs, "run benchmarks/models_bench.py --render"
    assert len(report["models"]) == len(load_script("benchmarks/model_corpus.py").load_corpus())
