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
    assert "an execution of step `cnn` took 76,058 µs (was 37,711; higher (+101%" in pipeline
    assert "an execution took" not in pipeline
    alone = (logs / "resnet18_pipeline_cnn" / "docs" / "experiment_log.md").read_text()
    assert "inferences took 56,232 µs" in alone  # the CNN served alone: no step to name
    assert "execution of step `" not in alone


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


def _tput(change: float, low: float, high: float, word: str) -> object:
    from tritonlab.stats.verdicts import Verdict, Word

    return Verdict("throughput", Word(word), change, 100.0, 104.0, "paired", low, high, 10)


def test_saturation_says_no_gain_only_where_the_interval_rules_one_out() -> None:
    """Audit 26 (at 1de98c6): "no throughput gain ... adds latency, not throughput" said of
    +4%, CI -0.2% to +13%. Both sides: an interval under +5% keeps the words; one reaching
    past it says the gain is not shown."""
    from tritonlab.decisions.recommend_records import Saturation
    from tritonlab.report.recommend_summary_text import saturation_text
    from tritonlab.stats.config_key import ConfigKey

    key = ConfigKey("baseline", "grpc", 1)
    wide = Saturation(key, 8, 16, 157.0, 1063.0, _tput(4.1, -0.2, 12.9, "no clear difference"))  # type: ignore[arg-type]
    text = saturation_text(wide)
    assert "with no clear throughput gain" in text and "the interval allows up to +13%" in text
    assert "not throughput" not in text
    tight = Saturation(key, 4, 8, 1121.0, 2827.0, _tput(-1.0, -6.0, 4.0, "no clear difference"))  # type: ignore[arg-type]
    assert "adds latency, not throughput" in saturation_text(tight)


def test_a_knee_whose_interval_spans_the_threshold_is_not_settled() -> None:
    """Audit 26: knees chosen on the estimate (+8.7% per doubling, CI +4.1% to +20.7%) under
    "no higher level clearly beats it". The next-level note says when the interval spans the
    rule's 10% per doubling, and only then."""
    log = (ROOT / "examples" / "simple_mlp_sweep_blocks" / "docs" / "experiment_log.md").read_text()
    row = next(line for line in log.splitlines() if line.startswith("| baseline/grpc/b1 | 1 |"))
    assert "(CI +4.1% to +20.7% per doubling, which spans the rule's 10%" in row
    settled = [line for line in log.splitlines() if line.startswith("| batch_0us/grpc/b1 | 16 |")]
    assert settled and "spans the rule" not in settled[0]


def test_the_live_gates_aa_line_carries_its_p99_misreads() -> None:
    """Audit 28 (at 1de98c6): the gate's A/A line gave throughput's undecided checks only; one
    A/A check's p99 read +4.8% (CI +0.3% to +10.3%). Both sides, from crafted checks."""
    report = load_script("benchmarks/calibration_report.py")
    page = load_script("benchmarks/calibration_page.py")

    def check(p99: str, ci: list[float]) -> dict[str, object]:
        verdict = {"change_pct": sum(ci) / 2, "ci95_change_pct": ci}
        return {
            "effect_pct": 0,
            "iterations": 0,
            "exit_status": 0 if p99 == "pass" else 3,
            "throughput_outcome": "pass",
            "latency_p99_outcome": p99,
            "wall_s": 60.0,
            "verdicts": [{"figure": "latency_p99", "verdict": verdict}],
        }

    apart = report.summarise_gate([check("undecided", [0.3, 10.3]), check("pass", [-3.0, 4.0])], {})
    assert (apart["aa_p99_undecided"], apart["aa_p99_regressions"]) == (1, 0)
    said = page._p99_misreads(apart)
    assert said.startswith("; p99 called a regression in 0, undecided in 1 (with an interval")
    assert "+5.3% (CI +0.3% to +10.3%)" in said
    quiet = report.summarise_gate([check("pass", [-3.0, 4.0])], {})
    assert page._p99_misreads(quiet) == "; p99 called a regression in 0, undecided in 0"
    assert (
        "p99 called a regression in 0, undecided in 1"
        in (ROOT / "benchmarks" / "results" / "calibration.md").read_text()
    )


