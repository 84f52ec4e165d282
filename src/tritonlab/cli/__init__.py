"""The command line: a thin typer layer over the library (one module per group of commands)."""

import signal
from types import FrameType

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


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    # SIGTERM (and SIGINT even when a non-interactive shell started us in the background with
    # it ignored) take the same path as Ctrl-C: servers and perf_analyzer are stopped cleanly.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    app(prog_name="tritonlab")


__all__ = ["app", "main"]
