"""Parts and wholes in a pipeline's log (issue 36, item 4): a BLS model's remainder is each
cell's own, per configuration and load (a difference of medians pooled over configurations is
no configuration's), and a row of an ensemble whose configurations change one step states that
step's own batch and compute beside the ensemble's counters."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from tritonlab.experiments.store import CellResult, load_cells
from tritonlab.report.steps_section import _attribution, changed_step_line
from tritonlab.report.text_format import num

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _finding(run: Any, rule: str) -> str:
    """The first finding of ``rule`` in a loaded run's explanations."""
    return next(
        f.text for a in run.analyses for r in a.reports for f in r.findings if f.rule == rule
    )


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
            from scipy.stats import binomtest

            over = sum(1 for r in rests if r < 0)
            systematic = binomtest(over, len(rests), 0.5).pvalue < 0.05
            assert f"in {over} of {len(rests)} cells" in line
            assert ("more than read timing gives by chance" in line) == systematic
            assert ("parts can exceed the whole" in line) == (not systematic)
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
    from tritonlab.stats.aggregate import summarise

    base_cells = by_variant.pop("baseline")
    batched_cells = next(v for v in by_variant.values() if v[0].variant.dynamic_batching)
    base, batched = summarise(base_cells)[0], summarise(batched_cells)[0]
    line = changed_step_line("cnn", batched, base)
    batches = statistics.median(c.steps["cnn"].mean_batch_size for c in batched_cells)
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
        assert ("exceed it by" in line) == (
            "parts can exceed the whole" in line or "more than read timing gives" in line
        )


def test_a_bls_models_slower_executions_are_its_calls_waiting_not_contention() -> None:
    """Issue 36 audit: the BLS model's count=2 row said "the instances contend for the cores:
    an execution took 76,168 µs (was 38,027)" while 25 ms of the rise was the BLS model
    waiting in `cnn`'s queue (38 -> 25,037 µs). Its executions include its calls: the called
    model whose queue grew is named instead."""
    from tritonlab.report.run_data import load_run

    run = load_run(EXAMPLES / "resnet18_pipeline_bls")
    rows = [r for a in run.analyses for r in a.reports if r.summary.variant.instance_count == 2]
    assert rows
    for row in rows:
        text = " ".join(f.text for f in row.findings)
        assert "contend for the cores" not in text
        assert "its executions include its calls, and they waited on them" in text
        assert "`cnn`'s queue rose from" in text


def test_in_process_ceilings_say_where_the_server_ran() -> None:
    """Issue 36 audit: the CNN's log set a 1-core server against in-process ceilings and a
    "1.81x faster in-process" speedup measured with both of the machine's cores. Under the CPU
    split the efficiency section says so and marks the rows whose ceiling needs more cores
    than the server had; the threads row says its threads shared the server's core."""
    from tritonlab.report.efficiency_text import efficiency_section
    from tritonlab.report.run_data import load_run, split_cores

    run = load_run(EXAMPLES / "resnet18_pipeline_cnn")
    cores = split_cores(run.manifest)
    assert cores == (1, 2)
    text = "\n".join(efficiency_section(run.efficiencies, run.summaries, cores))
    assert "the server ran on 1 of them (the CPU split)" in text
    marked = [ln for ln in text.splitlines() if "2 cores, the server had 1" in ln]
    assert {ln.split(" | ")[0] for ln in marked} == {
        "| no batching, count=2",
        "| no batching, count=1, 2 ORT threads",
    }
    threads = _finding(run, "threads-effect")
    assert (
        "in-process (with the machine's 2 cores); the server ran on 1 of the machine's 2" in threads
    )
    assert "so its 2 threads shared that core" in threads
    plain = "\n".join(efficiency_section(run.efficiencies, run.summaries, None))
    assert "CPU split" not in plain and "the server had" not in plain


def test_queue_growth_is_worded_by_its_size_and_read_at_one_client() -> None:
    """Issue 36 audit: a 72% rise was called "does not grow", and a gRPC point at concurrency
    16 was set against an HTTP one at 32. Growth is read at the highest load's protocol and
    client batch only, and a rise under twofold says so."""
    from tritonlab.explanation.steps import QueueGrowth, StepsAtLoad, StepTime, queue_growth
    from tritonlab.report.steps_section import _growth_word

    assert _growth_word(QueueGrowth("p", 16, 32, 35_637.0, 61_357.0)) == (
        "rises, less than twofold,"
    )
    assert _growth_word(QueueGrowth("p", 16, 32, 100.0, 400.0)) == "grows"
    assert _growth_word(QueueGrowth("p", 16, 32, 6_063.0, 5_880.0)) == "does not grow"

    def row(key: str, conc: int, queue: float) -> StepsAtLoad:
        return StepsAtLoad("v", key, conc, 1, (StepTime("cnn", 1.0, queue, 10.0, 1.0, 1.0),))

    table = [
        row("grpc_b1_c8", 8, 60_000.0),
        row("grpc_b1_c16", 16, 185_000.0),
        row("http_b1_c16", 16, 186_000.0),
        row("http_b1_c32", 32, 600_000.0),
    ]
    (growth,) = queue_growth(table, "v")
    assert (growth.low_concurrency, growth.low_queue_us) == (16, 186_000.0)  # HTTP only
    assert queue_growth([row("grpc_b1_c8", 8, 1.0), row("http_b1_c32", 32, 9.0)], "v") == []


def test_a_threads_row_without_a_cost_model_says_the_threads_shared_the_servers_core() -> None:
    """Issue 36 audit: the ensemble's 2-threads row ("lower (-6%) ... avoid") never said the
    server had one core for its two threads; nor did the cost model, which predicted the
    execution with a speedup timed on two cores."""
    from tritonlab.report.run_data import load_run

    run = load_run(EXAMPLES / "resnet18_pipeline")
    assert run.cost_model is None
    text = _finding(run, "threads-effect")
    assert "the server ran on 1 of the machine's 2 cores (the CPU split)" in text
    cnn = load_run(EXAMPLES / "resnet18_pipeline_cnn")
    model = cnn.cost_model
    assert model is not None and model.cores == 1 and model.speedup(2) > 1.5
    assert model.served_speedup(2) == model.speedup(1) == 1.0
