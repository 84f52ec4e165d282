"""Each configuration's own server process: a spread that pairing by block cannot see.

In a co-loaded run (the block engine's default) every configuration is its own model, served by
its own backend stub process for the whole run. The calibration benchmark served identical
copies side by side in 20 fresh runs and found that such a process can be a few percent faster
or slower than its copy for its whole lifetime (memory placement, the arena's layout: what it
is exactly was not isolated). Every block of the run shares that offset, so the paired
log-ratios of two configurations are centred on the difference of their two processes' offsets,
not on the configurations' difference, and an interval over blocks, however many, does not
cover it: identical copies were called different in 13 of 120 comparisons where 5% was due.

This module puts that part into the interval: each process's offset is taken as a random
draw with standard deviation ``sd_log`` (log units) per configuration, estimated from the A/A
copies of the calibration runs (``estimate_sd_log``, the method of moments: the mean square of
identical copies' log-ratio estimates, less the part their blocks' own spread explains, is the
variance of a difference of two offsets). A verdict between two configurations of a co-loaded run
adds ``sd_ref**2 + sd_variant**2`` to its interval's variance (``verdicts.compare``). Configurations
loaded afresh for every cell (the classic engine, a block run that does not co-load) spread
their processes over the blocks, where pairing sees them, and get no term.

The term is measured for throughput and for p99 latency; a latency percentile takes p99's,
every other figure throughput's (average latency follows throughput at a fixed concurrency, by
Little's law; the other figures were not calibrated, and the log says which term it used).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tritonlab.records import Record

# a percentile's names: attributes, fields and the verdict figure names (a tune race's "p99
# latency" once took the throughput term: issue 36 audit)
PERCENTILE_FIGURES = (
    "latency_p95",
    "latency_p99",
    "latency_p95_us",
    "latency_p99_us",
    "p95",
    "p99",
    "p95 latency",
    "p99 latency",
)


@dataclass(frozen=True)
class ProcessTerm(Record):
    """The spread of a configuration's own process, per configuration, in log units, with the
    A/A comparisons it was estimated from."""

    throughput_sd_log: float
    latency_p99_sd_log: float
    comparisons: int
    runs: int

    def sd_log(self, figure: str) -> float:
        """The term of ``figure`` (a ``VariantSummary`` attribute or a figure's name)."""
        return self.latency_p99_sd_log if figure in PERCENTILE_FIGURES else self.throughput_sd_log

    def pair_half_width_pct(self, figure: str = "throughput") -> float:
        """How far the term of ``figure`` alone widens a 95% interval between two
        configurations, in % (``pair_half_width_pct``)."""
        return pair_half_width_pct(self.sd_log(figure))


def pair_half_width_pct(sd_log: float, z: float = 1.959964) -> float:
    """How far a per-configuration term ``sd_log`` alone widens a 95% interval between two
    configurations, in % (``exp(h) - 1``): two processes, ``z * sqrt(2) * sd_log``."""
    return 100.0 * math.expm1(z * math.sqrt(2.0) * sd_log)


def estimate_sd_log(series: Sequence[Sequence[float]]) -> float:
    """Per configuration, from A/A comparisons (each the paired log-ratios of two identical
    configurations of one run, at least two blocks): ``sqrt(max(0, (mean m^2 - mean s^2/n) /
    2))`` with ``m`` a comparison's mean log-ratio and ``s^2/n`` its variance over its blocks.
    A difference of two offsets has twice one offset's variance, hence the 2."""
    usable = [x for x in series if len(x) >= 2]
    if not usable:
        raise ValueError("the process term needs A/A comparisons of at least two blocks")
    squares = statistics.fmean(statistics.fmean(x) ** 2 for x in usable)
    within = statistics.fmean(statistics.variance(x) / len(x) for x in usable)
    return math.sqrt(max(0.0, squares - within) / 2.0)


def widened(
    estimate: float, low: float, high: float, sd_log: float, z: float
) -> tuple[float, float]:
    """An interval (log units) around ``estimate`` with each side's half-width combined in
    quadrature with ``z * sd_log`` (the pair's process term)."""
    return (
        estimate - math.hypot(estimate - low, z * sd_log),
        estimate + math.hypot(high - estimate, z * sd_log),
    )


def predates_note(record: dict[str, object], subject: str) -> str:
    """' {subject} stored no CPU placement and no process term: ...' where a stored benchmark
    record (JSON) has neither, so a page quoting its intervals says they are not the shipped
    engine's (issue 36 audits: the aa_floor, Model Analyzer and resolution pages); ''
    otherwise."""
    if "cpu_split" in record or "process_term" in record:
        return ""
    return (
        f" {subject} stored no CPU placement and no process term: measured before tritonlab "
        "had either, the server shared the CPUs with perf_analyzer and no interval here is "
        "widened, so its intervals are not those of the engine as it ships."
    )
