"""Faults injected into real runs: each test ends with the figures the user cares about.

Cells lost (of those finished before the fault: must be 0), processes left (0), the one line
the user saw, and that a re-run resumes and finishes. The server, its backend stubs and
perf_analyzer are the real ones; the faults are real signals (SIGKILL, SIGSTOP, SIGTERM), a real
truncated file, and a writer that raises ENOSPC.
"""

from __future__ import annotations

import errno
import json
import re
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from integration_support import (
    BASELINE,
    BATCHING,
    MAX_TRIALS,
    STABILITY_PCT,
    WINDOW_MS,
    cli_env,
    describe,
    finish,
    living,
    named,
    process_tree,
    start_cli,
    stored_cells,
    tritonlab_command,
    wait_for,
    wait_gone,
)

from tritonlab.errors import ResultFileError
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint, MeasurementSettings
from tritonlab.experiments.recovery import load_faults
from tritonlab.experiments.runner import run_experiment
from tritonlab.models.demo import DEMO_MODEL_NAME
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.result_files import read_result
from tritonlab.server.launch import ServerOptions

pytestmark = pytest.mark.integration

SUMMARY_RE = re.compile(r"measured (\d+) cells, reused (\d+)")
# The block engine (the default): the seed's 4 configurations and the A/A control, co-loaded.
SEED_CELL_COUNT = 5


def _measuring(proc: subprocess.Popen[str]) -> list[psutil.Process]:
    """perf_analyzer processes measuring a cell (not the ``--version`` probe that locates it)."""
    found = []
    for p in named(proc, "perf_analyzer"):
        try:
            if "--version" not in p.cmdline():
                found.append(p)
        except psutil.Error:
            continue
    return found


def _freeze_a_measuring_perf_analyzer(proc: subprocess.Popen[str]) -> psutil.Process:
    """SIGSTOP a perf_analyzer that is measuring a cell and still alive once stopped: on a
    loaded machine the one found can finish its short window before the signal lands (then
    nothing hangs and the run records no fault), so another is taken."""
    for _ in range(20):
        wait_for(proc, lambda: bool(_measuring(proc)), "perf_analyzer", 120)
        found = _measuring(proc)
        if not found:
            continue
        frozen = found[0]
        try:
            frozen.send_signal(signal.SIGSTOP)
            time.sleep(0.2)
            if frozen.status() == psutil.STATUS_STOPPED:
                return frozen
        except psutil.Error:
            pass
    raise AssertionError("no measuring perf_analyzer could be stopped")


def _run_args(model: Path, out_dir: Path) -> list[str]:
    # Faults need cells, not precise ones: short windows keep these runs (and the hang's
    # deadline, which follows the window) short.
    return [
        "run",
        str(model),
        "--out",
        str(out_dir),
        "--configs",
        "seed",
        "--repeats",
        "1",
        "--max-repeats",
        "1",
        "--window-ms",
        "400",
        "--stability",
        "80",
    ]


