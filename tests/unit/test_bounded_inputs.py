"""Safe by construction (issue 32): hostile traces, plans over their limits and stored-run files
that are not what tritonlab wrote are refused in one line, in bounded time and memory.

Each test failed before its fix. Whatever could hang or exhaust memory on the old code (a FIFO,
``/dev/zero``, the 3.8 MiB trace whose peak rate once allocated 15 GiB) runs in a child process
under an address-space limit and a timeout, so a regression fails the test instead of the
machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritonlab.errors import PlanError, ResultFileError
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint, MeasurementSettings, PlanBasics
from tritonlab.experiments.plan_file import load_plan, parse_plan
from tritonlab.experiments.store import read_cell
from tritonlab.perf.trace import TraceError, TraceStats, peak_rate_per_s, read_trace
from tritonlab.repository.variants import ServingVariant
from tritonlab.result_files import read_json, read_result

MEMORY_LIMIT = 1536 * 2**20  # the child's address space: 1.5 GiB (the old peak step: 15 GiB)
CHILD_TIMEOUT_S = 90.0
EXAMPLE_RUN = Path(__file__).resolve().parents[2] / "examples" / "simple_mlp"
# Should a refusal regress, the sweep stops at the server instead of measuring for minutes.
NO_SERVER = ["--server-bin", "/nonexistent/tritonserver"]


def _child(code: str, cwd: Path) -> dict[str, Any]:
    """Run ``code`` in a fresh Python under ``MEMORY_LIMIT``; what it printed last, as JSON.

    A child that runs past ``CHILD_TIMEOUT_S`` (a read that blocks, or never ends) fails the
    test, naming what it was doing."""
    prelude = (
        "import json, resource\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT}))\n"
    )
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", prelude + textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            cwd=cwd,
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung for {CHILD_TIMEOUT_S:g} s (killed): {code.strip()[:200]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _read_in_child(path: Path) -> dict[str, Any]:
    """``read_trace(path)`` in a child: its figures, or the refusal's type and message."""
    return _child(
        f"""
        from pathlib import Path
        from tritonlab.perf.trace import read_trace
        try:
            stats = read_trace(Path({str(path)!r})).stats
            print(json.dumps({{"stats": stats.to_dict()}}))
        except Exception as exc:
            print(json.dumps({{"error": type(exc).__name__, "message": str(exc)}}))
        """,
        path.parent if path.parent.is_dir() else Path.cwd(),
    )


def _cli_in_child(args: list[str], cwd: Path) -> tuple[int, str]:
    """``tritonlab ARGS`` through typer's CliRunner, in a child (as above): exit code, output."""
    result = _child(
        f"""
        from typer.testing import CliRunner
        from tritonlab.cli import app
        result = CliRunner().invoke(app, {args!r})
        print(json.dumps({{"code": result.exit_code, "output": result.output}}))
        """,
        cwd,
    )
    return int(result["code"]), str(result["output"])


