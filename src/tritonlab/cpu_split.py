"""Where the server and perf_analyzer run: on disjoint CPUs (the default), or sharing them all.

Why: on a machine where perf_analyzer runs beside the server, the two compete for the same
cores, and the Linux scheduler moves their threads between them from one moment to the next.
Measured on this project's 2-core machine (``benchmarks/noise_sources.py``; the figures are in
``benchmarks/results/noise_sources.md``), that competition is most of the noise of a short
cell: the spread of a cell's throughput with the two sharing both cores is several times its
spread with the server on one core and perf_analyzer on the other. Load generators are kept off
the system under test in any serious benchmark for the same reason; in production the clients
are on other machines.

What it changes: the server gets fewer cores than the machine has (on 2 cores, one), so a
configuration that would need the client's cores (a second instance on a 2-core machine) is
compared on the cores the server has, which the log states. ``--no-cpu-split`` shares every core
between them as before. A server tritonlab does not start (``--url``) is not split.

``CpuSplit`` is the decision, stored in the run's manifest; ``pinned`` is the ``preexec_fn`` that
puts a started binary (and every process and thread it starts) on its CPUs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tritonlab.procenv import die_with_parent
from tritonlab.records import Record

# perf_analyzer's share of the CPUs: a quarter, at least one.
CLIENT_SHARE = 4


@dataclass(frozen=True)
class CpuSplit(Record):
    """The CPUs the server and perf_analyzer may run on (empty: not pinned), and why."""

    server_cpus: tuple[int, ...] = ()
    client_cpus: tuple[int, ...] = ()
    reason: str = ""

    @property
    def split(self) -> bool:
        """True when both are pinned, to disjoint CPUs."""
        return bool(self.server_cpus and self.client_cpus) and not (
            set(self.server_cpus) & set(self.client_cpus)
        )

    @property
    def server_core_count(self) -> int | None:
        """The server's own CPUs when split from perf_analyzer's; None when they shared."""
        return len(self.server_cpus) if self.split else None

    def describe(self) -> str:
        """The placement in words, for the log."""
        if not self.split:
            return f"perf_analyzer and the server shared every CPU ({self.reason})"
        return (
            f"the server ran on CPU {_cpus(self.server_cpus)} and perf_analyzer on CPU "
            f"{_cpus(self.client_cpus)} ({self.reason})"
        )


def _cpus(cpus: Iterable[int]) -> str:
    return ", ".join(str(c) for c in sorted(cpus))


def available_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on, in order."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def decide_split(
    wanted: bool, starts_server: bool, cpus: tuple[int, ...] | None = None
) -> CpuSplit:
    """The split of ``cpus`` (default: this process's): perf_analyzer on the last quarter (at
    least one), the server on the rest; none when not ``wanted``, when tritonlab does not start
    the server, or on one CPU."""
    cpus = available_cpus() if cpus is None else tuple(sorted(cpus))
    if not wanted:
        return CpuSplit(reason="--no-cpu-split")
    if not starts_server:
        return CpuSplit(reason="the server is not one tritonlab starts")
    if len(cpus) < 2 or not hasattr(os, "sched_setaffinity"):
        return CpuSplit(reason=f"{len(cpus)} CPU: nothing to split")
    client = max(1, len(cpus) // CLIENT_SHARE)
    return CpuSplit(
        server_cpus=cpus[:-client],
        client_cpus=cpus[-client:],
        reason=f"{len(cpus)} CPUs: perf_analyzer gets a quarter, at least one, the server the "
        "rest, so the two do not compete for cores",
    )


def pinned(cpus: tuple[int, ...]) -> Callable[[], None]:
    """A ``preexec_fn``: ``die_with_parent``, then run on ``cpus`` (none: wherever allowed). The
    binary exec'd inherits the mask, and so does every thread and process it starts."""
    wanted = frozenset(cpus)

    def preexec() -> None:
        die_with_parent()
        if wanted:
            os.sched_setaffinity(0, wanted)

    return preexec
