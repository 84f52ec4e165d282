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
SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed_run"


@pytest.fixture(scope="module")
def cells() -> dict[str, Any]:
    return {c.cell_id: c for c in load_cells(RUN)}


def test_an_extra_rounds_cells_share_one_block_whatever_their_repeat(tmp_path: Path) -> None:
    """An extra round holding one configuration's 3rd cell and another's 2nd pairs them (one
    block), and the 3rd cell of the second configuration, measured in a later round, is not
    paired with the first's (the issue 22 audit found such rounds in the stored sweep of then)."""
    import shutil

    from tritonlab.experiments.rounds import append_round

    run = tmp_path / "run"
    shutil.copytree(SEED, run)
    layout = RunLayout(run)
    append_round(
        layout.adaptive,
        AdaptiveRound(3, ("open",), ("baseline__grpc_b1_c8__r3", "batch_0ms_x1__grpc_b1_c8__r2")),
    )
    append_round(layout.adaptive, AdaptiveRound(4, ("open",), ("batch_0ms_x1__grpc_b1_c8__r3",)))
    by_id = {c.cell_id: c for c in load_cells(run)}
    base3, batch2 = by_id["baseline__grpc_b1_c8__r3"], by_id["batch_0ms_x1__grpc_b1_c8__r2"]
    assert base3.repeat != batch2.repeat and base3.block == batch2.block
    assert by_id["batch_0ms_x1__grpc_b1_c8__r3"].block != base3.block


def test_every_extra_round_is_one_block_and_planned_cells_keep_their_repeat(
    cells: dict[str, Any],
) -> None:
    rounds = load_records(RunLayout(RUN).adaptive, AdaptiveRound)
    extra = [{cells[cid].block for cid in r.cells} for r in rounds]
    assert all(len(blocks) == 1 for blocks in extra)
    assert len({b for blocks in extra for b in blocks}) == len(rounds)  # one block each
    held = {cid for r in rounds for cid in r.cells}
    assert all(c.block == c.repeat for cid, c in cells.items() if cid not in held)