def _one_line_error(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("error: "), output
    assert "Traceback" not in output
    return lines[0]


def _dense_trace(folder: Path) -> Path:
    """3.8 MiB, inside every documented bound: 2,000,000 requests in a 1 ms cycle."""
    path = folder / "dense.csv"
    path.write_text("interval_us\n" + "0\n" * 1_999_999 + "1000\n")
    return path


# --- traces ---------------------------------------------------------------------------------


def test_a_dense_trace_within_every_bound_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """Before: the 1 s peak tiled the cycle 1,001 times (2,000,000 x 1,001 int64: 14.9 GiB)."""
    path = _dense_trace(tmp_path)
    assert 3.5 < path.stat().st_size / 2**20 < 4.0
    started = time.monotonic()
    found = _read_in_child(path)
    assert "stats" in found, found
    stats = found["stats"]
    assert stats["request_count"] == 2_000_000 and stats["duration_s"] == 0.001
    assert stats["peak_rate_per_s"] == 2_000_000_000.0  # 1,000 whole cycles in any 1 s
    assert time.monotonic() - started < CHILD_TIMEOUT_S


def _old_peak_rate(intervals_us: np.ndarray[Any, Any], window_s: float = 1.0) -> float:
    """The peak as it was computed before (a copy of the cycle per cycle in the window)."""
    cycle_us = int(intervals_us.sum())
    window_us = round(window_s * 1e6)
    copies = -(-window_us // cycle_us) + 1
    stamps = np.cumsum(np.tile(intervals_us, copies))
    first = stamps[: intervals_us.size]
    ends = np.searchsorted(stamps, first + window_us, side="left")
    return float((ends - np.arange(first.size)).max()) / window_s


def test_the_bounded_peak_rate_is_the_old_one_on_small_cycles() -> None:
    rng = np.random.default_rng(32)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        scale = float(rng.choice([10.0, 1e3, 1e5, 1e6, 3e6]))
        intervals = np.round(rng.exponential(scale, n)).astype(np.int64)
        intervals[rng.random(n) < 0.3] = 0  # requests at one instant
        if intervals.sum() == 0:
            intervals[0] = 1
        window = float(rng.choice([1.0, 0.25, 2.5]))
        assert peak_rate_per_s(intervals, window) == _old_peak_rate(intervals, window), (
            intervals.tolist(),
            window,
        )


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        # 4 x 2**62 + 1000 wraps int64 to a 1 ms cycle: accepted before, with 2**62 µs gaps
        ("interval_us\n" + "4611686018427387904\n" * 4 + "1000\n", "longer than a whole cycle"),
        ("interval_us\n1e19\n1\n", "longer than a whole cycle"),  # was a negative interval
        ("interarrival_ms\n1e16\n1\n", "longer than a whole cycle"),
        ("interval_us\n" + "300000000\n" * 3, "the intervals up to here last over"),
        ("timestamp_s\n0\n1e300\n", "over 600 s after the first request"),
    ],
)
def test_intervals_that_would_overflow_int64_are_refused(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "huge.csv"
    path.write_text(text)
    with pytest.raises(TraceError, match=fragment) as info:
        read_trace(path)
    message = str(info.value)
    assert "\n" not in message and "huge.csv" in message and "at most 600 s" in message


def test_dev_zero_as_a_trace_is_refused_unread() -> None:
    """Before: read until memory ran out (its size is 0, so the size check passed)."""
    found = _read_in_child(Path("/dev/zero"))
    assert found.get("error") == "TraceError", found
    assert "'/dev/zero'" in found["message"] and "character device" in found["message"]


def test_a_fifo_as_a_trace_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """Before: the open blocked until someone wrote to the FIFO (forever)."""
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    found = _read_in_child(fifo)
    assert found.get("error") == "TraceError", found
    assert "pipe.csv" in found["message"] and "FIFO" in found["message"]
    assert "not a regular file" in found["message"]


def test_a_folder_as_a_trace_names_what_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "trace.csv"
    folder.mkdir()
    with pytest.raises(TraceError, match=r"trace\.csv'.*is a folder, not a regular file"):
        read_trace(folder)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("interval_us\n" + "\n" * 4_000_010 + "1\n2\n", "more than 4,000,001 lines"),
        ("interval_us," + "x," * 40_000 + "\n1\n2\n", "line 1 is over 65,536 characters"),
    ],
)
def test_a_trace_of_blank_or_endless_lines_is_refused(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "lines.csv"
    path.write_text(text)
    with pytest.raises(TraceError, match=fragment):
        read_trace(path)


def test_stored_trace_figures_of_no_duration_are_a_damaged_file() -> None:
    """Before: accepted, and a window over them divided by a cycle of 0 µs."""
    good = TraceStats("t", "ab" * 32, 4, 0.8, 5.0, 0.3, 5.0).to_dict()
    assert TraceStats.from_dict(good).cycle_us == 800_000
    for bad in ({"duration_s": 0.0}, {"duration_s": float("nan")}, {"request_count": 10**9}):
        with pytest.raises(ValueError, match="trace"):
            TraceStats.from_dict({**good, **bad})


def _writer_for(fifo: Path, text: str, after_s: float) -> threading.Thread:
    """A thread that, after ``after_s``, feeds ``text`` to a reader blocked on ``fifo`` (the old
    code), so a test of it ends; it gives up when no one reads (the new code)."""

    def feed() -> None:
        deadline = time.monotonic() + after_s + 5.0
        time.sleep(after_s)
        while time.monotonic() < deadline:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no reader
                time.sleep(0.1)
                continue
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            return

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "overflow", "folder"])
def test_cli_refuses_a_hostile_trace_in_one_line_writing_nothing(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        trace = tmp_path / "pipe.csv"
        os.mkfifo(trace)
        says = "FIFO"
    elif kind == "dev_zero":
        trace, says = Path("/dev/zero"), "character device"
    elif kind == "overflow":
        trace = tmp_path / "wrap.csv"
        trace.write_text("interval_us\n" + "4611686018427387904\n" * 4 + "1000\n")
        says = "longer than a whole cycle"
    else:
        trace = tmp_path / "folder.csv"
        trace.mkdir()
        says = "is a folder"
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (
        ["trace", "show", str(trace)],
        ["sweep", "demo", "--out", str(tmp_path / "out"), "--load-trace", str(trace), *NO_SERVER],
    ):
        code, output = _cli_in_child(args, tmp_path)
        assert code == 2, (args, output)
        line = _one_line_error(output)
        assert says in line and str(trace) in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no out/, nothing else


def test_cli_refuses_a_plan_whose_trace_is_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.csv")
    (tmp_path / "plan.yaml").write_text("model: demo\nloads: {trace: pipe.csv}\n")
    code, output = _cli_in_child(["sweep", "plan.yaml", "--out", "out", *NO_SERVER], tmp_path)
    assert code == 2, output
    assert "plan.yaml: loads.trace: trace" in _one_line_error(output) and "FIFO" in output
    assert not (tmp_path / "out").exists()


def test_cli_shows_the_dense_trace(tmp_path: Path) -> None:
    code, output = _cli_in_child(["trace", "show", str(_dense_trace(tmp_path))], tmp_path)
    assert code == 0, output
    assert "2,000,000 requests" in output and "peak 2,000,000,000 req/s" in output


# --- plans ----------------------------------------------------------------------------------


def _parse(data: dict[str, Any]) -> None:
    parse_plan({"model": "demo", **data}, "plan.yaml", Path("."))


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"repeats": 101}, "repeats: 101 is over the limit of 100"),
        ({"repeats": 10**30}, "repeats: about 10^30 is over the limit of 100"),
        (
            {
                "axes": {
                    "max_queue_delay_microseconds": list(range(100, 4100, 100)),
                    "instance_count": list(range(2, 32)),
                }
            },
            "plan.yaml: axes: 71 configurations (the baseline, the anchor, every axis value and "
            "every combined variant); the limit is 64",
        ),
        (
            {"combined": [{"changes": {"instance_count": n}} for n in range(2, 70)]},
            "plan.yaml: combined: 69 configurations",
        ),
        ({"baseline": {"instance_count": 257}}, "baseline.instance_count: 257 is over the limit"),
        ({"axes": {"instance_count": [10**6]}}, "axes.instance_count[0]: 1,000,000 is over"),
        ({"baseline": {"max_batch_size": 8193}}, "max_batch_size: 8,193 is over the limit"),
        (
            {"baseline": {"dynamic_batching": True, "preferred_batch_size": [9000]}},
            "preferred_batch_size[0]: 9,000 is over the limit of 8,192",
        ),
        (
            {"baseline": {"dynamic_batching": True, "preferred_batch_size": [1] * 65}},
            "preferred_batch_size: 65 values; the limit is 64",
        ),
        ({"baseline": {"intra_op_thread_count": 2000}}, "2,000 is over the limit of 1,024"),
        (
            {"baseline": {"dynamic_batching": True, "max_queue_delay_microseconds": 10**12}},
            "max_queue_delay_microseconds: 1,000,000,000,000 is over",
        ),
        (
            {"loads": {"batch_size": list(range(1, 66))}},
            "loads.batch_size: 65 values; the limit is 64",
        ),
        (
            {"loads": {"concurrency": list(range(1, 66))}},
            "loads.concurrency: 65 values; the limit is 64",
        ),
        (
            {"loads": {"open_loop": {"peak_fractions": [i / 50 for i in range(1, 66)]}}},
            "loads.open_loop.peak_fractions: 65 values; the limit is 64",
        ),
        (
            {"loads": {"sequence_length": list(range(1, 66))}},
            "loads.sequence_length: 65 values; the limit is 64",
        ),
        (
            {"loads": {"trace": [f"t{i}.csv" for i in range(65)]}},
            "loads.trace: 65 values; the limit is 64",  # before any file is opened
        ),
        (
            {"baseline": {"max_batch_size": 8192}, "loads": {"batch_size": [10**4]}},
            "loads.batch_size: 10,000 is over the limit of 8,192",
        ),
        (
            {"loads": {"sequence_length": [2**21]}},
            "loads.sequence_length: 2,097,152 is over the limit of 1,048,576",
        ),
        (
            {
                "baseline": {"max_batch_size": 8192},
                "loads": {"batch_size": [8192], "sequence_length": [2**16]},
            },
            "batch_size 8,192 x sequence_length 65,536 = 536,870,912 elements in one request's "
            "input; the limit is 268,435,456",
        ),
        (
            {
                "loads": {
                    "protocol": ["grpc", "http"],
                    "concurrency": list(range(1, 65)),
                    "batch_size": list(range(1, 65)),
                    "open_loop": {
                        "peak_fractions": [i / 40 for i in range(1, 65)],
                        "protocol": ["grpc", "http"],
                    },
                    "sequence_length": [128, 256],
                }
            },
            "plan.yaml: loads: 257 load points; the limit is 256",
        ),
        ({"measurement": {"measurement_interval_ms": 10**7}}, "10,000,000 is over the limit"),
        ({"measurement": {"max_trials": 1000}}, "max_trials: 1,000 is over the limit of 100"),
        ({"measurement": {"retries_when_unstable": 50}}, "50 is over the limit of 10"),
    ],
)
def test_a_plan_over_a_limit_is_one_line_naming_the_key_and_the_limit(
    data: dict[str, Any], says: str
) -> None:
    with pytest.raises(PlanError) as info:
        _parse(data)
    message = str(info.value)
    assert says in message and "\n" not in message and message.startswith("plan.yaml: ")


