"""A run's trust: one typed verdict on the whole run, computed once from its cells and controls.

Every layer that quotes a run (its log and summary, its picks, a deployment made from it, the
README and docs/results.md, benchmark pages) reads this record instead of deciding again, so a
run's doubts travel with its figures. The states, worst first:

- **control flagged**: the A/A controls (the baseline served twice) read "higher" or "lower" in
  more of their intervals than noise alone gives in one run in ten (``FAMILY_FALSE_ALARM``, a
  binomial tail at each interval's 5%): identical configurations were told apart, so any
  verdict of the run may be noise. One control has two intervals (throughput and p99), and one
  of them reading a difference is already past that line (noise alone: 9.75%); a sweep's seven
  controls hold fourteen, of which noise alone reads at least one different in about half of
  all runs;
- **disturbed**: more than ``MAX_DISTURBED_SHARE`` of the monitored cells were stored disturbed
  by the interference monitor (other processes took CPU while they were measured);
- **unstable repeats**: a configuration measured more than once has its figures resting on
  fewer than half its repeats, because
  perf_analyzer could not settle the others (the classic engine; the block engine measures
  fixed windows and has no such check);
- **unchecked**: neither an A/A control nor the interference monitor looked at the run, so
  nothing in it measured its noise;
- **control flag within chance**: some control interval read a difference, but no more of them
  than noise alone gives in one run in ten: the run is trusted, and its quotes say that a
  verdict near the noise floor may be noise;
- **quiet**: none of the above.

``caveat`` is the clause a quote of the run carries ("" for a quiet run).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Literal

from scipy import stats

from tritonlab.experiments.interference import MAX_DISTURBED_SHARE, too_disturbed
from tritonlab.experiments.store import CellResult
from tritonlab.records import Record, later
from tritonlab.stats.noise_floor import NoiseFloor
from tritonlab.stats.verdicts import tenth_text

TrustState = Literal[
    "quiet",
    "control flagged",
    "disturbed",
    "unstable repeats",
    "unchecked",
    "control flag within chance",
]
TRUSTED: tuple[TrustState, ...] = ("quiet", "control flag within chance")
# A run's controls are flagged when noise alone reads as many of their intervals different in
# fewer than this share of runs (each interval at its nominal 5%).
FAMILY_FALSE_ALARM = 0.10
INTERVAL_FALSE_ALARM = 0.05


@dataclass(frozen=True)
class ControlFlag(Record):
    """An A/A control that told the two copies apart: which figure, at which load, and how."""

    load_key: str
    figure: str  # "throughput" or "p99"
    phrase: str  # e.g. "lower (-3.4%, CI -6.1% to -0.6%)"


@dataclass(frozen=True)
class UnstableConfiguration(Record):
    """The configuration at a load whose figures rest on the fewest stable repeats."""

    variant: str
    load_key: str
    stable_repeats: int
    repeats: int


@dataclass(frozen=True)
class RunTrust(Record):
    """One verdict on a run, with the figures behind it (stored in ``summary.json``)."""

    DERIVED = ("state", "trusted")

    cells: int
    # cells the interference monitor watched, and those it stored disturbed
    cells_monitored: int
    cells_disturbed: int
    # CPU other processes used while the disturbed cells were measured (median, cores)
    foreign_cores_median: float | None
    steal_cores_median: float | None
    controls: int  # A/A controls (one per load that has one)
    control_flags: tuple[ControlFlag, ...]
    # the worst configuration's stable repeats, where under half its repeats settled
    unstable: UnstableConfiguration | None
    # the controls' intervals (throughput and p99 at each load, where one was computed); 0 in a
    # record from before it was counted: then any flag flags the run
    control_intervals: int = later(0)
    # control intervals that read no difference only once the process term widened them (the
    # blocks paired alone read one): the quiet line says so
    controls_widened: tuple[ControlFlag, ...] = later(())

    @property
    def chance_of_flags(self) -> float | None:
        """How often noise alone reads at least this many of the controls' intervals different
        (a binomial tail at ``INTERVAL_FALSE_ALARM`` each); None without a flag or a count."""
        if not self.control_flags or not self.control_intervals:
            return None
        k, n = len(self.control_flags), self.control_intervals
        return float(stats.binom.sf(k - 1, n, INTERVAL_FALSE_ALARM))

    @property
    def flags_beyond_chance(self) -> bool:
        """True when the controls' flags are more than noise explains (any flag, in a record
        that did not count the intervals)."""
        chance = self.chance_of_flags
        return bool(self.control_flags) and (chance is None or chance < FAMILY_FALSE_ALARM)

    @property
    def disturbed_share(self) -> float | None:
        """The share of monitored cells stored disturbed; None where none was monitored."""
        return self.cells_disturbed / self.cells_monitored if self.cells_monitored else None

    @property
    def state(self) -> TrustState:
        """The worst thing found, in the order of the module docstring."""
        share = self.disturbed_share
        if self.flags_beyond_chance:
            return "control flagged"
        if too_disturbed(share):
            return "disturbed"
        if self.unstable is not None:
            return "unstable repeats"
        if not self.controls and not self.cells_monitored:
            return "unchecked"
        if self.control_flags:
            return "control flag within chance"
        return "quiet"

    @property
    def trusted(self) -> bool:
        """True when the run's verdicts may be quoted without a doubt."""
        return self.state in TRUSTED

    def doubts(self) -> list[str]:
        """Every doubt, worst first, each with its figures ([] for a quiet run)."""
        flags = [f"{f.figure} {f.phrase} at `{f.load_key}`" for f in self.control_flags]
        found = []
        if self.flags_beyond_chance:
            found = [f"its A/A control told identical copies apart ({f})" for f in flags]
            if (chance := self.chance_of_flags) is not None:
                found[-1] += (
                    f", {len(flags)} of its {self.control_intervals} control intervals, as noise "
                    f"alone does in {_share(chance)} of runs"
                )
        share = self.disturbed_share
        if too_disturbed(share):
            found.append(
                f"{self.cells_disturbed} of {self.cells_monitored} cells were stored disturbed "
                f"(over the {100 * MAX_DISTURBED_SHARE:.0f}% a run may rest on)" + self._load_text()
            )
        if (u := self.unstable) is not None:
            found.append(
                f"`{u.variant}` at `{u.load_key}` rests on {u.stable_repeats} stable repeat"
                f"{'s' if u.stable_repeats != 1 else ''} of {u.repeats}"
            )
        if not self.controls and not self.cells_monitored:
            # also where a worse doubt is stated first (issue 36 audit: an unstable run's
            # Trust line left out that nothing checked its noise)
            found.append("no A/A control and no interference monitor checked its noise")
        if self.control_flags and not self.flags_beyond_chance:
            found.append(
                f"{len(flags)} of its {self.control_intervals} A/A control intervals read a "
                f"difference ({'; '.join(flags)}), as noise alone does in "
                f"{_share(self.chance_of_flags or 0.0)} of runs with as many: a verdict near "
                "the noise floor may be noise"
            )
        return found

    def _load_text(self) -> str:
        """'; other processes used a median 0.52 cores (steal 0.01) while they were measured'."""
        if self.foreign_cores_median is None:
            return ""
        steal = f", steal {self.steal_cores_median:.2f}" if self.steal_cores_median else ""
        return (
            f"; other processes used a median {self.foreign_cores_median:.2f} cores{steal} "
            "while they were measured"
        )

    def no_control_text(self) -> str:
        """'' unless the run is trusted with no A/A control: then that the interference monitor
        alone checked its noise, which a page quoting its verdicts carries (issue 36 audit: a
        tune's race verdicts quoted where its log says no control was measured)."""
        if self.state != "quiet" or self.controls or not self.cells_monitored:
            return ""
        return (
            "no A/A control was measured in this run: the interference monitor alone checked "
            "its noise"
        )

    def page_note(self) -> str:
        """What a page quoting the run carries: its ``note``, or for a trusted run with no
        A/A control that the monitor alone checked it ('' for a quiet, controlled run)."""
        bare = self.no_control_text()
        return self.note() or (f"Note: {bare}." if bare else "")

    def note(self) -> str:
        """'**Note: <caveat>.**', the bold sentence a page quoting this run carries; ''
        for a quiet run."""
        caveat = self.caveat()
        return f"**Note: {caveat}.**" if caveat else ""

    def caveat(self) -> str:
        """The clause a quote of this run carries: '' for a quiet run, else e.g. 'this run's
        verdicts are not to be trusted: 158 of 200 cells were stored disturbed (...)'."""
        doubts = self.doubts()
        if not doubts:
            return ""
        if self.state == "unchecked":
            return f"this run's noise was not checked: {doubts[0]}"
        if self.state == "control flag within chance":
            return f"this run is trusted, but {doubts[0]}"
        return "this run's verdicts are not to be trusted: " + "; ".join(doubts)


