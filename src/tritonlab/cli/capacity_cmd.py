"""``tritonlab capacity``: replicas for a target load at a p99 budget, from a finished run folder
(the library is ``deploy.capacity_run``; no server is started)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tritonlab.cli.common import app, out, refuse_outputs_inside, user_errors, write_output
from tritonlab.cli.options import JsonOutOpt, MarkdownOutOpt


@app.command()
def capacity(
    run_dir: Annotated[Path, typer.Argument(help="A finished run folder (run, sweep or tune).")],
    target_load: Annotated[
        float, typer.Option("--target-load", help="The load to carry in all (infer/s).")
    ],
    p99_budget_ms: Annotated[
        float, typer.Option("--p99-budget-ms", help="Each replica's p99 must stay under this (ms).")
    ],
    config: Annotated[
        str | None,
        typer.Option(
            "--config", help="One configuration by name (default: the run's pick, else every one)."
        ),
    ] = None,
    json_file: JsonOutOpt = None,
    markdown_file: MarkdownOutOpt = None,
) -> None:
    """Per-replica capacity at a p99 budget, with its 95% interval, and the replicas a target
    load needs (the range from the interval, and the end to provision). The figure is the one
    `tritonlab deploy --target-load --p99-budget-ms` sizes the HPA from; it holds for a replica
    on the hardware the run was measured on.

    Example: tritonlab capacity sweep-out --target-load 20000 --p99-budget-ms 50 --json cap.json
    """
    from tritonlab.deploy.capacity_run import run_capacity
    from tritonlab.deploy.capacity_text import COLUMNS, headline, markdown, notes, row_cells

    with user_errors():
        refuse_outputs_inside([json_file, markdown_file], {"the run folder": run_dir})
        report = run_capacity(run_dir, target_load, p99_budget_ms * 1000.0, config)
        table = Table(title=headline(report))
        for column in COLUMNS:
            table.add_column(column, overflow="fold")
        for row in report.rows:
            table.add_row(*row_cells(row))
        out.print(table)
        for line in notes(report):
            out.print(line, highlight=False, soft_wrap=True)
        for path, text in (
            (json_file, json.dumps(report.to_dict(), indent=2) + "\n"),
            (markdown_file, markdown(report)),
        ):
            if path is not None:
                write_output(text, path, inputs={"the run folder": run_dir})