def test_a_plan_at_every_limit_is_accepted() -> None:
    _parse(
        {
            "repeats": 100,
            "baseline": {"max_batch_size": 8192, "instance_count": 256},
            "axes": {"instance_count": list(range(1, 64))},  # with the baseline: 64
            "loads": {"batch_size": [1, 8192], "sequence_length": [2**15]},
        }
    )


def test_a_plan_from_flags_meets_the_same_limits() -> None:
    basics = PlanBasics("m", repeats=1000)
    with pytest.raises(PlanError, match="repeats: 1,000 is over the limit of 100"):
        basics.plan([ServingVariant("baseline", "b")], 8)
    with pytest.raises(PlanError, match="max_batch_size: 100,000 is over"):
        PlanBasics("m", max_batch_size=100_000).plan(
            [ServingVariant("baseline", "b", max_batch_size=100_000)], 8
        )
    many = tuple(ServingVariant("baseline" if i == 0 else f"v{i}", "") for i in range(65))
    with pytest.raises(PlanError, match="variants: 65 configurations; the limit is 64"):
        ExperimentPlan("m", many).validate()
    ExperimentPlan("m", many[:64]).validate()  # 64 configurations are fine
    huge = ServingVariant("baseline", "b", instance_count=10**4)
    with pytest.raises(PlanError, match="instance_count: 10,000 is over the limit of 256"):
        ExperimentPlan("m", (huge,)).validate()
    loads = (LoadPoint(batch_size=1, sequence_length=2**30),)
    with pytest.raises(PlanError, match="sequence_length: 1,073,741,824 is over"):
        ExperimentPlan("m", (ServingVariant("baseline", "b"),), loads).validate()
    window = MeasurementSettings(measurement_interval_ms=10**9)
    with pytest.raises(PlanError, match=r"measurement\.measurement_interval_ms"):
        ExperimentPlan("m", (ServingVariant("baseline", "b"),), measurement=window).validate()


