"""A claim test per rule (issue 22, item 5): every explanation rule has a recorded run where it
must fire and one where it must not, and a registry that makes a new rule without both fail.

``CLAIM_TESTS`` maps each rule in ``analysis.rules.RULES`` (and the claims made outside it: the
recommendations' saturation and knee findings, the cost model's "where the model fails" and
"right total for a partly wrong reason" lines) to the test where it must fire and the test
where it must stay silent. Most pairs already lived in the rule's own test module; the tests
below fill the sides that were missing or only synthetic, on the committed examples'
``results/`` (loaded read-only with ``load_run``) or on recorded rows changed in one field with
``test_rules``' helpers.
"""

from __future__ import annotations

import ast
import math
from functools import cache
from pathlib import Path

import pytest
from test_rules import CORES, with_server

from tritonlab.decisions.frontier import (
    closed_loop_curves,
    knee_concurrency,
    knees,
    saturation_findings,
    saturation_over_concurrency,
)
from tritonlab.decisions.recommend_records import (
    KNEE_GAIN_PER_DOUBLING_PCT,
    SATURATION_QUEUE_GROWTH_PCT,
)
from tritonlab.explanation.cost_prediction import MODEL_FAILS_PCT, Prediction
from tritonlab.explanation.knob_rules import cache_effect, threads_effect
from tritonlab.explanation.measurement_rules import backend_fallback
from tritonlab.explanation.rule_support import RuleContext
from tritonlab.explanation.rules import RULES
from tritonlab.report.cost_model_text import cost_model_section
from tritonlab.report.recommend_section import recommendations_section
from tritonlab.report.run_data import RunData, load_run
from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.config_key import ConfigKey
from tritonlab.stats.verdicts import HIGHER, LOWER, compare

UNIT = Path(__file__).resolve().parent
EXAMPLES = UNIT.parents[1] / "examples"

# rule (or claim) -> (the test where it must fire, the test where it must not), as
# "module.py::test_function" in tests/unit.
CLAIM_TESTS: dict[str, tuple[str, str]] = {
    "sequence_backlog": (
        "test_sequence_rules.py::test_the_direct_backlog_is_named_instead_of_a_busy_instance",
        "test_sequence_rules.py::test_no_backlog_without_more_sequences_than_slots",
    ),
    "strategy_effect": (
        "test_sequence_rules.py::test_oldest_is_named_where_throughput_rose_with_the_busy_share",
        "test_sequence_rules.py::test_a_strategy_change_that_moved_nothing_names_no_cause",
    ),
    "batching_amortised": (
        "test_rules.py::test_batching_raised_throughput_on_zero_delay",
        "test_rules.py::test_no_batching_finding_when_compute_per_inference_did_not_fall",
    ),
    "batching_compute_bound": (
        "test_compute_bound.py::test_batching_buys_little_when_the_model_dominates",
        "test_compute_bound.py::test_seed_mlp_batching_is_amortised_not_compute_bound",
    ),
    "queue_delay_trap": (
        "test_rules.py::test_trap_fires_on_both_5ms_variants",
        "test_rules.py::test_trap_does_not_fire_without_a_delay",
    ),
    "instances_effect": (
        "test_rules.py::test_instances_effect_on_recorded_x2_blames_the_batcher",
        "test_rules.py::test_instances_effect_only_for_instance_only_changes",
    ),
    "threads_effect": (
        "test_compute_bound.py::test_threads_against_instances",
        "test_rule_claims.py::test_threads_effect_silent_without_a_threads_only_change",
    ),
    "engine_effect": (
        "test_engines.py::test_engine_effect_names_the_fixed_cost_when_served_executions_show_it",
        "test_engines.py::test_engine_effect_does_not_fire_on_other_changes",
    ),
    "cache_effect": (
        "test_explain.py::test_recorded_cache_runs_word_repeated_and_fresh_inputs_apart",
        "test_rule_claims.py::test_cache_effect_silent_where_the_cache_did_not_change_or_count",
    ),
    "saturated_server": (
        "test_rules.py::test_saturated_baseline",
        "test_rules.py::test_not_saturated",
    ),
    "cpu_bound": (
        "test_rules.py::test_cpu_bound_when_cpu_figures_are_high",
        "test_rules.py::test_no_flags_on_the_recorded_run",
    ),
    "littles_law": (
        "test_rules.py::test_littles_law_flags_perturbed_latency",
        "test_rules.py::test_littles_law_tolerates_small_deviation",
    ),
    "unstable_measurement": (
        "test_rules.py::test_unstable_flag",
        "test_rules.py::test_no_flags_on_the_recorded_run",
    ),
    "queue_cross_check": (
        "test_rules.py::test_queue_cross_check_flags_disagreement",
        "test_rules.py::test_queue_cross_check_tolerance_and_floor",
    ),
    "perf_analyzer_warnings": (
        "test_rule_claims.py::test_perf_warnings_fire_on_the_recorded_overloaded_rates",
        "test_rules.py::test_no_warning_flag_on_the_recorded_run",
    ),
    "backend_fallback": (
        "test_fault_records.py::test_backend_fallbacks_are_flagged",
        "test_rule_claims.py::test_backend_fallback_silent_on_every_recorded_run",
    ),
    # --- claims made outside RULES ---
    "saturation_over_concurrency": (
        "test_rule_claims.py::test_saturation_fires_on_the_recorded_mlp_sweep",
        "test_rule_claims.py::test_no_saturation_on_the_recorded_curves_that_keep_paying",
    ),
    "knee_concurrency": (
        "test_rule_claims.py::test_knee_fires_where_the_recorded_baseline_stops_paying",
        "test_rule_claims.py::test_no_early_knee_on_recorded_curves_that_keep_paying",
    ),
    "cost_model_failure": (
        "test_rule_claims.py::test_cost_model_failures_listed_on_the_recorded_mlp_sweep",
        "test_rule_claims.py::test_no_cost_model_failure_on_recorded_runs_it_predicts",
    ),
    "cost_model_term_misses": (
        "test_rule_claims.py::test_term_misses_listed_on_the_recorded_seed_example",
        "test_rule_claims.py::test_no_term_miss_line_on_recorded_runs_without_one",
    ),
}

