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
from tritonlab.stats.verdicts import Verdict


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