def test_the_noise_pages_mean_offset_carries_its_interval() -> None:
    """Audit 28: "copy vs baseline (mean)" printed -3.3% bare where its 95% t-interval over the
    24 pairs is -10.0% to +3.8%."""
    bench = load_script("benchmarks/noise_sources.py")
    text = bench.copy_vs_baseline({"pairs": 24, "log_ratio_mean": -0.0335, "log_ratio_sd": 0.168})
    assert text.startswith("-3.3% (95% CI -") and text.endswith("+3.8%)")
    page = (ROOT / "benchmarks" / "results" / "noise_sources.md").read_text()
    assert "| -3.3% (95% CI -10.0% to +3.8%) |" in page


def test_the_demo_targets_count_controls_by_their_interval() -> None:
    """Audit 27 (at 1de98c6): 'the A/A control "no clear difference" within ±5% (2 of 3 runs)'
    counted estimates (+2.4%, -2.9%) whose intervals reached past ±5%."""
    text = (ROOT / "docs" / "results.md").read_text()
    assert 'the A/A control "no clear difference" with its interval within ±5% (0 of 3 runs' in text
    assert "its estimate within it in 2): missed." in text


def test_a_pick_at_the_load_generators_limit_carries_that_doubt(tmp_path: Path) -> None:
    """Audit 27: the cache sweep's pick and runner-up ran with perf_analyzer at 0.93 and 0.92
    of its one core (their rows say load-generator-bound), yet the pick paragraph, summary and
    docs/results.md said only "re-measure with more repeats". Both sides: the cache run carries
    the caveat; a sweep whose picks left the load generator room does not."""
    cache = (ROOT / "examples" / "simple_mlp_cache" / "docs" / "experiment_log.md").read_text()
    assert (
        "Caveat: at this point perf_analyzer used 0.94 of its own 1 core (load-generator-bound)"
        in cache
    )
    assert "the runner-up was too (0.93), so more repeats may not separate them" in cache
    assert (
        "Caveat: at the throughput-first pick perf_analyzer used 0.94 of its own 1 core"
        in (ROOT / "docs" / "results.md").read_text()
    )
    blocks = (
        ROOT / "examples" / "simple_mlp_sweep_blocks" / "docs" / "experiment_log.md"
    ).read_text()
    assert (
        "load-generator-bound)" not in blocks.split("## Recommendations", 1)[-1].split("##", 1)[0]
    )


def test_contention_is_not_named_from_a_prediction_the_model_misses() -> None:
    """Audit 27: "the instances contend for the cores: an execution of 2.4 inferences took 745
    µs where the cost model predicts 513 µs", in a row whose model missed the reference too.
    The prediction is evidence only where the model meets the reference (the CNN's x2 row,
    its server's one core full); the sweep's row names no contention."""
    sweep = (ROOT / "examples" / "simple_mlp_sweep" / "docs" / "experiment_log.md").read_text()
    assert "where the cost model predicts 513 µs" not in sweep
    cnn = (ROOT / "examples" / "resnet18_pipeline_cnn" / "docs" / "experiment_log.md").read_text()
    assert (
        "the 2 instances take turns on the server's 1 core: an execution of 1.0 inferences took "
        "56,232 µs where the cost model predicts 26,751 µs, the other instances' turns included, "
        "so it does not by itself show extra work (the server used 0.99 of the server's 1 core)"
    ) in cnn  # more instances than cores: an execution's time holds the others' turns (audit 65)


def test_the_engines_side_by_side_says_their_stopping_rules_differ() -> None:
    """Audit 27 (borderline): the side-by-side did not say the engines ran under different
    extra-round budgets and round limits; computed from the stored runs, and only where they
    differ."""
    import copy
    import json

    bench = load_script("benchmarks/resolution.py")
    report = json.loads((ROOT / "benchmarks" / "results" / "resolution.json").read_text())
    said = bench._rules_apart(report)
    assert said.startswith(" The two ran under different stopping rules: the block engine up to 40")
    same = copy.deepcopy(report)
    for r in same["runs"]:
        r["stopping"]["budget_s"], r["stopping"]["max_rounds"] = 60.0, 5
    assert bench._rules_apart(same) == ""


def test_the_gate_table_says_when_and_at_which_commit_each_row_ran() -> None:
    """Audit 31 (note): the gate's median-time column mixed checks of two rounds and commits
    (the 940-turn plant two hours later, at 38ed983). Each row says when and at which commit."""
    page = load_script("benchmarks/calibration_page.py")
    report = load_script("benchmarks/calibration_report.py")
    when = report._when(
        [
            {"date_utc": "2026-12-06 16:10", "commit": "88e6f66"},
            {"date_utc": "2026-12-06 16:57", "commit": "7560dbd"},
        ]
    )
    assert page._measured(when, bare=True) == "2026-12-06 16:10 to 16:57; 7560dbd, 88e6f66"
    assert page._measured(None) == ""
    text = (ROOT / "benchmarks" / "results" / "calibration.md").read_text()
    assert "| 53 s | 2026-12-06 18:49 to 18:57; 38ed983 |" in text


