"""``tritonlab tune``: search for the best configuration of a model, adaptively, and say why.

Each step prints one line (what was measured, what came back, why it was measured); the end
prints the pick, the runner-up and the verdict between them, and where the ready-to-deploy
``config.pbtxt`` and the reports are.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tritonlab.cli.common import app, note, resume_hint, say, user_errors
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
from tritonlab.report.tune_section import figure_span, over_budget_line, shared_digits
from tritonlab.repository.knobs import HELD_KNOBS
from tritonlab.run_layout import RunLayout

if TYPE_CHECKING:
    from tritonlab.decisions.tune_record import TunePick, TuneStep


def _step_line(step: TuneStep) -> None:
    config = step.configuration
    name = (
        f"x{config.instances} {'batching' if config.batching else 'no batching'}"
        f" max {config.max_batch} thr {config.threads or 'default'}"
        f" {config.protocol}"
    )
    rate, p99 = step.throughput_infer_per_s, step.latency_p99_us
    p99_text = "n/a" if p99 is None else f"{p99 / 1000:.2f} ms"
    figures = "no measurement" if rate is None else f"{rate:,.0f} infer/s, p99 {p99_text}"
    reused = " (stored)" if step.reused else ""
    if step.failure:
        reused += f" (perf_analyzer: {step.failure})"
    note(
        f"[{step.elapsed_s:.0f} s] {step.phase}: {name} "
        f"{'trace' if step.concurrency == 0 else f'c={step.concurrency}'} "
        f"r{step.repeat} -> {figures}{reused}; why: {step.reason}"
    )


def _summary_line(label: str, pick: TunePick | None, digits: tuple[int, int] = (0, 2)) -> str:
    if pick is None:
        return f"{label}: none"
    # a cell may have no p99 (a short window on a loaded node): say so, as the steps do
    thr = figure_span(pick.throughput_infer_per_s, pick.repeats, 1, digits[0])
    p99 = figure_span(pick.latency_p99_us, pick.repeats, 1000, digits[1])
    return (
        f"{label}: {pick.description} {pick.where()}: "
        f"{'n/a' if thr is None else thr + ' infer/s'}, "
        f"p99 {'n/a' if p99 is None else p99 + ' ms'} over {pick.repeats} repeats"
    )


@app.command()
@option_groups
def tune(
    model: Annotated[
        str | None,
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
        float | None,
        typer.Option("--p99-budget-ms", min=0.001, help="The pick's p99 must stay under this."),
    ] = None,
    target_load: Annotated[
        float | None, target_load_option("goal latency: infer/s the pick must carry.")
    ] = None,
    time_budget_s: Annotated[
        float,
        typer.Option(
            "--time-budget", min=1.0, help="Seconds the search may measure; re-run to go on."
        ),
    ] = 900.0,
    max_race_rounds: Annotated[
        int | None,
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
        list[str] | None,
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
        from tritonlab.pipeline.tune import run_tune
        from tritonlab.pipeline.tune_request import TuneRequest, prepare_tune
        from tritonlab.report.build import build_report

        request = TuneRequest(
            model,
            out_dir,
            name,
            goal,
            p99_budget_ms,
            target_load,
            time_budget_s,
            max_race_rounds,
            engine,
            keep_protocol,
            max_instances,
            tuple(hold or ()),
            load_trace,
            protocol,
            window_ms,
            stability,
            max_batch_size,
            tuple(inputs.shape or ()),
            inputs.input_data,
            fresh,
            ray,
            repository.choice(model),
        )
        options = server.options()
        chosen, settings = prepare_tune(request, options, note)
        started = time.monotonic()
        result, pick_config = run_tune(
            chosen.info,
            out_dir,
            chosen.name,
            settings,
            options,
            inputs=chosen.inputs,
            on_step=_step_line,
            builtin=chosen.builtin,
            cluster=ray,
        )
        report = build_report(out_dir)
        note(f"stopped: {result.stop_reason}")
        digits = shared_digits([result.pick, result.runner_up])
        say(_summary_line("pick", result.pick, digits))
        say(_summary_line("runner-up", result.runner_up, digits))
        if result.pick is not None and not result.pick.meets_p99_budget_every_repeat:
            say(over_budget_line(result.pick))
        if pick_config is not None:
            say(f"config.pbtxt of the pick: {pick_config}")
        say(
            f"measured {result.cells_measured} cells, reused {result.cells_reused}, in "
            f"{time.monotonic() - started:.0f} s; search path in "
            f"{RunLayout(out_dir).tune}; explained in {report.experiment_log}"
        )