@pytest.mark.timeout(480)
def test_killed_server_mid_sweep_is_restarted_and_the_sweep_finishes(
    demo_onnx: Path, tmp_path: Path
) -> None:
    (tmp_path / "m.onnx").write_bytes(demo_onnx.read_bytes())
    (tmp_path / "plan.yaml").write_text(
        "model: m.onnx\n"
        "axes: {max_queue_delay_microseconds: [0]}\n"
        "loads: {concurrency: [2, 8]}\n"
        "repeats: 1\n"
        "measurement: {measurement_interval_ms: 400, stability_percentage: 80}\n"
        "recommend: {latency_budget_p99_us: 1000000}\n"
    )
    out_dir = tmp_path / "project"
    args = ["sweep", "plan.yaml", "--out", str(out_dir), "--max-repeats", "1", "--no-progress"]
    proc, _stdout, stderr = start_cli(args, tmp_path, "killed")
    wait_for(proc, lambda: len(stored_cells(out_dir)) >= 1, "first cell")
    before = stored_cells(out_dir)
    wait_for(proc, lambda: bool(_measuring(proc)), "a cell in progress", 60)
    servers = named(proc, "tritonserver")
    assert servers, describe(process_tree(proc.pid))
    servers[0].send_signal(signal.SIGKILL)
    code = finish(proc, 360)
    tree = process_tree(proc.pid)

    assert code == 0, stderr.read_text()
    after = stored_cells(out_dir)
    lost = [c for c, data in before.items() if after.get(c) != data]
    print(f"cells finished before the kill: {len(before)}, lost: {len(lost)}")
    # the sweep: 2 configurations and the block engine's A/A control, x 2 loads
    assert not lost and len(after) == 6
    faults = read_result(out_dir / "results" / "faults.json")
    assert any("restarted the server" in f["action"] for f in faults), faults
    manifest = json.loads((out_dir / "results" / "manifest.json").read_text())
    assert manifest["faults"] == faults
    assert "## Faults and recoveries" in (out_dir / "docs" / "experiment_log.md").read_text()
    assert not wait_gone(tree, 5), describe(tree)