def test_a_table_note_names_no_cause_its_row_withholds() -> None:
    """Audit 29 (at 9f36c36): the CNN's table said "compute-bound: batching buys little" where
    its row named no cause (the cost model missed the point). Both sides: the CNN's note says
    no cause; the ResNet-18-shaped CNN, whose model meets the point, keeps the cause."""
    examples = ROOT / "examples"
    cnn = (examples / "resnet18_pipeline_cnn" / "README.md").read_text()
    assert "batching bought little (no cause named)" in cnn and "compute-bound" not in cnn
    log = (examples / "resnet18_pipeline_cnn" / "docs" / "experiment_log.md").read_text()
    assert "compute-bound: batching buys little" not in log
    fits = (examples / "resnet18_cnn" / "docs" / "experiment_log.md").read_text()
    assert "compute-bound: batching buys little" in fits


def test_a_pages_mean_batch_says_when_triton_seldom_formed_it() -> None:
    """Audit 29: docs/results.md gave the CNN's "mean batch 4.0" where 51% of executions held
    1 and 49% held 7 (its log says so). Both sides: that row says it is a mean of sizes 1 and
    7; the demo's batching rows, whose batches sat at their mean, do not."""
    text = (ROOT / "docs" / "results.md").read_text()
    cnn = text.split("## The pipeline's CNN step alone", 1)[1].split("\n## ", 1)[0]
    assert "| 4.0 (a mean of sizes 1 and 7) |" in cnn
    demo = text.split("## The seed's comparison on the demo MLP, as", 1)[1].split("\n## ", 1)[0]
    assert "(a mean of sizes" not in demo


def test_the_cnn_alone_is_a_separate_run_not_the_pipeline_less_its_steps() -> None:
    """Audit 29: "the CNN ... served on its own: what the steps around it add" invited
    subtracting two separate runs whose requests differ (FP32 tensors against UINT8 frames)."""
    text = (ROOT / "docs" / "results.md").read_text()
    assert "what the steps around it add" not in text
    assert (
        'A separate run from "The built-in pipeline as an ensemble": model `cnn` sent `image` '
        "(FP32 [3, 224, 224]), where that run's `pipeline` was sent `IMAGE` (UINT8 [240, 320, 3])"
    ) in text


def test_an_engine_rows_split_is_the_models_where_it_misses_the_points() -> None:
    """Audit 30 (at 9f36c36): the openvino row named the fixed cost as "what the engine change
    moved" from the in-process fit, at one batch size, while the cost model missed both rows'
    queue term by over 25%."""
    log = (ROOT / "examples" / "simple_mlp_backends" / "docs" / "experiment_log.md").read_text()
    assert (
        "by the in-process fit, the fixed cost per execution is what the engine change moved" in log
    )
    assert (
        "the cost model misses this point and the reference by more than 25% in a term (see its "
        "section), so take the split as the model's, not as measured"
    ) in log


def test_a_spread_of_batch_sizes_is_not_called_a_mean_of_two() -> None:
    """Audit 33 (at 2115539, wrong): "4.3 (a mean of sizes 1 and 2)" for executions of sizes 1
    to 31. Two sizes are named only where they hold most executions (the CNN's 1 and 7); a
    spread is given as its range and most common size."""
    text = (ROOT / "docs" / "results.md").read_text()
    assert "(a mean of sizes 1 and 2)" not in text
    assert "4.3 (a mean over sizes 1 to 31, most often 1: 59%)" in text
    assert "4.0 (a mean of sizes 1 and 7)" in text


def test_slower_executions_need_a_paired_verdict_not_two_medians() -> None:
    """Audit 33: "an execution took 3,498 µs (was 2,475)" over 2 and 3 repeats, paired +29%
    (CI -55% to +268%), named contention. The clause needs the paired change to read higher and
    quotes it; the sweep's clear +49% keeps its clause."""
    trace = (
        ROOT / "examples" / "simple_mlp_trace" / "tune_concurrency" / "docs" / "experiment_log.md"
    )
    assert "an execution took 3,498 µs" not in trace.read_text()
    sweep = (
        ROOT / "examples" / "simple_mlp_sweep_blocks" / "docs" / "experiment_log.md"
    ).read_text()
    assert "an execution took 1,010 µs (was 679; higher (+49%, CI +44% to +56%)) although" in sweep
    # audit 35: the two medians are over the blocks the paired change pairs (10), not 28 and 10
    assert (
        "an execution took 1,347 µs (was 1,088; higher (+24%, CI +17% to +27%) (medians over "
        "the 10 rounds both have, the verdict's pairs))" in sweep
    )