# The claims outside RULES, by the function that makes them.
EXTRA_CLAIMS = {
    "saturation_over_concurrency": saturation_over_concurrency,
    "knee_concurrency": knee_concurrency,
    "cost_model_failure": Prediction.failure,
    "cost_model_term_misses": Prediction.term_misses,
}


@cache
def _test_functions(module: str) -> frozenset[str]:
    tree = ast.parse((UNIT / module).read_text())
    return frozenset(
        n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
    )


def test_every_rule_has_a_firing_and_a_silent_claim_test() -> None:
    rules = [rule.__name__ for rule in RULES]
    missing = [name for name in rules if name not in CLAIM_TESTS]
    assert not missing, f"rules without a fire/silent claim test in CLAIM_TESTS: {missing}"
    assert set(CLAIM_TESTS) == set(rules) | set(EXTRA_CLAIMS), "a stale CLAIM_TESTS entry"
    for claim, (fires, silent) in CLAIM_TESTS.items():
        assert fires != silent, claim
        for ref in (fires, silent):
            module, name = ref.split("::")
            assert (UNIT / module).is_file(), (claim, ref)
            assert name in _test_functions(module), f"{claim}: no test {ref}"


# --- recorded runs -------------------------------------------------------------------------


@cache
def _example(name: str) -> RunData:
    return load_run(EXAMPLES / name)


def _rows(run: RunData, load_key: str) -> dict[str, VariantSummary]:
    return {s.variant.name: s for s in run.summaries if s.load_key == load_key}


def _ctx(names: dict[str, VariantSummary], subject: str, reference: str) -> RuleContext:
    return RuleContext(
        names[subject], names["baseline"], names[reference], CORES, tuple(names.values())
    )


def _fired(run: RunData) -> dict[tuple[str, str], list[str]]:
    """(load key, variant) -> the rules that fired in the run's own analyses."""
    return {
        (a.load_key, r.summary.variant.name): sorted(f.rule for f in r.findings)
        for a in run.analyses
        for r in a.reports
    }


# --- cache_effect ----------------------------------------------------------------------------


