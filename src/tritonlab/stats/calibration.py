"""Error rates of verdicts on effects of known size: the calibration benchmark's statistics.

The benchmark (``benchmarks/calibration.py``) serves, co-loaded, configurations whose true
difference is known: identical copies (A/A, true change 0) and copies with a fixed amount of
work planted per request (a true change established by a long reference measurement). This
module reads their cells three ways and counts how often each reading is wrong:

- **blocks** (tritonlab): the cells paired by block, ``verdicts.compare`` (Hodges-Lehmann with
  the signed-rank 95% interval).
- **independent runs** (AIPerf's multi-run reading): each configuration's cells cut into
  ``RUNS`` consecutive groups, each group's mean one "run"; a 95% Student-t interval per
  configuration over its runs, and a difference called when the two intervals do not overlap.
  Its interval of the change (for coverage) is Welch's 95% interval of the log-ratio of the runs.
- **one window** (perf_analyzer's reading): one cell per configuration, as a user reads one
  stable perf_analyzer result each; a difference called when the two differ by more than
  perf_analyzer's own stability band (±``STABILITY_BAND_PCT``); no interval. Every block gives
  one such reading.

A reading is a **false alarm** when it calls a difference between identical copies; it
**covers** a true change when its 95% interval contains it; it **detects** a planted effect when
it calls the difference in the effect's direction. The true change of a planted configuration
in one run is the reference left out of it (``leave_one_out``): the mean of the estimates of
every other run, so no run is judged against itself.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import stats

from tritonlab.records import Record
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import CONFIDENCE, Word, compare

RUNS = 5  # AIPerf-style runs per configuration (its multi-run mode takes 3 to 10)
STABILITY_BAND_PCT = 10.0  # perf_analyzer's default stability threshold, in %
READINGS = ("blocks", "independent runs", "one window")


@dataclass(frozen=True)
class Reading(Record):
    """One reading of a comparison: whether it calls a difference, its estimate of the change
    and its 95% interval in percent (None: the reading has none)."""

    word: str
    change_pct: float
    low_pct: float | None = None
    high_pct: float | None = None

    @property
    def calls_difference(self) -> bool:
        """True when the reading says "higher" or "lower"."""
        return self.word in (Word.HIGHER.value, Word.LOWER.value)

    def covers(self, true_pct: float) -> bool | None:
        """Whether the interval holds ``true_pct``; None without an interval."""
        if self.low_pct is None or self.high_pct is None:
            return None
        return self.low_pct <= true_pct <= self.high_pct

    def detects(self, true_pct: float) -> bool:
        """Whether the reading calls the difference in the true change's direction."""
        wanted = Word.HIGHER.value if true_pct > 0 else Word.LOWER.value
        return self.word == wanted


def _pct(log_ratio: float) -> float:
    return 100.0 * math.expm1(log_ratio)


def _word(low: float, high: float) -> str:
    if low > 0:
        return Word.HIGHER.value
    if high < 0:
        return Word.LOWER.value
    return Word.NO_CLEAR.value


def block_reading(
    reference: Mapping[int, float], variant: Mapping[int, float], process_sd_log: float = 0.0
) -> Reading:
    """tritonlab's verdict on ``variant`` against ``reference`` (values by block), each side
    with the process term ``process_sd_log`` (``process_term.py``) as its run's verdicts held."""
    blocks = sorted(set(reference) & set(variant))
    verdict = compare(
        "throughput",
        Summary.of([reference[b] for b in blocks], blocks, process_sd_log),
        Summary.of([variant[b] for b in blocks], blocks, process_sd_log),
    )
    return Reading(verdict.word.value, verdict.change_pct or 0.0, verdict.low_pct, verdict.high_pct)


def run_means(values: Sequence[float], runs: int = RUNS) -> list[float]:
    """``values`` (in measuring order) cut into ``runs`` consecutive groups of equal size (the
    remainder left out); each group's mean log value."""
    size = len(values) // runs
    if size < 1:
        raise ValueError(f"{len(values)} values cannot make {runs} runs")
    return [
        statistics.fmean(math.log(v) for v in values[i * size : (i + 1) * size])
        for i in range(runs)
    ]


def _t_interval(logs: Sequence[float]) -> tuple[float, float]:
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(logs) - 1)) * sd / math.sqrt(len(logs))
    return mean - half, mean + half


def independent_runs_reading(
    reference: Sequence[float], variant: Sequence[float], runs: int = RUNS
) -> Reading:
    """The AIPerf-style reading of two configurations' cells (each in measuring order)."""
    ref, var = run_means(reference, runs), run_means(variant, runs)
    (ref_low, ref_high), (var_low, var_high) = _t_interval(ref), _t_interval(var)
    if var_low > ref_high:
        word = Word.HIGHER.value
    elif var_high < ref_low:
        word = Word.LOWER.value
    else:
        word = Word.NO_CLEAR.value
    welch = stats.ttest_ind(var, ref, equal_var=False).confidence_interval(CONFIDENCE)
    diff = statistics.fmean(var) - statistics.fmean(ref)
    return Reading(word, _pct(diff), _pct(float(welch.low)), _pct(float(welch.high)))


def one_window_reading(reference: float, variant: float) -> Reading:
    """The perf_analyzer-style reading of one cell each: a difference beyond the stability
    band, in its direction."""
    change = 100.0 * (variant / reference - 1.0)
    if abs(change) <= STABILITY_BAND_PCT:
        return Reading(Word.NO_CLEAR.value, change)
    return Reading(Word.HIGHER.value if change > 0 else Word.LOWER.value, change)


def leave_one_out(estimates: Sequence[float]) -> list[float]:
    """For each run, the mean of every other run's estimate (its reference); needs two runs."""
    if len(estimates) < 2:
        raise ValueError("a reference left out of one run needs at least two runs")
    total, n = math.fsum(estimates), len(estimates)
    return [(total - e) / (n - 1) for e in estimates]


def pooled_change_pct(log_estimates: Sequence[float]) -> tuple[float, float, float]:
    """The reference over runs: the mean of the runs' log estimates with its 95% t-interval,
    in percent (estimate, low, high)."""
    mean = statistics.fmean(log_estimates)
    low, high = _t_interval(log_estimates) if len(log_estimates) > 1 else (mean, mean)
    return _pct(mean), _pct(low), _pct(high)


@dataclass(frozen=True)
class Tally(Record):
    """How often one reading was wrong, over comparisons of one kind."""

    comparisons: int = 0
    calls: int = 0  # readings that called a difference
    intervals: int = 0  # readings with an interval
    covered: int = 0  # of those, intervals holding the true change
    detected: int = 0  # readings that called the planted effect in its direction

    def add(self, reading: Reading, true_pct: float) -> Tally:
        """This tally with one more reading of a comparison whose true change is ``true_pct``."""
        covers = reading.covers(true_pct)
        return Tally(
            self.comparisons + 1,
            self.calls + reading.calls_difference,
            self.intervals + (covers is not None),
            self.covered + bool(covers),
            self.detected + (true_pct != 0.0 and reading.detects(true_pct)),
        )


def wilson_interval(successes: int, trials: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion (0..1); (0, 1) without trials."""
    if trials == 0:
        return 0.0, 1.0
    z = float(stats.norm.ppf(0.5 + CONFIDENCE / 2))
    p = successes / trials
    shrink = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / shrink
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / shrink
    return max(0.0, centre - half), min(1.0, centre + half)
