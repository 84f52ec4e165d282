"""Comparability is a precondition of every rule (issue 22): two rows are compared only under the
same workload (model, input shapes / sequence length, client, load), else the comparison says
what differs and the rule makes no claim. Counter-examples from the recorded
``examples/bert_encoder_sweep`` (three configurations at sequence lengths 128, 32 and 512), each
next to the same comparison at one length, where the rule still fires."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tritonlab.decisions.frontier import (
    closed_loop_curves,
    saturation_findings,
    saturation_over_concurrency,
)
from tritonlab.explanation.explain import choose_reference, fitted_cost_model
from tritonlab.explanation.knob_rules import threads_effect
from tritonlab.explanation.rule_support import RuleContext
from tritonlab.explanation.rules import instances_effect
from tritonlab.perf.settings import PerfSettings
from tritonlab.report.cost_model_text import cost_model_section
from tritonlab.report.run_data import RunData, load_run
from tritonlab.stats.aggregate import VariantSummary, compare_figure, why_not_comparable
from tritonlab.stats.config_key import ConfigKey
from tritonlab.stats.verdicts import NOT_COMPARABLE
from tritonlab.stats.workload import same_workload, workload_differences

SWEEP = Path(__file__).resolve().parents[2] / "examples" / "bert_encoder_sweep"
CORES = 2


@pytest.fixture(scope="module")
def sweep() -> RunData:
    return load_run(SWEEP)


def _row(run: RunData, variant: str, length: int) -> VariantSummary:
    key = f"grpc_b1_c4_s{length}"
    return next(s for s in run.summaries if s.variant.name == variant and s.load_key == key)


def _ctx(run: RunData, subject: VariantSummary, reference: VariantSummary) -> RuleContext:
    model = fitted_cost_model(run.cost_model, subject, reference)
    return RuleContext(subject, reference, reference, CORES, (), model)


# --- the one function: same workload, or what differs ----------------------------------------


def test_rows_at_one_length_are_the_same_workload(sweep: RunData) -> None:
    a, b = _row(sweep, "baseline", 512), _row(sweep, "nobatch_x2", 512)
    assert workload_differences(a, b) == []
    assert same_workload(a, b)


def test_rows_at_two_lengths_differ_in_sequence_length(sweep: RunData) -> None:
    a, b = _row(sweep, "baseline", 32), _row(sweep, "baseline", 512)
    assert workload_differences(a, b) == ["different sequence lengths (32 and 512)"]
    assert not same_workload(a, b)
    assert why_not_comparable(a, b) == "different sequence lengths (32 and 512)"
    verdict = compare_figure("throughput", "throughput", a, b)
    assert verdict.word == NOT_COMPARABLE
    assert verdict.phrase() == "not comparable (different sequence lengths (32 and 512))"


def test_input_shapes_protocol_and_batch_are_named(sweep: RunData) -> None:
    """Without a length in the key the shapes themselves differ; the client counts for rules
    but not for a verdict between two clients at the same load (the picks' runner-ups)."""
    a = _row(sweep, "baseline", 128)
    b = dataclasses.replace(
        a,
        load_key="grpc_b1_c4",
        settings=dataclasses.replace(
            a.settings, input_shapes={"input_ids": (64,)}, protocol="http", batch_size=4
        ),
    )
    assert workload_differences(a, b) == [
        "different input shapes (attention_mask [128], input_ids [128], token_type_ids [128] "
        "and input_ids [64])",
        "different protocols (grpc and http)",
        "different client batch sizes (1 and 4)",
    ]
    same_input = dataclasses.replace(b, settings=dataclasses.replace(b.settings, input_shapes={}))
    assert workload_differences(a, same_input, client=False) == [
        "different input shapes (attention_mask [128], input_ids [128], token_type_ids [128] "
        "and none)"
    ]
    twin = dataclasses.replace(a, settings=dataclasses.replace(a.settings, protocol="http"))
    assert why_not_comparable(a, twin) is None
    assert not same_workload(a, twin)


# --- saturation over concurrency: one curve per length -----------------------------------------


def test_recorded_sweep_has_no_saturation_step_across_lengths(sweep: RunData) -> None:
    """The log said "Saturated from concurrency 4: going to 4, queue time rose from 30,054 to
    451,037 µs": sequence 32 against 512 at one concurrency. Each length is its own curve."""
    curves = closed_loop_curves(sweep.summaries)
    assert ConfigKey("baseline", "grpc", 1, 512) in curves
    assert all(len(curve) == 1 for curve in curves.values())
    assert str(ConfigKey("baseline", "grpc", 1, 512)) == "baseline/grpc/b1/s512"
    assert saturation_findings(sweep.summaries) == []
    across = [_row(sweep, "baseline", 32), _row(sweep, "baseline", 512)]
    assert saturation_over_concurrency(across) is None


def test_saturation_still_fires_up_one_length(sweep: RunData) -> None:
    """The same rows as a curve at one length (s32 at concurrency 4, s512's figures as if
    measured at concurrency 8 with sequence 32): queue up x15, throughput down, a step up."""
    low, high = _row(sweep, "baseline", 32), _row(sweep, "baseline", 512)
    settings: PerfSettings = dataclasses.replace(low.settings, concurrency=8)
    high = dataclasses.replace(high, load_key="grpc_b1_c8_s32", settings=settings)
    sat = saturation_over_concurrency([low, high])
    assert sat is not None
    assert (sat.curve, sat.concurrency_before, sat.concurrency_after) == (
        ConfigKey("baseline", "grpc", 1, 32),
        4,
        8,
    )


# --- rules compare rows of one workload only ----------------------------------------------------


def test_a_rule_makes_no_claim_across_lengths(sweep: RunData) -> None:
    t2 = _row(sweep, "nobatch_t2", 512)
    assert threads_effect(_ctx(sweep, t2, _row(sweep, "baseline", 512))) is not None
    assert threads_effect(_ctx(sweep, t2, _row(sweep, "baseline", 32))) is None
    x2 = _row(sweep, "nobatch_x2", 512)
    assert instances_effect(_ctx(sweep, x2, _row(sweep, "baseline", 512))) is not None
    assert instances_effect(_ctx(sweep, x2, _row(sweep, "baseline", 32))) is None


def test_reference_ties_go_to_the_same_workload(sweep: RunData) -> None:
    earlier = [_row(sweep, "baseline", 32), _row(sweep, "baseline", 512)]
    chosen = choose_reference(_row(sweep, "nobatch_t2", 512), earlier)
    assert chosen.load_key == "grpc_b1_c4_s512"


# --- the cost model only where it was fitted ------------------------------------------------------


def test_cost_model_names_no_cause_at_another_length(sweep: RunData) -> None:
    """s512: "the instances contend for the cores: an execution ... took 163,730 µs where the
    cost model predicts 33,452 µs", though the baseline at s512 took 156,992 µs too and the
    terms were timed at sequence 128. At 128 the model's sentence stays."""
    model = sweep.cost_model
    assert model is not None
    x2, base = _row(sweep, "nobatch_x2", 512), _row(sweep, "baseline", 512)
    assert not model.fits(x2) and fitted_cost_model(model, x2, base) is None
    found = instances_effect(_ctx(sweep, x2, base))
    assert found is not None
    assert "contend for the cores" not in found.text
    assert "cost model" not in found.text
    assert "predicted_throughput_after" not in found.figures
    x2, base = _row(sweep, "nobatch_x2", 128), _row(sweep, "baseline", 128)
    assert model.fits(x2)
    found = instances_effect(_ctx(sweep, x2, base))
    assert found is not None and "The cost model predicts 30 -> 59 infer/s" in found.text


def test_no_prediction_at_another_length(sweep: RunData) -> None:
    assert {p.load_key for p in sweep.predictions} == {"grpc_b1_c4_s128"}
    assert sweep.unfitted_loads == ["grpc_b1_c4_s32", "grpc_b1_c4_s512"]
    text = "\n".join(cost_model_section(sweep.cost_model, sweep.predictions, sweep.unfitted_loads))
    assert "grpc_b1_c4_s512 |" not in text
    assert "timed at sequence length 128" in text
    assert "grpc_b1_c4_s32, grpc_b1_c4_s512 sent other input shapes" in text
    rows = [r for a in sweep.analyses for r in a.reports if r.summary.load_key.endswith("s512")]
    assert rows and all("cost model" not in r.result for r in rows)


def test_a_model_without_recorded_shapes_fits_every_row(sweep: RunData) -> None:
    """Runs that did not record their inputs (older manifests) keep their predictions."""
    assert sweep.cost_model is not None
    unknown = dataclasses.replace(sweep.cost_model, input_shapes=None)
    assert unknown.fits(_row(sweep, "baseline", 512))
