"""The run's tritonserver killed (SIGKILL) at each phase of a run, on the real server (issue 20, 0).

Between cells, during a model load, during an unload and during the serving-path probes: each
death is a restart (``results/faults.json`` says where), the open work is measured again, and
the run finishes with every cell stored, exit 0 and no process left. The phase is entered when
the run's own files say so: a cell file stored, or the server log's ``loading: MODEL`` line.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from integration_support import (
    describe,
    finish,
    living,
    named,
    process_tree,
    start_cli,
    stored_cells,
    wait_for,
)

from tritonlab.result_files import read_result

pytestmark = pytest.mark.integration

SHORT = ["--configs", "seed", "--window-ms", "400", "--stability", "80"]


def _kill_server(proc: subprocess.Popen[str]) -> int:
    servers = named(proc, "tritonserver")
    assert servers, describe(process_tree(proc.pid))
    servers[0].send_signal(signal.SIGKILL)
    return servers[0].pid


def _log_has(out_dir: Path, line: str) -> bool:
    try:
        return line in (out_dir / "server" / "tritonserver.log").read_text(errors="replace")
    except OSError:
        return False


def _check_finished(
    proc: subprocess.Popen[str], out_dir: Path, stderr: Path, cells: int, restarts: int
) -> list[dict[str, str]]:
    code = finish(proc, 400)
    assert code == 0, stderr.read_text()[-3000:]
    assert len(stored_cells(out_dir)) == cells
    faults = read_result(out_dir / "results" / "faults.json")
    restarted = [f for f in faults if "restarted the server" in f["action"]]
    assert len(restarted) == restarts, faults
    assert not living(process_tree(proc.pid))
    return faults


@pytest.mark.timeout(600)
def test_demo_survives_its_server_killed_after_the_1st_4th_and_8th_cell(tmp_path: Path) -> None:
    """The block engine: every configuration co-loaded again after each restart."""
    out_dir = tmp_path / "demo"
    args = ["demo", "--out", str(out_dir), *SHORT, "--repeats", "2", "--max-repeats", "2"]
    proc, _stdout, stderr = start_cli(args, tmp_path, "demo")
    kept: dict[str, bytes] = {}
    for after in (1, 4, 8):
        wait_for(
            proc, lambda n=after: len(stored_cells(out_dir)) >= n, f"cell {after}", 300, stderr
        )
        kept.update(stored_cells(out_dir))
        _kill_server(proc)
    faults = _check_finished(proc, out_dir, stderr, cells=10, restarts=3)  # 4 configs + A/A, x2
    after_run = stored_cells(out_dir)
    assert not [c for c, data in kept.items() if after_run.get(c) != data], "a cell was lost"
    engine = json.loads((out_dir / "results" / "engine.json").read_text())
    assert engine["coload"]["co_loaded"]
    print("faults:", [(f["cell"], f["action"]) for f in faults])


@pytest.mark.timeout(600)
def test_classic_demo_survives_its_server_killed_between_cells_in_a_load_and_in_the_probes(
    tmp_path: Path,
) -> None:
    """The classic engine unloads each configuration after its cells: the death reported on
    2026-12-01 ("unloading model ... failed: Connection refused" ended the run)."""
    out_dir = tmp_path / "classic"
    args = ["demo", "--out", str(out_dir), "--engine", "classic", *SHORT]
    args += ["--repeats", "1", "--max-repeats", "1"]
    proc, _stdout, stderr = start_cli(args, tmp_path, "classic")
    # 1. between cells: the first cell stored, its configuration about to be unloaded
    wait_for(proc, lambda: len(stored_cells(out_dir)) >= 1, "the first cell", 300)
    _kill_server(proc)
    # 2. during a load: the last configuration's
    wait_for(
        proc, lambda: _log_has(out_dir, "loading: simple_mlp__batch_0ms_x1:1"), "its load", 300
    )
    _kill_server(proc)
    # 3. during the serving-path probes (the null models behind the cost model)
    wait_for(proc, lambda: _log_has(out_dir, "loading: simple_mlp__serving_path"), "a probe", 300)
    _kill_server(proc)
    faults = _check_finished(proc, out_dir, stderr, cells=4, restarts=3)
    probes = list((out_dir / "results" / "serving_path").glob("*.json"))
    assert len(probes) == 3, probes  # every probe measured, the killed one again
    print("faults:", [(f["cell"], f["action"]) for f in faults])
