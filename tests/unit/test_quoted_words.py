"""Issue 36, the seventh and eighth independent audits: words a log or page set around figures
that the figures did not support, each checked on both sides (the case that must say it, and
the case that must not)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tritonlab.report.conditions_text import sent_lines, uneven_repeats_note
from tritonlab.report.efficiency_text import best_line
from tritonlab.report.page_tables import baseline_figures, compact_table
from tritonlab.report.recommend_section import recommendations_section
from tritonlab.report.recommend_summary_text import summary_line
from tritonlab.report.run_data import load_run
from tritonlab.report.steps_section import changed_step_line
from tritonlab.report.tune_section import tie_notes, tune_section
from tritonlab.stats.noise_floor import within_noise_floor
from tritonlab.stats.summary import Summary, column_digits
from tritonlab.stats.verdicts import compare

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _log(name: str) -> str:
    return (EXAMPLES / name / "docs" / "experiment_log.md").read_text()


def test_a_tune_pick_and_runner_up_of_one_process_carry_no_process_term() -> None:
    """Audit: the pick and runner-up were one server configuration (one process) at two client
    loads, yet the log widened their verdict by each configuration's process term."""
    run = load_run(EXAMPLES / "resnet18_pipeline_tune")
    tune = run.tune
    assert tune is not None and tune.pick is not None and tune.runner_up is not None
    assert tune.pick.variant == tune.runner_up.variant
    text = "\n".join(tune_section(tune, co_loaded=True))
    assert "no clear difference (+1%, 95% CI -1% to +3%)." in text
    assert "process term" not in text.split("Runner-up against the pick")[1].split("\n")[0]
    # two configurations (two processes): the term is added
    other = dataclasses.replace(tune.runner_up, variant="x2_dyn_m16_t1")
    two = "\n".join(tune_section(dataclasses.replace(tune, runner_up=other), co_loaded=True))
    assert "(with each configuration's process term, which the search stored it without)" in two


def test_one_configuration_at_two_loads_is_not_called_either_would_serve() -> None:
    """Audit: "either would serve as well" for one configuration at c16 and c32, whose p99
    repeats were 511-530 ms against 1,179-1,231 ms."""
    tune = load_run(EXAMPLES / "resnet18_pipeline_tune").tune
    assert tune is not None and tune.runner_up is not None
    notes = " ".join(tie_notes(tune))
    assert "one server configuration at two client loads" in notes
    assert "every p99 repeat of the pick (510.87–529.71 ms) was below every one of the " in notes
    assert "either would serve" not in notes
    other = dataclasses.replace(tune.runner_up, variant="x2_dyn_m16_t1")
    apart = " ".join(tie_notes(dataclasses.replace(tune, runner_up=other)))
    assert "on throughput either would serve as well as this run can tell" in apart


def test_a_tunes_uneven_rows_pair_by_repeat_number() -> None:
    """Audit: a tune's table note said "paired by block" where its rows pair by repeat."""
    assert (
        "paired by repeat number, each configuration's first repeat included"
        in uneven_repeats_note([5, 1], tune=True)
    )
    assert "paired by block" in uneven_repeats_note([10, 28])
    assert "search-phase" not in uneven_repeats_note([10, 28])
    assert uneven_repeats_note([5, 5], tune=True) == ""


def test_a_cost_model_split_whose_batch_1_side_it_misses_says_so() -> None:
    """Audit: "The cost model says why: an execution of one request costs about 365 µs" where
    the model missed the baseline point (484 µs measured, 1.33x) the batch-1 side rests on."""
    text = _log("simple_mlp_demo")
    assert "The cost model says why" not in text
    assert "it misses the reference, the batch-1 side by more than 25%" in text


def test_a_mean_batch_from_two_sizes_is_called_a_mean() -> None:
    """Audit: "Triton formed batches of 4.0" where every execution held 1 or 7 requests."""
    text = _log("resnet18_pipeline_cnn")
    assert "the sizes formed most often were 1 (51%) and 7 (49%) of the executions" in text
    # a mean near the sizes formed: no note
    assert "the sizes formed most often" not in _log("simple_mlp_demo").split("## Noise")[0]