@pytest.mark.parametrize("load", ["grpc_b1_c4", "grpc_b1_c16"])
def test_cache_effect_silent_where_the_cache_did_not_change_or_count(load: str) -> None:
    """The recorded cache run: the response cache fires only where it alone was switched on;
    batching against no batching, and batching against the cache without batching (two
    configurations that differ in batching), are not the cache's doing; nor is a cache that
    counted no lookup."""
    run = _example("simple_mlp_cache")
    fired = _fired(run)
    with_cache = {v for (key, v), rules in fired.items() if key == load and "cache-effect" in rules}
    assert with_cache == {"nobatch_cache"}
    names = _rows(run, load)
    assert cache_effect(_ctx(names, "batch_0us", "baseline")) is None
    assert cache_effect(_ctx(names, "batch_0us_cache", "nobatch_cache")) is None
    assert cache_effect(_ctx(names, "baseline", "baseline")) is None
    # the same cells with no lookup counted: nothing measured to explain the change with
    found = cache_effect(_ctx(names, "nobatch_cache", "baseline"))
    assert found is not None and found.figures["cache_hits"] > 0  # the control fires ...
    names["nobatch_cache"] = with_server(names["nobatch_cache"], cache_hit_count=0)
    assert cache_effect(_ctx(names, "nobatch_cache", "baseline")) is None  # ... this does not


# --- threads_effect --------------------------------------------------------------------------


def test_threads_effect_silent_without_a_threads_only_change() -> None:
    """The recorded CNN example (threads x instances): only threads_2 against the baseline is
    a threads change; an instance change, batching, or threads together with batching are
    not."""
    run = _example("resnet18_cnn")
    fired = _fired(run)
    assert [v for (_, v), rules in fired.items() if "threads-effect" in rules] == ["threads_2"]
    names = _rows(run, "grpc_b1_c4")
    assert threads_effect(_ctx(names, "threads_2", "baseline")) is not None  # the control
    assert threads_effect(_ctx(names, "instances_2", "baseline")) is None
    assert threads_effect(_ctx(names, "batch_0ms_x1", "baseline")) is None
    assert threads_effect(_ctx(names, "threads_2", "batch_0ms_x1")) is None  # two knobs
    assert threads_effect(_ctx(names, "threads_2", "threads_2")) is None  # nothing changed


# --- perf_analyzer_warnings, backend_fallback ---------------------------------------------------


def test_perf_warnings_fire_on_the_recorded_overloaded_rates() -> None:
    """The recorded MLP sweep's open-loop rates where perf_analyzer said it fell behind: every
    variant with a warned repeat, and only those, carries the flag with its count."""
    run = _example("simple_mlp_sweep")
    warned = {
        (s.load_key, s.variant.name): sum(1 for c in s.cells if c.perf.warnings)
        for s in run.summaries
    }
    flagged = {
        (a.load_key, r.summary.variant.name): f
        for a in run.analyses
        for r in a.reports
        for f in r.findings
        if f.rule == "perf-warnings"
    }
    assert flagged, "the recorded sweep has overloaded open-loop rates"
    assert set(flagged) == {key for key, n in warned.items() if n}
    for key, finding in flagged.items():
        assert finding.kind == "flag"
        assert finding.figures["warned_repeats"] == warned[key]
        assert "not able to keep up" in finding.text or "not stabilizing" in finding.text


RECORDED = (
    "simple_mlp",
    "simple_mlp_rerun",
    "simple_mlp_backends",
    "simple_mlp_cache",
    "simple_mlp_cache_fresh",
    "simple_mlp_sweep",
    "simple_mlp_sweep_blocks",
    "tiny_cnn",
    "resnet18_cnn",
    "resnet18_cnn_backends",
    "bert_encoder",
    "bert_encoder_sweep",
)


@pytest.mark.parametrize("name", RECORDED)
def test_backend_fallback_silent_on_every_recorded_run(name: str) -> None:
    """No committed run's backend ran a batch request by request: the flag must not appear."""
    run = _example(name)
    assert sum(c.backend_fallbacks for c in run.cells) == 0
    assert all("backend-fallback" not in rules for rules in _fired(run).values())
    for s in run.summaries:
        assert backend_fallback(RuleContext(s, s, s, CORES, (s,))) is None


# --- saturation over concurrency (recommendations) ---------------------------------------------

BASELINE_GRPC = ConfigKey("baseline", "grpc", 1)


