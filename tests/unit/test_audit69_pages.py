"""Issue 36, audits 69-72 (at 33134c0): a batching row above what its engine's in-process
timings let batching save says its ceiling read low, with the timing beside the ceiling; a
page's verdicts over few pairs say so; every co-loaded run states its process term where it
says how it measured; a tune's race order and rounds as the cells were taken; a pick's verdict
over other blocks than its median says so; a half-width's unit on every page that quotes one;
docs sentences that left out a condition the code holds. Each on both sides."""

from __future__ import annotations

import re
from pathlib import Path

from scipy.stats import binomtest

from tritonlab.decisions.efficiency import Efficiency
from tritonlab.explanation.knob_rules import ENGINE_SAME_PCT
from tritonlab.perf.in_process import Ceiling
from tritonlab.perf.machine import GEMM_SIZES, REPEATS
from tritonlab.report.conditions_text import RACE_ORDER
from tritonlab.report.efficiency_text import above_ceiling_note
from tritonlab.stats.robust import HALF_WIDTH_MEANING, half_width_pct
from tritonlab.stats.summary import Summary

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _log(name: str) -> str:
    return (EXAMPLES / name / "docs" / "experiment_log.md").read_text()


def _efficiency(ratio: float, mean_batch: float | None, timings: dict[int, float]) -> Efficiency:
    ceiling = Ceiling(1, 1, 1, 100.0, 300, 3.0)
    served = Summary((100.0 * ratio,) * 3, (1, 2, 3))
    return Efficiency(
        "batch",
        "batching (0 ms, count=1)",
        "grpc_b1_c8",
        ceiling,
        ceiling,
        served,
        Summary((ratio,) * 3, (1, 2, 3)),
        Summary((ratio,) * 3, (1, 2, 3)),
        tuple(sorted(timings.items())),
        mean_batch,
    )


def test_a_batching_row_above_what_its_timings_save_says_its_ceiling_read_low() -> None:
    backends = _log("resnet18_cnn_backends")
    assert (
        "'batching (0 ms, count=1), openvino bf16' 1.15 (1.14–1.19) (batches of 4.2 on average; "
        "the in-process timings take 86,844 µs per sample at batch 4, 93,328 at batch 8, "
        "against 83,443 at batch 1: batching saves no time per sample)" in backends
    )
    assert "10.4 infer/s for openvino bf16 (1 x 1 thread) against 12.0 from its timing" in backends
    # a fixed cost per execution batching shares: 1.3x allowed at batch 4, 1.2 is within it
    saving = {1: 10_000.0, 4: 4 * 7_700.0, 8: 8 * 7_600.0}
    assert above_ceiling_note([_efficiency(1.2, 4.0, saving)]) == ""
    over = above_ceiling_note([_efficiency(1.4, 4.0, saving)])
    assert "batching allows at most 1.30x the ceiling" in over
    assert "10,000 at batch 1" in over and "100.0 infer/s for onnxruntime" in over
    # without batching a ceiling bounds the row outright; without timings nothing is set beside
    plain = above_ceiling_note([_efficiency(1.05, None, {})])
    assert "(no batching)" in plain and "or the served figure is off" in plain
    assert above_ceiling_note([_efficiency(0.95, None, {})]) == ""


def test_a_page_quoting_verdicts_over_few_pairs_says_so() -> None:
    tune = (EXAMPLES / "simple_mlp_trace" / "tune_concurrency" / "README.md").read_text()
    row = next(x for x in tune.splitlines() if "CI -61% to +76%" in x)
    assert row.startswith("- **6 x, batching")
    assert row.endswith("; verdicts over 2 pairs (a t-interval, 1 degree of freedom).")
    baseline = [x for x in tune.splitlines() if x.startswith("- **") and "(baseline" in x]
    assert baseline and not any("verdicts over" in x for x in baseline)  # no verdict on itself
    blocks = (EXAMPLES / "simple_mlp_sweep_blocks" / "README.md").read_text()
    assert "verdicts over" not in blocks  # 10 blocks and more: the signed-rank interval


def test_every_co_loaded_run_states_its_process_term_where_it_says_how_it_measured() -> None:
    line = "hold the process term, ±1.5% on a throughput or server-side interval"
    measured = _log("simple_mlp_warmup").split("## How it was measured", 1)[1].split("\n## ")[0]
    assert line in measured
    assert "hold the process term" not in _log("bert_encoder_sweep")  # classic: no term


