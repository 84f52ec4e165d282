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
        assert "the median of each cell's difference" in line
        if rest < 0:
            assert f"the called models' figures exceed it by {num(-rest)} µs" in line
            assert "parts can exceed the whole" in line
        else:
            assert (
                f"the rest {num(rest)} µs" in line
                or f"account for all but {num(rest)} µs of it, within 1%" in line
            )
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


def test_a_bls_models_own_queue_is_named_where_it_binds() -> None:
    """Issue 36 audit: the BLS log said step `cnn` "binds, with 76% of the request's server
    time" while requests waited longer in the BLS model's own queue than `cnn` took. Shares are
    now of the steps' time, and the BLS model's own queue is named wherever it is longer than
    the binding step's queue and compute; an ensemble (no queue of its own) never says so."""
    from tritonlab.explanation.steps import steps_table
    from tritonlab.report.steps_section import steps_section

    for name, kind in (("resnet18_pipeline_bls", "bls"), ("resnet18_pipeline", "ensemble")):
        cells = _cells(name)
        table = steps_table(cells)
        text = "\n".join(steps_section(cells, {}, kind))
        assert "of the request's server time" not in text
        assert "of the steps' server time" in text
        for row in table:
            own = statistics.median(
                c.server.queue_us_per_request
                for c in cells
                if c.server and c.variant.name == row.variant and c.load_key == row.load_key
            )
            top = row.binding
            binds = own > (top.queue_us + top.compute_us) * top.calls_per_request
            assert row.own_queue_binds == binds
        named = "requests waited longer for the BLS model itself" in text
        assert named == (kind == "bls" and any(r.own_queue_binds for r in table))


def test_an_ensembles_steps_that_exceed_it_say_so() -> None:
    """Issue 36 audit: the ensemble's called models exceeded it by about 0.1% in all four
    configurations and the log said they "account for all of it". A negative rest is named
    as parts exceeding the whole, however small."""
    cells = _cells("resnet18_pipeline")
    lines = _attribution("ensemble", cells)
    assert not any("account for all of it" in x for x in lines)
    for line in lines[1:]:
        assert ("exceed it by" in line) == ("parts can exceed the whole" in line)