def test_a_pipeline_row_and_page_give_the_changed_steps_own_queue() -> None:
    """Audit: the ensemble's own "queued 4 µs" read as no queueing where step `cnn` queued
    245,823 µs, 82% of the latency."""
    run = load_run(EXAMPLES / "resnet18_pipeline")
    analysis = run.analyses[0]
    base = analysis.reports[0].summary
    line = changed_step_line("cnn", base, None)
    assert "queue 245,823 µs per request (82% of the measured model's mean latency)" in line
    table = compact_table(analysis, "cnn")
    assert "step `cnn` queue µs" in table[0]
    assert "| 245,823 |" in table[2]
    assert "| 4 |" in compact_table(analysis)[2]  # the measured model's own, without a step


def test_figures_side_by_side_tell_equal_and_different_medians_apart() -> None:
    """Audit: the BLS baseline "26 (25–27)" beside the ensemble's "26.2 (25.7–26.5)" (equal
    medians), and a table's "26" beside "26.6" (a +2.3% look for a +1.4% pair)."""
    a = Summary.of([25.11, 26.21, 26.91])
    b = Summary.of([25.7, 26.21, 26.5])
    assert column_digits([a]) == 0
    assert column_digits([a, b]) == 1
    assert a.text(column_digits([a, b])) == "26.2 (25.1–26.9)"
    c = Summary.of([26.0, 26.2, 26.4])
    d = Summary.of([26.5, 26.6, 26.7])
    assert column_digits([c, d]) == 1
    run = load_run(EXAMPLES / "resnet18_pipeline")
    bls = load_run(EXAMPLES / "resnet18_pipeline_bls")
    base, bls_base = run.analyses[0].reports[0].summary, bls.analyses[0].reports[0].summary
    assert baseline_figures(bls_base, [base]).startswith("26.2 (25.1–26.9) infer/s")


def test_a_baseline_pick_reads_no_verdict_against_itself() -> None:
    """Audit: "throughput: no clear difference (+0%, CI +0% to +0%)" for the baseline against
    itself."""
    run = load_run(EXAMPLES / "simple_mlp_sweep_blocks")
    recs = run.recommendations
    assert recs is not None and recs.latency_pick is not None
    assert recs.latency_pick.point.variant == "baseline"
    text = "\n".join(
        recommendations_section(recs, [r.summary for a in run.analyses for r in a.reports])
    )
    assert "No verdict against the baseline: the pick is the baseline configuration itself." in text
    assert "+0%, CI +0% to +0%" not in text
    assert "Verdicts against the baseline at the same load: throughput: higher" in text


def test_the_latency_picks_open_loop_quote_skips_a_rate_not_kept_up() -> None:
    """Audit: the closed-loop pick quoted its configuration's p99 under Poisson arrivals at
    2,705 req/s, a point excluded because perf_analyzer could not keep that rate up."""
    recs = load_run(EXAMPLES / "simple_mlp_sweep").recommendations
    assert recs is not None
    line = summary_line(recs)
    assert "under Poisson arrivals at 2,705 req/s" not in line
    assert "a higher rate, 2,705 req/s, is left out: perf_analyzer could not keep it up" in line
    blocks = load_run(EXAMPLES / "simple_mlp_sweep_blocks").recommendations
    assert blocks is not None
    assert "is left out: perf_analyzer could not keep it up" not in summary_line(blocks)


def test_a_win_inside_the_controls_interval_says_it_may_be_the_processes() -> None:
    """Audit: "a clear win" at +4% (CI +1% to +9%) where the A/A control at that load read +2%
    (CI -2% to +7%) between identical copies."""
    text = _log("simple_mlp_warmup")
    assert "but the A/A control's interval between identical copies at this load reaches" in text
    run = load_run(EXAMPLES / "simple_mlp_warmup")
    floor = next(f for f in run.noise_floors if f.load_key == "grpc_b1_c1")
    far = compare(
        "throughput", Summary.of([100.0, 101, 99, 100, 100, 101]), Summary.of([150.0] * 6)
    )
    assert far.word.value == "higher"
    assert within_noise_floor([far], floor) == ""
    assert within_noise_floor([far], None) == ""


