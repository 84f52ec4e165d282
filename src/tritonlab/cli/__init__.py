"""The command line: a thin typer layer over the library (one module per group of commands)."""

from tritonlab.cli import (  # noqa: F401  (registers the commands)
    capacity_cmd,
    ceilings_cmd,
    check_cmd,
    deploy_cmd,
    locate_cmd,
    pipeline_cmd,
    project_cmds,
    step_cmds,
    sweep_cmd,
    trace_cmd,
    tune_cmd,
)
from tritonlab.cli.common import app
from tritonlab.procenv import install_interrupt_handlers


def main() -> None:
    """The ``tritonlab`` entry point: Ctrl-C and SIGTERM stop servers cleanly, then the app."""
    install_interrupt_handlers()
    app(prog_name="tritonlab")


__all__ = ["app", "main"]
