"""``tritonlab trace``: generate a bursty trace, or show a trace file's figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tritonlab.cli.common import app, out, user_errors

trace_app = typer.Typer(
    no_args_is_help=True,
    help=(
        "Replayed traffic: generate a trace CSV (Poisson, on/off bursts, a diurnal ramp) or "
        "show a trace's figures; replay one with --load-trace in run, sweep and tune.\n\n"
        "Example: tritonlab trace generate --kind bursts --rate 400 --on-s 0.5 --off-s 0.5 "
        "--duration-s 4 --seed 1 --out bursts.csv"
    ),
)
app.add_typer(trace_app, name="trace")


def _show(path: Path) -> None:
    from tritonlab.perf.trace import read_trace

    stats = read_trace(path).stats
    out.print(
        f"{path}: {stats.words()}; sha256 {stats.sha256[:16]}...", highlight=False, soft_wrap=True
    )


@trace_app.command("generate")
def generate(
    out_file: Annotated[Path, typer.Option("--out", help="The trace CSV to write.")],
    kind: Annotated[str, typer.Option("--kind", help="poisson, bursts or diurnal.")] = "poisson",
    rate: Annotated[
        float, typer.Option("--rate", help="req/s: Poisson's rate, the bursts' on rate, the peak.")
    ] = 100.0,
    low_rate: Annotated[
        float, typer.Option("--low-rate", help="req/s: the bursts' off rate, the trough.")
    ] = 0.0,
    on_s: Annotated[float, typer.Option("--on-s", help="bursts: seconds on.")] = 1.0,
    off_s: Annotated[float, typer.Option("--off-s", help="bursts: seconds off.")] = 1.0,
    shape: Annotated[str, typer.Option("--shape", help="diurnal: sine or ramp.")] = "sine",
    duration_s: Annotated[
        float, typer.Option("--duration-s", help="Seconds in one cycle of the trace.")
    ] = 10.0,
    seed: Annotated[int, typer.Option("--seed", help="The same seed, the same trace.")] = 0,
) -> None:
    """Write a trace CSV (column interval_us), deterministic by seed, and print its figures.

    Example: tritonlab trace generate --kind diurnal --low-rate 20 --rate 200 --duration-s 120
    --out day.csv
    """
    from tritonlab.perf.trace_gen import TraceSpec, generate, write_trace_csv

    with user_errors():
        spec = TraceSpec(kind, duration_s, rate, low_rate, on_s, off_s, shape, seed)
        write_trace_csv(generate(spec), out_file)
        out.print(f"wrote {spec.words()}", highlight=False, soft_wrap=True)
        _show(out_file)


@trace_app.command("show")
def show(
    trace_file: Annotated[Path, typer.Argument(help="A trace CSV.")],
) -> None:
    """Print a trace's figures: requests, duration, mean rate, inter-arrival CV, 1 s peak.

    Example: tritonlab trace show bursts.csv
    """
    with user_errors():
        _show(trace_file)