def test_a_judgement_names_the_row_it_is_judged_against() -> None:
    """Audit: "a clear win at this load" against a row's parent, read as against the baseline
    where that verdict was no clear difference (+39%, CI -34% to +190%)."""
    text = _log("simple_mlp_sweep")
    assert "Judgement (against 'batching (5 ms, count=1)', the row it is explained from)" in text
    for line in text.splitlines():
        if "Judgement: " in line:
            assert "Against the baseline:" not in line  # a baseline-referenced row says none


def test_the_most_served_line_reads_every_row_and_names_the_rows_left_out() -> None:
    """Audit: a lead over the next median only, where a like-for-like row was not separated
    (+6%, CI -18% to +36%); and a table that silently left out the cache configurations."""
    backends = load_run(EXAMPLES / "resnet18_cnn_backends")
    line = best_line(backends.efficiencies, backends.summaries)
    assert "by the paired verdicts not separated from 'batching (0 ms, count=1), openvino f32'" in (
        line
    )
    cache = load_run(EXAMPLES / "simple_mlp_cache")
    line = best_line(cache.efficiencies, cache.summaries)
    assert "throughput higher than every other row at its load" in line
    assert "Not in this table" in line and "response cache'" in line
    demo = load_run(EXAMPLES / "simple_mlp_demo")
    assert "Not in this table" not in best_line(demo.efficiencies, demo.summaries)


def test_load_points_at_several_sequence_lengths_are_stated() -> None:
    """Audit: the Conditions stated "[batch, 128]" for a run whose loads also sent 32 and 512."""
    run = load_run(EXAMPLES / "bert_encoder_sweep")
    keys = [a.load_key for a in run.analyses]
    lines = "\n".join(sent_lines(run.manifest, keys))
    assert "the load points sent 32, 128, 512 in the dynamic dims" in lines
    assert "Sequence lengths" not in "\n".join(sent_lines(run.manifest, keys[:1]))
    assert "sequence length 32, 128, 512" in _log("bert_encoder_sweep")


def test_the_method_doc_states_the_family_wise_control_rule() -> None:
    """Audit: docs/measuring.md said any control "higher" or "lower" makes the run untrusted,
    against its own trust table (controls judged together; one flag may be within chance)."""
    text = (ROOT / "docs" / "measuring.md").read_text()
    assert 'If the control reads "higher" or\n   "lower", the log says' not in text
    assert "Controls are judged together" in text
    assert '"control flag within chance"' in text


def test_the_baseline_beside_a_ranked_pick_reads_the_same_blocks() -> None:
    """Audit: a pick's medians over the 10 blocks every point has beside the baseline's over
    all 28 repeats (7,176 / 2,414 reads +197% where the paired verdict is +212%)."""
    text = _log("simple_mlp_sweep_blocks")
    assert "Against the baseline at the same load (2,325 infer/s, p99 8,082 µs, medians over " in (
        text
    )
    assert "the same 10 blocks)" in text
    assert "medians over the same" not in _log("simple_mlp_sweep")


def test_a_latency_pick_says_how_many_repeats_fell_short_of_the_target() -> None:
    """Audit: "its lowest repeat was under the target" where 4 of the 10 ranked blocks were."""
    blocks = load_run(EXAMPLES / "simple_mlp_sweep_blocks").recommendations
    assert blocks is not None and blocks.latency_pick is not None
    assert (blocks.latency_pick.under_target_ranked, blocks.latency_pick.under_target_repeats) == (
        4,
        5,
    )
    assert "4 of those 10 blocks (5 of its 27 repeats) were under the target" in summary_line(
        blocks
    )
    classic = load_run(EXAMPLES / "simple_mlp_sweep").recommendations
    assert classic is not None
    assert "1 of its 3 repeats was under the target (the lowest 1,789)" in summary_line(classic)


def test_a_runner_up_of_the_picks_own_configuration_is_called_so() -> None:
    """Audit: "not the two configurations at one load" where the runner-up was the pick's own
    configuration over another protocol and concurrency."""
    text = _log("simple_mlp_sweep")
    assert "(one server configuration at two client loads, grpc, batch 1, concurrency 16 and " in (
        text
    )
    assert "this compares operating points, not the two configurations at one load" in text


