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

A trace file is read safely whatever it holds (``read_trace``, bounded by the ``MAX_*`` below):
every interval, and their running total, is checked as a float before it becomes whole µs (so
none can overflow int64), and the 1 s peak is computed over one cycle (``peak_rate_per_s``).
"""

from __future__ import annotations

import csv
import hashlib
import math
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tritonlab.bounded_read import FileRefused, read_capped
from tritonlab.errors import PlanError
from tritonlab.perf.records import FELL_BEHIND
from tritonlab.records import Record

Array = npt.NDArray[Any]  # intervals (int64 µs) or times (float64)
COLUMNS = ("timestamp_s", "interarrival_ms", "interval_us")
# Bounds a trace must keep: perf_analyzer reads the whole interval file into memory, and a
# measurement window holds at least one whole cycle, so a cycle of an hour is a cell of hours.
MAX_TRACE_BYTES = 64 * 1024 * 1024
MAX_REQUESTS = 2_000_000
# Lines of the file, blank ones included (a file of nothing but newlines is not parsed for
# long), and characters on one line (so no row of the CSV holds millions of fields).
MAX_LINES = 2 * MAX_REQUESTS + 1
MAX_LINE_CHARS = 64 * 1024
MAX_CYCLE_S = 600.0
MAX_CYCLE_US = round(MAX_CYCLE_S * 1e6)  # every interval, and the cycle, at most this (µs)
MAX_NAME_CHARS = 24
# Achieved within this share of the trace's mean rate: perf_analyzer kept to the trace.
KEPT_TO_PCT = 5.0


class TraceError(PlanError):
    """A trace file that cannot be replayed; the message names the file and what to fix."""


@dataclass(frozen=True)
class TraceStats(Record):
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

    def __post_init__(self) -> None:
        """``ValueError`` for figures no trace has (a cycle of no time or over ``MAX_CYCLE_S``,
        fewer than 2 or over ``MAX_REQUESTS`` requests): a stored file's reader reports it as a
        damaged file."""
        if not 0 < self.duration_s <= MAX_CYCLE_S or self.cycle_us < 1:
            raise ValueError(f"trace duration_s {self.duration_s!r}: 0 to {MAX_CYCLE_S:g} s")
        if not 2 <= self.request_count <= MAX_REQUESTS:
            raise ValueError(
                f"trace request_count {self.request_count}: 2 to {MAX_REQUESTS:,} requests"
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


def _lines(path: Path, text: str) -> Iterator[str]:
    """The lines of ``text`` (each with its ``\\n``), one at a time: at most ``MAX_LINES`` of
    them, each at most ``MAX_LINE_CHARS`` long, or a ``TraceError``."""
    start, size = 0, len(text)
    for number in range(1, MAX_LINES + 2):
        if start >= size:
            return
        if number > MAX_LINES:
            break
        end = text.find("\n", start, start + MAX_LINE_CHARS + 1)
        if end < 0 and size - start > MAX_LINE_CHARS:
            raise _fail(
                path, f"line {number} is over {MAX_LINE_CHARS:,} characters; is it a trace CSV?"
            )
        end = size if end < 0 else end + 1
        yield text[start:end]
        start = end
    raise _fail(path, f"has more than {MAX_LINES:,} lines; replay a shorter excerpt")


def _column(path: Path, text: str) -> tuple[str, Array]:
    """The trace's one time column and its values (as float64), or a ``TraceError``.

    Every value is checked as it is read: a finite number >= 0; an interval at most
    ``MAX_CYCLE_S`` long, and the intervals so far too; a timestamp at most ``MAX_CYCLE_S``
    after the first. So no value can overflow when it becomes whole µs."""
    reader = csv.reader(_lines(path, text))
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
    scale_us = {"timestamp_s": 1e6, "interarrival_ms": 1e3, "interval_us": 1.0}[column]
    values = array("d")
    total_us = 0.0  # the intervals so far, or the span of the timestamps so far (µs)
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
        if column == "timestamp_s":
            total_us = max(total_us, (value - values[0]) * scale_us) if values else 0.0
        else:
            total_us += value * scale_us
        if total_us > MAX_CYCLE_US:
            raise _fail(path, f"line {line}: {_too_long(column, value * scale_us)}")
        values.append(value)
    return column, np.frombuffer(values, dtype=np.float64) if values else np.zeros(0)


def _too_long(column: str, value_us: float) -> str:
    """Why a line takes the trace past ``MAX_CYCLE_S``, with what to do."""
    what = (
        f"{column} is over {MAX_CYCLE_S:g} s after the first request"
        if column == "timestamp_s"
        else f"{column} {value_us / 1e6:,.6g} s is longer than a whole cycle"
        if value_us > MAX_CYCLE_US
        else "the intervals up to here last over a whole cycle"
    )
    return (
        f"{what}; a trace lasts at most {MAX_CYCLE_S:g} s (every measurement window replays "
        "it whole: compress it, or cut an excerpt)"
    )


def _intervals_us(path: Path, column: str, values: Array) -> Array:
    """The cycle of whole-µs intervals the column describes (see the module's docstring);
    ``values`` are bounded by ``_column``, so every sum here is far inside int64."""
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
        intervals: Array = np.concatenate([np.array([closing], dtype=np.int64), gaps])
    else:
        scale = 1000.0 if column == "interarrival_ms" else 1.0
        intervals = np.round(values * scale).astype(np.int64)
    cycle_us = int(intervals.sum())
    if cycle_us <= 0:
        raise _fail(path, "all its requests are at the same instant; it has no duration")
    if cycle_us > MAX_CYCLE_US:
        raise _fail(
            path,
            f"lasts {cycle_us / 1e6:,.0f} s; at most {MAX_CYCLE_S:g} s (every measurement "
            "window replays it whole: compress it, or cut an excerpt)",
        )
    return intervals


def peak_rate_per_s(intervals_us: Array, window_s: float = 1.0) -> float:
    """The most requests in any ``window_s`` window of the looping replay, per second.

    A window starting at a request holds ``q`` whole cycles (``q * n`` requests) and then the
    requests of the next ``r`` µs (``window = q * cycle + r``, ``r < cycle``), which wrap past
    the cycle's end at most once: so one cycle of cumulative times and its copy one cycle on
    (``2 n`` values) answer every window, in memory of a few arrays of ``n``, whatever the
    window or the cycle. The intervals must be whole µs, each 0 to ``MAX_CYCLE_US``, with a
    positive sum (``read_trace`` and the generator make them so)."""
    n = int(intervals_us.size)
    if n == 0 or int(intervals_us.min()) < 0 or int(intervals_us.max()) > MAX_CYCLE_US:
        raise ValueError(f"intervals must be 0 to {MAX_CYCLE_US:,} µs each")
    stamps = np.cumsum(intervals_us, dtype=np.int64)  # n <= memory: no overflow at <= 6e8 each
    cycle_us = int(stamps[-1])
    if cycle_us <= 0:
        raise ValueError("the intervals have no duration")
    whole, rest_us = divmod(round(window_s * 1e6), cycle_us)
    extra = 0
    if rest_us:
        both = np.concatenate([stamps, stamps + cycle_us])
        ends = np.searchsorted(both, stamps + rest_us, side="left")
        extra = int((ends - np.arange(n)).max())
    return float(whole * n + extra) / window_s


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
    replayable trace: missing, not a regular file (a FIFO, a device, a folder), empty, too
    large, wrong columns, NaN, negative, unsorted or too long."""
    try:
        data = read_capped(path, MAX_TRACE_BYTES)
    except FileRefused as exc:
        raise _fail(path, f"{exc} (a trace is a CSV file)") from None
    except OSError as exc:
        raise _fail(path, f"cannot be read ({exc.strerror or exc})") from None
    sha256 = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _fail(path, "is not UTF-8 text; write it as a CSV") from None
    del data  # the text is all that is parsed: hold one copy of the file, not two
    if not text.strip():
        raise _fail(path, f"is empty; write a header ({' or '.join(COLUMNS)}) and one row each")
    try:
        column, values = _column(path, text)
    except csv.Error as exc:
        raise _fail(path, f"is not a readable CSV ({exc})") from None
    intervals = _intervals_us(path, column, values)
    return Trace(intervals, stats_of(trace_name(path), sha256, intervals), path)


@dataclass(frozen=True)
class TraceAdherence:
    """Whether a trace cell's achieved request rate kept to the trace's mean rate."""

    trace_mean_rate_per_s: float
    achieved_rate_per_s: float
    behind_warnings: int

    @property
    def kept_to(self) -> bool:
        """At least (100 - KEPT_TO_PCT)% of the trace's mean rate (one-sided: with bursty
        traffic, completions that spill across a window's edges can read a little high)."""
        return 100.0 * self.achieved_rate_per_s / self.trace_mean_rate_per_s >= 100 - KEPT_TO_PCT


def adherence(
    stats: TraceStats, throughput_infer_per_s: float, batch_size: int, warnings: list[str]
) -> TraceAdherence:
    """A trace cell's achieved rate (requests completed per second: its throughput over the
    client batch size) against ``stats``, and perf_analyzer's warnings that it could not keep up
    (``records.FELL_BEHIND``)."""
    behind = sum(1 for w in warnings if FELL_BEHIND in w)
    achieved = throughput_infer_per_s / max(1, batch_size)
    return TraceAdherence(stats.mean_rate_per_s, achieved, behind)


_DELAYED = re.compile(r"([0-9]+(?:\.[0-9]+)?)% of the requests were delayed")


def delayed_pct(warnings: list[str]) -> float:
    """The share of requests perf_analyzer said it sent late ("... not able to keep up with the
    desired request rate. 3.99% of the requests were delayed."), the largest it stated; 0.0
    when it said none."""
    return max((float(m.group(1)) for w in warnings for m in _DELAYED.finditer(w)), default=0.0)


def replay_fell_behind(warnings: list[str]) -> bool:
    """Whether perf_analyzer failed to replay a trace: it said it sent more than
    ``KEPT_TO_PCT`` of the requests late. (What it sent is the offered load; a replay of
    sub-millisecond burst gaps on a busy machine sends a few late now and then, which does not
    change it. Completions short of the trace's rate are the server's result, not a different
    load: they show in the throughput and the latency.)"""
    return delayed_pct(warnings) > KEPT_TO_PCT
