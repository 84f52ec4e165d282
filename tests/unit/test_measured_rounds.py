"""Cells pair by the round they were measured in, also in extra rounds whose configurations
were at different repeats of their own (found by the issue 22 audit in the block-engine sweep)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tritonlab.experiments.rounds import AdaptiveRound
from tritonlab.experiments.store import load_cells
from tritonlab.result_files import load_records
from tritonlab.run_layout import RunLayout

RUN = Path(__file__).resolve().parents[2] / "examples" / "simple_mlp_sweep_blocks"


@pytest.fixture(scope="module")
def cells() -> dict[str, Any]:
    return {c.cell_id: c for c in load_cells(RUN)}


def test_an_extra_rounds_cells_share_one_block_whatever_their_repeat(
    cells: dict[str, Any],
) -> None:
    pref8, baseline = (
        cells["batch_5000us_pref8__http_b1_c8__r34"],
        cells["baseline__http_b1_c8__r37"],
    )
    assert pref8.repeat != baseline.repeat
    assert pref8.block == baseline.block  # measured in the same extra round
    assert cells["baseline__http_b1_c8__r34"].block != pref8.block


def test_every_extra_round_is_one_block_and_planned_cells_keep_their_repeat(
    cells: dict[str, Any],
) -> None:
    rounds = load_records(RunLayout(RUN).adaptive, AdaptiveRound)
    extra = [{cells[cid].block for cid in r.cells} for r in rounds]
    assert all(len(blocks) == 1 for blocks in extra)
    assert len({b for blocks in extra for b in blocks}) == len(rounds)  # one block each
    held = {cid for r in rounds for cid in r.cells}
    assert all(c.block == c.repeat for cid, c in cells.items() if cid not in held)