def test_a_sweep_at_several_lengths_counts_what_it_measured_and_ranked() -> None:
    """Audit: "from 3 measured operating points" where 9 were measured at three lengths."""
    text = _log("bert_encoder_sweep")
    assert "From 9 measured operating points, the 3 at the reference sequence length 128 " in (text)
    assert "From 42 measured operating points (" in _log("simple_mlp_sweep_blocks")


def test_a_measured_cell_without_a_p99_is_not_called_unmeasured() -> None:
    """Audit: "not measured" for a cell measured once, unstable, with no p99."""
    readme = (EXAMPLES / "resnet18_cnn_tune" / "README.md").read_text()
    assert "**6 x, batching, max 64, 1 thr**: 17 infer/s and no p99 (1 cell, 1 unstable)" in readme
    assert "not measured" not in readme


def test_the_pages_quote_the_noise_floor_doubt_with_the_verdicts() -> None:
    """Audit: the warm-up's +4% quoted on the README and docs/results.md without the log's
    note that the A/A control's interval reaches it."""
    readme = (EXAMPLES / "simple_mlp_warmup" / "README.md").read_text()
    assert "; the A/A control's interval at this load reaches this change: tput and p99)" in readme
    demo = (EXAMPLES / "simple_mlp_demo" / "README.md").read_text()
    assert "the A/A control's interval at this load reaches" not in demo


def test_causes_the_figures_do_not_show_are_not_named() -> None:
    """Audit: "smaller batches, so each request carries more of an execution's fixed cost"
    where compute per inference doubled and batch size barely moved it; "although batches did
    not grow" where they shrank; a queue-delay trap named as the cause of a loss."""
    tune = _log("resnet18_pipeline_tune")
    assert "split the waiting requests into smaller batches" not in tune
    assert "although batches shrank" in tune
    demo = _log("simple_mlp_demo")
    assert "that explains no gain, not the loss, which goes with slower executions: compute " in (
        demo
    )


def test_the_two_in_process_figures_say_what_each_holds() -> None:
    """Audit: "12 µs the model itself (in-process fit)" beside "13.3 µs fixed + 3.3 µs per
    sample" in one log, the difference (the null model's call) unsaid."""
    text = _log("simple_mlp_sweep_blocks")
    assert "the in-process fit less the null model's own in-process call" in text
    assert "the empty call a null model also makes included" in text


def test_a_results_table_carries_the_noise_floor_doubt_per_figure() -> None:
    """Audit: docs/results.md quoted the warm-up's +4% (CI +1% to +9%) bare, where the log
    said the A/A control's interval at that load reaches it."""
    from tritonlab.explanation.explain import FLOOR_NOTE

    run = load_run(EXAMPLES / "simple_mlp_warmup")
    at_c1 = next(a for a in run.analyses if a.load_key == "grpc_b1_c1")
    row = compact_table(at_c1)[3]
    assert row.count(f"({FLOOR_NOTE})") == 2
    at_c8 = next(a for a in run.analyses if a.load_key == "grpc_b1_c8")
    assert FLOOR_NOTE not in "\n".join(compact_table(at_c8))


def test_the_docs_quote_the_encoders_threads_verdicts_as_measured() -> None:
    """Audit: docs/tune.md said the sweep found 2 x 1 "clearly ahead" of 1 x 2; it was at
    lengths 32 and 128, not separated at 512, in an unchecked run."""
    from tritonlab.stats.aggregate import compare_figure

    run = load_run(EXAMPLES / "bert_encoder_sweep")
    words = {}
    for analysis in run.analyses:
        by = {r.summary.variant.name: r.summary for r in analysis.reports}
        verdict = compare_figure("throughput", "throughput", by["nobatch_t2"], by["nobatch_x2"])
        words[analysis.load_key.rsplit("_s", 1)[1]] = verdict.word.value
    assert words == {"32": "higher", "128": "higher", "512": "no clear difference"}
    assert run.trust.state == "unchecked"
    doc = (ROOT / "docs" / "tune.md").read_text()
    assert "2 x 1 ahead of 1 x 2 at sequence lengths 32 and 128" in doc
    assert "and not separated at 512, in a run no A/A control or interference monitor" in doc
    assert "clearly ahead" not in doc


