"""The adaptive repeats of a run: more interleaved rounds of the cells whose verdicts are open.

After the planned rounds, ``AdaptiveRun`` asks ``AdaptiveRepeats.undecided`` which cells still
carry an undecided verdict (or, with the block engine, one wider than its target), measures one
more round of exactly those, and repeats until every verdict the rule watches is decided, the
round limit is reached or the next round would pass a budget (judged from the median cell so
far): the extra rounds' own, or the run's measuring in all (``measuring_time.measuring_s``, the
planned rounds, the disturbed cells measured again and the warm-ups included). Each round is
stored in ``results/adaptive.json``, and why the rounds stopped in ``results/stopping.json``;
the experiment log states both.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonlab.experiments.engine import MeasuringSession
from tritonlab.experiments.measuring_time import measuring_per_cell_s, measuring_s
from tritonlab.experiments.plan import LoadPoint
from tritonlab.experiments.rounds import AdaptiveRound, StoppingRecord, append_round
from tritonlab.experiments.session import Progress, Round
from tritonlab.experiments.store import cell_path
from tritonlab.repository.layout import RepositoryModel
from tritonlab.result_files import load_records, write_result
from tritonlab.run_layout import RunLayout, cell_id

# A round is priced at this many times its cells' expected cost against the measuring budget:
# the checks between rounds grow with the cells stored, which the run's mean does not see.
ROUND_MARGIN = 1.1

# The cells with an open verdict as (variant, load key) pairs, and the verdicts in words.
UndecidedCells = Callable[[], tuple[list[tuple[str, str]], list[str]]]


@dataclass(frozen=True)
class AdaptiveRepeats:
    """Measure more interleaved rounds of the cells ``undecided`` names, up to ``max_repeats``."""

    max_repeats: int
    undecided: UndecidedCells
    # Seconds the extra rounds may take in all; a round starts only if it is expected to fit
    # (its cells times the median cell of this run). None: no limit but ``max_repeats``.
    budget_s: float | None = None
    # Whether ``undecided`` also counts intervals wider than their target (the block engine).
    precision: bool = False
    # Seconds the whole run may measure (``measuring_s``); a round starts only if it is
    # expected to fit this too. None: no such limit.
    measuring_budget_s: float | None = None


def cell_cost_s(session: object) -> float:
    """What one more cell is expected to take: the median wall time of the cells this session
    measured (retries included), not the run's elapsed time over its cells (which counted the
    server's start, the export and the in-process timings as measuring). 0 before any cell."""
    seconds = getattr(session, "cell_seconds", [])
    return statistics.median(seconds) if seconds else 0.0


def rated_loads(
    derived: Sequence[LoadPoint], rates: Mapping[tuple[str, str], float], model: RepositoryModel
) -> list[LoadPoint]:
    """``model``'s loads at a fraction of the peak, each at the rate measured for it (loads
    without a rate, because no peak was measured, are left out)."""
    name = model.variant.name
    return [
        replace(ld, request_rate_per_s=rates[(name, ld.key)])
        for ld in derived
        if (name, ld.key) in rates
    ]


