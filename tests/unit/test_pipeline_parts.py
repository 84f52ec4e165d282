"""Parts and wholes in a pipeline's log (issue 36, item 4): a BLS model's remainder is each
cell's own, per configuration and load (a difference of medians pooled over configurations is
no configuration's), and a row of an ensemble whose configurations change one step states that
step's own batch and compute beside the ensemble's counters."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tritonlab.experiments.store import CellResult, load_cells
from tritonlab.report.steps_section import _attribution, changed_step_line
from tritonlab.report.text_format import num

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _cells(name: str) -> list[CellResult]:
    return [c for c in load_cells(EXAMPLES / name) if not c.variant.control]


def test_a_bls_remainder_is_per_cell_and_per_configuration() -> None:
    cells = _cells("resnet18_pipeline_bls")
    lines = _attribution("bls", cells)
    groups: dict[tuple[str, str], list[float]] = {}
    for c in cells:
        s = c.server
        assert s is not None and c.steps
        called = sum(
            (d.queue_us_per_request + d.compute_us_per_request)
            * (d.request_count / s.request_count)
            for d in c.steps.values()
        )
        own = s.compute_us_per_execution * s.execution_count / s.request_count
        groups.setdefault((c.variant.name, c.load_key), []).append(own - called)
    assert len(groups) > 1  # several configurations: one line each, none pooled
    assert len(lines) == 1 + len(groups)
    for (variant, load), rests in groups.items():
        (line,) = [x for x in lines if x.startswith(f"  - {variant} at {load}:")]
        rest = statistics.median(rests)
        assert (
            f"the rest {num(rest)} µs" in line
            if rest > 0
            else f"the called models' figures exceed it by {num(-rest)} µs" in line
        ) or "account for all of it (within 1%)" in line
        assert f"({len(rests)} cells)" in line


def test_the_changed_steps_own_figures_stand_beside_the_ensembles() -> None:
    cells = _cells("resnet18_pipeline")
    by_variant: dict[str, list[CellResult]] = {}
    for c in cells:
        by_variant.setdefault(c.variant.name, []).append(c)
    base = by_variant.pop("baseline")
    batched = next(v for v in by_variant.values() if v[0].variant.dynamic_batching)
    line = changed_step_line("cnn", batched, base)
    batches = statistics.median(c.steps["cnn"].mean_batch_size for c in batched)
    assert f"`cnn`, by its own statistics: mean batch {batches:.2f}" in line
    assert "the baseline's: mean batch" in line and "compute per inference" in line
    assert changed_step_line("cnn", base, None).count("baseline's") == 0
    assert changed_step_line("no_such_step", batched, base) == ""


@pytest.mark.parametrize("kind", ["bls", "ensemble"])
def test_no_statistics_no_attribution(kind: str) -> None:
    cells = [c for c in load_cells(EXAMPLES / "simple_mlp_sweep")][:3]
    assert _attribution(kind, cells) == []
