"""Shared CLI pieces: the app, option types, error handling, progress and result printing.

Library errors become one line on stderr and exit code 2 (the traceback only with ``--debug``);
Ctrl-C becomes exit code 130 after the servers and perf_analyzer have been stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tritonlab import __version__
from tritonlab.analysis.explain import Analysis
from tritonlab.errors import TritonlabError
from tritonlab.procenv import interrupt
from tritonlab.server.launch import ServerOptions

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="From an ONNX file to a served, measured and explained Triton deployment.",
)
err = Console(stderr=True)
out = Console()
_state = {"debug": False}
API_KEY_VARIABLE = "TRITONLAB_API_KEY"

UrlOpt = Annotated[
    Optional[str],  # noqa: UP045 - typer needs Optional on Python 3.10
    typer.Option("--url", help="Use a running Triton at HOST:PORT (HTTP) instead of starting one."),
]
GrpcUrlOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--grpc-url", help="gRPC HOST:PORT of --url (default: its port + 1)."),
]
ServerBinOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("--server-bin", help="External tritonserver binary (e.g. an NGC container's)."),
]
BackendDirOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("--backend-dir", help="Backend folder for --server-bin."),
]
HostOpt = Annotated[str, typer.Option("--host", help="Address the server binds to.")]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="blocks (every configuration loaded at once, short cells in a shuffled block order, "
        "robust paired intervals, an A/A control in run/demo, an interference monitor; "
        "docs/measuring.md) or classic (one configuration loaded at a time, perf_analyzer's "
        "stable windows).",
    ),
]
RepeatsOpt = Annotated[int, typer.Option("--repeats", min=1, help="Repeats per configuration.")]
AdaptiveBudgetOpt = Annotated[
    Optional[float],  # noqa: UP045
    typer.Option(
        "--adaptive-budget-s",
        min=0.0,
        help="Seconds the extra (adaptive) rounds may take in all; a round starts only if it "
        "fits (default: 150 with the block engine, 120 with the classic one).",
    ),
]
MaxRepeatsOpt = Annotated[
    Optional[int],  # noqa: UP045
    typer.Option(
        "--max-repeats",
        min=1,
        help="Measure more interleaved rounds, up to this many, while a verdict the picks rest "
        "on is undecided or, with the block engine, wider than ±5% (default: 40 with the block "
        "engine, 5 with the classic one; = the plan's repeats turns it off).",
    ),
]
SweepEngineOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--engine",
        help="blocks or classic (default: the plan's measurement.engine, itself blocks by "
        "default; docs/measuring.md). A --ray run uses classic.",
    ),
]
ConcurrencyOpt = Annotated[
    Optional[int],  # noqa: UP045
    typer.Option(
        "--concurrency",
        min=1,
        help="Requests in flight (default: 8; 2 per core for threads x instances).",
    ),
]
ConfigsOpt = Annotated[
    str,
    typer.Option(
        "--configs",
        help="auto, seed (batching and instances), compute (threads x instances) or backends "
        "(onnxruntime vs OpenVINO f32/bf16); auto picks compute when one execution takes over "
        "1 ms in-process.",
    ),
]
ProtocolOpt = Annotated[str, typer.Option("--protocol", help="grpc or http.")]
WindowOpt = Annotated[
    int, typer.Option("--window-ms", min=200, help="perf_analyzer measurement window (ms).")
]
StabilityOpt = Annotated[
    float, typer.Option("--stability", min=1.0, help="perf_analyzer stability threshold (%).")
]
FreshOpt = Annotated[
    bool,
    typer.Option(
        "--fresh",
        help="Move earlier results in --out aside (into --out/.trash/; only in a folder tritonlab "
        "made).",
    ),
]
RemeasureOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option(
        "--remeasure",
        help="Measure this stored cell again (its id: the file name in results/cells without "
        ".json; globs work; repeatable). The old file is kept as .json.replaced.",
    ),
]
RayOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option(
        "--ray",
        help="Measure on a Ray cluster: its address (host:port) or 'auto'. Every node that "
        "offers the 'tritonlab' resource measures whole rounds on its own server "
        "(docs/scaling.md); needs tritonlab[ray].",
    ),
]
MaxBatchOpt = Annotated[int, typer.Option("--max-batch-size", min=1, help="Triton max_batch_size.")]
ShapeOpt = Annotated[
    Optional[list[str]],  # noqa: UP045
    typer.Option(
        "--shape",
        help="NAME:D1,D2,... sets an input's dims without the batch dim (repeatable); dynamic "
        "dims default to 128.",
    ),
]
InputDataOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(
        "--input-data",
        help="Send your own samples: an .npz (one array per input, samples on the first axis) "
        "or perf_analyzer's JSON file.",
    ),
]
NameOpt = Annotated[
    Optional[str],  # noqa: UP045
    typer.Option("--name", help="Model name in Triton (default: the file's stem)."),
]


def _print_version(value: bool) -> None:
    # Eager: runs while parsing, so `tritonlab --version` needs no command.
    if value:
        out.print(f"tritonlab {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """tritonlab: deploy an ONNX model on real Triton, measure it, and explain the results."""
    _state["debug"] = debug
    # SIGTERM (a scheduler, `kill`) takes the same way out as Ctrl-C: servers and perf_analyzer
    # stopped, finished cells kept, one line, exit 130.
    signal.signal(signal.SIGTERM, interrupt)


@contextlib.contextmanager
def user_errors(hint: str = "") -> Iterator[None]:
    """Library errors -> one line and exit 2; Ctrl-C -> one line and exit 130."""
    try:
        yield
    except TritonlabError as exc:
        if _state["debug"]:
            raise
        # escape: messages quote user paths, and "[...]" in a path is not rich markup.
        err.print(
            f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True, markup=True
        )
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        if _state["debug"]:
            raise
        err.print(
            f"interrupted{': ' + escape(hint) if hint else ''}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(130) from None


def server_options(
    url: str | None = None,
    grpc_url: str | None = None,
    server_bin: Path | None = None,
    backend_dir: Path | None = None,
    host: str = "127.0.0.1",
    http_port: int = 0,
    grpc_port: int = 0,
    metrics_port: int = 0,
) -> ServerOptions:
    return ServerOptions(
        url=url,
        grpc_url=grpc_url,
        server_bin=server_bin,
        backend_dir=backend_dir,
        host=host,
        http_port=http_port,
        grpc_port=grpc_port,
        metrics_port=metrics_port,
        # From the environment, never a flag: a command line is visible to every user (ps).
        api_key=os.environ.get(API_KEY_VARIABLE) or None,
    )


def progress_printer() -> Callable[[int, int, str], None]:
    """Progress lines with elapsed time and ETA, on stderr (plain text: logs stay readable)."""
    started = time.monotonic()

    def report(done: int, total: int, cell: str) -> None:
        elapsed = time.monotonic() - started
        eta = f", ~{elapsed / done * (total - done):.0f} s left" if 0 < done < total else ""
        label = "finished" if cell == "done" else f"measuring {cell}"
        err.print(f"[{done}/{total}] {label} ({elapsed:.0f} s{eta})", highlight=False)

    return report


def print_results(run_dir: Path, analyses: list[Analysis]) -> None:
    for analysis in analyses:
        table = Table(title=f"{run_dir} · {analysis.load_key} (medians over repeats)")
        for col in ("config", "infer/s", "p99 µs", "queue µs", "mean batch", "notes"):
            table.add_column(col, overflow="fold")
        for r in analysis.reports:
            s = r.summary
            table.add_row(
                s.variant.description,
                f"{s.throughput.median or 0:,.0f}",
                f"{s.latency_p99.median or 0:,.0f}",
                f"{s.queue_us.median or 0:,.0f}",
                f"{s.mean_batch.median or 0:.1f}",
                r.note,
            )
        out.print(table)


def engine_defaults(
    engine: str,
    repeats: int | None,
    max_repeats: int | None,
    budget_s: float | None,
    classic_budget_s: float = 60.0,
) -> tuple[int, int, float]:
    """The rounds, the most rounds and the extra rounds' budget for ``engine``: what was given,
    else the engine's defaults (``classic_budget_s``: the classic engine's budget, which a
    sweep sets higher)."""
    from tritonlab.errors import ConfigError
    from tritonlab.experiments.blocks import (
        DEFAULT_EXTRA_BUDGET_S,
        DEFAULT_MAX_BLOCKS,
        ENGINE_BLOCKS,
        ENGINES,
    )
    from tritonlab.experiments.plan_file import engine_repeats

    if engine not in ENGINES:
        raise ConfigError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    blocks = engine == ENGINE_BLOCKS
    first = engine_repeats(engine, repeats)
    most = max_repeats if max_repeats is not None else (DEFAULT_MAX_BLOCKS if blocks else 5)
    default_budget = DEFAULT_EXTRA_BUDGET_S if blocks else classic_budget_s
    return first, max(first, most), budget_s if budget_s is not None else default_budget