def test_a_tunes_race_is_described_as_its_cells_were_taken() -> None:
    tune = _log("resnet18_pipeline_tune")
    assert RACE_ORDER in tune
    assert "each once per round" not in tune and "once per round in that order" not in tune
    assert (
        "measured over up to 4 rounds (3 to 4 per contender; each verdict over the rounds both "
        "its sides have)" in tune
    )
    assert "each contender's rounds are its own" in tune
    docs = " ".join((ROOT / "docs" / "tune.md").read_text().split())
    assert "the contender with the fewest race cells goes next" in docs
    assert "every contender once per round" not in docs


def test_a_picks_verdict_over_other_blocks_than_its_median_says_so() -> None:
    cache = _log("simple_mlp_cache")
    assert "higher (+768%, CI +725% to +803%) vs. the baseline over the 46 blocks both have" in (
        cache
    )
    assert "their verdicts pair every block both sides have" in cache
    demo = _log("simple_mlp_demo")
    assert "blocks both have, p99" not in demo.split("## Conditions")[0]  # no extra blocks


def test_every_page_quoting_a_half_width_says_what_it_is() -> None:
    for page in ("benchmarks/results/demo_precision.md", "benchmarks/results/aa_floor.md"):
        text = (ROOT / page).read_text()
        assert HALF_WIDTH_MEANING[1:] in text, page
    assert HALF_WIDTH_MEANING in (ROOT / "docs" / "results.md").read_text()
    # the unit the pages state: +125.0% to +137.2% is ±2.7%, though it spans ±6.1 points
    assert round(half_width_pct(125.0, 137.2), 1) == 2.7


def test_docs_state_the_conditions_the_code_holds() -> None:
    backends = " ".join((ROOT / "docs" / "backends.md").read_text().split())
    low, high = min(GEMM_SIZES), max(GEMM_SIZES)
    assert f"({low}³ to {high}³, 2·n³ FLOP per run)" in backends
    assert f"each size run at least {REPEATS} times" in backends
    assert "the fastest size's best run" in backends
    assert f"best of {len(GEMM_SIZES)} sizes" == "best of 5 sizes" and "best of five sizes" in (
        backends
    )
    assert f"predicted executions within {ENGINE_SAME_PCT:g}% of each other" in backends
    assert "the serving path counted" in backends and "misses one of its own points" in backends
    repositories = " ".join((ROOT / "docs" / "repositories.md").read_text().split())
    assert "6 of 6 cells does, 5 of 6 does not" in repositories
    assert binomtest(6, 6, 0.5).pvalue < 0.05 <= binomtest(5, 6, 0.5).pvalue
    pipeline = _log("resnet18_pipeline")
    assert "more than read timing gives by chance" in pipeline


def test_docs_measuring_quotes_the_loaded_demo_runs_as_stored() -> None:
    import json

    report = json.loads((ROOT / "benchmarks/results/demo_precision.json").read_text())
    loaded = [r for r in report["runs"] if r["condition"] == "split, half a core of other work"]
    again = [r["cells_remeasured_disturbed"] for r in loaded]
    stored = [r["cells_stored_disturbed"] for r in loaded]
    cells = [r["cells"] for r in loaded]
    text = " ".join((ROOT / "docs" / "measuring.md").read_text().split())
    assert len(loaded) == 3 and "in each of the three such runs" in text
    assert (
        f"{min(again)} to {max(again)} cells were measured again and {min(stored)} to "
        f"{max(stored)} of {min(cells)} to {max(cells)} cells were stored disturbed" in text
    )
    assert "of commit 7104e6e" not in text  # a page of another commit cannot be checked
    from tritonlab.stats.run_trust import RunTrust

    assert "none of those runs trusted its verdicts" in text
    assert not any(RunTrust.from_dict(r["trust"]).trusted for r in loaded)


def test_docs_tune_says_the_budget_allowance_steers_the_search_until_the_race_decides() -> None:
    from tritonlab.decisions.search_space import MIN_RACE_ROUNDS, NEAR_BUDGET_PCT

    tune = " ".join((ROOT / "docs" / "tune.md").read_text().split())
    assert MIN_RACE_ROUNDS == 2  # "twice more": a ramp point and two race cells is three
    assert (
        f'"within" allows its median p99 up to {NEAR_BUDGET_PCT:g}% over the budget' in tune
        and "the incumbent the moves start from, can be a single figure up to" in tune
    )


# --- audits 73-76 (at 3894fce) -------------------------------------------------------------------