def test_an_interval_end_next_to_a_bound_keeps_its_decimal() -> None:
    """Audit 37 (at 9c75c96): the second round's coverage, 179 of 180, printed as "95% CI
    97-100%" where its lower end is 96.9%, inside the 93-97% bound; docs/measuring.md said it
    held the truth more often than the targets allow, flat. Both sides, and the docs' figures
    against the stored round."""
    import json

    page = load_script("benchmarks/calibration_page.py")
    assert page._rate(179, 180) == "179 of 180 (99%, 95% CI 96.9-99.9%)"
    assert page._rate(0, 120) == "0 of 120 (0%, 95% CI 0-3%)"
    stored = json.loads((ROOT / "benchmarks" / "results" / "calibration.json").read_text())
    second = next(r for r in stored["earlier_rounds"] if r["folder"] == "process_term_2.8")
    covered, intervals = second["coverage"]["covered"], second["coverage"]["intervals"]
    low = _wilson_low(covered, intervals)
    assert 93.0 <= low < 97.0  # the interval reaches inside the 93-97% bound, as the docs say
    measuring = (ROOT / "docs" / "measuring.md").read_text().replace("\n", " ")
    assert "by their estimate (the 95% interval of its coverage, in the report's" in measuring
    assert "reaches just inside the bound" in measuring


def _wilson_low(k: int, n: int) -> float:
    from tritonlab.stats.calibration import wilson_interval

    return 100 * wilson_interval(k, n)[0]


def test_the_readme_names_both_model_analyzer_benchmarks() -> None:
    """Audit 37 (wrong): "the side-by-side benchmark against Model Analyzer is on the demo MLP
    only", where the pipeline's benchmark ran Model Analyzer's quick ensemble search too."""
    readme = (ROOT / "README.md").read_text().replace("\n  ", " ")
    assert "demo MLP only" not in readme
    assert (ROOT / "benchmarks" / "results" / "pipeline_vs_model_analyzer.json").exists()
    assert "and on the built-in pipeline (its quick ensemble search" in readme


def test_the_run_to_run_agreement_carries_which_runs_were_not_trusted() -> None:
    """Audit 37 (note): the agreement lines quoted estimates of disturbed and control-flagged
    runs without their doubt. Both sides: those conditions name their runs; the quiet split
    runs, all trusted, name none."""
    page = (ROOT / "benchmarks" / "results" / "demo_precision.md").read_text()
    lines = {ln.split(":", 1)[0]: ln for ln in page.splitlines() if ln.startswith("- ")}
    assert (
        "(runs 1, 2 and 3 did not call their verdicts trusted"
        in lines["- split, half a core of other work"]
    )
    assert "(run 2 did not call its verdicts trusted" in lines["- shared, quiet"]
    assert "did not call" not in lines["- split, quiet"]


def test_no_clear_change_is_no_effect_only_where_both_intervals_rule_one_out() -> None:
    """Audit 36 (at 9c75c96): "no measurable effect at this load" said of throughput -2%, CI
    -35% to +48%. Both sides: intervals within ±5% say no change beyond it; wider ones say the
    run cannot tell."""
    from tritonlab.explanation.explain import _no_clear_judgement

    tight = (
        _tput(0.5, -3.0, 4.0, "no clear difference"),
        _tput(1.0, -4.0, 4.5, "no clear difference"),
    )
    assert _no_clear_judgement(*tight).startswith("no change beyond ±5% in throughput or p99")  # type: ignore[arg-type]
    wide = (
        _tput(-2.0, -35.0, 48.0, "no clear difference"),
        _tput(1.0, -4.0, 4.5, "no clear difference"),
    )
    said = _no_clear_judgement(*wide)  # type: ignore[arg-type]
    assert said == (
        "no clear change at this load, but the intervals still allow one (throughput CI -35% to "
        "+48%): this run cannot tell whether the change has an effect here"
    )
    for name in ("simple_mlp_sweep", "simple_mlp_cache", "simple_mlp_warmup"):
        log = (ROOT / "examples" / name / "docs" / "experiment_log.md").read_text()
        assert "no measurable effect" not in log


