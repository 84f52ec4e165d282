"""Typed perf_analyzer results, parsed from its CSV and its console output.

One table maps CSV columns to fields; every time is in microseconds and says so in its name.
When perf_analyzer cannot stabilise it writes no CSV, so the per-window lines of its ``-v``
console output are parsed too, and an unstable cell keeps the numbers it did measure.
"""

from __future__ import annotations

import csv
import io
import re
import statistics
from dataclasses import dataclass
from typing import Any

from tritonlab.records import Record

# CSV column -> PerfMeasurement field.
CSV_COLUMNS: dict[str, str] = {
    "Concurrency": "concurrency",
    "Request Rate": "request_rate_per_s",
    "Inferences/Second": "throughput_infer_per_s",
    "Client Send": "client_send_us",
    "Network+Server Send/Recv": "network_server_send_recv_us",
    "Server Queue": "server_queue_us",
    "Server Compute Input": "server_compute_input_us",
    "Server Compute Infer": "server_compute_infer_us",
    "Server Compute Output": "server_compute_output_us",
    "Client Recv": "client_recv_us",
    "p50 latency": "latency_p50_us",
    "p90 latency": "latency_p90_us",
    "p95 latency": "latency_p95_us",
    "p99 latency": "latency_p99_us",
    "Avg latency": "latency_avg_us",
}


@dataclass(frozen=True)
class PerfMeasurement(Record):
    """One load level as perf_analyzer measured it (client-side latencies, server breakdown)."""

    concurrency: int | None
    request_rate_per_s: float | None
    throughput_infer_per_s: float
    latency_avg_us: float
    latency_p50_us: float | None = None
    latency_p90_us: float | None = None
    latency_p95_us: float | None = None
    latency_p99_us: float | None = None
    client_send_us: float | None = None
    network_server_send_recv_us: float | None = None
    server_queue_us: float | None = None
    server_compute_input_us: float | None = None
    server_compute_infer_us: float | None = None
    server_compute_output_us: float | None = None
    client_recv_us: float | None = None


def _number(text: str) -> float | None:
    try:  # an empty cell too
        return float(text)
    except ValueError:
        return None


def parse_perf_csv(text: str) -> list[PerfMeasurement]:
    """Parse perf_analyzer's ``-f`` CSV, rows sorted by load (concurrency or rate):
    perf_analyzer writes them in the order it ran them, which is not always ascending."""
    rows = []
    for raw in csv.DictReader(io.StringIO(text)):
        values: dict[str, Any] = {"concurrency": None, "request_rate_per_s": None}
        values.update((name, _number(raw[c] or "")) for c, name in CSV_COLUMNS.items() if c in raw)
        if values.get("throughput_infer_per_s") is None or values.get("latency_avg_us") is None:
            continue
        if values["concurrency"] is not None:
            values["concurrency"] = int(values["concurrency"])
        rows.append(PerfMeasurement(**values))
    rows.sort(key=lambda m: (m.concurrency or 0, m.request_rate_per_s or 0.0))
    return rows


_PASS_RE = re.compile(r"Pass \[(\d+)\] throughput: ([\d.]+) infer/sec\. Avg latency: (\d+) usec")


@dataclass(frozen=True)
class WindowTrial:
    """One measurement window (a "Pass") from perf_analyzer's verbose console output."""

    index: int
    throughput_infer_per_s: float
    latency_avg_us: float


def parse_trials(console: str) -> list[WindowTrial]:
    """The windows of the last load level in the console output (errors in a pass skipped)."""
    # The closing summary line "Request Rate: 2290.00, throughput: ..." is not a block header.
    blocks = re.split(
        r"^Request (?:concurrency|Rate): (?![^\n]*throughput:)", console, flags=re.MULTILINE
    )
    return [
        WindowTrial(int(m.group(1)), float(m.group(2)), float(m.group(3)))
        for m in _PASS_RE.finditer(blocks[-1])  # re.split gives at least one
    ]


def measurement_from_trials(
    trials: list[WindowTrial], concurrency: int | None, request_rate_per_s: float | None
) -> PerfMeasurement | None:
    """An unstable cell's best estimate: the mean of its last 3 windows (no percentiles or
    server breakdown: perf_analyzer does not print them per window)."""
    if not trials:
        return None
    tail = trials[-3:]
    return PerfMeasurement(
        concurrency=concurrency,
        request_rate_per_s=request_rate_per_s,
        throughput_infer_per_s=statistics.fmean(t.throughput_infer_per_s for t in tail),
        latency_avg_us=statistics.fmean(t.latency_avg_us for t in tail),
    )


UNSTABLE_MARKER = "Failed to obtain stable measurement"
FELL_BEHIND = "not able to keep up"  # perf_analyzer's warning for a request schedule it missed
_WARNING_RE = re.compile(r"^\s*(?:Warning:|\[WARNING\])\s*(.+?)\s*$", re.MULTILINE)


def parse_warnings(console: str) -> list[str]:
    """perf_analyzer's warnings (e.g. it fell behind an open-loop rate), each once, in order."""
    return list(dict.fromkeys(m.group(1) for m in _WARNING_RE.finditer(console)))
