"""The A/A control: the baseline served twice, under two names, measured like any configuration.

Both copies run the same configuration on the same server, so any difference the verdicts find
between them is noise (or a flaw in the method). Its interval is the run's noise floor, stated
in every log; a control that reads "higher" or "lower" says the run's verdicts are not to be
trusted. Whether the run as a whole may be trusted (its disturbed cells too) is ``RunTrust``'s
to say (``run_trust.py``), read by every page that quotes the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonlab.experiments.store import CellResult
from tritonlab.records import Record
from tritonlab.stats.aggregate import compare_figure, summarise
from tritonlab.stats.verdicts import HIGHER, LOWER, Verdict


@dataclass(frozen=True)
class NoiseFloor(Record):
    """The control against the baseline at one load point (stored in ``summary.json``)."""

    DERIVED = ("trusted",)

    load_key: str
    control: str
    throughput: Verdict
    latency_p99: Verdict

    @property
    def trusted(self) -> bool:
        """False when the control differs from the baseline "clearly" in throughput or p99:
        the control's own reading (the run's is ``RunTrust``, which also counts its cells)."""
        return not (self.throughput.clear or self.latency_p99.clear)

    @property
    def widened_only(self) -> list[Verdict]:
        """The control's verdicts that read a difference by the pairing alone and none once the
        process term widened them (``Verdict.widening_decides``)."""
        return [v for v in (self.throughput, self.latency_p99) if v.widening_decides]


def noise_floors(cells: list[CellResult], baseline: str = "baseline") -> list[NoiseFloor]:
    """Every control against the baseline at the same load point (none without a control)."""
    summaries = summarise(cells, controls=True)
    refs = {s.load_key: s for s in summaries if s.variant.name == baseline}
    return [
        NoiseFloor(
            s.load_key,
            s.variant.name,
            compare_figure("throughput", "throughput", ref, s),
            compare_figure("latency_p99", "latency_p99", ref, s),
        )
        for s in summaries
        if s.variant.control and (ref := refs.get(s.load_key)) is not None
    ]


def within_noise_floor(verdicts: list[Verdict], floor: NoiseFloor | None) -> str:
    """'' unless a decided verdict's estimate lies inside the interval the A/A control at its
    load read between two identical copies: then that a change this size can be the copies'
    own difference (issue 36 audit: "a clear win" at +4%, CI +1% to +9%, where the control
    read +2%, CI -2% to +7%, and the win against the control's copy was +1%, CI -2% to +5%)."""
    if floor is None:
        return ""
    reached = []
    for v in verdicts:
        control = floor.throughput if v.figure == "throughput" else floor.latency_p99
        if v.word not in (HIGHER, LOWER) or v.change_pct is None or not control.has_interval:
            continue
        low, high = control.low_pct or 0.0, control.high_pct or 0.0
        change = v.change_pct
        if (change > 0 and high >= change) or (change < 0 and low <= change):
            reached.append(f"{v.figure} {change:+.0f}%, where the control read {control.phrase()}")
    if not reached:
        return ""
    return (
        "; but the A/A control's interval between identical copies at this load reaches this "
        f"change ({'; '.join(reached)}): a change this size may be the two server processes' "
        "own difference, not the configuration's"
    )
