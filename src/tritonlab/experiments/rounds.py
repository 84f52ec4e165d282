"""The adaptive repeats' records: ``results/adaptive.json`` (each extra round, the verdicts
that asked for it and the cells it measured) and ``results/stopping.json`` (why the extra rounds
stopped and what a cell cost). The runner writes both; the experiment log reads them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tritonlab.records import Record, later
from tritonlab.result_files import load_records, write_result


@dataclass(frozen=True)
class AdaptiveRound(Record):
    """One extra round (``round`` counted from 1, the planned rounds included)."""

    round: int
    reasons: tuple[str, ...]
    cells: tuple[str, ...]


def append_round(path: Path, record: AdaptiveRound) -> None:
    """Add ``record`` to the rounds stored at ``path`` (``results/adaptive.json``)."""
    write_result(path, [r.to_dict() for r in (*load_records(path, AdaptiveRound), record)])


@dataclass(frozen=True)
class StoppingRecord(Record):
    """Why the adaptive rounds stopped, the rule's limits, and what the rounds cost (seconds)."""

    reason: str
    max_rounds: int
    budget_s: float | None  # the extra rounds' budget; None: no budget, only ``max_rounds``
    extra_s: float  # wall seconds of the extra rounds
    cell_cost_s: float  # the median cell's wall seconds (the budget check's estimate)
    cells_wall_s: float  # every cell of this session together
    precision: bool = False  # the rule watched interval widths, not only undecided words
    # The run's measuring in all (``measuring_time.measuring_s``): its limit (None: none) and
    # what it was when the rounds stopped (None in files written before it was stored).
    measuring_budget_s: float | None = later(group="measuring")
    measured_s: float | None = later(group="measuring")
