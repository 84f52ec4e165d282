"""The verdicts' error rates: what the calibration benchmark measured, and the smallest change a
run's own noise lets its verdicts find.

``calibration_rates.json`` beside this module is written by ``benchmarks/calibration.py`` from
its stored runs (never by hand): how often identical configurations were called different, how
often the 95% intervals held the true change, and how often planted drops were found, with the
machine and date they were measured on. A run's log quotes them as that machine's rates.

The run's own figure is the smallest throughput change its verdicts find 9 times in 10: with a
paired interval of half-width h (log units) at 95%, a true change of d is called when the
interval clears zero, which under a normal approximation happens with probability
Phi(d / se - z_0.975), se = h / z_0.975; solving for 90% gives d = h (1 + z_0.90 / z_0.975),
about 1.65 h. The A/A control's half-width is the run's noise at its load.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources

from scipy import stats

from tritonlab.records import Record, later
from tritonlab.stats.process_term import ProcessTerm
from tritonlab.stats.verdicts import CONFIDENCE

RATES_FILE = "calibration_rates.json"
POWER = 0.90
# d / h: the detectable change in units of the interval's half-width (about 1.65)
DETECTABLE_FACTOR = 1.0 + float(stats.norm.ppf(POWER)) / float(stats.norm.ppf(0.5 + CONFIDENCE / 2))


@dataclass(frozen=True)
class BlocksDetected(Record):
    """How often a planted drop was found with only the first ``blocks`` blocks of each run."""

    blocks: int
    detected: int


@dataclass(frozen=True)
class PlantedPower(Record):
    """One planted drop: its reference change (from the runs it was not judged in), and how
    often it was found: at the runs' stopping point (median ``blocks``) and with fewer blocks
    (``by_blocks``: a log's verdicts on fewer blocks have less power, issue 36 audit)."""

    reference_change_pct: float
    trials: int
    detected: int
    blocks: int | None = later()
    by_blocks: tuple[BlocksDetected, ...] = later(factory=tuple)


@dataclass(frozen=True)
class MeasuredRates(Record):
    """The calibration benchmark's summary, as packaged with tritonlab."""

    date_utc: str
    machine: str
    cores: int
    commit: str
    runs: int
    blocks: int
    aa_comparisons: int
    false_alarms: int
    intervals: int
    covered: int
    power: tuple[PlantedPower, ...]
    # whether the runs put the server and perf_analyzer on disjoint CPUs (``cpu_split.py``)
    cpu_split: bool = later(False)
    # each configuration's own process (``process_term.py``), estimated from the A/A copies
    process_term: ProcessTerm | None = later(None)
    # the throughput process term (log units) the runs' own verdicts held when they were
    # measured (0: before verdicts held one); the packaged ``process_term`` is estimated after
    process_term_held_sd_log: float = later(0.0)
    # the runs' noise: the median run's standard deviation of one block's A/A throughput ratio,
    # in % (0: not stored); the power above holds at about this noise
    block_spread_pct: float = later(0.0)


@cache
def measured_rates() -> MeasuredRates | None:
    """The packaged calibration summary (read once); None when this tritonlab carries none."""
    path = resources.files("tritonlab.stats").joinpath(RATES_FILE)
    if not path.is_file():
        return None
    return MeasuredRates.from_dict(json.loads(path.read_text()))


def packaged_process_term() -> ProcessTerm | None:
    """The process term this tritonlab carries; None when it carries none."""
    rates = measured_rates()
    return None if rates is None else rates.process_term


def process_sd_log(figure: str) -> float:
    """The packaged process term's spread for ``figure`` (log units); 0 where none is carried.
    The one reading of it: co-loaded verdicts, a step's figures and a tune's race use it."""
    term = packaged_process_term()
    return 0.0 if term is None else term.sd_log(figure)


def detectable_change_pct(half_width_pct: float) -> float:
    """The change found 9 times in 10 by a verdict whose 95% half-width is ``half_width_pct``
    (stated as exp(h) - 1, like the half-widths in the log), in percent (module docstring)."""
    return 100.0 * math.expm1(math.log1p(half_width_pct / 100.0) * DETECTABLE_FACTOR)
