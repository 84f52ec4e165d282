"""Issue 36, audits 47-49 (at 517931c): a cross-load verdict resting on blocks where every
configuration at one load read slow says so, with the verdict without them; the trace
example's "larger change" is the one its intervals separate, and a tune under the trace above
its mean says it offered more load; the runner-up's "different loads" note in every branch;
docs/sweeps.md states the tie rule the logs state. Each on both sides."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cost_model import _prediction
from test_recommend import cell, summaries

from tritonlab.decisions.frontier import after_knee, closed_loop_curves
from tritonlab.decisions.recommend_records import OperatingPoint
from tritonlab.explanation.cost_prediction import Prediction
from tritonlab.report.recommend_text import _runner_up_unclear
from tritonlab.stats.config_key import ConfigKey
from tritonlab.stats.load_drift import disturbed_blocks, without_disturbed
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import NO_CLEAR, compare

ROOT = Path(__file__).resolve().parents[2]
BASE = {"baseline": 2000.0, "batch_0us": 1900.0, "batch_5000us": 600.0}
WOBBLE = [1.00, 1.02, 0.99, 1.01, 0.98, 1.02, 1.00, 0.99, 1.01, 1.00]


def _sweep(slow_c1_blocks: dict[str, float]) -> list:
    """Three configurations at concurrency 1 and 4 over 10 blocks, c4 about 8% above c1; in
    blocks 8-10 the configurations named in ``slow_c1_blocks`` read slower at c1 by that
    factor."""
    cells = []
    for name, base in BASE.items():
        for i, w in enumerate(WOBBLE, start=1):
            c1 = base * w * (slow_c1_blocks.get(name, 1.0) if i >= 8 else 1.0)
            cells.append(cell(name, c1, 1000.0, repeat=i, concurrency=1))
            cells.append(cell(name, base * 1.08 * WOBBLE[-i], 1000.0, repeat=i, concurrency=4))
    return cells


def _knee_note(cells: list) -> str:
    sums = summaries(cells)
    curve = closed_loop_curves(sums)[ConfigKey("baseline", "grpc", 1)]
    return after_knee(curve, 1, disturbed_blocks(sums, "throughput"))


def test_a_knee_resting_on_blocks_slow_at_one_load_says_so_with_the_verdict_without_them() -> None:
    note = _knee_note(_sweep({"baseline": 0.6, "batch_0us": 0.7, "batch_5000us": 0.75}))
    assert "blocks 8–10 read every configuration at `grpc_b1_c1` below its own median" in note
    assert "without those blocks: higher (+" in note and "per doubling" in note.split(";")[-1]


def test_one_configuration_slow_at_one_load_is_not_a_load_wide_shift() -> None:
    note = _knee_note(_sweep({"baseline": 0.6}))
    assert note.startswith("concurrency 4: throughput higher")
    assert "below its own median" not in note and "without those blocks" not in note


def test_one_load_needs_no_drift_note_the_pairing_cancels_it() -> None:
    sums = summaries(_sweep({"baseline": 0.6, "batch_0us": 0.7, "batch_5000us": 0.75}))
    at_c1 = [s for s in sums if s.load_key == "grpc_b1_c1"]
    disturbed = disturbed_blocks(sums, "throughput")
    assert {r for (load, r) in disturbed if load == "grpc_b1_c1"} == {8, 9, 10}
    assert without_disturbed(at_c1[0], at_c1[1], "throughput", disturbed) is None


def test_the_sweep_examples_knee_row_carries_the_drift_it_rests_on() -> None:
    log = (ROOT / "examples/simple_mlp_sweep_blocks/docs/experiment_log.md").read_text()
    row = next(line for line in log.splitlines() if line.startswith("| baseline/grpc/b1 | 1 |"))
    assert "every configuration at `grpc_b1_c1` below its own median" in row
    assert "without those blocks: higher (+10%" in row


def test_the_trace_summary_names_the_change_its_intervals_separate(trace_summary: str) -> None:
    line = next(
        x for x in trace_summary.splitlines() if x.startswith("- `fixed_runner_up` against")
    )
    assert "the larger change is in computing" not in line
    assert "the change the intervals separate is in waiting in the queue" in line
    start = next(x for x in trace_summary.splitlines() if x.startswith("- `start` against"))
    assert "both changes are separated from the noise; the larger is in waiting" in start


def test_where_says_it_cannot_tell_when_neither_change_is_separated() -> None:
    from tritonlab.report.server_change import where_text

    assert "cannot tell" in where_text(False, 500.0, False, 900.0)
    assert "separate is in computing" in where_text(False, 500.0, True, 90.0)
    assert "the larger is in computing" in where_text(True, 50.0, True, 90.0)


def test_a_tune_under_the_trace_above_its_mean_says_it_offered_more_load(
    trace_summary: str,
) -> None:
    tuned = next(x for x in trace_summary.splitlines() if x.startswith("- **Tuned under"))
    in_tune, again = tuned.split("measured again in `compare/`")
    assert "above the trace's mean by 7%: these cells offered more load" in in_tune
    assert "above the trace's mean" not in again  # 100% of the mean: no such clause


def _point(key: str, tput: float) -> OperatingPoint:
    return OperatingPoint("a", "a", key, "grpc", 1, 8, None, tput, 1000.0)


def test_an_unclear_runner_up_at_another_load_says_the_two_were_at_different_loads() -> None:
    verdict = compare("throughput", Summary.of([100, 104, 97, 101]), Summary.of([99, 103, 99, 98]))
    assert verdict.word == NO_CLEAR
    pick = _point("grpc_b1_c16", 101.0)
    runner = OperatingPoint("b", "b", "http_b1_c8", "http", 1, 8, None, 100.0, 1000.0)
    assert "the two at different loads" in _runner_up_unclear(pick, runner, verdict)
    same = OperatingPoint("b", "b", "grpc_b1_c16", "grpc", 1, 16, None, 100.0, 1000.0)
    assert "different loads" not in _runner_up_unclear(pick, same, verdict)


def test_docs_sweeps_states_the_tie_rule_the_logs_state() -> None:
    page = (ROOT / "docs/sweeps.md").read_text()
    log = (ROOT / "examples/simple_mlp_sweep_blocks/docs/experiment_log.md").read_text()
    assert "Two closed-loop points are compared even at different concurrencies" in log
    flat = " ".join(page.split())
    assert "even at different concurrencies" in flat
    assert "at different loads are never compared" not in flat
    assert "the runner-up may sit at another concurrency or protocol" in flat


def _paragraph(log: str, load: str, heading: str) -> str:
    section = log.split(f"## Results: {load}\n", 1)[1].split("\n## ", 1)[0]
    return section.split(f"### {heading}", 1)[1].split("\n### ", 1)[0]


def test_the_against_the_baseline_sentence_carries_the_controls_reach_where_it_reaches() -> None:
    log = (ROOT / "examples/simple_mlp_sweep_blocks/docs/experiment_log.md").read_text()
    reached = _paragraph(log, "grpc_b1_c8", "batching (0 µs, count=2)")
    assert (
        "p99 lower (-23%, CI -39% to -12%) (the A/A control's interval at this load reaches "
        "this change: p99, which may be the two server processes' own difference)" in reached
    )
    clear = _paragraph(log, "grpc_b1_c16", "batching (0 µs, count=2)")
    assert "Against the baseline: throughput higher (+148%" in clear
    assert "control's interval at this load reaches" not in clear


def test_a_rules_paired_medians_say_which_rounds_they_are_over() -> None:
    from tritonlab.explanation.rule_support import paired_note

    longer, shorter = Summary.of([1.0] * 18), Summary.of([1.0] * 10)
    assert paired_note(longer, shorter) == (
        " (medians over the 10 rounds both have, the verdict's pairs)"
    )
    assert paired_note(shorter, Summary.of([2.0] * 10)) == ""
    log = (ROOT / "examples/simple_mlp_cache_fresh/docs/experiment_log.md").read_text()
    assert (
        "compute per inference fell from 508 to 135 µs (lower (-74%, CI -74% to -73%)) "
        "(medians over the 10 rounds both have, the verdict's pairs)" in log
    )


def test_a_share_halfway_between_whole_percents_keeps_its_decimal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from script_module import load_script

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # the page imports its report

    page = load_script("benchmarks/calibration_page.py")
    assert page._rate(3, 120).startswith("3 of 120 (2.5%, ")  # half to even printed 2%
    assert page._rate(6, 120).startswith("6 of 120 (5%, ")
    assert page._rate(56, 60).startswith("56 of 60 (93%, ")


def test_a_quiet_resolution_run_with_disturbed_cells_says_how_many() -> None:
    page = (ROOT / "benchmarks/results/resolution.md").read_text()
    assert (
        "- Trust: quiet (16 of 200 monitored cells were stored disturbed, within the 16% a run "
        "may rest on)" in page
    )
    assert "- Trust: quiet\n" in page  # runs with none stored disturbed: nothing to add


# --- audits 50-52 (at ffd2888) -------------------------------------------------------------------


def _slow_execution(in_flight: float, measured_batch: float, instances: int = 2) -> str:
    """A closed-loop point whose execution cost 1,424 µs where 875 µs were predicted."""
    p = _prediction(
        requests_per_execution=8.0,
        execution_us=875.0,
        queue_us=5000.0,
        measured_requests_per_execution=measured_batch,
        measured_execution_us=1424.0,
        measured_throughput_infer_per_s=2900.0,
        measured_queue_us=4900.0,
        instances=instances,
        in_flight_requests=in_flight,
    )
    return " ".join(p.term_misses())


def test_contention_is_not_offered_where_every_batch_held_every_request_in_flight() -> None:
    whole = _slow_execution(in_flight=8.0, measured_batch=8.0)
    assert "not instances contending: every batch took all 8 requests in flight" in whole
    assert "instances contending for the cores" not in whole
    split = _slow_execution(in_flight=16.0, measured_batch=5.0)  # two batches can be in flight
    assert "instances contending for the cores, or the model running colder" in split
    one = _slow_execution(in_flight=8.0, measured_batch=8.0, instances=1)
    assert "with every batch holding all 8 requests in flight no other request's work" in one
    assert "the one instance sharing its core" not in one
    spare = _slow_execution(in_flight=16.0, measured_batch=8.0, instances=1)
    assert "the one instance sharing its core" in spare  # other requests waited beside it
    log = (ROOT / "examples/simple_mlp/docs/experiment_log.md").read_text()
    assert "1,424 µs, not 875 µs (not instances contending" in log


def test_a_cached_pick_carries_its_cache_caveat_into_the_summary_line() -> None:
    cache = (ROOT / "examples/simple_mlp_cache/docs/experiment_log.md").read_text()
    summary = next(line for line in cache.splitlines() if line.startswith("> Deployed"))
    assert (
        "Caveat: the response cache answered 100% of the throughput-first pick's requests; its "
        "figures hold for traffic whose inputs repeat as often." in summary
    )
    fresh = (ROOT / "examples/simple_mlp_cache_fresh/docs/experiment_log.md").read_text()
    summary = next(line for line in fresh.splitlines() if line.startswith("> Deployed"))
    assert "the response cache answered" not in summary  # its inputs never repeat: no hits


def test_the_efficiency_header_names_each_rows_own_engine() -> None:
    backends = (ROOT / "examples/resnet18_cnn_backends/docs/experiment_log.md").read_text()
    assert "sessions of the configuration's own engine (onnxruntime, openvino bf16 or" in backends
    assert "11.1 infer/s (1 x 1 thread, openvino f32)" in backends
    one = (ROOT / "examples/resnet18_cnn/docs/experiment_log.md").read_text()
    assert "as many onnxruntime sessions as the configuration has instances" in one


def test_the_instance_rules_paired_medians_say_which_rounds() -> None:
    sweep = (ROOT / "examples/simple_mlp_sweep_blocks/docs/experiment_log.md").read_text()
    assert (
        "What changed: mean batch 9.7 -> 5.3 (lower; medians over the 10 rounds both have, the "
        "verdict's pairs); compute per inference 113 -> 255 µs (higher; medians over the 10 "
        "rounds both have, the verdict's pairs)" in sweep
    )
    demo = (ROOT / "examples/simple_mlp_demo/docs/experiment_log.md").read_text()
    assert "What changed: mean batch" in demo and "rounds both have" not in demo


def test_docs_sweeps_states_the_knee_saturation_and_co_loading_as_the_code_does() -> None:
    from tritonlab.decisions.recommend_records import (
        KNEE_GAIN_PER_DOUBLING_PCT,
        SATURATION_QUEUE_GROWTH_PCT,
    )
    from tritonlab.stats.verdicts import MIN_EFFECT_PCT

    flat = " ".join((ROOT / "docs/sweeps.md").read_text().split())
    assert (
        "the smallest concurrency that no higher measured level clearly beats (verdict "
        f'"higher" and at least {KNEE_GAIN_PER_DOUBLING_PCT:g}% per doubling' in flat
    )
    assert "after which the next measured level brings no clear" not in flat
    assert f"by at least {SATURATION_QUEUE_GROWTH_PCT:g}%)" in flat
    assert f'its verdict not "higher", and its estimate under {MIN_EFFECT_PCT:g}%' in flat
    assert "variants are loaded and unloaded one at a time" not in flat
    assert "loads every configuration into it at once" in flat


def test_a_tune_step_reason_keeps_the_digits_that_tell_two_small_figures_apart() -> None:
    from tritonlab.decisions.search import Goal, Knobs, Observation, incumbent, propose_moves

    def seen(k: Knobs, tput: float) -> Observation:
        return Observation(k, 16, 0, tput, 1000.0, 10.0, 1000.0, 1000.0, 4.0, 1.5, 0.1)

    two, four = Knobs(instances=2, batching=True), Knobs(instances=4, batching=True)
    for tputs, said in (((20.69, 20.09), "(20.1 against 20.7)"), ((2069, 2009), "(2,009 against")):
        obs = [seen(two, tputs[0]), seen(four, tputs[1])]
        reasons = [m.reason for m in propose_moves(obs, incumbent(obs, Goal()), Goal())]
        margin = "by more than the 5% noise margin "
        assert any(r.startswith(f"4 instances did not beat 2 {margin}{said}") for r in reasons)


def test_docs_state_the_tune_and_gate_rules_with_the_conditions_the_code_holds() -> None:
    tune = " ".join((ROOT / "docs/tune.md").read_text().split())
    assert "and the two ran at the same concurrency, the runner-up is the pick" in tune
    assert "At different concurrencies the leader stays" in tune
    assert "with the CPU split (the default) the server's own cores against what the server" in tune
    gate = " ".join((ROOT / "docs/ci_gate.md").read_text().split())
    assert "about n (h/d)^2 rounds in all, so about n (h/d)^2 - n more" in gate
    sweeps = " ".join((ROOT / "docs/sweeps.md").read_text().split())
    assert "the highest Poisson open-loop rate whose p99 stays within the budget" in sweeps
    assert "Constant-rate loads are not counted" in sweeps


def test_the_gates_more_rounds_is_the_rounds_beyond_those_it_has() -> None:
    from tritonlab.decisions.gate import more_rounds_to_decide
    from tritonlab.stats.verdicts import Verdict, Word

    # centre -5% on a -5% threshold has no answer; a centre half the half-width away needs
    # about 4n in all, so 3n more
    verdict = Verdict("throughput", Word("no clear difference"), -2.0, 1.0, 1.0, "", -8.0, 4.0, 10)
    more = more_rounds_to_decide(verdict, -5.0)
    assert more is not None and 25 <= more <= 40  # n (h/d)^2 - n, not n (h/d)^2


# --- audit 53 (at 2d0ecac) -----------------------------------------------------------------------


def test_a_knee_at_the_top_of_its_curve_gives_the_step_into_it_with_its_doubts() -> None:
    cache = (ROOT / "examples/simple_mlp_cache/docs/experiment_log.md").read_text()
    top = next(x for x in cache.splitlines() if x.startswith("| batch_0us_cache/grpc/b1 | 16 |"))
    assert "the step into it from concurrency 4: throughput higher (+47%" in top
    assert (
        "spans the rule's 10%" in top and "which the knee's rule would not count as a gain" in top
    )
    below_top = next(x for x in cache.splitlines() if x.startswith("| baseline/grpc/b1 | 4 |"))
    assert below_top.split("|")[3].strip().startswith("concurrency 16: throughput")
    assert "rule would" not in below_top  # +5% and +8% without: neither counts
    sums = summaries(_sweep({}))
    single = [s for s in closed_loop_curves(sums)[ConfigKey("baseline", "grpc", 1)]][:1]
    assert after_knee(single, 1) == ""


def test_the_drift_note_gives_the_rows_own_shift_beside_the_blocks_median() -> None:
    log = (ROOT / "examples/simple_mlp_sweep_blocks/docs/experiment_log.md").read_text()
    row = next(line for line in log.splitlines() if line.startswith("| baseline/grpc/b1 | 1 |"))
    assert "(their median shift 9% to 22%; `baseline` there 19% to 47%)" in row


def test_one_request_in_flight_is_why_an_added_instance_had_nothing_to_run_not_the_cpu() -> None:
    log = (ROOT / "examples/simple_mlp_sweep_blocks/docs/experiment_log.md").read_text()
    row = _paragraph(log, "grpc_b1_c1", "batching (0 µs, count=2)")
    assert "with one request in flight the added instances had nothing to run" in row
    assert "no spare CPU" not in row


def _queue_prediction(predicted: float, measured: float, fails: bool) -> Prediction:
    """A closed-loop point at concurrency 8 whose batch and execution were as predicted."""
    return _prediction(
        requests_per_execution=8.0,
        execution_us=900.0,
        throughput_infer_per_s=8200.0 if fails else 6300.0,
        queue_us=predicted,
        measured_requests_per_execution=8.0,
        measured_execution_us=894.0,
        measured_throughput_infer_per_s=6250.0,
        measured_queue_us=measured,
        in_flight_requests=8.0,
    )


def test_a_queue_predicted_at_zero_is_a_miss_and_in_a_closed_loop_follows_the_throughput() -> None:
    right = _queue_prediction(0.0, 155.0, fails=False)
    assert right.term_misses() == ["requests queued 155 µs, not 0 µs"]
    small = _queue_prediction(0.0, 50.0, fails=False)  # under the 100 µs floor: the timer's
    assert small.term_misses() == []
    failed = _queue_prediction(0.0, 157.0, fails=True)
    text = failed.failure() or ""
    assert text.startswith("execution cost and batch size were each within 25%")
    assert text.endswith(
        "requests queued 157 µs, not 0 µs, which in a closed loop follows from the throughput"
    )
    pipeline = (ROOT / "examples/resnet18_pipeline_cnn/docs/experiment_log.md").read_text()
    assert (
        "so the rest of the miss is in the parallelism or the client's round trip (the CPU the "
        "server could really use), or in those terms together; requests queued 203,668 µs, not "
        "400,325 µs, which in a closed loop follows from the throughput" in pipeline
    )


# --- audits 58-60 (at 6f9831f) -------------------------------------------------------------------


def test_a_cost_model_execution_miss_offers_candidates_not_a_cause() -> None:
    text = _slow_execution(in_flight=16.0, measured_batch=1.0, instances=1)
    assert "(not shown by these figures; it may be the one instance sharing its core" in text
    log = (ROOT / "examples/tiny_cnn/docs/experiment_log.md").read_text()
    assert "1,593 µs, not 1,057 µs (not shown by these figures; with every batch holding" in log


def test_rows_above_their_ceiling_without_batching_say_the_ceiling_is_no_bound() -> None:
    backends = (ROOT / "examples/resnet18_cnn_backends/docs/experiment_log.md").read_text()
    assert (
        "Above what their own ceiling allows: 'baseline (onnxruntime, no batching, count=1)' "
        "1.05 (0.98–1.12) (no batching)" in backends
    )
    assert "'openvino f32 (no batching, count=1)' 1.04 (1.00–1.06) (no batching)" in backends
    mlp = (ROOT / "examples/simple_mlp_backends/docs/experiment_log.md").read_text()
    assert "Above what" not in mlp  # every row within what its ceiling allows


def test_a_classic_tunes_conditions_do_not_call_its_search_interleaved() -> None:
    tune = (ROOT / "examples/bert_encoder_tune/docs/experiment_log.md").read_text()
    line = next(x for x in tune.splitlines() if x.startswith("- Measurement:"))
    assert "interleaved" not in line and "in the order the search took them" in line
    sweep = (ROOT / "examples/simple_mlp/docs/experiment_log.md").read_text()
    line = next(x for x in sweep.splitlines() if x.startswith("- Measurement:"))
    assert "interleaved (every configuration once, then again)" in line


def test_the_resolution_table_names_a_trusted_runs_disturbed_cells() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from resolution_trust import trusted_runs

    page = (ROOT / "docs/results.md").read_text()
    assert (
        "2 of 3 (run 2: control flagged; run 1: trusted, 16 of 200 cells stored disturbed)" in page
    )
    quiet = {"run": 1, "engine": "blocks", "cells": 10, "cells_stored_disturbed": 0}
    quiet |= {"aa_control": [], "verdicts": [], "foreign_cores_max": 0.0}
    assert trusted_runs([quiet]) == "1 of 1"


def test_docs_tune_and_sweeps_state_the_conditions_the_search_and_picker_hold() -> None:
    tune = " ".join((ROOT / "docs/tune.md").read_text().split())
    assert "Under `--goal throughput`, for the first configuration this happens at once" in tune
    assert "Under `--goal throughput`, a one-instance configuration whose first point" in tune
    assert "except a move to more instances" not in tune
    sweeps = " ".join((ROOT / "docs/sweeps.md").read_text().split())
    assert "whose verdict's paired estimate of the change is within 10%" in sweeps
    assert "the step into it from the level below" in sweeps
    from tritonlab.report.recommend_summary_text import RULES

    assert "paired estimate of the change within" in RULES["tie_break"]


def test_an_execution_miss_beside_a_batch_miss_is_priced_at_the_batch_formed() -> None:
    log = (ROOT / "examples/simple_mlp_sweep_blocks/docs/experiment_log.md").read_text()
    assert (
        "an execution cost 586 µs, not 394 µs (at the measured 2.6 requests the model gives "
        "454 µs, still off by more than 25%: not shown by these figures" in log
    )
    classic = (ROOT / "examples/simple_mlp_sweep/docs/experiment_log.md").read_text()
    assert (
        "an execution cost 433 µs, not 343 µs, from the batch it formed: at the measured 1.5 "
        "requests the model gives 371 µs, within 25%" in classic
    )
    alone = _slow_execution(in_flight=16.0, measured_batch=8.0)  # batch as predicted
    assert "at the measured" not in alone


def test_a_knees_verdict_without_the_drift_blocks_carries_its_own_doubt() -> None:
    cache = (ROOT / "examples/simple_mlp_cache/docs/experiment_log.md").read_text()
    row = next(x for x in cache.splitlines() if x.startswith("| nobatch_cache/grpc/b1 | 16 |"))
    assert row.rstrip(" |").endswith(
        "+24.7% per doubling (CI +4.2% to +49.2% per doubling, which spans the rule's 10%)"
    )
    assert "served by one server process, so its interval holds no process term" in cache
    classic = (ROOT / "examples/simple_mlp_sweep/docs/experiment_log.md").read_text()
    assert "no process term" not in classic  # not co-loaded: no term to leave out


# --- audit 64 (at 6f54cad) -----------------------------------------------------------------------


def test_docs_state_the_process_terms_and_limits_as_the_code_holds_them() -> None:
    import json

    from tritonlab.result_files import MAX_RESULT_BYTES
    from tritonlab.stats.process_term import PERCENTILE_FIGURES

    measuring = " ".join((ROOT / "docs/measuring.md").read_text().split())
    assert "every latency percentile (p95 and p99) takes p99's" in measuring
    assert {"latency_p95", "latency_p99"} <= set(PERCENTILE_FIGURES)
    rates = json.loads((ROOT / "src/tritonlab/stats/calibration_rates.json").read_text())
    assert (
        rates["process_term"]["latency_p99_sd_log"] == 0.0
    )  # the page says the shipped p99 term is zero
    assert "The latency percentiles' size as shipped is zero" in measuring
    sweeps = " ".join((ROOT / "docs/sweeps.md").read_text().split())
    assert "a cell over 64 MiB (`result_files.MAX_RESULT_BYTES`)" in sweeps
    assert MAX_RESULT_BYTES == 64 * 1024 * 1024
    assert "only when the two picks are different variants" in sweeps


# --- audits 61-63 (at 6f54cad) -------------------------------------------------------------------


def _log(name: str) -> str:
    return (ROOT / "examples" / name / "docs" / "experiment_log.md").read_text()


def test_the_roofline_says_instances_took_turns_where_every_batch_held_every_request() -> None:
    demo = _log("simple_mlp_demo")
    assert "its 2 instances took turns (every batch held all 8 requests in flight)" in demo
    assert "executions overlapped" not in demo


def test_an_execution_is_priced_at_the_batch_formed_even_where_the_batch_did_not_miss() -> None:
    assert (
        "an execution cost 768 µs, not 592 µs, from the batch it formed: at the measured 5.0 "
        "requests the model gives 659 µs, within 25%" in _log("simple_mlp_sweep_blocks")
    )


def test_why_lines_stay_within_their_intervals_and_loads() -> None:
    sweep = _log("simple_mlp_sweep")
    assert "whether throughput moved with them this run cannot tell (CI -15% to +56%)" in sweep
    assert (
        "executions ran in parallel: the server used 1.22 cores (was 1.03), which outweighed"
        in sweep
    )
    assert (
        "with one request in flight nothing ran in parallel, so the rest of the miss is in the "
        "client's round trip outside the server" in sweep
    )
    trace = (ROOT / "examples/simple_mlp_trace/tune_trace/docs/experiment_log.md").read_text()
    assert "throughput is the offered rate while both keep up, so it could not show them" in trace


def test_a_tunes_method_does_not_describe_whole_interleaved_rounds() -> None:
    assert "- A tune measures its search's points one after another" in _log("resnet18_cnn_tune")
    assert "- Repeats are measured in interleaved rounds" not in _log("resnet18_cnn_tune")
    assert "- Repeats are measured in interleaved rounds" in _log("simple_mlp")


def test_the_efficiency_lead_carries_the_controls_reach_and_pages_their_placement() -> None:
    assert (
        "a lead of about that size may be noise"
        in _log("simple_mlp_cache_fresh").split("## Serving efficiency")[1].split("\n## ")[0]
    )
    aa = (ROOT / "benchmarks/results/aa_floor.md").read_text()
    assert "These runs stored no CPU placement and no process term" in aa
    pipe = (ROOT / "benchmarks/results/pipeline_vs_model_analyzer.md").read_text()
    assert "Note: the re-measurement stored no A/A control and no interference record" in pipe


def test_docs_statements_of_the_verdict_method_carry_the_process_term() -> None:
    sweeps = " ".join((ROOT / "docs/sweeps.md").read_text().split())
    assert "in a co-loaded run widened on throughput and the server's own figures" in sweeps
    tune = " ".join((ROOT / "docs/tune.md").read_text().split())
    assert "server's own figures widened by the process term, as in a co-loaded sweep" in tune
    assert "seen on the CNN on 2 cores at concurrency 64" not in tune  # no stored run shows it


def test_an_open_loop_rate_row_carries_its_warnings_and_tune_tables_their_pairing() -> None:
    assert "| baseline/grpc/b1 | 1,691 (perf_analyzer warned in 1 of its 3 repeats) |" in _log(
        "simple_mlp_sweep"
    )
    assert "| baseline/grpc/b1 | 1,163 |" in _log("simple_mlp_sweep_blocks")  # none warned
    results = (ROOT / "docs/results.md").read_text()
    assert "so these verdicts are not the race's alone" in results
    assert "the race's, paired over its rounds" not in results


def test_instances_outnumbering_the_cores_take_turns_rather_than_add_work() -> None:
    sweep = _log("simple_mlp_sweep_blocks")
    assert (
        "the 2 instances take turns on the server's 1 core: an execution took 1,010 µs (was 679; "
        "higher (+49%, CI +44% to +56%)) although batches shrank, the other instances' turns "
        "included, so it does not by itself show extra work" in sweep
    )
    assert "the instances contend for the cores" not in sweep