def test_a_plan_file_that_is_not_a_small_regular_file_is_one_line(tmp_path: Path) -> None:
    digits = tmp_path / "digits.yaml"
    digits.write_text("model: demo\nrepeats: " + "1" * 5000 + "\n")  # was a ValueError
    with pytest.raises(PlanError, match=r"digits\.yaml: not a plan tritonlab reads"):
        load_plan(digits)
    deep = tmp_path / "deep.yaml"
    deep.write_text("model: demo\naxes: " + "[" * 50_000 + "]" * 50_000 + "\n")
    with pytest.raises(PlanError, match="nested too deeply"):  # was a RecursionError
        load_plan(deep)
    big = tmp_path / "big.yaml"
    big.write_text("model: demo\n" + "#" * (5 * 2**20) + "\n")
    with pytest.raises(PlanError, match=r"big.yaml: is [0-9,]+ bytes; at most 4 MiB"):
        load_plan(big)
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    writer = _writer_for(fifo, "model: demo\n", after_s=3.0)  # ends the old code's wait
    with pytest.raises(PlanError, match=r"pipe.yaml: is a FIFO \(named pipe\), not a regular"):
        load_plan(fifo)
    writer.join()


def test_cli_refuses_a_plan_over_a_limit_before_writing(tmp_path: Path) -> None:
    (tmp_path / "plan.yaml").write_text("model: demo\nrepeats: 1000\n")
    code, output = _cli_in_child(["sweep", "plan.yaml", "--out", "out", *NO_SERVER], tmp_path)
    assert code == 2, output
    assert "repeats: 1,000 is over the limit of 100" in _one_line_error(output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml"]


# --- stored runs ----------------------------------------------------------------------------


def test_a_results_file_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    """Before: a valid JSON file of any size was parsed whole."""
    path = tmp_path / "summary.json"
    with path.open("w") as handle:
        handle.write('{"a": "')
        handle.write("x" * (64 * 2**20))
        handle.write('"}')
    for read in (read_json, read_result):
        with pytest.raises(ResultFileError, match=r"summary\.json is 67,108,873 bytes; at most 64"):
            read(path)


def test_a_cell_over_the_cap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tritonlab.result_files as result_files

    cell = next((EXAMPLE_RUN / "results" / "cells").glob("*.json"))
    assert read_cell(cell).cell_id
    monkeypatch.setattr(result_files, "MAX_RESULT_BYTES", 1024)
    with pytest.raises(ResultFileError, match=r"FileRefused: is [0-9,]+ bytes; at most 1 KiB"):
        read_cell(cell)


def test_a_deeply_nested_results_file_is_one_line(tmp_path: Path) -> None:
    """Before: a RecursionError traceback."""
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ResultFileError, match=r"deep\.json is unreadable"):
        read_json(path)
    cell = tmp_path / "cells" / "c__grpc_b1_c8__r0.json"
    cell.parent.mkdir()
    cell.write_text('{"cell_id": ' + "1" * 5000 + "}")  # an int of over 4,300 digits
    with pytest.raises(ResultFileError, match="is unreadable"):
        read_cell(cell)


