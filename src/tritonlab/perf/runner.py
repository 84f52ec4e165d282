"""Run perf_analyzer as a subprocess and keep everything it said.

Each attempt's console output is written next to its CSV. "Failed to obtain stable measurement"
is retried once with a window twice as long; if it still fails, the cell is returned as unstable
with the per-window numbers perf_analyzer did print, so nothing measured is dropped. The CPU time
perf_analyzer itself used is read from its rusage, to flag a load generator that ran out of CPU.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tritonlab import gateway
from tritonlab.cpu_split import pinned
from tritonlab.errors import PerfAnalyzerError
from tritonlab.perf.locate import PerfAnalyzerInstall
from tritonlab.perf.records import (
    UNSTABLE_MARKER,
    PerfMeasurement,
    measurement_from_trials,
    parse_perf_csv,
    parse_trials,
    parse_warnings,
)
from tritonlab.perf.settings import PerfSettings
from tritonlab.procenv import child_environment, raise_if_interrupted
from tritonlab.records import Record


@dataclass(frozen=True)
class PerfRun(Record):
    """One perf_analyzer cell: what was asked, the exact command, and what came back."""

    settings: PerfSettings
    command: list[str]
    measurement: PerfMeasurement | None
    stable: bool
    trial_count: int
    attempts: int
    wall_s: float
    perf_analyzer_cpu_s: float
    console_files: list[str] = field(default_factory=list)
    csv_file: str | None = None
    # perf_analyzer's own warnings about the final attempt (overload, requests delayed, ...)
    warnings: list[str] = field(default_factory=list)


def _run_once(
    install: PerfAnalyzerInstall,
    args: list[str],
    console_path: Path,
    timeout_s: float,
    cpus: tuple[int, ...] = (),
) -> tuple[int, str, float]:
    """Run perf_analyzer; return (exit code, console text, CPU seconds it used)."""
    with gateway.open_new(console_path) as console:
        proc = subprocess.Popen(
            [str(install.binary), *args],
            stdout=console,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=child_environment(install.environment()),  # without the API key
            start_new_session=True,
            preexec_fn=pinned(cpus),
        )
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                raise_if_interrupted()
                if time.monotonic() > deadline:  # killed and reaped below
                    raise PerfAnalyzerError(
                        f"perf_analyzer ran past {timeout_s:.0f} s and was stopped; "
                        f"see {console_path}"
                    )
                time.sleep(0.05)
        except BaseException:
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.killpg(proc.pid, signal.SIGKILL)
                os.wait4(proc.pid, 0)
            proc.returncode = -9
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
    text = console_path.read_text(errors="replace")
    return proc.returncode, text, rusage.ru_utime + rusage.ru_stime


NO_REQUESTS_MARKER = "No valid requests recorded within time interval"
HUNG_AFTER_RESULTS = (
    "tritonlab: perf_analyzer wrote its results but did not exit by its deadline; it was "
    "stopped and its results kept"
)


def _finished_but_hung(csv_path: Path, console_path: Path) -> str | None:
    """The console text when perf_analyzer had written its CSV (its last act before exiting)
    and its summary before it was stopped at the deadline: seen with HTTP at high concurrency,
    where it can hang while closing its connections. None when it had not finished."""
    try:
        if not csv_path.exists() or not parse_perf_csv(csv_path.read_text()):
            return None
        text = console_path.read_text(errors="replace")
    except (OSError, ValueError):
        return None
    return text if "Inferences/Second vs." in text else None


def _failure_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() or "failed" in ln.lower()]
    return (errors or lines or ["no output"])[-1][:300]


def run_perf(
    install: PerfAnalyzerInstall,
    settings: PerfSettings,
    out_dir: Path,
    stem: str,
    retries: int = 1,
    timeout_s: float = 300.0,
    cpus: tuple[int, ...] = (),
) -> PerfRun:
    """Measure one cell; files go to ``out_dir/<stem>.*``; perf_analyzer runs on ``cpus``
    (``cpu_split.py``; empty: any). Raises only for real failures."""
    gateway.mkdir(out_dir)
    csv_path = out_dir / f"{stem}.csv"
    gateway.remove(csv_path)  # perf_analyzer writes it by name: never through an old link
    started = time.monotonic()
    attempt_settings = settings
    console_files: list[str] = []
    cpu_s = 0.0
    text = ""
    command: list[str] = []
    widened = False
    attempt = -1

    def outcome(
        measurement: PerfMeasurement | None, stable: bool, csv_file: str | None, warnings: list[str]
    ) -> PerfRun:
        trials, elapsed = len(parse_trials(text)), time.monotonic() - started
        return PerfRun(
            attempt_settings,
            command,
            measurement,
            stable,
            trials,
            attempt + 1,
            elapsed,
            cpu_s,
            console_files,
            csv_file,
            warnings,
        )

    while attempt < retries + int(widened):
        attempt += 1
        console_path = out_dir / f"{stem}.attempt{attempt + 1}.txt"
        args = attempt_settings.to_args(str(csv_path))
        command = [str(install.binary), *args]
        try:
            code, text, used = _run_once(install, args, console_path, timeout_s, cpus)
        except PerfAnalyzerError:
            if (finished := _finished_but_hung(csv_path, console_path)) is None:
                raise
            code, text, used = 0, finished, 0.0  # its CPU is lost with the kill
            text += f"\n{HUNG_AFTER_RESULTS}\n"
        cpu_s += used
        console_files.append(console_path.name)
        if code == 0 and csv_path.exists():
            if not (rows := parse_perf_csv(csv_path.read_text())):
                raise PerfAnalyzerError(f"perf_analyzer wrote an empty CSV: {csv_path}")
            hung = [HUNG_AFTER_RESULTS] if HUNG_AFTER_RESULTS in text else []
            return outcome(rows[-1], True, csv_path.name, parse_warnings(text) + hung)
        if NO_REQUESTS_MARKER in text and not widened:
            # A window too short for the requests to come back (a short block-engine window
            # right after a reload, on a loaded machine): once more with a 4x longer window.
            widened = True
            attempt_settings = attempt_settings.with_longer_window(4)
            continue
        if UNSTABLE_MARKER not in text:
            raise PerfAnalyzerError(
                f"perf_analyzer failed (exit {code}) for model {settings.model_name}: "
                f"{_failure_line(text)}"
            )
        if attempt < retries:
            attempt_settings = attempt_settings.with_longer_window()
    trials = parse_trials(text)
    measurement = measurement_from_trials(trials, settings.concurrency, settings.request_rate_per_s)
    return outcome(measurement, False, None, parse_warnings(text))