def test_a_row_above_even_its_timing_at_the_batch_it_formed_says_so() -> None:
    backends = _log("resnet18_cnn_backends")
    assert (
        "'batching (0 ms, count=1), openvino bf16' served 11.9 infer/s, above even its engine's "
        "timing at the batch it formed (11.5)" in backends
    )
    assert "so the served figure or the timing is off too" in backends
    bert = _log("bert_encoder")  # above its ceiling, not above its timing at its batch
    assert "Above what its own ceiling allows" in bert and "above even its" not in bert


def test_the_operators_paragraph_prices_only_its_own_engines_rows() -> None:
    backends = _log("resnet18_cnn_backends")
    formed = backends.split("At the batches Triton formed (", 1)[1].split(") against", 1)[0]
    assert "onnxruntime at `grpc_b1_c8`" in formed and "openvino" not in formed
    assert "the rows served by openvino bf16 and openvino f32 are not priced by them" in backends


def test_a_run_readme_says_what_the_model_is_and_what_its_client_checked() -> None:
    tune = (EXAMPLES / "resnet18_pipeline_tune" / "README.md").read_text()
    assert tune.count("An ensemble (`pipeline`") == 1 and "An ONNX model" not in tune
    assert "validates shapes and dtypes (no expected values were given" in tune
    assert "`config.pbtxt` + `1/model.onnx`" not in tune
    bls = (EXAMPLES / "resnet18_pipeline_bls" / "README.md").read_text()
    assert "A Python BLS model (`pipeline_bls`" in bls and "validates shapes and values" in bls
    demo = (EXAMPLES / "simple_mlp_demo" / "README.md").read_text()
    assert "An ONNX model (`simple_mlp`)" in demo and "`config.pbtxt` + `1/model.onnx`" in demo


def test_a_tune_readme_carries_its_doubts_and_names_its_pick() -> None:
    tune = (EXAMPLES / "resnet18_pipeline_tune" / "README.md").read_text()
    key = tune.split("## Key results", 1)[1]
    assert key.index("no A/A control was measured in this run") < key.index("Load point")
    assert "raises the chance of a false higher or lower" in key
    assert "tune's pick: 1 instance, dynamic batching (delay 0, max batch 16)" in key
    assert "reference at this load (the run's baseline has no cell here)" in key


def test_a_tunes_conditions_say_how_many_rounds_its_race_ran() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "the contenders raced in 4 rounds at most (the limit 12)" in readme
    assert "raced in up to 12 rounds" not in readme


def test_a_tune_table_names_its_reference_where_it_is_not_the_baseline() -> None:
    results = (ROOT / "docs" / "results.md").read_text()
    assert "| throughput vs the first row | p99 vs the first row |" in results
    assert "| the reference (not the run's baseline) | the reference |" in results
    assert "against the first row of their table, at the same load" in results
    readme = (ROOT / "README.md").read_text()  # the demo's table: its first row is the baseline
    assert "vs the first row" not in readme.split("<!-- results: end -->")[0]


def test_points_perf_analyzer_did_not_keep_up_are_not_counted_as_cost_model_misses() -> None:
    sweep = _log("simple_mlp_sweep_blocks")
    assert "Not counted (9): batching (0 µs, count=1) at grpc_b1_p80" in sweep
    fails = sweep.split("Where the model fails", 1)[1].split("\n\n", 2)[1]
    assert "grpc_b1_p80" not in fails and "grpc_b1_p50" not in fails
    assert "Not counted" not in _log("simple_mlp_demo")  # no open-loop point fell behind


def test_the_stop_reasons_open_count_says_what_it_counted() -> None:
    resolution = (ROOT / "benchmarks" / "results" / "resolution.md").read_text()
    assert (
        "with 2 verdict(s) still open (counted when it stopped, over every verdict the rule "
        "watches: against the baseline, against the row each is explained from and the A/A "
        "control's; of the verdicts listed above, against the baseline only, 0 are undecided)"
        in resolution
    )


def test_a_benchmark_measured_before_the_cpu_split_says_so() -> None:
    for page in ("docs/results.md", "benchmarks/results/vs_model_analyzer.md"):
        text = (ROOT / page).read_text()
        assert "This re-measurement stored no CPU placement and no process term" in text, page


# --- audits 77-80 (at e1b266c) -------------------------------------------------------------------