def test_saturation_fires_on_the_recorded_mlp_sweep() -> None:
    """The recorded MLP sweep's baseline curve: 8 -> 16 in flight, the queue per request
    nearly tripled (1,809 -> 5,019 µs) and throughput fell; no other curve saturates."""
    run = _example("simple_mlp_sweep")
    found = saturation_findings(run.summaries)
    assert [s.curve for s in found] == [BASELINE_GRPC]
    sat = found[0]
    assert (sat.concurrency_before, sat.concurrency_after) == (8, 16)
    assert (round(sat.queue_us_before), round(sat.queue_us_after)) == (1809, 5019)
    assert sat.queue_us_after >= sat.queue_us_before * (1 + SATURATION_QUEUE_GROWTH_PCT / 100)
    assert sat.throughput_verdict.word == LOWER
    assert run.recommendations is not None
    section = "\n".join(recommendations_section(run.recommendations, run.summaries))
    assert (
        "- `baseline/grpc/b1`: Saturated from concurrency 8: going to 16, queue time rose from "
        "1,809 to 5,019 µs per request" in section
    )


def test_no_saturation_on_the_recorded_curves_that_keep_paying() -> None:
    """The same sweep's batching curves: throughput rises with every doubling (batches grow),
    so however the queue moves they are not saturated; a one-level curve has no step."""
    run = _example("simple_mlp_sweep")
    curves = closed_loop_curves(run.summaries)
    for name in ("batch_0us", "batch_1000us", "batch_5000us", "batch_0us_x2"):
        curve = curves[ConfigKey(name, "grpc", 1)]
        first, last = curve[0], curve[-1]
        assert compare("throughput", first.throughput, last.throughput).word == HIGHER
        assert saturation_over_concurrency(curve) is None, name
    http = curves[ConfigKey("baseline", "http", 1)]
    assert len(http) == 1 and saturation_over_concurrency(http) is None
    # the recorded sequence-length sweep: one level per curve, nothing to saturate
    assert saturation_findings(_example("bert_encoder_sweep").summaries) == []


# --- knees (recommendations) ---------------------------------------------------------------------


def _gain_per_doubling_pct(low: VariantSummary, high: VariantSummary) -> float:
    c0, c1 = low.settings.concurrency or 1, high.settings.concurrency or 1
    t0, t1 = low.throughput.median or 0.0, high.throughput.median or 0.0
    doublings = math.log2(c1 / c0)
    ratio: float = (t1 / t0) ** (1.0 / doublings)
    return 100.0 * (ratio - 1.0)


def _clearly_beaten(low: VariantSummary, high: VariantSummary) -> bool:
    return (
        compare("throughput", low.throughput, high.throughput).word == HIGHER
        and _gain_per_doubling_pct(low, high) >= KNEE_GAIN_PER_DOUBLING_PCT
    )


def test_knee_fires_where_the_recorded_baseline_stops_paying() -> None:
    """The recorded MLP sweep's baseline (1, 4, 8, 16 in flight, one instance, no batching):
    1 -> 4 clearly pays, nothing above 4 clearly beats it, so the knee is 4, below the top."""
    run = _example("simple_mlp_sweep")
    curve = closed_loop_curves(run.summaries)[BASELINE_GRPC]
    assert [s.settings.concurrency for s in curve] == [1, 4, 8, 16]
    assert knees(run.summaries)[BASELINE_GRPC] == 4
    one, four, *higher = curve
    assert _clearly_beaten(one, four)
    assert not any(_clearly_beaten(four, h) for h in higher)
    assert run.recommendations is not None
    section = "\n".join(recommendations_section(run.recommendations, run.summaries))
    assert "| baseline/grpc/b1 | 4 |" in section


def test_no_early_knee_on_recorded_curves_that_keep_paying() -> None:
    """Where every measured level is clearly beaten by a later one, no level below the top is
    called the knee; a curve of one level (http, or each sequence length) gets none."""
    run = _example("simple_mlp_sweep")
    curves = closed_loop_curves(run.summaries)
    found = knees(run.summaries)
    for name in ("batch_0us", "batch_0us_x2"):
        curve = curves[ConfigKey(name, "grpc", 1)]
        assert all(_clearly_beaten(low, curve[-1]) for low in curve[:-1]), name
        assert found[ConfigKey(name, "grpc", 1)] == curve[-1].settings.concurrency == 16
    single = [key for key, curve in curves.items() if len(curve) == 1]
    assert single and all(key.protocol == "http" for key in single)
    assert not set(single) & set(found)
    assert knees(_example("bert_encoder_sweep").summaries) == {}


# --- the cost model's "where the model fails" and "partly wrong reason" lines ---------------------