@pytest.mark.timeout(480)
def test_killed_backend_stub_is_retried_after_a_reload(demo_onnx: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "project"
    proc, _stdout, stderr = start_cli(_run_args(demo_onnx, out_dir), tmp_path, "stub")
    wait_for(proc, lambda: len(stored_cells(out_dir)) >= 1, "first cell")
    before = stored_cells(out_dir)
    wait_for(proc, lambda: bool(_measuring(proc)), "a cell in progress", 60)
    stubs = named(proc, "python_backend_stub")
    assert stubs, describe(process_tree(proc.pid))
    for stub in stubs:
        stub.send_signal(signal.SIGKILL)
    code = finish(proc, 360)

    assert code == 0, stderr.read_text()
    after = stored_cells(out_dir)
    assert not [c for c, data in before.items() if after.get(c) != data]
    assert len(after) == SEED_CELL_COUNT
    assert not living(process_tree(proc.pid))
    # The stubs died without a word in the server log: each fault says so, instead of quoting
    # the GPU-less start-up's warnings as its cause.
    faults = load_faults(out_dir)
    assert faults and all(f.action == "retrying" for f in faults), faults
    assert not [ln for f in faults for ln in f.log_lines if "CudaDriverHelper" in ln], faults


@pytest.mark.timeout(480)
def test_hung_perf_analyzer_is_killed_at_its_deadline_and_retried(
    demo_onnx: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "project"
    proc, _stdout, stderr = start_cli(_run_args(demo_onnx, out_dir), tmp_path, "hung")
    frozen = _freeze_a_measuring_perf_analyzer(proc)  # the deadline must end it
    started = time.monotonic()
    code = finish(proc, 420)

    assert code == 0, stderr.read_text()
    assert not living([frozen]), "the hung perf_analyzer was not killed"
    faults = read_result(out_dir / "results" / "faults.json")
    assert faults[0]["action"] == "retrying" and "ran past" in faults[0]["what"], faults
    assert len(stored_cells(out_dir)) == SEED_CELL_COUNT
    print(f"run finished {time.monotonic() - started:.0f} s after the hang")


@pytest.mark.timeout(420)
def test_sigterm_stops_cleanly_and_the_rerun_resumes(demo_onnx: Path, tmp_path: Path) -> None:
    """SIGINT (Ctrl-C) is tested in test_cli_project.py; SIGTERM takes the same way out."""
    sig = signal.SIGTERM
    out_dir = tmp_path / "project"
    args = _run_args(demo_onnx, out_dir)
    proc, _stdout, stderr = start_cli(args, tmp_path, sig.name)
    wait_for(proc, lambda: len(stored_cells(out_dir)) >= 1, "first cell")
    wait_for(proc, lambda: bool(_measuring(proc)), "a cell in progress", 60)
    tree = process_tree(proc.pid)
    before = stored_cells(out_dir)
    proc.send_signal(sig)
    code = finish(proc, 60)

    message = stderr.read_text().strip().splitlines()
    assert code == 130, message
    assert message[-1].startswith("interrupted: finished cells are kept"), message
    assert "Traceback" not in stderr.read_text()
    assert not wait_gone(tree, 5), describe(tree)
    assert all(stored_cells(out_dir)[c] == data for c, data in before.items())

    again = subprocess.run(
        [*tritonlab_command(), *args],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    summary = SUMMARY_RE.search(again.stdout)
    assert summary and int(summary.group(2)) >= len(before), again.stdout
    assert len(stored_cells(out_dir)) == SEED_CELL_COUNT


@pytest.mark.timeout(300)
def test_truncated_and_old_schema_cells_on_resume(demo_onnx: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "project"
    args = _run_args(demo_onnx, out_dir)
    first = subprocess.run(
        [*tritonlab_command(), *args],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert first.returncode == 0, first.stderr
    paths = sorted((out_dir / "results" / "cells").glob("*.json"))
    truncated, old, redo = paths[0], paths[1], paths[2]
    redo_bytes = redo.read_bytes()
    truncated.write_bytes(truncated.read_bytes()[:200])
    data = json.loads(old.read_text())
    del data["schema_version"]  # as written before cells carried a version
    old.write_text(json.dumps(data))

    report = subprocess.run(
        [*tritonlab_command(), "report", str(out_dir)],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert report.returncode == 2 and str(truncated) in report.stderr
    assert report.stderr.count("\n") == 1, report.stderr
    assert f"--remeasure {truncated.stem}" in report.stderr

    again = subprocess.run(
        [*tritonlab_command(), *args, "--remeasure", redo.stem],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert again.returncode == 0, again.stderr
    assert "measured 2 cells, reused 3" in again.stdout, again.stdout
    assert redo.with_name(redo.name + ".replaced").read_bytes() == redo_bytes
    assert redo.read_bytes() != redo_bytes, "the cell asked for was measured again"
    assert "kept as" in again.stderr and truncated.with_name(truncated.name + ".corrupt").exists()
    assert json.loads(old.read_text()).get("schema_version") is None, "the old cell was kept"
    assert json.loads(truncated.read_text())["schema_version"] == 2


@pytest.mark.timeout(300)
def test_a_full_disk_mid_run_loses_nothing_and_resumes(
    demo_info: OnnxModelInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tritonlab.experiments.store as store

    plan = ExperimentPlan(
        model_name=DEMO_MODEL_NAME,
        variants=(BASELINE, BATCHING),
        loads=(LoadPoint(protocol="grpc", batch_size=1, concurrency=8),),
        repeats=1,
        measurement=MeasurementSettings(
            measurement_interval_ms=WINDOW_MS,
            stability_percentage=STABILITY_PCT,
            max_trials=MAX_TRIALS,
        ),
    )
    run_dir = tmp_path / "run"
    real = store.write_json_atomic
    written: list[Path] = []

    def full_after_first_cell(path: Path, data: object) -> None:
        if "cells" in path.parts and written:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)
        if "cells" in path.parts:
            written.append(path)

    monkeypatch.setattr(store, "write_json_atomic", full_after_first_cell)
    children_before = set(p.pid for p in psutil.Process().children(recursive=True))
    with pytest.raises(ResultFileError, match="No space left on device") as exc:
        run_experiment(plan, demo_info, run_dir, ServerOptions())
    assert "\n" not in str(exc.value) and "run the same command to resume" in str(exc.value)
    cells = list((run_dir / "results" / "cells").iterdir())
    assert [p.name for p in cells] == [written[0].name], "one whole cell, no temporary file"
    left = [
        p for p in living(psutil.Process().children(recursive=True)) if p.pid not in children_before
    ]
    assert not left, describe(left)

    monkeypatch.setattr(store, "write_json_atomic", real)
    outcome = run_experiment(plan, demo_info, run_dir, ServerOptions())
    assert outcome.skipped == [written[0].stem] and len(outcome.measured) == 1