def _share(p: float) -> str:
    """A chance in words: '51%', '9.8%', 'under 0.1%'."""
    if p < 0.001:
        return "under 0.1%"
    return f"{100 * p:.0f}%" if p >= 0.1 else f"{100 * p:.1f}%"


def _unstable(cells: list[CellResult]) -> UnstableConfiguration | None:
    """The configuration at a load with the smallest share of stable repeats, where that share
    is under half; None where every configuration has at least half its repeats stable."""
    groups: dict[tuple[str, str], list[CellResult]] = {}
    for c in cells:
        groups.setdefault((c.variant.name, c.load_key), []).append(c)
    worst: UnstableConfiguration | None = None
    for (variant, load), group in sorted(groups.items()):
        stable = sum(1 for c in group if c.perf.stable)
        # one cell (a search's probe) carries no verdict: its unstable figure is its own note
        if len(group) < 2 or 2 * stable >= len(group):
            continue
        if worst is None or stable / len(group) < worst.stable_repeats / worst.repeats:
            worst = UnstableConfiguration(variant, load, stable, len(group))
    return worst


def run_trust(cells: list[CellResult], floors: list[NoiseFloor]) -> RunTrust:
    """The trust of the run these ``cells`` and A/A ``floors`` belong to."""
    monitored = [c.interference for c in cells if c.interference is not None]
    disturbed = [r for r in monitored if r.disturbed]
    flags = [
        ControlFlag(f.load_key, name, verdict.phrase())
        for f in floors
        for name, verdict in (("throughput", f.throughput), ("p99", f.latency_p99))
        if verdict.clear
    ]
    return RunTrust(
        cells=len(cells),
        cells_monitored=len(monitored),
        cells_disturbed=len(disturbed),
        foreign_cores_median=(
            statistics.median(r.foreign_cores for r in disturbed) if disturbed else None
        ),
        steal_cores_median=(
            statistics.median(r.steal_cores for r in disturbed) if disturbed else None
        ),
        controls=len(floors),
        control_flags=tuple(flags),
        unstable=_unstable(cells),
        control_intervals=sum(
            v.has_interval for f in floors for v in (f.throughput, f.latency_p99)
        ),
        controls_widened=tuple(
            ControlFlag(
                f.load_key,
                name,
                f"{v.unwidened_word} by the blocks paired alone (CI "
                f"{tenth_text(v.unwidened_pct[0])} to {tenth_text(v.unwidened_pct[1])})",
            )
            for f in floors
            for name, v in (("throughput", f.throughput), ("p99", f.latency_p99))
            if v.widening_decides and v.unwidened_pct is not None
        ),
    )
