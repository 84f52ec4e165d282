"""The CLI's project commands end to end: Ctrl-C and resume, and a model no other test saw."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from integration_support import (
    FAST_RUN_FLAGS,
    WINDOW_MS,
    StartServer,
    cli_env,
    describe,
    kill_tree,
    names,
    process_tree,
    tritonlab_command,
    wait_gone,
    write_two_input_model,
)

from tritonlab.experiments.store import CellResult
from tritonlab.repository.variants import AA_CONTROL_NAME, seed_comparison_variants
from tritonlab.result_files import read_result
from tritonlab.server.locate import default_cache_root

pytestmark = pytest.mark.integration

# The block engine (the default) serves the baseline a second time as its A/A control.
SEED_CELLS = {f"{v.name}__grpc_b1_c8__r1" for v in seed_comparison_variants()} | {
    f"{AA_CONTROL_NAME}__grpc_b1_c8__r1"
}
SUMMARY_RE = re.compile(r"measured (\d+) cells, reused (\d+)")
TEXT_SUFFIXES = (".sh", ".py", ".json", ".md", ".html", ".log", ".txt")


def _start_cli(args: list[str], cwd: Path, tag: str) -> tuple[subprocess.Popen[str], Path, Path]:
    """Start ``tritonlab ARGS`` in its own session; output goes to files (never a full pipe)."""
    stdout_path, stderr_path = cwd / f"{tag}.stdout", cwd / f"{tag}.stderr"
    with open(stdout_path, "w") as stdout, open(stderr_path, "w") as stderr:
        proc = subprocess.Popen(
            [*tritonlab_command(), *args],
            cwd=cwd,
            env=cli_env(),
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
    return proc, stdout_path, stderr_path


def _run_cli(args: list[str], cwd: Path, tag: str, timeout_s: float) -> tuple[int, str, str]:
    proc, stdout_path, stderr_path = _start_cli(args, cwd, tag)
    try:
        code = proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            kill_tree(proc)
    return code, stdout_path.read_text(), stderr_path.read_text()


def _cells(out_dir: Path) -> list[Path]:
    return sorted((out_dir / "results" / "cells").glob("*.json"))


@pytest.mark.timeout(420)
def test_ctrl_c_stops_everything_keeps_cells_and_resumes(demo_onnx: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "project"
    args = ["run", str(demo_onnx), "--out", str(out_dir), *FAST_RUN_FLAGS]
    proc, stdout_path, stderr_path = _start_cli(args, tmp_path, "interrupted")
    try:
        deadline = time.monotonic() + 180
        while not _cells(out_dir):
            assert proc.poll() is None, f"exited early: {stderr_path.read_text()}"
            assert time.monotonic() < deadline, "no cell finished within 180 s"
            time.sleep(0.2)
        # Interrupt while the next cell is measured, if it starts soon: then the server,
        # its backend stubs and perf_analyzer all run below the CLI.
        tree = process_tree(proc.pid)
        until = time.monotonic() + 20
        while "perf_analyzer" not in names(tree) and time.monotonic() < until:
            time.sleep(0.1)
            tree = process_tree(proc.pid)
        assert "tritonserver" in names(tree), describe(tree)
        assert any("python_backend_stub" in n for n in names(tree)), describe(tree)

        print(f"process tree at SIGINT: {describe(tree)}")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=40)
    finally:
        if proc.poll() is None:
            kill_tree(proc)
    stderr = stderr_path.read_text()
    assert code == 130, f"exit {code}; stderr: {stderr}"
    assert "interrupted" in stderr
    assert "Traceback" not in stderr
    leftover = wait_gone(tree, timeout_s=5)
    assert not leftover, f"left running after Ctrl-C: {describe(leftover)}"

    finished = _cells(out_dir)
    assert 1 <= len(finished) < len(SEED_CELLS), stdout_path.read_text()
    for path in finished:
        cell = CellResult.from_dict(json.loads(path.read_text()))
        assert cell.cell_id == path.stem
        assert cell.perf.measurement is not None

    code, stdout, stderr = _run_cli(args, tmp_path, "resumed", timeout_s=300)
    assert code == 0, stderr
    summary = SUMMARY_RE.search(stdout)
    assert summary, stdout
    measured, reused = int(summary.group(1)), int(summary.group(2))
    assert reused == len(finished) >= 1
    assert measured == len(SEED_CELLS) - reused
    assert {p.stem for p in _cells(out_dir)} == SEED_CELLS
    # The cells kept from the interrupted run are the same files, not re-measured ones.
    for path in finished:
        assert CellResult.from_dict(json.loads(path.read_text())).cell_id == path.stem
    assert (out_dir / "docs" / "experiment_log.md").exists()


def _results_rows(experiment_log: str) -> list[list[str]]:
    """The cells of the first results table (header and separator dropped)."""
    lines = experiment_log.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| config |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


@pytest.mark.timeout(360)
def test_run_on_an_unseen_two_input_model(start_server: StartServer, tmp_path: Path) -> None:
    model = tmp_path / "twin.onnx"
    write_two_input_model(model)
    out_dir = tmp_path / "twin-project"
    code, stdout, stderr = _run_cli(
        ["run", str(model), "--out", str(out_dir), *FAST_RUN_FLAGS], tmp_path, "twin", 300
    )
    assert code == 0, f"stdout: {stdout}\nstderr: {stderr}"
    # The block engine: 4 configurations and the A/A control co-loaded, one block.
    assert "measured 5 cells, reused 0" in stdout

    log = (out_dir / "docs" / "experiment_log.md").read_text()
    engine = read_result(out_dir / "results" / "engine.json")
    assert engine["coload"]["co_loaded"], engine
    assert "## Noise floor (A/A control)" in log and "## Interference" in log
    assert "co-loaded: estimated" in log
    rows = _results_rows(log)
    assert [r[0] for r in rows] == [v.description for v in seed_comparison_variants()]
    for row in rows:
        throughput = float(row[2].replace(",", "").split()[0])
        assert throughput > 0, row
    assert "`x`" in log and "`y`" in log

    # The serving cost model: a null model with both inputs ran through the same backend, and
    # the log sets its prediction against every configuration's measurement.
    probes = sorted(p.stem for p in (out_dir / "results" / "serving_path").glob("*.json"))
    assert len(probes) == 3, probes
    assert (out_dir / "serving_path" / "null_model.onnx").is_file()
    costs = json.loads((out_dir / "results" / "cost_model.json").read_text())
    assert len(costs["predictions"]) == 4
    assert all(p["measured_throughput_infer_per_s"] for p in costs["predictions"])
    assert "## Serving cost model: predicted against measured" in log

    for relative in (
        "README.md",
        "scripts/start_server.sh",
        "scripts/run_perf.sh",
        "client/infer_client.py",
        "models/twin/config.pbtxt",
        "models/twin/1/model.onnx",
    ):
        assert (out_dir / relative).is_file(), relative
    for script in ("scripts/start_server.sh", "scripts/run_perf.sh"):
        check = subprocess.run(["bash", "-n", str(out_dir / script)], capture_output=True)
        assert check.returncode == 0, check.stderr
    assert "twin" in (out_dir / "README.md").read_text()

    # Nothing written names this machine's folders: the run folder, the ONNX file's folder,
    # the virtualenv or tritonlab's cache (they are relative paths or named variables).
    machine_paths = (str(tmp_path), sys.prefix, str(default_cache_root()))
    for path in out_dir.rglob("*"):
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            text = path.read_text(errors="replace")
            assert not [p for p in machine_paths if p in text], path
    manifest = json.loads((out_dir / "results" / "manifest.json").read_text())
    assert "--model-repository=models" in manifest["server"]["command"]
    assert manifest["server"]["command"][0].startswith("$TRITONLAB_CACHE/")

    # The generated client works against a server on the project's own repository.
    server = start_server(out_dir / "models", explicit_model_control=True)
    server.load_model("twin")
    client = out_dir / "client" / "infer_client.py"
    for protocol, url in (("grpc", server.grpc_url), ("http", server.http_url)):
        result = subprocess.run(
            [sys.executable, str(client), "--protocol", protocol, "--url", url, "--model", "twin"],
            cwd=out_dir,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "OK" in result.stdout, result.stdout
        assert "output out: shape [2, 8]" in result.stdout, result.stdout


@pytest.mark.timeout(600)
def test_adaptive_repeats_measure_more_rounds_only_where_undecided(
    demo_onnx: Path, tmp_path: Path
) -> None:
    """Two planned rounds, at most three: a third round is measured only while a headline
    verdict is undecided, it re-measures every configuration (pairs stay paired), and the
    log says how many rounds it took and why (the classic engine's rule, on decided words)."""
    out_dir = tmp_path / "adaptive"
    args = [
        "run",
        str(demo_onnx),
        "--out",
        str(out_dir),
        "--engine",
        "classic",
        "--repeats",
        "2",
        "--max-repeats",
        "3",
        "--adaptive-budget-s",
        "300",
        "--window-ms",
        str(WINDOW_MS),
        "--stability",
        "60",
    ]
    code, stdout, stderr = _run_cli(args, tmp_path, "adaptive", timeout_s=540)
    assert code == 0, f"stdout: {stdout}\nstderr: {stderr}"
    cells = {p.stem for p in _cells(out_dir)}
    classic = {c for c in SEED_CELLS if AA_CONTROL_NAME not in c}
    planned = {c.replace("__r1", f"__r{r}") for c in classic for r in (1, 2)}
    assert planned <= cells
    extra = cells - planned
    log = (out_dir / "docs" / "experiment_log.md").read_text()
    manifest = json.loads((out_dir / "results" / "manifest.json").read_text())
    assert manifest["adaptive"]["max_repeats"] == 3
    rounds_path = out_dir / "results" / "adaptive.json"
    if extra:
        rounds = read_result(rounds_path)
        assert [r["round"] for r in rounds] == [3]
        assert set(rounds[0]["cells"]) == extra
        assert {c.rsplit("__", 1)[0] for c in extra} == {
            c.rsplit("__", 1)[0] for c in classic
        }  # every configuration, so round 3 pairs with round 3
        assert rounds[0]["reasons"] and all(
            "no clear difference" in r for r in rounds[0]["reasons"]
        )
        assert "Round 3: 4 cells re-measured because these verdicts were undecided" in log
    else:
        assert not rounds_path.exists()
        assert "No extra round was measured. It stopped because every verdict" in log
    assert not any(c.endswith("__r4") for c in cells)