def test_the_readme_states_the_family_wise_control_rule() -> None:
    """Audit: the README said any control reading higher or lower makes a run untrusted."""
    readme = (ROOT / "README.md").read_text()
    assert "(a control that reads higher or lower says the run is not to be trusted)" not in readme
    assert "controls are judged together" in readme


def test_a_rows_two_figures_share_digits() -> None:
    """Audit: "26 infer/s (25–27) against 26 infer/s (25–27)" for 26.0 against 26.2."""
    text = _log("resnet18_pipeline_bls")
    assert "26.0 infer/s (24.7–26.6) against 26.2 infer/s (25.1–26.9)" in text
    assert "26 infer/s (25–27) against" not in text


def test_a_quoted_prediction_says_when_the_model_misses_the_point() -> None:
    """Audit: "The cost model predicts 1,208 -> 1,208 infer/s (... 1,276 µs per execution)"
    where the execution measured 1,908 µs, a term the model's own section lists as missed."""
    text = _log("simple_mlp_demo")
    assert "and it misses this point by more than 25% in its throughput or a term" in text
    assert "the server's 1 cores" not in text


def test_one_loads_batches_are_named_with_their_load() -> None:
    """Audit: the operators paragraph and roofline quoted one load's mean batches unnamed."""
    text = _log("simple_mlp_sweep_blocks")
    assert "batching (0 µs, count=1) at `http_b1_c8`: mean batch 4.3" in text
    assert "Where the served executions sit at load `http_b1_c8`" in text


def test_the_noise_floor_line_names_the_rows_its_interval_reaches() -> None:
    """Audit: "its verdicts can be trusted as far as this control can tell" beside rows the
    same log said the control's interval reaches."""
    text = _log("simple_mlp_sweep_blocks")
    assert (
        "can tell, except where its interval reaches a row's change: 'batching (0 µs, count=2)'"
        in text
    )


def test_the_calibration_power_is_quoted_at_the_runs_block_count() -> None:
    """Audit: "a planted drop of 3.5% was found in 17 of 20 runs" (at a median 19 blocks)
    quoted beside verdicts on 6 blocks, where 10 blocks found it in 13."""
    text = _log("resnet18_pipeline")
    assert "found in 17 of 20 runs (at their stopping point, median 19 blocks; with 10 " in text
    assert "most of this log's verdicts rest on 6 blocks" in text


def test_a_pages_quote_of_a_tune_carries_its_missing_control_and_race_rule() -> None:
    """Audit: the README and docs/results.md quoted a tune's race verdicts without "no A/A
    control was measured" or the race's stopping-rule warning its log states."""
    tune = load_run(EXAMPLES / "resnet18_pipeline_tune")
    assert tune.trust.state == "quiet" and tune.trust.controls == 0
    assert "no A/A control was measured in this run" in tune.trust.no_control_text()
    demo = load_run(EXAMPLES / "simple_mlp_demo")
    assert demo.trust.no_control_text() == ""
    readme = (ROOT / "README.md").read_text()
    assert "Note: no A/A control was measured in this run" in readme
    assert "raises the chance of a false higher or lower" in readme


def test_a_pick_from_a_tie_break_is_not_said_to_lead() -> None:
    """Audit: "the pick leads only with its search-phase cell counted" where over every repeat
    the runner-up led too (5,086 against 4,635): the pick came from the p99 tie-break."""
    text = _log("simple_mlp_trace/tune_concurrency")
    assert "and over every repeat too: the pick came from the tie-break" in text
    assert "leads only with its search-phase cell" in _log("resnet18_pipeline_tune")


def test_either_would_serve_says_when_the_budget_tells_them_apart() -> None:
    """Audit: "on p99 latency either would serve as well" where the runner-up was over the
    20 ms budget in 2 of 13 repeats and the pick in none; the p99 verdict tagged with a
    throughput process term."""
    text = _log("simple_mlp_trace/tune_trace")
    assert "the runner-up's p99 was over it in 2 of its 13 repeats and the pick's in 0" in text
    assert "process term, which the search stored it without" not in text


