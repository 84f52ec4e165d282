"""The command line: a thin typer layer over the library (one module per group of commands)."""

import signal

from tritonlab.cli import (  # noqa: F401  (registers the commands)
    ceilings_cmd,
    deploy_cmd,
    locate_cmd,
    project_cmds,
    step_cmds,
    sweep_cmd,
    tune_cmd,
)
from tritonlab.cli.common import app
from tritonlab.procenv import interrupt


def main() -> None:
    # SIGTERM (and SIGINT even when a non-interactive shell started us in the background with
    # it ignored) take the same path as Ctrl-C: servers and perf_analyzer are stopped cleanly.
    # Both also set a flag that the waiting loops check: an interrupt Python swallowed (raised
    # in an at-fork callback) is raised again (procenv.interrupt).
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    app(prog_name="tritonlab")


__all__ = ["app", "main"]
