"""Commands that produce a project folder: ``demo``, ``run`` and ``report``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from tritonlab.cli.common import (
    AdaptiveBudgetOpt,
    BackendDirOpt,
    ConcurrencyOpt,
    FreshOpt,
    GrpcUrlOpt,
    HostOpt,
    MaxBatchOpt,
    MaxRepeatsOpt,
    NameOpt,
    ProtocolOpt,
    RepeatsOpt,
    ServerBinOpt,
    StabilityOpt,
    UrlOpt,
    WindowOpt,
    app,
    err,
    out,
    print_results,
    progress_printer,
    server_options,
    user_errors,
)
from tritonlab.server.launch import ServerOptions

OutOpt = Annotated[Path, typer.Option("--out", help="Project folder to write (resumable).")]


def _run_pipeline(
    onnx_path: Path,
    out_dir: Path,
    model_name: str,
    demo: bool,
    repeats: int,
    concurrency: int,
    protocol: str,
    window_ms: int,
    stability: float,
    max_batch_size: int,
    fresh: bool,
    options: ServerOptions,
    max_repeats: int,
    adaptive_budget_s: float,
) -> None:
    from tritonlab.experiments.plan import MeasurementSettings, seed_comparison_plan
    from tritonlab.pipeline import run_project

    plan = seed_comparison_plan(
        model_name,
        repeats=repeats,
        concurrency=concurrency,
        protocol=protocol,
        max_batch_size=max_batch_size,
        measurement=MeasurementSettings(
            measurement_interval_ms=window_ms, stability_percentage=stability
        ),
    )
    started = time.monotonic()
    result = run_project(
        onnx_path,
        out_dir,
        plan,
        options,
        progress_printer(),
        fresh=fresh,
        demo=demo,
        max_repeats=max(max_repeats, repeats),
        adaptive_budget_s=adaptive_budget_s,
    )
    print_results(out_dir, result.report.analyses)
    outcome = result.outcome
    out.print(
        f"measured {len(outcome.measured)} cells, reused {len(outcome.skipped)}, in "
        f"{time.monotonic() - started:.0f} s; explained in {result.report.experiment_log}",
        highlight=False,
    )


@app.command()
def demo(
    out_dir: OutOpt = Path("demo-out"),
    repeats: RepeatsOpt = 3,
    max_repeats: MaxRepeatsOpt = 5,
    adaptive_budget_s: AdaptiveBudgetOpt = 60.0,
    concurrency: ConcurrencyOpt = 8,
    protocol: ProtocolOpt = "grpc",
    window_ms: WindowOpt = 2000,
    stability: StabilityOpt = 25.0,
    max_batch_size: MaxBatchOpt = 64,
    fresh: FreshOpt = False,
    url: UrlOpt = None,
    grpc_url: GrpcUrlOpt = None,
    server_bin: ServerBinOpt = None,
    backend_dir: BackendDirOpt = None,
    host: HostOpt = "127.0.0.1",
) -> None:
    """Export the demo MLP (256 -> 1024 -> 10) and run the whole loop on it.

    Example: tritonlab demo --out demo-out
    """
    with user_errors(f"finished cells are kept in {out_dir}; run the same command to resume"):
        from tritonlab.models.demo import DEMO_MODEL_NAME, export_simple_mlp

        out_dir.mkdir(parents=True, exist_ok=True)
        check = export_simple_mlp(out_dir / f"{DEMO_MODEL_NAME}.onnx")
        err.print(
            f"exported {check.onnx_path} (max abs diff vs PyTorch {check.max_abs_diff:.2g})",
            highlight=False,
        )
        _run_pipeline(
            check.onnx_path,
            out_dir,
            DEMO_MODEL_NAME,
            True,
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
        )


@app.command()
def run(
    model: Annotated[Path, typer.Argument(help="The ONNX model file.")],
    out_dir: OutOpt,
    name: NameOpt = None,
    repeats: RepeatsOpt = 3,
    max_repeats: MaxRepeatsOpt = 5,
    adaptive_budget_s: AdaptiveBudgetOpt = 60.0,
    concurrency: ConcurrencyOpt = 8,
    protocol: ProtocolOpt = "grpc",
    window_ms: WindowOpt = 2000,
    stability: StabilityOpt = 25.0,
    max_batch_size: MaxBatchOpt = 64,
    fresh: FreshOpt = False,
    url: UrlOpt = None,
    grpc_url: GrpcUrlOpt = None,
    server_bin: ServerBinOpt = None,
    backend_dir: BackendDirOpt = None,
    host: HostOpt = "127.0.0.1",
) -> None:
    """Deploy, check, measure and explain your ONNX model (the seed's four configurations).

    Example: tritonlab run model.onnx --out my-project
    """
    with user_errors(f"finished cells are kept in {out_dir}; run the same command to resume"):
        _run_pipeline(
            model,
            out_dir,
            name or model.stem,
            False,
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