def test_the_most_served_line_is_a_median_lead() -> None:
    """Audit: "Most served throughput" for a row the paired estimate put 11% below another."""
    text = _log("simple_mlp_trace/compare")
    assert "Most served throughput" not in text
    assert "Highest median served throughput among this table's rows" in text


def test_a_readme_with_cache_rows_says_what_traffic_they_hold_for() -> None:
    """Audit: the cache rows' +768% quoted without "inputs that repeat"."""
    readme = (EXAMPLES / "simple_mlp_cache" / "README.md").read_text()
    assert "The response-cache rows hold only for traffic whose inputs repeat" in readme
    demo = (EXAMPLES / "simple_mlp_demo" / "README.md").read_text()
    assert "response-cache rows" not in demo


def test_the_readme_and_tune_doc_state_placement_budget_and_race_rounds_as_the_code() -> None:
    """Audit: "client and server share the cores" where the headline runs split them; a
    measuring budget stated as a guarantee (one demo measured 251.3 s of 250); the race's
    default rounds said to be 3 (12 with the block engine, tune's default)."""
    from tritonlab.experiments.adaptive_run import ROUND_MARGIN

    readme = (ROOT / "README.md").read_text()
    assert "where client and server share the cores" not in readme
    assert "the served run shares it with perf_analyzer (the log" not in readme
    assert load_run(EXAMPLES / "simple_mlp_demo").manifest.cpu_split is not None
    assert "a prediction, so a run can end a few" in readme
    assert ROUND_MARGIN == 1.1  # "a tenth to spare"
    tune_doc = (ROOT / "docs" / "tune.md").read_text()
    assert "(default 12 with the block engine, tune's default; 3 with the classic engine)" in (
        tune_doc
    )
    source = (ROOT / "src" / "tritonlab" / "pipeline" / "tune_request.py").read_text()
    assert "r.max_race_rounds or (12 if engine == ENGINE_BLOCKS else 3)" in source


def test_a_rows_medians_are_over_the_blocks_its_verdict_pairs() -> None:
    """Audit: "1,933 infer/s ... against 2,234 infer/s" (a 27-repeat median) beside "-3%, CI
    -7% to +10%" paired over 10 blocks; the quoted medians read -13.5%."""
    text = _log("simple_mlp_sweep_blocks")
    assert "1,933 infer/s (1,459–2,057) against 2,047 infer/s (1,180–2,223) (medians over the " in (
        text
    )
    assert "against 2,234 infer/s" not in text


def test_a_tune_pick_names_configurations_not_separated_at_its_load() -> None:
    """Audit: the pick read as the server configuration to deploy where max batch 8 was not
    told apart from it at the pick's own load."""
    text = _log("resnet18_pipeline_tune")
    assert (
        "At the pick's load (http_b1_c16, over the race's rounds) the pick is not separated "
        "on throughput from '1 x, batching, max 8, 1 thr' (the pick against it:"
    ) in text
    assert "the choice is the client's load, not the server's configuration" not in text


def test_the_race_note_counts_contenders_per_load() -> None:
    """Audit: "each verdict compares two operating points" where five of six verdicts were at
    the pick's own load."""
    text = _log("resnet18_cnn_tune")
    assert "grpc c16 (6 configurations), http c16 (1 configuration)" in text
    assert "the pick and the runner-up ran at one load" in text
    assert "each verdict compares two operating points" not in text


def test_an_open_loop_quote_carries_perf_analyzers_warnings() -> None:
    """Audit: a worst repeat quoted beside the latency pick from a repeat perf_analyzer warned
    was not stabilising."""
    line = summary_line(load_run(EXAMPLES / "simple_mlp_sweep").recommendations)  # type: ignore[arg-type]
    assert "(worst repeat 4,705 µs; perf_analyzer warned in 1 of its 3 repeats)" in line


def test_the_trace_summary_quotes_the_trace_tune_with_its_missing_control() -> None:
    """Audit: the trace tune quoted with no note where its log says no A/A control was
    measured."""
    summary = (EXAMPLES / "simple_mlp_trace" / "SUMMARY.md").read_text()
    line = next(x for x in summary.splitlines() if x.startswith("- **Tuned under the trace**"))
    assert "Note: no A/A control was measured in this run" in line
    assert "(no A/A control was measured in the trace tune:" in summary


