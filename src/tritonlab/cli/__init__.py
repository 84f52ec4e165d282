"""The command line: a thin typer layer over the library (one module per group of commands)."""

from tritonlab.cli import project_cmds, step_cmds  # noqa: F401  (registers the commands)
from tritonlab.cli.common import app


def main() -> None:
    app(prog_name="tritonlab")


__all__ = ["app", "main"]
