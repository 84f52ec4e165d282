"""``results/recommendations.json`` through ``StoredRecommendations``: ``tritonlab sweep``'s
closing lines read it through the record, and a damaged file is a one-line error naming it
(every committed file dumps back the same: ``test_committed_records.py``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tritonlab.cli.sweep_cmd import _print_outcome
from tritonlab.errors import ResultFileError

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "simple_mlp_sweep_blocks"


def test_the_sweep_command_states_the_picks_and_the_summary_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "results").mkdir()
    shutil.copy(EXAMPLE / "results" / "recommendations.json", tmp_path / "results")
    _print_outcome(tmp_path, 3, 4, 65.0)
    printed = capsys.readouterr().out.splitlines()
    stored = json.loads((EXAMPLE / "results" / "recommendations.json").read_text())
    point = stored["throughput_pick"]["point"]
    assert printed[0] == "measured 3 cells, reused 4, in 1:05 (m:ss)"
    assert printed[1] == (
        f"throughput-first: {point['description']} at {point['load_key']}: "
        f"{point['throughput_infer_per_s']:,.0f} infer/s, p99 {point['latency_p99_us']:,.0f} µs"
    )
    assert printed[2].startswith("latency-first: ")
    assert printed[3] == stored["summary_line"]
    assert printed[4].startswith("explained in ")


def test_a_damaged_recommendations_json_is_one_line_naming_the_file(tmp_path: Path) -> None:
    data = json.loads((EXAMPLE / "results" / "recommendations.json").read_text())
    data["throughput_pick"]["point"]["concurrency"] = "eight"
    path = tmp_path / "results" / "recommendations.json"
    path.parent.mkdir()
    path.write_text(json.dumps(data))
    with pytest.raises(ResultFileError) as raised:
        _print_outcome(tmp_path, 0, 0, 1.0)
    message = str(raised.value)
    assert "\n" not in message and str(path) in message
    assert "throughput_pick.point.concurrency" in message
