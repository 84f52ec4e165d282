"""``tritonlab locate``: where tritonserver / perf_analyzer are here (used by the scripts)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tritonlab.cli.common import app, user_errors
from tritonlab.cli.options import BackendDirOpt, ServerBinOpt


@app.command()
def locate(
    what: Annotated[str, typer.Argument(help="server or perf.")],
    shell: Annotated[
        bool, typer.Option("--shell", help="Shell-quoted assignments for `eval`.")
    ] = False,
    server_bin: ServerBinOpt = None,
    backend_dir: BackendDirOpt = None,
    perf_analyzer: Annotated[
        Path | None, typer.Option("--perf-analyzer", help="An explicit perf_analyzer binary.")
    ] = None,
) -> None:
    """Print where the server or perf_analyzer is, and the environment it runs in.

    The project's scripts/start_server.sh and run_perf.sh `eval` the `--shell` form at run
    time, so a project folder runs on any machine where tritonlab is installed.
    Example: tritonlab locate server --shell
    """
    from tritonlab.locate import locate as locate_text

    with user_errors():
        sys.stdout.write(locate_text(what, shell, server_bin, backend_dir, perf_analyzer))