def test_the_calibration_page_says_what_undecided_and_the_blocks_column_hold() -> None:
    """Audit: two A/A gate checks whose intervals excluded no change called merely
    "undecided"; a blocks column of "19" for runs that stopped at 11 to 33 blocks."""
    page = (ROOT / "benchmarks" / "results" / "calibration.md").read_text()
    assert "throughput undecided in 2 (both with an interval that excludes no change" in page
    assert "| 19 (median; runs stopped at 11-33) |" in page


def test_a_tunes_ties_at_its_load_are_read_over_the_race_rounds() -> None:
    """Audit: the ties at the pick's load left out '3 x', ahead of the pick only when paired
    over each one's search-phase cell (taken at another time); over the race's rounds
    undecided."""
    text = _log("resnet18_cnn_tune")
    line = next(x for x in text.splitlines() if x.startswith("- At the pick's load"))
    assert "'3 x, batching, max 64, 1 thr' (the pick against it: no clear difference" in line


def test_different_optima_need_a_difference_at_one_load() -> None:
    """Audit: "different optima" for picks at concurrency 16 and 1, where at concurrency 1 the
    throughput-first configuration's p99 was not separated from the latency-first one's."""
    recs = load_run(EXAMPLES / "simple_mlp_sweep_blocks").recommendations
    assert recs is not None and recs.optima_p99_same_load is not None
    assert recs.optima_p99_same_load.word.value == "no clear difference"
    line = summary_line(recs)
    assert "different optima" not in line
    assert "do not show that the two goals need different configurations" in line


def test_a_results_table_marks_open_loop_rows_left_out_or_warned() -> None:
    """Audit: docs/results.md quoted open-loop rows the log excluded (perf_analyzer could not
    keep up their rate) with no mark."""
    run = load_run(EXAMPLES / "simple_mlp_sweep_blocks")
    p80 = next(a for a in run.analyses if a.load_key == "grpc_b1_p80")
    table = "\n".join(compact_table(p80))
    assert table.count("could not keep up this rate in a repeat: left out of the picks") == 5
    closed = next(a for a in run.analyses if a.load_key == "grpc_b1_c16")
    assert "perf_analyzer" not in "\n".join(compact_table(closed))


def test_the_docs_state_the_sweeps_time_placement_and_control_counts_as_measured() -> None:
    """Audit: the demo sweep said to take ~10-15 min where the committed one measured 18.6;
    "the block-engine examples" said to split the CPUs where the warm-up run shares them; "a
    sweep's seven controls hold fourteen ... it takes three" where the demo sweep's hold ten
    (two needed); the measuring budget stated as a hard cap."""
    from scipy.stats import binom

    from tritonlab.stats.run_trust import FAMILY_FALSE_ALARM

    readme = (ROOT / "README.md").read_text()
    stored = (EXAMPLES / "simple_mlp_sweep_blocks" / "results" / "stopping.json").read_text()
    minutes = json.loads(stored)["measured_s"] / 60
    assert 15 < minutes < 25 and "(~20 min on 2 cores)" in readme
    shared = sorted(
        str(e.parents[1].relative_to(EXAMPLES))
        for e in EXAMPLES.glob("**/results/engine.json")
        if load_run(e.parents[1]).manifest.cpu_split is None
    )
    assert shared == [
        "simple_mlp_trace/tune_concurrency",
        "simple_mlp_trace/tune_trace",
        "simple_mlp_warmup",
    ]
    assert "the warm-up example, the trace example's two\n  tunes and the older" in readme

    def needed(intervals: int) -> int:
        return next(
            k
            for k in range(1, intervals + 1)
            if binom.sf(k - 1, intervals, 0.05) < FAMILY_FALSE_ALARM
        )

    trust = load_run(EXAMPLES / "simple_mlp_sweep_blocks").trust
    assert (trust.controls, trust.control_intervals) == (7, 10)
    assert (needed(2), needed(10), needed(14)) == (1, 2, 3)
    doc = (ROOT / "docs" / "measuring.md").read_text()
    assert "the demo sweep's hold ten, where two are needed" in doc
    assert "starts no\n   block it predicts would take" in doc


