"""Commands that produce a project folder: ``demo``, ``run`` and ``report``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from tritonlab.cli.common import (
    BackendDirOpt,
    ConcurrencyOpt,
    ConfigsOpt,
    EngineOpt,
    FreshOpt,
    GrpcUrlOpt,
    HostOpt,
    InputDataOpt,
    MaxBatchOpt,
    NameOpt,
    ProtocolOpt,
    RemeasureOpt,
    ServerBinOpt,
    ShapeOpt,
    StabilityOpt,
    UrlOpt,
    WindowOpt,
    app,
    engine_defaults,
    err,
    out,
    print_results,
    progress_printer,
    server_options,
    user_errors,
)
from tritonlab.server.launch import ServerOptions

OutOpt = Annotated[Path, typer.Option("--out", help="Project folder to write (resumable).")]
BlocksOpt = Annotated[
    Optional[int],  # noqa: UP045
    typer.Option(
        "--repeats",
        min=1,
        help="Rounds (blocks) measured first (default: 10 with --engine blocks, 3 classic).",
    ),
]
MaxBlocksOpt = Annotated[
    Optional[int],  # noqa: UP045
    typer.Option(
        "--max-repeats",
        min=1,
        help="Measure more rounds, up to this many, while a headline verdict is undecided "
        "(blocks: or wider than its target) (default: 40 blocks, 5 classic; = --repeats turns "
        "it off).",
    ),
]
ExtraBudgetOpt = Annotated[
    Optional[float],  # noqa: UP045
    typer.Option(
        "--adaptive-budget-s",
        min=0.0,
        help="Seconds the extra rounds may take in all; a round starts only if it fits, "
        "judged from the median cell so far (default: 150 blocks, 60 classic).",
    ),
]


def _run_pipeline(
    onnx_path: Path,
    out_dir: Path,
    model_name: str,
    demo: str | None,
    repeats: int | None,
    concurrency: int | None,
    protocol: str,
    window_ms: int,
    stability: float,
    max_batch_size: int,
    fresh: bool,
    options: ServerOptions,
    max_repeats: int | None,
    adaptive_budget_s: float | None,
    configs: str = "auto",
    shape: list[str] | None = None,
    input_data: Path | None = None,
    remeasure: list[str] | None = None,
    engine: str = "blocks",
) -> None:
    from tritonlab.experiments.plan import MeasurementSettings
    from tritonlab.models.shape_probe import checked_inputs
    from tritonlab.pipeline.project import default_plan, load_model_info, run_project

    first, most, budget = engine_defaults(engine, repeats, max_repeats, adaptive_budget_s)
    info = load_model_info(onnx_path)
    inputs = checked_inputs(info, shape, input_data)
    plan = default_plan(
        info,
        inputs,
        model_name,
        configs,
        repeats=first,
        concurrency=concurrency,
        protocol=protocol,
        max_batch_size=max_batch_size,
        measurement=MeasurementSettings(
            measurement_interval_ms=window_ms, stability_percentage=stability, engine=engine
        ),
    )
    for note in plan.notes:
        err.print(note, highlight=False, soft_wrap=True, markup=False)
    started = time.monotonic()
    result = run_project(
        onnx_path,
        out_dir,
        plan,
        options,
        progress_printer(),
        fresh=fresh,
        demo=demo,
        max_repeats=most,
        adaptive_budget_s=budget,
        inputs=inputs,
        remeasure=tuple(remeasure or ()),
    )
    outcome = result.outcome
    for line in outcome.quarantined:
        err.print(f"warning: {line}", highlight=False, soft_wrap=True, markup=False)
    print_results(out_dir, result.report.analyses)
    out.print(
        f"measured {len(outcome.measured)} cells, reused {len(outcome.skipped)}, in "
        f"{time.monotonic() - started:.0f} s; explained in {result.report.experiment_log}",
        highlight=False,
    )


@app.command()
def demo(
    out_dir: OutOpt = Path("demo-out"),
    model: Annotated[
        str,
        typer.Option("--model", help="Built-in model: simple_mlp, resnet18_cnn or bert_encoder."),
    ] = "simple_mlp",
    repeats: BlocksOpt = None,
    max_repeats: MaxBlocksOpt = None,
    adaptive_budget_s: ExtraBudgetOpt = None,
    engine: EngineOpt = "blocks",
    concurrency: ConcurrencyOpt = None,
    protocol: ProtocolOpt = "grpc",
    window_ms: WindowOpt = 2000,
    stability: StabilityOpt = 25.0,
    max_batch_size: MaxBatchOpt = 64,
    configs: ConfigsOpt = "auto",
    fresh: FreshOpt = False,
    remeasure: RemeasureOpt = None,
    url: UrlOpt = None,
    grpc_url: GrpcUrlOpt = None,
    server_bin: ServerBinOpt = None,
    backend_dir: BackendDirOpt = None,
    host: HostOpt = "127.0.0.1",
) -> None:
    """Export a built-in model (default: the MLP 256 -> 1024 -> 10) and run the whole loop on it.

    Example: tritonlab demo --out demo-out;  tritonlab demo --model resnet18_cnn --out cnn-out
    """
    with user_errors(f"finished cells are kept in {out_dir}; run the same command to resume"):
        from tritonlab.models.zoo import builtin_model

        builtin = builtin_model(model)
        out_dir.mkdir(parents=True, exist_ok=True)
        check = builtin.export(out_dir / f"{builtin.name}.onnx")
        err.print(
            f"exported {check.onnx_path}: {builtin.summary} "
            f"(max abs diff vs PyTorch {check.max_abs_diff:.2g})",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
        _run_pipeline(
            check.onnx_path,
            out_dir,
            builtin.name,
            builtin.name,
            repeats,
            concurrency,
            protocol,
            window_ms,
            stability,
            max_batch_size,
            fresh,
            server_options(url, grpc_url, server_bin, backend_dir, host),
            max_repeats,
            adaptive_budget_s,
            configs,
            remeasure=remeasure,
            engine=engine,
        )


@app.command()
def run(
    model: Annotated[Path, typer.Argument(help="The ONNX model file.")],
    out_dir: OutOpt,
    name: NameOpt = None,
    repeats: BlocksOpt = None,
    max_repeats: MaxBlocksOpt = None,
    adaptive_budget_s: ExtraBudgetOpt = None,
    engine: EngineOpt = "blocks",
    concurrency: ConcurrencyOpt = None,
    protocol: ProtocolOpt = "grpc",
    window_ms: WindowOpt = 2000,
    stability: StabilityOpt = 25.0,
    max_batch_size: MaxBatchOpt = 64,
    configs: ConfigsOpt = "auto",
    shape: ShapeOpt = None,
    input_data: InputDataOpt = None,
    fresh: FreshOpt = False,
    remeasure: RemeasureOpt = None,
    url: UrlOpt = None,
    grpc_url: GrpcUrlOpt = None,
    server_bin: ServerBinOpt = None,
    backend_dir: BackendDirOpt = None,
    host: HostOpt = "127.0.0.1",
) -> None:
    """Deploy, check, measure and explain your ONNX model.

    The configurations compared fit the model (--configs auto): batching and instance counts for
    a model whose requests are cheap, threads x instances for a compute-bound one; a model
    without a batch axis is compared without batching.
    Example: tritonlab run model.onnx --out my-project --shape input_ids:256
    """
    with user_errors(f"finished cells are kept in {out_dir}; run the same command to resume"):
        _run_pipeline(
            model,
            out_dir,
            name or model.stem,
            None,
            repeats,
            concurrency,
            protocol,
            window_ms,
            stability,
            max_batch_size,
            fresh,
            server_options(url, grpc_url, server_bin, backend_dir, host),
            max_repeats,
            adaptive_budget_s,
            configs,
            shape,
            input_data,
            remeasure,
            engine,
        )


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A folder written by run, demo or sweep.")],
) -> None:
    """Rebuild docs/experiment_log.md, plots/, report.html, results/summary.json and README.md.

    Everything is rebuilt from the stored results alone; nothing is measured.

    Example: tritonlab report demo-out
    """
    with user_errors():
        from tritonlab.report.build import build_report

        built = build_report(run_dir)
        print_results(run_dir, built.analyses)
        out.print(f"wrote {built.experiment_log} and {built.html_report}", highlight=False)
