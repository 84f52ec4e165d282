"""The A/A control: the baseline served twice, under two names, measured like any configuration.

Both copies run the same configuration on the same server, so any difference the verdicts find
between them is noise (or a flaw in the method). Its interval is the run's noise floor, stated
in every log; a control that reads "higher" or "lower" says the run's verdicts are not to be
trusted, and the log says so. Neither does a run with more than ``MAX_DISTURBED_SHARE`` of its
cells stored disturbed by the interference monitor, whatever its control reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonlab.experiments.interference import disturbed_share, too_disturbed
from tritonlab.experiments.store import CellResult
from tritonlab.records import Record
from tritonlab.stats.aggregate import compare_figure, summarise
from tritonlab.stats.verdicts import Verdict


@dataclass(frozen=True)
class NoiseFloor(Record):
    """The control against the baseline at one load point (stored in ``summary.json``)."""

    DERIVED = ("trusted", "too_disturbed")

    load_key: str
    control: str
    throughput: Verdict
    latency_p99: Verdict
    # the share of the run's monitored cells stored disturbed (None: no cell was monitored)
    disturbed_share: float | None = None

    @property
    def too_disturbed(self) -> bool:
        """True when too many of the run's cells stayed disturbed (``MAX_DISTURBED_SHARE``)."""
        return too_disturbed(self.disturbed_share)

    @property
    def trusted(self) -> bool:
        """False when the control differs from the baseline "clearly" in throughput or p99, or
        when too many of the run's cells stayed disturbed."""
        return not (self.throughput.clear or self.latency_p99.clear or self.too_disturbed)


def noise_floors(cells: list[CellResult], baseline: str = "baseline") -> list[NoiseFloor]:
    """Every control against the baseline at the same load point (none without a control)."""
    summaries = summarise(cells, controls=True)
    share = disturbed_share([c.interference for c in cells if c.interference is not None])
    refs = {s.load_key: s for s in summaries if s.variant.name == baseline}
    return [
        NoiseFloor(
            s.load_key,
            s.variant.name,
            compare_figure("throughput", "throughput", ref, s),
            compare_figure("latency_p99", "latency_p99", ref, s),
            share,
        )
        for s in summaries
        if s.variant.control and (ref := refs.get(s.load_key)) is not None
    ]
