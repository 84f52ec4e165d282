"""Faults in stored results and during runs: corrupt cells, schema versions, fault records."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from tritonlab.decisions.recommend import recommend
from tritonlab.errors import ConfigError, PerfAnalyzerError, ResultFileError, ServerError
from tritonlab.experiments.plan import (
    LoadPoint,
    PlanBasics,
    seed_comparison_plan,
    sequence_length_of,
)
from tritonlab.experiments.recovery import Recovery, load_faults, stub_died
from tritonlab.experiments.runner import quarantine_unusable
from tritonlab.experiments.store import (
    CELL_SCHEMA_VERSION,
    CellResult,
    load_cells,
    read_cell,
    save_cell,
    set_aside_cells,
)
from tritonlab.explanation.measurement_rules import backend_fallback
from tritonlab.explanation.rule_support import RuleContext
from tritonlab.perf.trace import TraceStats
from tritonlab.report.experiment_log import faults_section
from tritonlab.report.recommend_text import justification
from tritonlab.result_files import (
    RESULT_SCHEMA_VERSION,
    read_result,
    write_json_atomic,
    write_result,
)
from tritonlab.run_layout import FAULTS_FILE
from tritonlab.server.endpoint import RemoteServer
from tritonlab.server.locate import ServerInstall
from tritonlab.server.process import TritonServer, relevant_log_lines
from tritonlab.stats.aggregate import summarise


@pytest.fixture()
def run_copy(seed_run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(seed_run_dir, target)
    return target


def _first_cell(run: Path) -> Path:
    return sorted((run / "results" / "cells").glob("*.json"))[0]


def test_new_cells_carry_their_schema_and_old_ones_still_read(run_copy: Path) -> None:
    old = read_cell(_first_cell(run_copy))
    assert old.schema_version == 1 and "schema_version" not in old.to_dict()
    new = dataclasses.replace(old, schema_version=CELL_SCHEMA_VERSION, backend_fallbacks=3)
    path = save_cell(run_copy, new)
    data = json.loads(path.read_text())
    assert data["schema_version"] == CELL_SCHEMA_VERSION and data["backend_fallbacks"] == 3
    assert read_cell(path) == new


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"cell_id": "x", "variant": {', "is unreadable"),
        ('{"schema_version": 99}', "cell schema 99"),
        ('{"schema_version": 2, "cell_id": "x"}', "not a complete cell record"),
    ],
)
def test_bad_cell_files_are_one_line_errors_naming_the_file(
    run_copy: Path, content: str, message: str
) -> None:
    path = _first_cell(run_copy)
    path.write_text(content)
    with pytest.raises(ResultFileError, match=message) as exc:
        load_cells(run_copy)
    assert str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_resume_moves_a_truncated_cell_aside_and_keeps_the_rest(run_copy: Path) -> None:
    path = _first_cell(run_copy)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    before = len(list((run_copy / "results" / "cells").glob("*.json")))
    moved = quarantine_unusable(run_copy)
    assert len(moved) == 1 and "re-measuring it" in moved[0]
    assert (
        not path.exists()
        and path.with_name(path.name + ".corrupt").read_text() == text[: len(text) // 2]
    )
    assert len(load_cells(run_copy)) == before - 1  # every readable cell kept


def test_recovery_retries_a_hung_perf_analyzer_and_records_it(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    recovery = Recovery(RemoteServer("127.0.0.1:1"), tmp_path, 1.0)
    hung = PerfAnalyzerError("perf_analyzer ran past 40 s and was stopped; see x.txt")
    assert recovery.recoverable(hung)
    failed = PerfAnalyzerError("perf_analyzer failed (exit 1)")
    assert recovery.recoverable(failed), "retried once after a reload (a stub may have died)"
    assert not recovery.recoverable(failed, last_attempt=True), "twice: systematic, stop"
    assert recovery.recoverable(hung, last_attempt=True), "a hang is recorded and passed"
    assert not recovery.recoverable(ServerError("a remote server is not restarted"))
    recovery.handle("baseline__grpc_b1_c8__r1", hung, last_attempt=False)
    recovery.handle("baseline__grpc_b1_c8__r1", hung, last_attempt=True)
    faults = load_faults(tmp_path)
    assert [f.action for f in faults] == ["retrying", "gave up: cell stored as failed"]
    assert recovery.failed_cells == ["baseline__grpc_b1_c8__r1"]
    assert read_result(tmp_path / "results" / FAULTS_FILE)[0]["cell"]
    lines = "\n".join(faults_section(faults))
    assert "## Faults and recoveries" in lines and "gave up" in lines
    assert faults_section([]) == []


def test_a_dead_stub_is_told_from_other_perf_analyzer_failures() -> None:
    """Its reload does not wait for the unload, which Triton never finishes for a dead stub."""
    dead = "perf_analyzer failed (exit 99) for model m: Thread [7] had error: Stub process "
    assert stub_died(PerfAnalyzerError(dead + "'m_0_0' is not healthy."))
    assert not stub_died(PerfAnalyzerError("perf_analyzer failed (exit 1) for model m: refused"))
    assert not stub_died(ServerError("Stub process 'm_0_0' is not healthy."))


def test_perf_deadline_covers_every_window_it_may_open() -> None:
    plan = seed_comparison_plan(PlanBasics("m"))
    m = plan.measurement
    settings = plan.perf_settings(plan.loads[0], "m", "127.0.0.1:1", {})
    assert settings.deadline_s > m.max_trials * 2 * m.measurement_interval_ms / 1000 + 30
    # under a trace of 10 s cycles the windows are whole cycles, and the deadline covers them
    stats = TraceStats("t", "0" * 64, 100, 10.0, 10.0, 1.0, 10.0)
    traced = plan.perf_settings(LoadPoint(concurrency=None, trace=stats), "m", "u", {}, None, "t")
    assert traced.measurement_interval_ms >= 10_000
    assert traced.deadline_s > m.max_trials * 2 * 10.0 + 30


def test_backend_fallbacks_are_flagged(seed_cells: list[CellResult], plan_order: list[str]) -> None:
    fallback = [
        dataclasses.replace(c, backend_fallbacks=2) if c.variant.name == "batch_0ms_x1" else c
        for c in seed_cells
    ]
    names = {s.variant.name: s for s in summarise(fallback, plan_order)}
    ctx = RuleContext(names["batch_0ms_x1"], names["baseline"], names["baseline"], 2)
    finding = backend_fallback(ctx)
    assert finding is not None and finding.kind == "flag"
    assert finding.figures["backend_fallbacks"] == 6  # 2 in each of the 3 repeats
    clean = RuleContext(names["baseline"], names["baseline"], names["baseline"], 2)
    assert backend_fallback(clean) is None


def test_picks_rank_only_the_reference_sequence_length(
    seed_cells: list[CellResult], plan_order: list[str]
) -> None:
    """The same cells relabelled as two sequence lengths: the short one must not win."""
    at_128 = [dataclasses.replace(c, load_key="grpc_b1_c8_s128") for c in seed_cells]
    faster_32 = [
        dataclasses.replace(c, load_key="grpc_b1_c8_s32")
        for c in seed_cells
        if c.variant.name == "baseline"
    ]
    summaries = summarise([*at_128, *faster_32], plan_order)
    assert {sequence_length_of(s.load_key) for s in summaries} == {128, 32}
    picks = recommend(summaries, 1e9)
    assert picks.throughput_pick is not None
    assert picks.throughput_pick.point.load_key == "grpc_b1_c8_s128"
    assert "reference sequence length 128" in justification(picks.throughput_pick, picks)
    assert sequence_length_of("grpc_b1_c8") is None


def test_efficiency_only_at_the_length_its_ceiling_was_measured(
    seed_cells: list[CellResult], plan_order: list[str]
) -> None:
    from tritonlab.decisions.efficiency import serving_efficiency
    from tritonlab.perf.in_process import Ceiling

    at_128 = [dataclasses.replace(c, load_key="grpc_b1_c8_s128") for c in seed_cells]
    at_32 = [dataclasses.replace(c, load_key="grpc_b1_c8_s32") for c in seed_cells]
    at_512 = [dataclasses.replace(c, load_key="grpc_b1_c8_s512") for c in seed_cells]
    # 128 is the reference: it is the length with the most load points (two here)
    extra = [dataclasses.replace(c, load_key="grpc_b1_c4_s128") for c in seed_cells]
    summaries = summarise([*at_128, *extra, *at_32, *at_512], plan_order)
    ceiling = Ceiling(1, 1, 1, 1000.0, 100, 3.0)
    keys = {e.load_key for e in serving_efficiency(summaries, [ceiling])}
    assert keys == {"grpc_b1_c8_s128", "grpc_b1_c4_s128"}


@pytest.mark.parametrize(
    "name", ["manifest.json", "infer_check.json", "operators.json", "adaptive.json"]
)
def test_corrupt_run_files_are_one_line_errors(cnn_copy: Path, name: str) -> None:
    from tritonlab.report.run_data import load_run

    path = cnn_copy / "results" / name
    path.write_text(path.read_text()[:40])
    with pytest.raises(ResultFileError) as exc:
        load_run(cnn_copy)
    assert str(path) in str(exc.value) and "\n" not in str(exc.value)


@pytest.fixture()
def cnn_copy(tmp_path: Path) -> Path:
    target = tmp_path / "cnn_run"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "cnn_run", target)
    return target


@pytest.mark.parametrize("payload", [{"terms": {"a": 1.5}}, [{"cell": "x"}, {"cell": "y"}]])
def test_results_files_carry_a_schema_version_and_read_back(
    tmp_path: Path, payload: dict[str, object] | list[object]
) -> None:
    path = tmp_path / "results" / "thing.json"
    write_result(path, payload)
    stored = json.loads(path.read_text())
    assert stored["schema_version"] == RESULT_SCHEMA_VERSION
    assert read_result(path) == payload


@pytest.mark.parametrize("payload", [{"terms": {"a": 1.5}}, [{"cell": "x"}]])
def test_results_files_from_before_versions_still_read(
    tmp_path: Path, payload: dict[str, object] | list[object]
) -> None:
    path = tmp_path / "old.json"
    write_json_atomic(path, payload)  # as written before results files carried a version
    assert read_result(path) == payload
    assert read_result(tmp_path / "absent.json", []) == []


@pytest.mark.parametrize("content", ['{"schema_version": 99, "records": []}', '"text"', "[1, 2"])
def test_newer_or_foreign_results_files_are_one_line_errors(tmp_path: Path, content: str) -> None:
    path = tmp_path / "faults.json"
    path.write_text(content)
    with pytest.raises(ResultFileError) as exc:
        read_result(path)
    message = str(exc.value)
    assert str(path) in message and "\n" not in message
    assert ("reads up to 2" in message) == content.startswith('{"schema_version": 99')


def test_the_cnn_run_rebuilds_with_versioned_files_and_reads_them_back(cnn_copy: Path) -> None:
    from tritonlab.report.build import build_report

    first = build_report(cnn_copy)
    for name in ("summary.json", "cost_model.json"):
        assert json.loads((cnn_copy / "results" / name).read_text())["schema_version"] == 2
    # the unversioned files of the fixture were read as schema 1; after rewriting them as
    # schema 2 the report is the same, byte for byte
    for name in ("infer_check.json", "adaptive.json", "operators.json"):
        path = cnn_copy / "results" / name
        write_result(path, read_result(path))
    second = build_report(cnn_copy)
    assert second.experiment_log.read_bytes() == first.experiment_log.read_bytes()


def test_remeasure_sets_matching_cells_aside_and_refuses_a_pattern_matching_none(
    run_copy: Path,
) -> None:
    cells = sorted((run_copy / "results" / "cells").glob("*.json"))
    first = cells[0]
    original = first.read_bytes()
    moved = set_aside_cells(run_copy, [first.stem])
    assert moved == [first] and not first.exists()
    assert first.with_name(first.name + ".replaced").read_bytes() == original
    prefix = cells[1].stem.split("__")[0]
    matched = set_aside_cells(run_copy, [f"{prefix}__*"])
    assert matched and all(p.stem.startswith(prefix) for p in matched)
    with pytest.raises(ConfigError) as exc:
        set_aside_cells(run_copy, ["no_such_cell"])
    assert "--remeasure no_such_cell" in str(exc.value) and "\n" not in str(exc.value)


class _LiveServer(TritonServer):
    """A TritonServer whose process counts as alive (none runs: only its log is read)."""

    def is_alive(self) -> bool:
        return True


def test_a_killed_server_counts_as_dead_once_its_exit_shows_within_the_grace(
    tmp_path: Path,
) -> None:
    """A SIGKILLed server refuses connections a moment before the kernel reports its exit; the
    recovery waits up to ``EXIT_GRACE_S`` for it instead of taking the refusal as systematic."""
    import signal
    import subprocess

    install = ServerInstall(Path("/bin/true"), tmp_path, None, (), bundled=False)
    server = TritonServer(install, tmp_path, tmp_path / "log")
    assert server.exited_within(0.0), "never started: not alive"
    server._process = subprocess.Popen(["sleep", "30"])  # a stand-in for tritonserver
    try:
        assert not server.exited_within(0.2)
        server._process.send_signal(signal.SIGKILL)
        assert server.exited_within(3.0) and not server.is_alive()
    finally:
        server._process.kill()
        server._process.wait()


GPU_LESS_START = (
    'W1203 02:49:32.938015 1 pinned_memory_manager.cc:273] "Unable to allocate pinned system '
    'memory, pinned memory pool will not be available: CUDA driver version is insufficient"\n'
    'E1203 02:49:32.938203 1 server.cc:241] "CudaDriverHelper has not been initialized."\n'
    "Error: Failed to initialize NVML\n"
    'W1203 02:49:32.939445 1 metrics.cc:798] "DCGM unable to start: DCGM initialization error"\n'
)


def test_a_fault_quotes_only_the_log_lines_written_during_its_attempt(tmp_path: Path) -> None:
    """Not the GPU-less start-up's warnings, nor an earlier cell's or run's errors: a stub that
    died silently is recorded with no log lines rather than with unrelated ones."""
    (tmp_path / "results").mkdir()
    log = tmp_path / "tritonserver.log"
    earlier = 'E1203 01:00:00.000000 1 model.cc:1] "failed to load an earlier run\'s model"\n'
    log.write_text(GPU_LESS_START + earlier)
    install = ServerInstall(Path("/bin/true"), tmp_path, None, (), bundled=False)
    recovery = Recovery(_LiveServer(install, tmp_path, log), tmp_path, 1.0)
    stub = PerfAnalyzerError("perf_analyzer failed (exit 99): Stub process 'm_0_0' is not healthy.")

    recovery.mark()  # the attempt starts; the stub dies and the log says nothing
    recovery.handle("a__grpc_b1_c8__r1", stub, last_attempt=False)  # marks the log again
    now = 'E1203 02:50:00.000000 1 python_be.cc:1] "Stub process m_0_0 exited"\n'
    with log.open("a") as f:
        f.write(now)
    recovery.handle("b__grpc_b1_c8__r1", stub, last_attempt=False)

    faults = load_faults(tmp_path)
    assert [f.log_lines for f in faults] == [(), (now.strip(),)]
    assert "(nothing logged)" in "\n".join(faults_section(faults))
    assert relevant_log_lines(GPU_LESS_START) == [], "start-up noise of every GPU-less host"
    assert relevant_log_lines(GPU_LESS_START + earlier) == [earlier.strip()]


def test_a_server_that_will_not_start_is_explained_by_its_own_lines_only(tmp_path: Path) -> None:
    """A resumed run appends to the server log; a start that fails quotes only what it logged."""
    log = tmp_path / "tritonserver.log"
    log.write_text('E1203 01:00:00.000000 1 model.cc:1] "failed: an earlier run\'s error"\n')
    install = ServerInstall(Path("/bin/true"), tmp_path, None, (), bundled=False)
    server = TritonServer(install, tmp_path, log)
    with pytest.raises(ServerError, match="exited") as exc:
        server.start(ready_timeout_s=10)
    assert "earlier run" not in str(exc.value), exc.value
