"""Picks rank medians over the blocks every point has (issue 36 audit: a sweep's extra rounds
measured only the watched cells and ran 6-14% faster, so a median over 28 blocks beside one
over 10 let those rounds decide the frontier, the picks and the runner-ups)."""

from __future__ import annotations

from pathlib import Path

from test_recommend import repeats, summaries

from tritonlab.decisions.recommend import common_blocks, recommend
from tritonlab.report.recommend_section import recommendations_section
from tritonlab.report.recommend_summary_text import summary_line
from tritonlab.report.recommend_text import justification
from tritonlab.report.run_data import load_run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _sweep(extra: list[float]) -> list:
    """Two configurations at one load over blocks 1-3; batch_0us measured again in ``extra``
    further blocks (an extra round of the watched cell) at the given throughputs."""
    cells = [
        *repeats("baseline", [1000, 1010, 990], [2000, 2000, 2000]),
        *repeats("batch_0us", [980, 1000, 990, *extra], [2000] * (3 + len(extra))),
    ]
    return cells


def test_a_point_with_extra_fast_rounds_does_not_win_by_them() -> None:
    # over all its 6 blocks batch_0us's median is 1,100, above the baseline's 1,000: the
    # extra rounds (1,200 each) would decide
    recs = recommend(summaries(_sweep([1200, 1200, 1200])), latency_budget_p99_us=5000)
    pick = recs.throughput_pick
    assert pick is not None
    # over the 3 blocks both have, batch_0us reads 990 against the baseline's 1,000
    assert pick.point.variant == "baseline"
    assert pick.point.ranked_blocks is None and pick.point.repeats == 3  # all its blocks
    other = next(p for p in recs.points if p.variant == "batch_0us")
    assert (other.throughput_infer_per_s, other.ranked_blocks, other.repeats) == (990.0, 3, 6)
    # the budget still holds over every repeat measured
    assert other.worst_p99_us == 2000.0
    section = "\n".join(recommendations_section(recs, summaries(_sweep([1200, 1200, 1200]))))
    assert "rank medians over the 3 blocks every point has" in section
    assert "medians over the 3 blocks every point has; see the frontier's note" in section


def test_points_on_the_same_blocks_rank_their_own_medians() -> None:
    recs = recommend(summaries(_sweep([])), latency_budget_p99_us=5000)
    assert all(p.ranked_blocks is None for p in recs.points)
    assert common_blocks(summaries(_sweep([]))) is None
    section = "\n".join(recommendations_section(recs, summaries(_sweep([]))))
    assert "blocks every point has" not in section
    assert "medians over repeats" in section


def test_the_committed_sweep_ranks_over_its_planned_blocks() -> None:
    """The block-engine sweep: 10 full blocks, then extra rounds of the watched cells; its
    picks' figures are medians over the 10 blocks, recomputed here from the cells."""
    run = load_run(EXAMPLES / "simple_mlp_sweep_blocks")
    recs = run.recommendations
    assert recs is not None and recs.throughput_pick is not None
    pick = recs.throughput_pick.point
    assert pick.ranked_blocks == 10 and pick.repeats > 10
    own = sorted(
        c.perf.measurement.throughput_infer_per_s
        for c in run.cells
        if c.variant.name == pick.variant
        and c.load_key == pick.load_key
        and c.block <= 10
        and c.perf.measurement is not None
    )
    assert len(own) == 10
    assert pick.throughput_infer_per_s == (own[4] + own[5]) / 2
    text = justification(recs.throughput_pick, recs)
    assert "medians over the 10 blocks every point has, the blocks the ranking reads" in text
    assert "The picks' figures are medians over the 10 blocks every point has" in summary_line(recs)
    # a run without extra rounds: no point says it
    classic = load_run(EXAMPLES / "simple_mlp_sweep").recommendations
    assert classic is not None
    assert all(p.ranked_blocks is None for p in classic.points)
    assert "blocks every point has" not in summary_line(classic)