def test_a_manifest_or_cell_that_is_a_fifo_or_a_device_is_refused(tmp_path: Path) -> None:
    """Before: a FIFO blocked the read for ever, and /dev/zero was read until memory ran out."""
    run = tmp_path / "run"
    (run / "results" / "cells").mkdir(parents=True)
    os.mkfifo(run / "results" / "manifest.json")
    (run / "results" / "cells" / "c__grpc_b1_c8__r0.json").symlink_to("/dev/zero")
    found = _child(
        f"""
        from pathlib import Path
        from tritonlab.experiments.store import load_manifest, read_cell
        run = Path({str(run)!r})
        said = []
        for read in (lambda: load_manifest(run),
                     lambda: read_cell(run / "results" / "cells" / "c__grpc_b1_c8__r0.json")):
            try:
                read()
                said.append("read")
            except Exception as exc:
                said.append(type(exc).__name__ + ": " + str(exc))
        print(json.dumps({{"said": said}}))
        """,
        tmp_path,
    )
    manifest, cell = found["said"]
    assert manifest.startswith("ResultFileError") and "FIFO" in manifest, manifest
    assert cell.startswith("ResultFileError") and "character device" in cell, cell


def test_check_against_a_folder_that_is_no_run_is_one_line(tmp_path: Path) -> None:
    """``check MODEL --against X``: X must be a finished run folder (``require_run_folder``),
    checked before anything else; a manifest that is a FIFO no longer hangs the check."""
    plain = tmp_path / "plain"
    plain.mkdir()
    fifo_run = tmp_path / "fifo_run"
    (fifo_run / "results").mkdir(parents=True)
    os.mkfifo(fifo_run / "results" / "manifest.json")
    model = tmp_path / "new.onnx"
    model.write_bytes(b"not read")
    for against, says in (
        (plain, "is not a finished tritonlab run (no results/manifest.json)"),
        (tmp_path / "missing", "no such folder"),
        (fifo_run, "is not a finished tritonlab run"),
    ):
        code, output = _cli_in_child(
            ["check", str(model), "--against", str(against), "--out", str(tmp_path / "out")],
            tmp_path,
        )
        assert code == 4, output  # could not check
        assert says in _one_line_error(output), output
    assert not (tmp_path / "out").exists()
