"""The interference monitor: CPU that something other than the measurement used during a cell.

On a shared machine a cell can be disturbed by anything else that runs: another tenant's process,
a build, a backup. Per cell, the monitor reads the machine's busy and steal time from
``/proc/stat`` and subtracts what the measurement's own processes used over the same wall time:
the server's process tree, perf_analyzer (its rusage) and tritonlab itself. What is left is
*foreign* CPU. Steal time (a hypervisor running another guest on this machine's cores) is read
from the same line. A cell with more than ``DISTURBED_FOREIGN_CORES`` of foreign load, or more
than ``DISTURBED_STEAL_CORES`` of steal, is *disturbed*: the engine measures it again at once
(at most ``DISTURBED_RETRIES`` times, while retries are clearing cells: ``RetryPolicy``) and
stores the last attempt with the flag set when every try was disturbed, so the log can name it.

The same accounting shows whether co-loaded idle models disturb the measured one: the CPU of the
other models' backend stubs (their processes in the server's tree) over the cell is stored as
``idle_models_cores``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import psutil

from tritonlab.records import Record

# Thresholds in cores (CPU seconds per wall second). /proc/stat counts in ticks (10 ms), so a
# 1-s cell reads its figures to about 0.02 cores; 0.25 cores is a process using a quarter of a
# core, an eighth of a 2-core machine that client and server already share (a chosen threshold,
# not one derived from measured effects on throughput).
DISTURBED_FOREIGN_CORES = 0.25
DISTURBED_STEAL_CORES = 0.25
DISTURBED_RETRIES = 2
# The Hodges-Lehmann estimate's breakdown point: the share of a verdict's pairs that may be
# arbitrarily wrong before the estimate can be moved arbitrarily far (1 - 1/sqrt(2)).
HL_BREAKDOWN = 1.0 - 2.0**-0.5
# The share of a run's cells stored disturbed above which its verdicts are not called trusted:
# a pair is touched when either of its two cells is, which a share q of disturbed cells does to
# 1 - (1 - q)^2 of the pairs, HL_BREAKDOWN of them at this q (about 16%). A limit from the
# estimator, not yet from runs measured under load (the calibration benchmark's are quiet).
MAX_DISTURBED_SHARE = 1.0 - (1.0 - HL_BREAKDOWN) ** 0.5
# A retry pays while the other load comes and goes: it finds a quiet moment. Under a steady load
# it measures the same load again and costs one more cell. With half a core of other work
# (benchmarks/results/demo_precision.md at 44b63b2) 64-77 of about 92 cells measured again were
# still disturbed after their retries, and a cell cost three times a quiet one's, so the runs
# ended with fewer blocks and wider intervals than retries bought back. A disturbed cell is
# measured again only while at least RETRY_CLEARS_SHARE of the last RETRY_WINDOW retries came
# back undisturbed; otherwise it is kept as measured (flagged), and one such cell in
# RETRY_PROBE_EVERY is still retried, so a load that ends is noticed. (Chosen thresholds.)
RETRY_WINDOW = 12
RETRY_CLEARS_SHARE = 1.0 / 3.0
RETRY_PROBE_EVERY = 4
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
STUB_NAME = "triton_python_backend_stub"


@dataclass
class RetryPolicy:
    """Whether a disturbed cell is measured again: while retries are clearing cells."""

    outcomes: list[bool] = field(default_factory=list)  # each retry: came back undisturbed
    held_back: int = 0  # disturbed cells met while retries were not paying

    def record(self, cleared: bool) -> None:
        """One retry's outcome."""
        self.outcomes.append(cleared)

    def paying(self) -> bool:
        """Fewer than ``RETRY_WINDOW`` retries so far, or enough of the last ones cleared."""
        recent = self.outcomes[-RETRY_WINDOW:]
        return len(recent) < RETRY_WINDOW or sum(recent) >= RETRY_CLEARS_SHARE * len(recent)

    def retry(self) -> bool:
        """Whether to measure a disturbed cell again now (a probe every ``RETRY_PROBE_EVERY``
        disturbed cells while retries are not paying)."""
        if self.paying():
            return True
        self.held_back += 1
        return self.held_back % RETRY_PROBE_EVERY == 0


@dataclass(frozen=True)
class CpuCounters:
    """Machine-wide busy and steal CPU seconds (all cores) at one instant, and the time."""

    busy_s: float
    steal_s: float
    monotonic_s: float

    @classmethod
    def read(cls) -> CpuCounters:
        """From the first line of /proc/stat: user nice system idle iowait irq softirq steal."""
        now = time.monotonic()
        try:
            with open("/proc/stat") as stat:
                fields = stat.readline().split()[1:]
        except OSError:
            return cls(0.0, 0.0, now)
        ticks = [int(v) for v in fields[:8]] + [0] * max(0, 8 - len(fields))
        user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
        return cls((user + nice + system + irq + softirq) * _TICK_S, steal * _TICK_S, now)


def own_cpu_s() -> float:
    """User + system CPU seconds of this process (every thread), without reaped children."""
    times = os.times()
    return times.user + times.system


@dataclass(frozen=True)
class Interference(Record):
    """What the monitor saw during one cell (cores = CPU seconds per wall second)."""

    foreign_cores: float
    steal_cores: float
    idle_models_cores: float
    disturbed: bool
    attempts: int = 1  # how many times the cell was measured (retries when disturbed)


def disturbed_share(records: Sequence[Interference]) -> float | None:
    """The share of ``records`` stored disturbed; None without records."""
    return sum(r.disturbed for r in records) / len(records) if records else None


def too_disturbed(share: float | None) -> bool:
    """True when a run's ``disturbed_share`` is over ``MAX_DISTURBED_SHARE``."""
    return share is not None and share > MAX_DISTURBED_SHARE


def idle_stubs(
    processes: Sequence[psutil.Process], measured_model: str, *called: str
) -> list[psutil.Process]:
    """The backend stubs in the server's tree that serve another model than ``measured_model``
    and the models it ``called`` (a stub's command line names its model's folder)."""
    markers = [f"/{name}/" for name in (measured_model, *called)]
    found = []
    for proc in processes:
        try:
            cmdline = proc.cmdline()
        except psutil.Error:
            continue
        if (
            cmdline
            and cmdline[0].endswith(STUB_NAME)
            and not any(marker in a for a in cmdline for marker in markers)
        ):
            found.append(proc)
    return found


class Window:
    """Open at a cell's start, ``close`` at its end with the CPU the measurement itself used."""

    def __init__(self) -> None:
        self.start = CpuCounters.read()
        self.own_start = own_cpu_s()

    def close(self, measured_cpu_s: float, idle_models_cpu_s: float = 0.0) -> Interference:
        """``measured_cpu_s``: the server tree's and perf_analyzer's CPU over the cell."""
        end = CpuCounters.read()
        wall = end.monotonic_s - self.start.monotonic_s
        if wall <= 0:
            return Interference(0.0, 0.0, 0.0, False)
        ours = measured_cpu_s + (own_cpu_s() - self.own_start)
        foreign = max(0.0, (end.busy_s - self.start.busy_s) - ours) / wall
        steal = max(0.0, end.steal_s - self.start.steal_s) / wall
        return Interference(
            round(foreign, 3),
            round(steal, 3),
            round(max(0.0, idle_models_cpu_s) / wall, 3),
            foreign > DISTURBED_FOREIGN_CORES or steal > DISTURBED_STEAL_CORES,
        )
