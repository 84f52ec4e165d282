"""Shared CLI pieces: the app, error handling, progress and result printing (the options:
``cli.options``).

Library errors become one line on stderr and exit code 2 (the traceback only with ``--debug``);
Ctrl-C becomes exit code 130 after the servers and perf_analyzer have been stopped.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tritonlab import __version__, gateway
from tritonlab.errors import TritonlabError
from tritonlab.procenv import interrupt

if TYPE_CHECKING:  # the analysis stack (scipy, pydantic) stays out of every command's start-up
    from tritonlab.explanation.explain import Analysis

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="From an ONNX file to a served, measured and explained Triton deployment.",
)
err = Console(stderr=True)
out = Console()
_state = {"debug": False}


def say(text: str, console: Console = out) -> None:
    """One line of plain text, stdout by default (user paths and names are not rich markup; no
    hard wraps, so logs stay greppable)."""
    console.print(text, highlight=False, markup=False, soft_wrap=True)


def note(text: str) -> None:
    """``say`` on stderr: what a command decided or warns of, beside its results."""
    say(text, err)


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
def user_errors(hint: str = "", code: int = 2, internal: bool = False) -> Iterator[None]:
    """Library errors -> one line and exit ``code`` (2); Ctrl-C -> one line and exit 130; with
    ``internal`` (where exit 1 has a meaning of its own), any other error too -> exit ``code``."""
    try:
        yield
    except TritonlabError as exc:
        if _state["debug"]:
            raise
        # escape: messages quote user paths, and "[...]" in a path is not rich markup.
        err.print(
            f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True, markup=True
        )
        raise typer.Exit(code) from None
    except KeyboardInterrupt:
        if _state["debug"]:
            raise
        err.print(
            f"interrupted{': ' + escape(hint) if hint else ''}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(130) from None
    except Exception as exc:
        if not internal or _state["debug"] or isinstance(exc, typer.Exit):
            raise
        err.print(
            f"[bold red]error:[/] internal: {type(exc).__name__}: {escape(str(exc))} (rerun "
            "with --debug for the traceback)",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(code) from None


def refuse_outputs_inside(
    targets: list[Path | None], inputs: Mapping[str, Path | str | None]
) -> None:
    """A one-line ``GatewayError`` when a file to write (``--json``, ``--markdown``) lies inside
    one of ``inputs`` (a run folder the command only reads); call it before any work."""
    for target in (t for t in targets if t is not None and str(t) != "-"):
        for option, path in inputs.items():
            if path is not None and gateway.overlaps(target, path):
                raise gateway.GatewayError(
                    f"{target} lies inside {option} {path}, which this command only reads; "
                    "write it elsewhere (nothing was written)"
                )


def write_output(
    text: str, target: Path, inputs: Mapping[str, Path | str | None] | None = None
) -> None:
    """``text`` to the file ``target`` (its folder made), or to stdout when ``target`` is ``-``
    (hyperfine's convention for exporters); never inside one of ``inputs`` (a run folder)."""
    if str(target) == "-":
        typer.echo(text, nl=False)
        return
    refuse_outputs_inside([target], inputs or {})
    out_gate = gateway.open_root(target.parent)
    out_gate.write_text(target, text)
    err.print(f"wrote {target}", highlight=False, soft_wrap=True)


def resume_hint(out_dir: Path) -> str:
    """What an interrupted measuring command says: where its cells are, and how to resume."""
    return f"finished cells are kept in {out_dir}; run the same command to resume"


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
    """One table per load: every configuration's medians over the repeats and its note."""
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