def test_docs_scaling_models_and_tune_state_what_the_code_holds() -> None:
    import inspect

    from tritonlab.decisions import capacity, search
    from tritonlab.experiments import plan

    scaling = " ".join((ROOT / "docs" / "scaling.md").read_text().split())
    assert "(`decisions.capacity`)" in scaling and "`analysis.capacity`" not in scaling
    assert "a replica carries *at least* this much" in scaling
    assert "at_least" in inspect.getsource(capacity)
    models = " ".join((ROOT / "docs" / "models.md").read_text().split())
    assert "N = the cores this process may use, at least 2" in models
    assert "n = max(2, cores)" in inspect.getsource(plan.compute_plan)
    tune = " ".join((ROOT / "docs" / "tune.md").read_text().split())
    assert "the best concurrency of the configuration it was proposed from" in tune
    assert "Moves are tried only before the race has measured any cell" in tune
    source = inspect.getsource(search.next_step)
    assert 'return Step("move", reason, move.knobs, base.concurrency)' in source
    assert "if not any(o.repeat >= 1 for o in observations)" in source


def test_the_serving_path_names_the_backend_the_bundled_server_runs() -> None:
    log = _log("simple_mlp")
    assert "Triton and the `onnxruntime` backend, in this bundled server a Python-based" in log
    assert "the Python backend and its adapter" not in log


def test_a_stored_did_not_beat_reason_says_it_means_by_the_noise_margin() -> None:
    tune = _log("resnet18_cnn_tune")
    assert '"did not beat" means not by more than the 5% noise margin' in tune
    from dataclasses import replace

    from tritonlab.decisions.tune_record import TuneRecord
    from tritonlab.report.tune_section import beat_note
    from tritonlab.result_files import load_record

    record = load_record(EXAMPLES / "resnet18_cnn_tune" / "results" / "tune.json", TuneRecord)
    assert record is not None and beat_note(record)
    margin = r"did not beat \1 by more than the 5% noise margin ("
    new = [replace(s, reason=re.sub(r"did not beat (\d+) \(", margin, s.reason))
           for s in record.steps]  # fmt: skip
    assert beat_note(replace(record, steps=new)) == ""  # the new wording says it itself


def test_pages_quoting_runs_from_before_the_cpu_split_say_so() -> None:
    from tritonlab.stats.process_term import predates_note

    text = "stored no CPU placement and no process term"
    for page in ("resolution.md", "aa_floor.md", "vs_model_analyzer.md"):
        assert text in (ROOT / "benchmarks" / "results" / page).read_text(), page
    results = (ROOT / "docs" / "results.md").read_text()
    assert results.count(f"These runs {text}") == 1  # the resolution block
    assert predates_note({"cpu_split": {}}, "These runs") == ""


def test_a_table_over_few_pairs_says_which_interval_it_shows() -> None:
    results = (ROOT / "docs" / "results.md").read_text()
    tune = results.split("## ", 1)[1]
    assert "Verdicts in this table over 4 pairs: below 6 pairs the interval is the mean" in results
    demo = results.split("Load `grpc_b1_c8`:", 1)[1].split("\n\n", 2)[1]  # the demo's table
    assert "Verdicts in this table" not in demo and tune


def test_a_tune_readme_carries_what_its_race_left_open() -> None:
    tune = (EXAMPLES / "resnet18_pipeline_tune" / "README.md").read_text()
    assert "the race did not separate the pick from the runner-up on throughput" in tune
    assert (
        "compared across serving configurations of step `cnn` (dynamic_batching, "
        "instance_group count, " in tune
    )
    assert "max_batch_size), at more than one concurrency and protocol." in tune
    sweep = (EXAMPLES / "bert_encoder_sweep" / "README.md").read_text()
    assert "at more than one input shape." in sweep


def test_the_knee_table_states_when_a_block_is_set_apart() -> None:
    from tritonlab.stats.load_drift import MIN_CONFIGS, MIN_SHIFT_PCT

    sweep = _log("simple_mlp_sweep_blocks")
    assert (
        f"at least {MIN_CONFIGS} configurations (the A/A control not counted) were measured "
        f"there in it, all on one side of their own medians, by a median shift of "
        f"{MIN_SHIFT_PCT:g}% or more" in sweep
    )
    docs = " ".join((ROOT / "docs" / "sweeps.md").read_text().split())
    assert f"by a median shift of {MIN_SHIFT_PCT:g}% or more" in docs
    assert "the A/A control not counted" in docs
    assert "and the control's at the pick's load, get another block" in docs
    assert "by a median shift" not in _log("simple_mlp_demo")  # no block set apart there