def test_the_docs_state_how_tune_and_sweep_decide_as_the_code() -> None:
    """Audit: docs/tune.md said "only the race's rounds decide the pick" where the median of
    every repeat, the search-phase cell included, ranks the contenders; docs/sweeps.md left
    out the same-load condition of "different optima"."""
    tune = load_run(EXAMPLES / "resnet18_pipeline_tune").tune
    assert tune is not None and tune.pick is not None and tune.verdict is not None
    assert tune.pick.repeats == tune.verdict.pairs + 1  # the search-phase cell is counted
    assert (tune.verdict.variant_median or 0) > (tune.verdict.reference_median or 0)
    tune_doc = (ROOT / "docs" / "tune.md").read_text()
    assert "only the race's rounds decide the pick" not in tune_doc
    assert "its search-phase cell included, ranks the contenders" in tune_doc
    sweeps = (ROOT / "docs" / "sweeps.md").read_text()
    assert "each is clearly ahead at its own pick's load" in sweeps


def test_a_queue_prediction_off_by_twice_is_a_term_miss() -> None:
    """Audit: the cost model's queue predictions missed by about 2x (1,197 against 512 µs;
    101,282 against 45,684 µs) and no miss list named them."""
    run = load_run(EXAMPLES / "simple_mlp_demo")
    queued = [p for p in run.predictions if any("requests queued" in m for m in p.term_misses())]
    assert queued
    for p in queued:
        assert p.queue_us is not None and p.measured_queue_us is not None
        assert abs(p.queue_us - p.measured_queue_us) > 100
    # a small queue, however far off in share, is no miss
    small = dataclasses.replace(queued[0], queue_us=60.0, measured_queue_us=20.0)
    assert not any("requests queued" in m for m in small.term_misses())
    assert "requests queued" in _log("resnet18_pipeline_cnn")


def test_a_bls_results_table_says_whose_batches_it_shows() -> None:
    """Audit: a BLS row's mean batch of 4.2 (the BLS model's own) read as batching reaching
    the CNN, which ran at 1.0 in every row."""
    from tritonlab.report.page_tables import called_steps_caption

    bls = load_run(EXAMPLES / "resnet18_pipeline_bls")
    caption = called_steps_caption(bls.manifest, bls.analyses[0])
    assert "the BLS model `pipeline_bls`'s own counters" in caption
    assert "`cnn` 1.0" in caption
    ensemble = load_run(EXAMPLES / "resnet18_pipeline")
    assert called_steps_caption(ensemble.manifest, ensemble.analyses[0]) == ""


def test_a_verdict_without_pairs_quotes_every_repeats_median() -> None:
    """Audit: "medians +23%: 1,738,497 µs against 1,637,366 µs (medians over the 1 rounds
    both have)" where +23% was the ratio of the medians over every repeat."""
    for name in ("resnet18_cnn_tune", "bert_encoder_tune"):
        text = _log(name)
        assert "over the 1 rounds" not in text
        assert "medians over the 1 " not in text


def test_a_run_nothing_checked_says_so_beside_a_worse_doubt() -> None:
    """Audit: the trace compare run's Trust line named its unstable repeats only, not that no
    A/A control and no interference monitor checked it."""
    trust = load_run(EXAMPLES / "simple_mlp_trace" / "compare").trust
    assert trust.state == "unstable repeats"
    assert "no A/A control and no interference monitor checked its noise" in trust.caveat()
    demo = load_run(EXAMPLES / "simple_mlp_demo").trust
    assert "no interference monitor" not in " ".join(demo.doubts())


def test_the_trace_summary_says_which_way_a_race_verdict_reads() -> None:
    """Audit: the race's "+3%" read as the pick's lead where it is the runner-up against the
    pick; the trace tune's p99 verdict unnamed."""
    summary = (EXAMPLES / "simple_mlp_trace" / "SUMMARY.md").read_text()
    assert "the runner-up against the pick on throughput: no clear difference (+3%" in summary
    assert "the runner-up against the pick on p99 latency: no clear difference (+7%" in summary
