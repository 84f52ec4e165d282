"""Real models from registry wheels in `make test` (issue 35, item 6): two of the corpus's
streaming voice activity detectors, fetched as the models bench fetches them (the wheel with
`pip download --no-deps`, never installed; the file's sha256 checked), each run with no flag
but shorter rounds. silero_vad has a rank-0 sample rate the graph compares with constants, an
audio length the shape search finds and a state pair; silero_vad_lstm has LSTM `h`/`c` pairs.
The whole corpus, with no flags at all, is `make models-bench`."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
from integration_support import FAST_RUN_FLAGS, run_cli
from script_module import load_script

from tritonlab.client.sequence_check import SEQUENCE_CHECK_REQUESTS
from tritonlab.result_files import read_result

pytestmark = pytest.mark.integration


def _servers_naming(folder: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or ())
        if proc.info["name"] == "tritonserver" and str(folder) in cmdline:
            found.append(proc)
    return found


@pytest.mark.timeout(540)
@pytest.mark.parametrize("name", ["silero_vad", "silero_vad_lstm"])
def test_a_real_streaming_model_is_served_checked_and_measured(name: str, tmp_path: Path) -> None:
    corpus = load_script("benchmarks/model_corpus.py")
    model = corpus.fetch(next(m for m in corpus.load_corpus() if m.name == name))
    out_dir = tmp_path / name
    result = run_cli(["run", str(model), "--out", str(out_dir), *FAST_RUN_FLAGS], tmp_path, 420)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert not _servers_naming(out_dir), "no server is left behind"

    checks = read_result(out_dir / "results" / "infer_check.json")
    assert {c["protocol"] for c in checks} == {"http", "grpc"}
    assert all(c["sequence_requests"] == SEQUENCE_CHECK_REQUESTS for c in checks)
    cells = [json.loads(p.read_text()) for p in (out_dir / "results" / "cells").glob("*.json")]
    assert len(cells) == 4 and all(c["server"]["request_count"] > 0 for c in cells)
    log = (out_dir / "docs" / "experiment_log.md").read_text()
    assert "so it is served by Triton's sequence batcher" in log
    if name == "silero_vad":  # the sample rate from the graph's constants, sent as [1]
        assert "`sr` INT64 []: 16000 (a control input: the graph compares it with 16000" in log