def test_the_resolution_pages_say_how_far_fresh_runs_agreed() -> None:
    """Audit 36: the block engine's ±4% half-widths were presented without saying two of its
    runs' intervals for one change did not overlap (+45% against +54% to +69%); the cells' times
    were in the reverse order of "block against classic"."""
    for page in (ROOT / "benchmarks" / "results" / "resolution.md", ROOT / "docs" / "results.md"):
        text = page.read_text()
        assert (
            "- simple_mlp, blocks engine: in 1 of 6 verdicts the runs' intervals did not overlap "
            "(batch_0ms_x1 throughput)"
        ) in text
        assert "(run 2 did not call its verdicts trusted" in text
    docs = (ROOT / "docs" / "results.md").read_text()
    assert (
        "150 s of extra rounds (a median cell 0.8 s), the classic up to 5 and 60 s (a median "
        "cell 7.4 s)"
    ) in docs


def test_a_served_execution_rate_says_when_instances_overlapped() -> None:
    """Audit 35 (at 9c75c96): "no batching, count=2: ... 64.52 GFLOP/s (38% of the ceiling)"
    read as a kernel at half speed where two instances shared one core and delivered as much as
    one. Both sides: the two-instance point says what they delivered together; one instance
    does not."""
    log = (ROOT / "examples" / "resnet18_pipeline_cnn" / "docs" / "experiment_log.md").read_text()
    served = log.split("Where the served executions sit", 1)[1].split("\n", 1)[0]
    x2 = (
        served.split("no batching, count=2:", 1)[1].split(";", 1)[0]
        + served.split("count=2:", 1)[1]
    )
    assert "with 2 instances one execution's rate is not the server's" in x2
    assert "together they delivered 128.18" in x2
    baseline = served.split("your configuration (no batching, count=1):", 1)[1].split(
        "; batching", 1
    )[0]
    assert "overlapped" not in baseline


def test_a_steps_queue_growth_names_its_client_and_repeats() -> None:
    """Audit 35: "`postprocess`'s queue rises, less than twofold, with load (6,523 µs at 16,
    10,034 µs at 32, one client)" was an HTTP pair resting on one cell at 32, where gRPC had five
    and grew 2.2x. The client reaching the highest load with the most repeats is used, named."""
    log = (ROOT / "examples" / "resnet18_pipeline_tune" / "docs" / "experiment_log.md").read_text()
    assert "6,523 µs at concurrency 16" not in log
    assert (
        "(6,916 µs at concurrency 16, 14,949 µs at 32, one client: grpc, client batch 1; medians "
        "of 1 and 5 repeats)"
    ) in log


def test_paired_medians_sit_beside_paired_changes() -> None:
    """Audit 38 (at e51a94c): "compute per inference fell from 310 to 158 µs (lower (-52%, CI
    -53% to -50%))": 310 was the baseline's median over 28 repeats, the change paired over 10
    blocks (329 there); "What changed: compute per inference 105 -> 255 µs" the same way."""
    from tritonlab.explanation.rule_support import paired_medians
    from tritonlab.stats.summary import Summary

    a = Summary((1.0, 2.0, 3.0, 10.0), (1, 2, 3, 4))
    b = Summary((2.0, 4.0), (3, 4))
    assert paired_medians(a, b) == (6.5, 3.0)  # over rounds 3 and 4 only
    assert paired_medians(a, a) == (a.median, a.median)
    log = (ROOT / "examples" / "simple_mlp_sweep_blocks" / "docs" / "experiment_log.md").read_text()
    assert "compute per inference fell from 329 to 158 µs" in log
    assert "compute per inference 113 -> 255 µs" in log


def test_audit_39_wording() -> None:
    """Audit 39 (at e51a94c): an unmoved figure named no cause ("so the instance count was not
    what limited this load" from CI -40% to +91%); a runner-up the verdict separated was said
    to be one more repeats may not separate; a sweep's pick at one sequence length was quoted
    beside the other lengths' tables without saying so."""
    sweep = (ROOT / "examples" / "simple_mlp_sweep" / "docs" / "experiment_log.md").read_text()
    from tritonlab.explanation.instance_clauses import unmoved_clause
    from tritonlab.stats.verdicts import NO_CLEAR, Verdict

    unmoved = Verdict("mean batch", NO_CLEAR, 1.0, 1.0, 1.0, "", -40.0, 91.0, 3)
    assert "so these figures name no cause" in unmoved_clause(unmoved, unmoved)
    # the sweep's concurrency-1 row now names the cause its figures show (audit 53): one
    # request in flight leaves an added instance nothing to run
    assert "with one request in flight the added instances had nothing to run" in sweep
    assert "the runner-up was too (1.88)." in sweep  # separated: +14%, CI +2% to +26%
    cache = (ROOT / "examples" / "simple_mlp_cache" / "docs" / "experiment_log.md").read_text()
    assert "the runner-up was too (0.93), so more repeats may not separate them" in cache
    results = (ROOT / "docs" / "results.md").read_text()
    assert "The picks are at sequence length 128 only (lengths 32, 512 were measured" in results


