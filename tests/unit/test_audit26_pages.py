"""Issue 36, twenty-sixth to twenty-eighth audits' predecessors (at 6b8f0fe): a results
section that repeats another's comparison says which conditions differ (machine, cores, CPU
placement, engine), computed from both manifests; every section states its CPU placement."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]


def test_a_repeated_comparison_names_what_differs_and_an_identical_one_nothing() -> None:
    pages = load_script("scripts/results_pages.py")
    demo, classic, rerun = (
        pages._run(f) for f in ("simple_mlp_demo", "simple_mlp", "simple_mlp_rerun")
    )
    note = pages.differences(classic, demo, "the demo")
    assert note.startswith('Not the same measurement as "the demo" (above); it differs in machine:')
    assert "CPU placement: the server and perf_analyzer sharing every core" in note
    assert "engine: classic here, blocks there" in note
    assert pages.differences(rerun, classic, "the classic run") == ""  # same machine and setup
    # the placement alone differing is named
    shared = dataclasses.replace(demo, manifest=dataclasses.replace(demo.manifest, cpu_split=None))
    assert pages.differences(shared, demo, "x").startswith(
        'Not the same measurement as "x" (above); it differs in CPU placement:'
    )


def test_every_section_states_its_placement() -> None:
    text = (ROOT / "docs" / "results.md").read_text()
    measured = [
        line for line in text.splitlines() if line.startswith("Measured 2026-") and "engine" in line
    ]
    assert measured
    for line in measured:
        if "UTC" in line:  # a benchmark's header, not an example's conditions
            continue
        assert "perf_analyzer on CPU" in line or "sharing every core" in line, line
    assert "Not the same measurement as \"The seed's comparison on the demo MLP" in text


def test_a_contender_at_another_load_is_said_to_be_another_operating_point() -> None:
    """Audit at 6b8f0fe: the throughput tune's undecided contender at concurrency 32 was listed
    beside its pick at 128 as if the two configurations were compared at one load."""
    notes = load_script("benchmarks/vs_model_analyzer/race_notes.py")
    leader = "7 instances, grpc at concurrency 128"
    note = notes.operating_points_note(
        leader, ["6 instances, grpc at concurrency 128", "4 instances, grpc at concurrency 32"]
    )
    assert note == (
        " Of these, 4 instances, grpc at concurrency 32 ran at another client load than the "
        "leader (concurrency 128): that verdict compares operating points, each configuration "
        "at its own load, not configurations at one load."
    )
    assert notes.operating_points_note(leader, ["6 instances, grpc at concurrency 128"]) == ""
    page = (ROOT / "benchmarks" / "results" / "vs_model_analyzer.md").read_text()
    assert "grpc at concurrency 32 ran at another client load than the leader" in page


def test_the_verdicts_a_stopping_rule_left_open_are_named(tmp_path: Path) -> None:
    """Audit at 6b8f0fe: "the limit of 6 rounds was reached with 1 verdict(s) still open"
    named none. Read again from the cells by the rule's own function, they are named where
    that reading finds the count the rule stored, and not where it does not."""
    import shutil

    from tritonlab.report.run_data import load_run
    from tritonlab.report.still_open import reason_text, still_open

    run_dir = tmp_path / "run"
    shutil.copytree(ROOT / "examples" / "resnet18_pipeline_cnn", run_dir)
    run = load_run(run_dir)
    assert run.stopping is not None and "with 1 verdict(s) still open" in run.stopping.reason
    named = still_open(run, 2)
    assert len(named) == 1 and named[0].startswith("A/A control baseline_aa vs baseline:")
    said = reason_text(run.stopping.reason, named)
    assert said.endswith(f"with 1 verdict still open ({named[0]})")
    # a count the cells do not bear out names nothing, and the reason stays as stored
    other = dataclasses.replace(
        run,
        stopping=dataclasses.replace(
            run.stopping, reason="the limit of 6 rounds was reached with 2 verdict(s) still open"
        ),
    )
    assert still_open(other, 2) == []
    assert reason_text(other.stopping.reason, []) == other.stopping.reason  # type: ignore[union-attr]
    log = (ROOT / "examples" / "resnet18_pipeline_cnn" / "docs" / "experiment_log.md").read_text()
    assert "verdict(s) still open" not in log and "with 1 verdict still open (A/A control" in log


def test_a_step_s_execution_time_is_named_as_the_step_s() -> None:
    """Audit at 6b8f0fe: a pipeline row's "Why" quoted step `cnn`'s execution time as "an
    execution took": the clause names the step where the figures are a step's, and only there."""
    logs = ROOT / "examples"
    pipeline = (logs / "resnet18_pipeline" / "docs" / "experiment_log.md").read_text()
    assert "an execution of step `cnn` took 76,058 µs (was 37,711)" in pipeline
    assert "an execution took" not in pipeline
    sweep = (logs / "simple_mlp_sweep" / "docs" / "experiment_log.md").read_text()
    assert "an execution took" in sweep or " inferences took " in sweep
    assert "of step `" not in sweep


def test_a_batching_points_compute_each_is_said_to_be_per_batch() -> None:
    """Audit at 6b8f0fe: a tune path's "(434,363 µs compute each)" at a batching point is
    Triton's compute per request, which under batching is a batch's whole execution. Stored
    reasons are kept verbatim and the caption says so for their rows only; a new search words
    it so itself."""
    from tritonlab.decisions.tune_record import TuneRecord
    from tritonlab.report.tune_section import batch_compute_note
    from tritonlab.result_files import load_record

    tune = load_record(
        ROOT / "examples" / "resnet18_cnn_tune" / "results" / "tune.json", TuneRecord
    )
    assert tune is not None
    note = batch_compute_note(tune)
    rows = [
        i
        for i, s in enumerate(tune.steps, 1)
        if "µs compute each)" in s.reason and s.configuration.batching
    ]
    assert rows and note.startswith(f" In row{'s' if len(rows) > 1 else ''} {rows[0]}")
    unbatched = dataclasses.replace(
        tune, steps=tuple(s for s in tune.steps if not s.configuration.batching)
    )
    assert batch_compute_note(unbatched) == ""
    search = (ROOT / "src" / "tritonlab" / "decisions" / "search.py").read_text()
    assert "compute per request, under batching its batch's whole execution" in search


def test_the_pages_say_how_many_cells_the_figures_rest_on() -> None:
    """Audit at 6b8f0fe: "10 planned rounds" where the demo's figures rest on 38 blocks."""
    from tritonlab.report.conditions_text import per_configuration

    pages = load_script("scripts/results_pages.py")
    demo = pages._run("simple_mlp_demo")
    measured = per_configuration(demo.cells)
    assert measured.startswith(str(max(c.repeat for c in demo.cells)))
    said = f"{demo.manifest.plan.repeats} planned rounds ({measured} measured)"
    assert said in (ROOT / "README.md").read_text()
    assert said in (ROOT / "docs" / "results.md").read_text()
