"""The experiment log's cost-model section: the fitted terms, each configuration's prediction
against its measurement, and where the model misses."""

from __future__ import annotations

import statistics

from tritonlab.experiments.plan import sequence_length_of
from tritonlab.explanation.cost_model import CostModel
from tritonlab.explanation.cost_prediction import MODEL_FAILS_PCT, Prediction
from tritonlab.report.text_format import num
from tritonlab.stats.workload import shapes_text


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.0f}%"


def _misses_lines(predictions: list[Prediction]) -> list[str]:
    """The throughput error, where the model fails, and where a term is off (each if any);
    points whose offered rate perf_analyzer did not keep up are set apart, not counted (issue
    36 audit: two such points counted as misses and given causes)."""
    apart = [p for p in predictions if p.rate_not_kept]
    predictions = [p for p in predictions if not p.rate_not_kept]
    errors = [abs(e) for p in predictions if (e := p.throughput_error_pct) is not None]
    failures = [p for p in predictions if p.fails]
    lines = [""]
    if errors:
        lines += [
            f"Throughput error: median {statistics.median(errors):.0f}%, worst "
            f"{max(errors):.0f}% over {len(errors)} configurations and loads; "
            f"{len(failures)} miss by more than {MODEL_FAILS_PCT:g}%.",
            "",
        ]
    if apart:
        listed = ", ".join(f"{p.description} at {p.load_key}" for p in apart)
        lines += [
            f"Not counted ({len(apart)}): {listed}. perf_analyzer did not keep up the offered "
            "rate in a repeat there (it sent some requests late), so the load measured is not "
            "the one predicted (the log leaves these points out of its picks too); their rows "
            "above are no test of the model.",
            "",
        ]
    if failures:
        lines += [
            f"Where the model fails (|error| > {MODEL_FAILS_PCT:g}%):",
            "",
            *(
                f"- {p.description} at {p.load_key}: predicted {p.throughput_infer_per_s:,.0f}, "
                f"measured {num(p.measured_throughput_infer_per_s)} infer/s: {p.failure()}."
                for p in failures
            ),
            "",
        ]
    partial = [p for p in predictions if not p.fails and p.term_misses()]
    if partial:
        lines += [
            f"Throughput within {MODEL_FAILS_PCT:g}%, but a term off by more than "
            f"{MODEL_FAILS_PCT:g}% (the right total for a partly wrong reason):",
            "",
            *(f"- {p.description} at {p.load_key}: {'; '.join(p.term_misses())}." for p in partial),
            "",
        ]
    return lines


def _unfitted_lines(model: CostModel, predictions: list[Prediction], loads: list[str]) -> list[str]:
    """The loads left out: their rows sent other input shapes than the terms were timed at."""
    if not loads:
        return []
    lengths = {sequence_length_of(p.load_key) for p in predictions}
    shapes = shapes_text(dict(model.input_shapes or ()))
    fitted = (
        f"sequence length {next(iter(lengths))} ({shapes})"
        if len(lengths) == 1 and None not in lengths
        else shapes
    )
    return [
        f"The in-process terms were timed at {fitted}; {', '.join(loads)} sent other input "
        "shapes, so the model predicts nothing there and the explanations name no cause from "
        "it at those loads.",
        "",
    ]


def cost_model_section(
    model: CostModel | None,
    predictions: list[Prediction],
    unfitted_loads: list[str] | None = None,
    graph: bool = True,
    stateful: bool = False,
) -> list[str]:
    """The fitted terms, predicted against measured per configuration and load (at the input
    shapes the terms were timed at; ``unfitted_loads`` are named as left out), and misses;
    ``graph``: whether the measured model is an ONNX graph (a Python model or a pipeline of a
    repository is not, and has no cost model); ``stateful``: whether it carries state (served
    as sequences, which the serving-path probes skip)."""
    lines = ["## Serving cost model: predicted against measured", ""]
    if model is None and not graph:
        return [
            *lines,
            "Not available for this run: its terms are timed in-process on an ONNX graph, and a "
            "Python model, an ensemble or a BLS model has none to time; the pipeline steps' "
            "statistics say where the time goes.",
            "",
        ]
    if model is None and stateful:
        return [
            *lines,
            "Not available for this run: its model carries state between requests (served by "
            "the sequence batcher), and the serving-path probes, which batch requests of many "
            "streams into one execution, cannot run it; the sequence rules explain its rows.",
            "",
        ]
    if model is None:
        return [
            *lines,
            "Not available for this run: it needs the serving-path cells measured in the "
            "same server run (`results/serving_path/`; a remote or external server without "
            "tritonlab's backends has none) and the in-process timings (`operators.json`).",
            "",
        ]
    points = ", ".join(
        f"{p.requests_per_execution:.1f} requests per execution: "
        f"{p.compute_us_per_execution:,.0f} µs"
        for p in model.serving_points
    )
    return [
        *lines,
        "One execution carrying r requests of k samples is modelled as "
        "T(r) = S_exec + S_req·r + F + P·r·k, and a busy instance takes T(r) + G(r) per "
        "execution; each term measured in this run "
        "(the model and its assumptions: `tritonlab.explanation.cost_model`):",
        "",
        "| term | µs | measured by |",
        "|---|---|---|",
        f"| S_exec: serving path, fixed per execution | {model.serving_fixed_us:,.0f} | null "
        f"model (the model's inputs and outputs, zeros) through the same backend in the same "
        f"server ({points}) |",
        f"| S_req: serving path, per request | {model.serving_per_request_us:,.1f} | the same "
        "cells: least-squares line (predictions interpolate between the measured points) |",
        f"| F: model, fixed per execution | {model.model_fixed_us:,.1f} | in-process "
        "onnxruntime fit (1 thread, hot loop) |",
        f"| P: model, per sample | {model.model_per_sample_us:,.1f} | the same fit |",
        *(
            f"| F, P on {engine} | {fixed:,.1f}, {per_sample:,.1f} | in-process {engine} fit "
            "(1 stream, the same batches), less the same null-model call |"
            for engine, fixed, per_sample in model.engine_terms
        ),
        "| G: hand-off between executions of a busy instance | "
        + ", ".join(
            f"{model.gap_us(p.requests_per_execution):,.0f} at {p.requests_per_execution:.1f}"
            for p in model.serving_points[:-1] or model.serving_points
        )
        + " | null model: one instance's cycle (requests per execution / requests per second) "
        "minus its compute; the probe that takes every request in flight is left out (its gap "
        "holds the clients' round trip) |",
        f"| L0: client round trip outside the server | {model.client_overhead_us:,.0f} | "
        "null model without batching: client latency minus server time |",
        "",
        f"With {model.cores} cores, the instance count and perf_analyzer's measured CPU, it "
        "predicts each configuration's batch, execution cost, throughput and queue:",
        "",
        "| config | load | regime | mean requests / execution (pred / meas) | µs per execution "
        "(pred / meas) | infer/s (pred / meas) | error | queue µs (pred / meas) |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {p.description} | {p.load_key} | {p.regime} | "
            f"{p.requests_per_execution:.1f} / {num(p.measured_requests_per_execution, 1)} | "
            f"{p.execution_us:,.0f} / {num(p.measured_execution_us)} | "
            f"{p.throughput_infer_per_s:,.0f} / {num(p.measured_throughput_infer_per_s)} | "
            f"{_pct(p.throughput_error_pct)} | {num(p.queue_us)} / {num(p.measured_queue_us)} |"
            for p in predictions
        ),
        *_misses_lines(predictions),
        *_unfitted_lines(model, predictions, unfitted_loads or []),
    ]
