"""``tritonlab tune``: search for the best configuration of a model, adaptively, and say why.

Each step prints one line (what was measured, what came back, why it was measured); the end
prints the pick, the runner-up and the verdict between them, and where the ready-to-deploy
``config.pbtxt`` and the reports are.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from tritonlab import gateway
from tritonlab.cli.common import app, err, out, resume_hint, user_errors
from tritonlab.cli.options import (
    EngineOpt,
    FreshOpt,
    InputFlags,
    LoadTraceOpt,
    MaxBatchOpt,
    NameOpt,
    ProtocolOpt,
    RayOpt,
    ResumableOutOpt,
    ServerFlags,
    StabilityOpt,
    WindowOpt,
    option_groups,
    target_load_option,
)
from tritonlab.cli.repository_options import RepositoryFlags
from tritonlab.errors import ConfigError
from tritonlab.report.tune_section import figure_span, over_budget_line
from tritonlab.repository.knobs import HELD_KNOBS
from tritonlab.run_layout import RunLayout

if TYPE_CHECKING:
    from tritonlab.decisions.tune_record import TunePick, TuneStep


def _say(text: str, to_out: bool = False) -> None:
    (out if to_out else err).print(text, highlight=False, markup=False, soft_wrap=True)


def _figures(step: TuneStep) -> str:
    rate, p99 = step.throughput_infer_per_s, step.latency_p99_us
    if rate is None:
        return "no measurement"
    p99_text = "n/a" if p99 is None else f"{p99 / 1000:.2f} ms"
    return f"{rate:,.0f} infer/s, p99 {p99_text}"


def _step_line(step: TuneStep) -> None:
    config = step.configuration
    name = (
        f"x{config.instances} {'batching' if config.batching else 'no batching'}"
        f" max {config.max_batch} thr {config.threads or 'default'}"
        f" {config.protocol}"
    )
    reused = " (stored)" if step.reused else ""
    if step.failure:
        reused += f" (perf_analyzer: {step.failure})"
    _say(
        f"[{step.elapsed_s:.0f} s] {step.phase}: {name} "
        f"{'trace' if step.concurrency == 0 else f'c={step.concurrency}'} "
        f"r{step.repeat} -> {_figures(step)}{reused}; why: {step.reason}"
    )


def _summary_line(label: str, pick: TunePick | None) -> str:
    if pick is None:
        return f"{label}: none"
    # a cell may have no p99 (a short window on a loaded node): say so, as the steps do
    thr = figure_span(pick.throughput_infer_per_s, pick.repeats, 1, ",.0f")
    p99 = figure_span(pick.latency_p99_us, pick.repeats, 1000, ",.2f")
    return (
        f"{label}: {pick.description} {pick.where()}: "
        f"{'n/a' if thr is None else thr + ' infer/s'}, "
        f"p99 {'n/a' if p99 is None else p99 + ' ms'} over {pick.repeats} repeats"
    )


@app.command()
@option_groups
def tune(
    model: Annotated[
        Optional[str],  # noqa: UP045
        typer.Argument(
            help="The ONNX model file, or a built-in model: simple_mlp, resnet18_cnn, "
            "bert_encoder (or --repository DIR --model NAME)."
        ),
    ] = None,
    out_dir: ResumableOutOpt = Path("tune-out"),
    goal: Annotated[
        str, typer.Option("--goal", help="throughput (most infer/s) or latency (lowest p99).")
    ] = "throughput",
    p99_budget_ms: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option("--p99-budget-ms", min=0.001, help="The pick's p99 must stay under this."),
    ] = None,
    target_load: Annotated[
        Optional[float],  # noqa: UP045
        target_load_option("goal latency: infer/s the pick must carry."),
    ] = None,
    time_budget_s: Annotated[
        float,
        typer.Option(
            "--time-budget", min=1.0, help="Seconds the search may measure; re-run to go on."
        ),
    ] = 900.0,
    max_race_rounds: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(
            "--max-race-rounds",
            min=2,
            help="Most repeats of the final contenders (default: 12 with --engine blocks, whose "
            "cells are short; 3 classic).",
        ),
    ] = None,
    engine: EngineOpt = "blocks",
    keep_protocol: Annotated[
        bool,
        typer.Option(
            "--keep-protocol", help="Search only --protocol (your clients'); no HTTP/gRPC move."
        ),
    ] = False,
    max_instances: Annotated[
        int, typer.Option("--max-instances", min=1, help="Most instances to try (default 16).")
    ] = 16,
    hold: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option(
            "--hold",
            metavar="KNOB=VALUE",
            help=f"Serve every configuration with this knob at this value, never searched "
            f"(one of: {', '.join(HELD_KNOBS)}; perf_analyzer's samples repeat, so a cache "
            "would always win if tune moved it).",
        ),
    ] = None,
    load_trace: LoadTraceOpt = None,
    name: NameOpt = None,
    protocol: ProtocolOpt = "grpc",
    window_ms: WindowOpt = 2000,
    stability: StabilityOpt = 25.0,
    max_batch_size: MaxBatchOpt = 64,
    *,
    inputs: InputFlags,
    fresh: FreshOpt = False,
    server: ServerFlags,
    ray: RayOpt = None,
    repository: RepositoryFlags,
) -> None:
    """Find the configuration that serves best: ramps concurrency to each configuration's
    knee, moves where the measured figures point (batching, instances, max batch, threads,
    protocol), races the close ones in interleaved rounds, and stops when nothing left can win.

    Example: tritonlab tune model.onnx --out tuned --p99-budget-ms 10
    """
    with user_errors(resume_hint(out_dir)):
        from tritonlab.decisions.search import GOALS, Goal, Knobs
        from tritonlab.experiments.blocks import ENGINE_BLOCKS
        from tritonlab.experiments.manifest import available_cores
        from tritonlab.experiments.plan import MeasurementSettings
        from tritonlab.experiments.repository_plan import repository_baseline
        from tritonlab.experiments.run_folder import claim, discard_results, open_run_folder
        from tritonlab.models.zoo import BUILTIN_MODELS
        from tritonlab.pipeline.held_knobs import parse_holds
        from tritonlab.pipeline.model_choice import bind_step, choose_model
        from tritonlab.pipeline.project import check_engine, check_measuring_host
        from tritonlab.pipeline.tune import TuneSettings, repository_start, run_tune
        from tritonlab.report.build import build_report

        if check_engine(engine) == ENGINE_BLOCKS and ray:
            _say("--ray: the search measures on a cluster node with the classic engine")
            engine = "classic"
        if max_race_rounds is None:
            max_race_rounds = 12 if engine == ENGINE_BLOCKS else 3
        trace = None
        if load_trace is not None:
            from tritonlab.perf.trace import KEPT_TO_PCT, read_trace

            trace = read_trace(load_trace)
            if goal != "latency" or target_load is not None:
                _say(
                    f"--load-trace: the offered load is the trace's ({trace.stats.words()}); "
                    "the goal is the lowest p99 among the configurations that keep to it "
                    f"(serve at least {100 - KEPT_TO_PCT:g}% of its mean rate)"
                    + (" and hold the p99 budget" if p99_budget_ms is not None else "")
                )
            goal = "latency"
            target_load = trace.stats.mean_rate_per_s * (1 - KEPT_TO_PCT / 100)
        if goal not in GOALS:
            raise ConfigError(f"--goal must be one of {', '.join(GOALS)}, got {goal!r}")
        if goal == "latency" and p99_budget_ms is None and trace is None:
            raise ConfigError("--goal latency needs --p99-budget-ms (the latency to stay under)")
        if protocol not in ("grpc", "http"):
            raise ConfigError(f"--protocol must be one of grpc, http, got {protocol!r}")
        held = parse_holds(hold or [])
        options = server.options()
        check_measuring_host(options)
        open_run_folder(
            out_dir,
            {
                "the model": None if model is None or model in BUILTIN_MODELS else Path(model),
                "--repository": repository.repository,
                "--reference": repository.reference,
                "--input-data": inputs.input_data,
                "--load-trace": load_trace,
            },
        )
        chosen = choose_model(
            model,
            name,
            out_dir,
            options,
            repository.choice(model),
            inputs.shape,
            inputs.input_data,
        )
        chosen = bind_step(
            chosen, options, out_dir, 1 if goal == "latency" else 8, protocol, fresh
        )  # an ensemble: tune moves the step that binds first
        info, model_name, model_inputs = chosen.info, chosen.name, chosen.inputs
        # Every argument checked: only now may --fresh move earlier results aside.
        if fresh:
            discard_results(out_dir)
        gateway.mkdir(out_dir)
        claim(out_dir)
        if info.source is not None:
            baseline = repository_baseline(info)
            start = repository_start(baseline, protocol)
            if held:
                start = replace(start, held=tuple((dict(start.held) | dict(held)).items()))
            _say(
                f"start: {baseline.description} of `{info.source.tuned}`"
                + (
                    f", the step tune moves first ({info.source.tuned_reason})"
                    if info.source.tuned != info.source.model
                    else ""
                )
            )
        else:
            start = Knobs(
                max_batch=max_batch_size if info.batched else 0,
                protocol=protocol,
                held=held,
            )
        settings = TuneSettings(
            Goal(
                kind=goal,
                p99_budget_us=None if p99_budget_ms is None else p99_budget_ms * 1000,
                min_throughput_infer_per_s=target_load,
                cores=available_cores(),
                max_race_rounds=max_race_rounds,
                start=start,
                switch_protocol=not keep_protocol,
                max_instances=max_instances,
                window_ms=window_ms,
                fixed_load=None if trace is None else f"under trace {trace.stats.name}",
            ),
            time_budget_s=time_budget_s,
            measurement=MeasurementSettings(
                measurement_interval_ms=window_ms, stability_percentage=stability, engine=engine
            ),
            trace=trace,
        )
        started = time.monotonic()
        result = run_tune(
            info,
            out_dir,
            model_name,
            settings,
            options,
            inputs=model_inputs,
            on_step=_step_line,
            builtin=chosen.builtin,
            cluster=ray,
        )
        report = build_report(out_dir)
        _say(f"stopped: {result.stop_reason}")
        _say(_summary_line("pick", result.pick), to_out=True)
        _say(_summary_line("runner-up", result.runner_up), to_out=True)
        if result.pick is not None and not result.pick.meets_p99_budget_every_repeat:
            _say(over_budget_line(result.pick), to_out=True)
        if result.pick_config is not None:
            _say(f"config.pbtxt of the pick: {result.pick_config}", to_out=True)
        _say(
            f"measured {len(result.measured)} cells, reused {len(result.reused)}, in "
            f"{time.monotonic() - started:.0f} s; search path in "
            f"{RunLayout(out_dir).tune}; explained in {report.experiment_log}",
            to_out=True,
        )