@dataclass
class AdaptiveRun:
    """The extra rounds of one run: what to measure next, measuring it, and why it stopped."""

    session: MeasuringSession
    adaptive: AdaptiveRepeats
    run_dir: Path
    models: list[RepositoryModel]
    direct_loads: list[LoadPoint]
    derived_loads: list[LoadPoint]
    # The open-loop rate of each (variant, load key) a fraction of the peak resolved to.
    rates: Mapping[tuple[str, str], float]
    planned: int = 0  # the plan's rounds: the first extra round is planned + 1 (from 1)
    alternate: bool = False  # every other round in the reverse order (``planned_rounds``)
    progress: Progress = field(default_factory=Progress)  # counts the added cells too

    def _cells(
        self, targets: list[tuple[str, str]]
    ) -> list[tuple[RepositoryModel, LoadPoint, int]]:
        """The next repeat (the first not yet stored) of every target below the round limit,
        in the models' order; a derived load at its variant's rate, none without one."""
        cells = []
        for model in self.models:
            name = model.variant.name
            rated = rated_loads(self.derived_loads, self.rates, model)
            loads = {ld.key: ld for ld in [*self.direct_loads, *rated]}
            for key in sorted({k for variant, k in targets if variant == name}):
                if (load := loads.get(key)) is None:
                    continue
                repeat = 0
                while cell_path(self.run_dir, cell_id(name, key, repeat + 1)).exists():
                    repeat += 1
                if repeat < self.adaptive.max_repeats:
                    cells.append((model, load, repeat))
        return cells

    def _over_budget(self, cells: int, reasons: int, started: float) -> str | None:
        """Why the next round of ``cells`` would not fit a budget (None: it fits both)."""
        adaptive = self.adaptive
        cost = cell_cost_s(self.session)
        round_ = f"the next round ({cells} cells x {cost:.1f} s, the median cell)"
        still_open = f"with {reasons} verdict(s) still open"
        if adaptive.budget_s is not None:
            spent = time.monotonic() - started
            if spent + cells * cost > adaptive.budget_s:
                return (
                    f"{round_} would pass the {adaptive.budget_s:.0f} s budget of the extra "
                    f"rounds ({spent:.0f} s spent), {still_open}"
                )
        if adaptive.measuring_budget_s is not None:
            measured = measuring_s(self.run_dir)
            # the measuring span also holds the gaps between cells: price a cell at least at
            # the span so far per cell it holds (a median cell alone let a demo end at 250.8 s
            # of a 250 s budget, demo_precision.md at 9be019b; the span over the session's
            # cells, probes included, at 251.3 s at 9fa5983), with ROUND_MARGIN to spare
            per_cell = ROUND_MARGIN * max(cost, measuring_per_cell_s(self.run_dir, measured))
            if measured + cells * per_cell > adaptive.measuring_budget_s:
                return (
                    f"the next round ({cells} cells x {per_cell:.1f} s, the measuring so far "
                    f"per cell) would take the run's measuring past "
                    f"{adaptive.measuring_budget_s:.0f} s ({measured:.0f} s measured), "
                    f"{still_open}"
                )
        return None

    def extra_round(self, started: float) -> str | None:
        """Measure one more round of the undecided cells; the reason to stop instead."""
        targets, reasons = self.adaptive.undecided()
        if not targets:
            return "every verdict the rule watches was decided" + (
                " and within its target width" if self.adaptive.precision else ""
            )
        todo = self._cells(targets)
        if not todo:
            return (
                f"the limit of {self.adaptive.max_repeats} rounds was reached with "
                f"{len(reasons)} verdict(s) still open"
            )
        if (too_long := self._over_budget(len(todo), len(reasons), started)) is not None:
            return too_long
        self.progress.total += len(todo)
        measured: list[str] = []
        path = RunLayout(self.run_dir).adaptive
        # Rounds are counted over the run, not from one configuration's repeats: cells of one
        # round can be at different repeats of their own.
        number = self.planned + len(load_records(path, AdaptiveRound))
        order = self.models[::-1] if self.alternate and number % 2 else self.models
        round_: Round = [
            (model, mine)
            for model in order
            if (mine := [(ld, r) for m, ld, r in todo if m is model])
        ]
        complete = self.session.measure_rounds([round_], measured, " (adaptive)")
        if measured:
            append_round(path, AdaptiveRound(number + 1, tuple(reasons), tuple(measured)))
        return None if complete else "the run's time budget was reached"

    def run(self) -> None:
        """Measure extra rounds until a reason to stop; store that reason and what it cost."""
        started = time.monotonic()
        stop_reason = "the run's time budget was reached"
        while not self.session.over_budget():
            if (reason := self.extra_round(started)) is not None:
                stop_reason = reason
                break
        stopping = StoppingRecord(
            reason=stop_reason,
            max_rounds=self.adaptive.max_repeats,
            budget_s=self.adaptive.budget_s,
            extra_s=round(time.monotonic() - started, 1),
            cell_cost_s=round(cell_cost_s(self.session), 3),
            cells_wall_s=round(sum(getattr(self.session, "cell_seconds", [])), 1),
            precision=self.adaptive.precision,
            measuring_budget_s=self.adaptive.measuring_budget_s,
            measured_s=measuring_s(self.run_dir),
        )
        write_result(RunLayout(self.run_dir).stopping, stopping.to_dict())
