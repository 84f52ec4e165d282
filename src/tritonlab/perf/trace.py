"""Replayed traffic: a CSV of request times read into intervals, its figures, and the
interval file perf_analyzer's ``--request-intervals`` replays.

A trace is a CSV with one of three columns (any other columns are ignored):

- ``timestamp_s``: each request's send time in seconds, non-decreasing;
- ``interarrival_ms`` or ``interval_us``: the gap before each request.

perf_analyzer loops over its interval file, so a trace is a cycle. A file of intervals is that
cycle as written (its duration is their sum). A file of timestamps gives the gaps between
them, closed by one gap of their mean length from the last request back to the first, so that
``n`` requests span ``n`` mean gaps and the cycle's rate is the timestamps' own
(``(n - 1) / (last - first)``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tritonlab.errors import PlanError
from tritonlab.perf.records import FELL_BEHIND

Array = npt.NDArray[Any]  # intervals (int64 µs) or times (float64)
COLUMNS = ("timestamp_s", "interarrival_ms", "interval_us")
# Bounds a trace must keep: perf_analyzer reads the whole interval file into memory, and a
# measurement window holds at least one whole cycle, so a cycle of an hour is a cell of hours.
MAX_TRACE_BYTES = 64 * 1024 * 1024
MAX_REQUESTS = 2_000_000
MAX_CYCLE_S = 600.0
MAX_NAME_CHARS = 24
# Achieved within this share of the trace's mean rate: perf_analyzer kept to the trace.
KEPT_TO_PCT = 5.0


class TraceError(PlanError):
    """A trace file that cannot be replayed; the message names the file and what to fix."""


@dataclass(frozen=True)
class TraceStats:
    """A trace's figures, as one cycle of perf_analyzer's replay.

    ``interarrival_cv``: standard deviation over mean of the gaps (1 for Poisson arrivals, above
    1 for bursts, 0 for a constant rate); ``peak_rate_per_s``: the most requests any 1 s window
    of the looping replay holds.
    """

    name: str
    sha256: str
    request_count: int
    duration_s: float
    mean_rate_per_s: float
    interarrival_cv: float
    peak_rate_per_s: float

    @property
    def cycle_us(self) -> int:
        """One cycle of the replay in whole microseconds (the interval file's sum)."""
        return round(self.duration_s * 1e6)

    def window_ms(self, at_least_ms: int) -> int:
        """A measurement window of whole cycles, at least ``at_least_ms`` long: every window
        then replays the whole trace, whatever phase it starts at, so its rate is the trace's."""
        cycles = max(1, math.ceil(at_least_ms * 1000 / self.cycle_us))
        return max(1, round(cycles * self.cycle_us / 1000))

    def words(self) -> str:
        """The trace in words: name, requests, rate, burstiness, peak."""
        return (
            f"trace {self.name} ({self.request_count:,} requests over {self.duration_s:g} s, "
            f"mean {self.mean_rate_per_s:,.1f} req/s, inter-arrival CV "
            f"{self.interarrival_cv:.2f}, peak {self.peak_rate_per_s:,.0f} req/s over 1 s)"
        )

    def to_dict(self) -> dict[str, Any]:
        """The figures as stored in the plan (and so in its fingerprint)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TraceStats:
        """The figures stored by :meth:`to_dict`."""
        return cls(
            name=str(data["name"]),
            sha256=str(data["sha256"]),
            request_count=int(data["request_count"]),
            duration_s=float(data["duration_s"]),
            mean_rate_per_s=float(data["mean_rate_per_s"]),
            interarrival_cv=float(data["interarrival_cv"]),
            peak_rate_per_s=float(data["peak_rate_per_s"]),
        )


@dataclass(frozen=True, eq=False)
class Trace:
    """A trace read from a file: its cycle of intervals (µs), its figures and the file."""

    intervals_us: Array
    stats: TraceStats
    path: Path

    def interval_file_text(self) -> str:
        """perf_analyzer's ``--request-intervals`` file: one interval in µs per line."""
        return "".join(f"{int(v)}\n" for v in self.intervals_us)


def trace_name(path: Path) -> str:
    """A trace's name from its file name: lower-case letters, digits and ``-`` only (it goes
    into load keys, which ``_`` separates, and file names), at most MAX_NAME_CHARS long."""
    name = re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-")[:MAX_NAME_CHARS].strip("-")
    return name or "trace"


def _fail(path: Path, what: str) -> TraceError:
    return TraceError(f"trace {str(path)!r}: {what}")


def _column(path: Path, text: str) -> tuple[str, Array]:
    """The trace's one time column and its values (as float64), or a ``TraceError``."""
    reader = csv.reader(io.StringIO(text))
    header = [h.strip() for h in next(reader, [])]
    found = [c for c in COLUMNS if c in header]
    if len(found) != 1:
        raise _fail(
            path,
            (f"has {' and '.join(found)}; give only one" if found else "has no time column")
            + f" (one of {', '.join(COLUMNS)}; header was {','.join(header)[:80]!r})",
        )
    column = found[0]
    index = header.index(column)
    values: list[float] = []
    for line, row in enumerate(reader, start=2):
        if not row or not any(cell.strip() for cell in row):
            continue
        if len(values) >= MAX_REQUESTS:
            raise _fail(path, f"more than {MAX_REQUESTS:,} requests; replay a shorter excerpt")
        cell = row[index].strip() if index < len(row) else ""
        try:
            value = float(cell)
        except ValueError:
            raise _fail(path, f"line {line}: {column} {cell[:40]!r} is not a number") from None
        if not math.isfinite(value):
            raise _fail(path, f"line {line}: {column} is {cell[:40]!r}; times must be finite")
        if value < 0:
            raise _fail(path, f"line {line}: {column} {value:g} is negative")
        values.append(value)
    return column, np.asarray(values, dtype=np.float64)


def _intervals_us(path: Path, column: str, values: Array) -> Array:
    """The cycle of whole-µs intervals the column describes (see the module's docstring)."""
    if values.size < 2:
        raise _fail(path, f"has {values.size} request(s); a trace needs at least 2")
    if column == "timestamp_s":
        steps = np.diff(values)
        if (steps < 0).any():
            line = int(np.argmax(steps < 0)) + 3
            raise _fail(path, f"line {line}: timestamp_s goes back in time; sort the trace")
        stamps_us = np.round((values - values[0]) * 1e6).astype(np.int64)
        gaps = np.diff(stamps_us)
        closing = round(int(stamps_us[-1]) / gaps.size) if gaps.size else 0
        intervals = np.concatenate([[closing], gaps])
    else:
        scale = 1000.0 if column == "interarrival_ms" else 1.0
        intervals = np.round(values * scale).astype(np.int64)
    if int(intervals.sum()) <= 0:
        raise _fail(path, "all its requests are at the same instant; it has no duration")
    if intervals.sum() > MAX_CYCLE_S * 1e6:
        raise _fail(
            path,
            f"lasts {intervals.sum() / 1e6:,.0f} s; at most {MAX_CYCLE_S:g} s (every measurement "
            "window replays it whole: compress it, or cut an excerpt)",
        )
    return intervals


def peak_rate_per_s(intervals_us: Array, window_s: float = 1.0) -> float:
    """The most requests in any ``window_s`` window of the looping replay, per second."""
    cycle_us = int(intervals_us.sum())
    window_us = round(window_s * 1e6)
    copies = math.ceil(window_us / cycle_us) + 1
    stamps = np.cumsum(np.tile(intervals_us, copies))
    first = stamps[: intervals_us.size]
    ends = np.searchsorted(stamps, first + window_us, side="left")
    return float((ends - np.arange(first.size)).max()) / window_s


def stats_of(name: str, sha256: str, intervals_us: Array) -> TraceStats:
    """The figures of a cycle of intervals (µs)."""
    duration_us = int(intervals_us.sum())
    gaps = intervals_us.astype(np.float64)
    mean = float(gaps.mean())
    return TraceStats(
        name=name,
        sha256=sha256,
        request_count=int(intervals_us.size),
        duration_s=duration_us / 1e6,
        mean_rate_per_s=round(intervals_us.size / (duration_us / 1e6), 6),
        interarrival_cv=round(float(gaps.std()) / mean, 6) if mean > 0 else 0.0,
        peak_rate_per_s=peak_rate_per_s(intervals_us),
    )


def read_trace(path: Path) -> Trace:
    """The trace in the CSV at ``path``; ``TraceError`` (one line) for anything that is not a
    replayable trace: missing, empty, too large, wrong columns, NaN, negative or unsorted."""
    try:
        size = path.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise _fail(path, f"is {size / 2**20:,.0f} MiB; at most {MAX_TRACE_BYTES >> 20} MiB")
        data = path.read_bytes()
    except OSError as exc:
        raise _fail(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _fail(path, "is not UTF-8 text; write it as a CSV") from None
    if not text.strip():
        raise _fail(path, f"is empty; write a header ({' or '.join(COLUMNS)}) and one row each")
    try:
        column, values = _column(path, text)
    except csv.Error as exc:
        raise _fail(path, f"is not a readable CSV ({exc})") from None
    intervals = _intervals_us(path, column, values)
    stats = stats_of(trace_name(path), hashlib.sha256(data).hexdigest(), intervals)
    return Trace(intervals, stats, path)


def achieved_rate_per_s(throughput_infer_per_s: float, batch_size: int) -> float:
    """Requests per second a cell completed: its throughput over the client batch size."""
    return throughput_infer_per_s / max(1, batch_size)


@dataclass(frozen=True)
class TraceAdherence:
    """Whether a trace cell's achieved request rate kept to the trace's mean rate."""

    trace_mean_rate_per_s: float
    achieved_rate_per_s: float
    behind_warnings: int

    @property
    def achieved_pct(self) -> float:
        """The achieved rate as a percentage of the trace's mean rate."""
        return 100.0 * self.achieved_rate_per_s / self.trace_mean_rate_per_s

    @property
    def kept_to(self) -> bool:
        """At least (100 - KEPT_TO_PCT)% of the trace's mean rate (one-sided: with bursty
        traffic, completions that spill across a window's edges can read a little high)."""
        return self.achieved_pct >= 100.0 - KEPT_TO_PCT


def adherence(
    stats: TraceStats, throughput_infer_per_s: float, batch_size: int, warnings: list[str]
) -> TraceAdherence:
    """A trace cell's achieved rate against ``stats``, and perf_analyzer's warnings that it
    could not keep up (``records.FELL_BEHIND``)."""
    behind = sum(1 for w in warnings if FELL_BEHIND in w)
    return TraceAdherence(
        stats.mean_rate_per_s, achieved_rate_per_s(throughput_infer_per_s, batch_size), behind
    )


_DELAYED = re.compile(r"([0-9]+(?:\.[0-9]+)?)% of the requests were delayed")


def delayed_pct(warnings: list[str]) -> float:
    """The share of requests perf_analyzer said it sent late ("... not able to keep up with the
    desired request rate. 3.99% of the requests were delayed."), the largest it stated; 0.0
    when it said none."""
    found = [float(m.group(1)) for w in warnings for m in _DELAYED.finditer(w)]
    return max(found, default=0.0)


def replay_fell_behind(warnings: list[str]) -> bool:
    """Whether perf_analyzer failed to replay a trace: it said it sent more than
    ``KEPT_TO_PCT`` of the requests late. (What it sent is the offered load; a replay of
    sub-millisecond burst gaps on a busy machine sends a few late now and then, which does not
    change it. Completions short of the trace's rate are the server's result, not a different
    load: they show in the throughput and the latency.)"""
    return delayed_pct(warnings) > KEPT_TO_PCT