def test_audits_41_to_43_fixes_on_the_pages() -> None:
    """Audits 41-43 (at f30017f), each with its other side: the trace tune's window is the
    cells' 2,000 ms (the concurrency tune's 200 ms); a tie of sizes names both; perf_analyzer at
    0.02 of a core is not said to compete (at 0.62 it is); instances that did not raise compute
    per inference are not said to add fixed cost per request; a BLS row names the calls'
    slower compute; a co-loaded tune states its process term; a trace row above the trace's
    mean says so; the trace summary says how the pick kept to the trace, re-measured; the
    longer rows' p99 over the shared blocks; 59 of 60 keeps its decimal."""
    ex = ROOT / "examples"
    trace = (ex / "simple_mlp_trace" / "tune_trace" / "docs" / "experiment_log.md").read_text()
    conc = (ex / "simple_mlp_trace" / "tune_concurrency" / "docs" / "experiment_log.md").read_text()
    assert "perf_analyzer windows of 2000 ms at every load" in trace
    assert "perf_analyzer windows of 200 ms at every load" in conc
    results = (ROOT / "docs" / "results.md").read_text()
    assert "10.1 (a mean over sizes 1 to 16, most often 14 and 15: 17% each)" in results
    bert = (ex / "bert_encoder" / "docs" / "experiment_log.md").read_text()
    assert "the server had the cores nearly to itself" in bert
    assert "understate a dedicated server" not in bert
    assert "the load generator competes with the server" in conc  # perf_analyzer at 0.62
    assert "the instances split the waiting requests" not in conc
    bls = (ex / "resnet18_pipeline_bls" / "docs" / "experiment_log.md").read_text()
    assert "the calls' own compute per request rose too (`cnn` 29,332 -> 38,079 µs" in bls
    assert "hold the process term, ±1.5% on a throughput or server-side interval" in trace
    demo = (ex / "simple_mlp_demo" / "docs" / "experiment_log.md").read_text()
    # every co-loaded run says it where it says how it measured (issue 36 audit: a warm-up
    # run said so only in its error-rates line); a classic run holds no process term
    assert "hold the process term, ±1.5% on a throughput or server-side" in demo
    classic = (ex / "simple_mlp" / "docs" / "experiment_log.md").read_text()
    assert "hold the process term" not in classic
    assert "above the trace's mean by 7%: these cells offered more load than the trace" in trace
    summary = (ex / "simple_mlp_trace" / "SUMMARY.md").read_text()
    assert "measured again in `compare/`, its cells achieved a median 100%" in summary
    assert "in 4 of 6 (lowest 889.7 req/s)" in summary
    assert "preferred [8] 6,464 infer/s, p99 3,433 µs (all: 7,283 infer/s, 2,140 µs)" in results
    page = load_script("benchmarks/calibration_page.py")
    assert page._rate(59, 60) == "59 of 60 (98%, 95% CI 91.1-99.7%)"
    assert page._rate(20, 20) == "20 of 20 (100%, 95% CI 84-100%)"


def test_a_server_change_the_client_intervals_cannot_rule_out_is_not_said_to_be_hidden() -> None:
    """Audit 45 (at 735fe00): "a change inside the server that did not show in the
    client-side figures beyond the noise" where throughput read +35% (CI -22% to +135%). Wide
    client intervals say the run cannot tell; the words "did not show" need both within ±5%."""
    log = (ROOT / "examples" / "simple_mlp_backends" / "docs" / "experiment_log.md").read_text()
    assert "beyond the noise" not in log
    assert "whether it showed at the client this run cannot tell (throughput CI" in log
    # the other side: the CNN's row whose client intervals lie within ±5% keeps "did not show"
    cnn = (ROOT / "examples" / "resnet18_pipeline_cnn" / "docs" / "experiment_log.md").read_text()
    assert (
        "a change inside the server that did not show in the client-side figures beyond ±5%" in cnn
    )