# --- audits 81-84 (at 551cc9c) -------------------------------------------------------------------


def test_a_readme_names_a_config_override_it_compared() -> None:
    warmup = (EXAMPLES / "simple_mlp_warmup" / "README.md").read_text()
    assert "compared across serving configurations (config.pbtxt model_warmup)" in warmup
    assert "(none)" not in warmup


def test_the_operators_split_carries_the_cost_models_misses() -> None:
    warmup = _log("simple_mlp_warmup")
    assert "By the cost model above (which misses 2 of its 4 points by more than 25%" in warmup
    assert "take this split as the model's, not as measured" in warmup
    cnn = _log("resnet18_cnn")  # a model that misses no point of its run says no such thing
    assert "Which cost does batching spread? By the cost model above, one execution" in cnn
    assert "0 miss by more than 25%" in cnn


def test_the_calibration_floor_names_its_figures_mean_squares() -> None:
    page = (ROOT / "benchmarks" / "results" / "calibration.md").read_text()
    assert "the mean square of the A/A estimates' log-ratios, 0.0038" in page
    assert "(mean squares in log units, not spreads in %)" in page
    assert "the A/A means' spread" not in page


def test_the_readme_does_not_call_the_resolution_runs_this_machines() -> None:
    import json

    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "resolves differences on this shared machine" not in readme
    assert "(runs on another machine, from before the CPU split and the process term)" in readme
    resolution = json.loads((ROOT / "benchmarks/results/resolution.json").read_text())
    demo = json.loads((EXAMPLES / "simple_mlp_demo/results/manifest.json").read_text())
    assert resolution["machine"] != demo["machine"]["cpu_model"]
    assert "cpu_split" not in resolution and "process_term" not in resolution


def test_a_row_whose_word_turns_on_blocks_set_apart_at_its_load_says_so() -> None:
    sweep = _log("simple_mlp_sweep_blocks")
    assert (
        "and a row's throughput word against the first row turns on them: 'batching (0 µs, "
        "count=1)' lower (-4%, CI -9% to -1%) without them, no clear difference (-3%, CI -7% to "
        "+10%) with them; the other 4 rows' words are the same without them." in sweep
    )
    assert "turns on them" not in _log("simple_mlp_demo")  # set-apart blocks turn no word there


# --- audits 85-88 (at bf0312b) -------------------------------------------------------------------


def test_docs_state_what_the_examples_and_the_code_hold() -> None:
    import inspect
    import json

    from tritonlab.experiments import plan_file, repository_plan
    from tritonlab.perf.machine import MIN_SECONDS_PER_SIZE

    reliability = " ".join((ROOT / "docs" / "reliability.md").read_text().split())
    assert "(the committed examples are such files)" not in reliability
    assert "some files of the 7 older classic examples are such files" in reliability
    bare = {
        p.relative_to(EXAMPLES).parts[0]
        for p in EXAMPLES.glob("*/results/**/*.json")
        if "schema_version" not in json.loads(p.read_text() or "{}")
    }
    assert len(bare) == 7  # the older classic examples, as the page says
    backends = " ".join((ROOT / "docs" / "backends.md").read_text().split())
    assert f"at least 7 times and for at least {MIN_SECONDS_PER_SIZE:g} s" in backends
    assert "a sixth configuration that changes nothing" in backends
    assert "aa_control(variants[0])" in inspect.getsource(plan_file.with_engine_controls)
    assert "(in throughput or in a term)" in backends
    repositories = " ".join((ROOT / "docs" / "repositories.md").read_text().split())
    assert "both only where the user's `max_batch_size` is above 0" in repositories
    assert "if baseline.max_batch_size > 0:" in inspect.getsource(repository_plan)


def test_a_pipeline_readme_names_the_step_it_changed_and_small_rates_keep_a_decimal() -> None:
    pipeline = (EXAMPLES / "resnet18_pipeline" / "README.md").read_text()
    assert "compared across serving configurations of step `cnn` (" in pipeline
    demo = (EXAMPLES / "simple_mlp_demo" / "README.md").read_text()
    assert "serving configurations of step" not in demo  # the model measured is the one changed
    backends = (EXAMPLES / "resnet18_cnn_backends" / "README.md").read_text()
    assert "**openvino f32 (no batching, count=1)**: 11.5 infer/s" in backends
    assert "**batching (0 ms, count=1), openvino f32**: 11.4 infer/s" in backends