def _cost_text(run: RunData) -> str:
    return "\n".join(cost_model_section(run.cost_model, run.predictions, run.unfitted_loads))


def _block(text: str, heading: str) -> str:
    """The bullet lines under ``heading`` (up to the next blank line after them)."""
    start = text.index(heading)
    lines = text[start:].split("\n")[2:]
    return "\n".join(lines[: lines.index("")])


def _failure_line(p: Prediction) -> str:
    return f"- {p.description} at {p.load_key}: predicted {p.throughput_infer_per_s:,.0f}"


def test_cost_model_failures_listed_on_the_recorded_mlp_sweep() -> None:
    """The recorded MLP sweep: the predictions off by more than 25% (concurrency 1, where the
    client's round trip dominates, and some batching points) are listed with the term that
    missed; the others are not."""
    run = _example("simple_mlp_sweep")
    failing = [p for p in run.predictions if p.fails]
    assert len(failing) == 7
    text = _cost_text(run)
    assert f"{len(failing)} miss by more than {MODEL_FAILS_PCT:g}%" in text
    block = _block(text, f"Where the model fails (|error| > {MODEL_FAILS_PCT:g}%):")
    assert len(block.splitlines()) == len(failing)
    for p in failing:
        assert abs(p.throughput_error_pct or 0.0) > MODEL_FAILS_PCT
        assert f"{_failure_line(p)}, measured" in block and f": {p.failure()}." in block
    for p in run.predictions:
        if not p.fails:
            assert _failure_line(p) not in block
    baseline_c1 = next(p for p in failing if p.variant == "baseline" and p.load_key == "grpc_b1_c1")
    # one request in flight: no parallelism to miss (issue 36 audit 62)
    assert "the rest of the miss is in the client's round trip outside the server" in (
        baseline_c1.failure() or ""
    )


@pytest.mark.parametrize("name", ["resnet18_cnn", "bert_encoder_sweep", "simple_mlp"])
def test_no_cost_model_failure_on_recorded_runs_it_predicts(name: str) -> None:
    run = _example(name)
    assert run.predictions and all(not p.fails for p in run.predictions)
    assert all(abs(p.throughput_error_pct or 0.0) <= MODEL_FAILS_PCT for p in run.predictions)
    text = _cost_text(run)
    assert f"0 miss by more than {MODEL_FAILS_PCT:g}%" in text
    assert "Where the model fails" not in text


PARTLY_WRONG = "(the right total for a partly wrong reason):"


def test_term_misses_listed_on_the_recorded_seed_example() -> None:
    """The recorded MLP example: the two 5 ms batching variants' throughput is right (the
    delay sets it) while their executions cost far more than predicted; the log says so."""
    run = _example("simple_mlp")
    partial = {p.variant: p for p in run.predictions if not p.fails and p.term_misses()}
    # the 0 ms row's queue: 663 µs predicted, 415 measured (a term since issue 36's audit)
    assert set(partial) == {"batch_0ms_x1", "batch_5ms_x1", "batch_5ms_x2"}
    block = _block(_cost_text(run), PARTLY_WRONG)
    for name in ("batch_5ms_x1", "batch_5ms_x2"):
        p = partial[name]
        assert (p.execution_error_pct or 0.0) < -MODEL_FAILS_PCT
        assert f"- {p.description} at {p.load_key}: an execution cost " in block
        assert f"{p.measured_execution_us:,.0f} µs, not {p.execution_us:,.0f} µs" in block
    assert "requests queued 415 µs, not 663 µs" in block
    assert len(block.splitlines()) == 3
    # batch_5ms_x1 runs one instance (nothing to contend with), batch_5ms_x2 two whose every
    # batch held all 8 requests in flight: one execution at a time (issue 36 audit)
    assert (
        "1,209 µs, not 875 µs (not shown by these figures; with every batch holding all 8" in block
    )
    assert "1,424 µs, not 875 µs (not instances contending: every batch took all 8" in block


@pytest.mark.parametrize("name", ["resnet18_cnn"])
def test_no_term_miss_line_on_recorded_runs_without_one(name: str) -> None:
    """A run whose rows are right in every term (the CNN): no "partly wrong reason" line. (The
    fresh cache run was one too, its misses all failures, until it was measured again quietly
    for issue 36.)"""
    run = _example(name)
    assert all(p.fails or not p.term_misses() for p in run.predictions)
    assert PARTLY_WRONG not in _cost_text(run)
