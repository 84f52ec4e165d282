"""The example CI workflow (docs/ci/tritonlab-check.yml) is valid YAML and calls `tritonlab
check` only with options the command has, and handles each of its exit statuses."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml
from typer.testing import CliRunner

from tritonlab.cli import app
from tritonlab.decisions.check import EXIT_MEANINGS
from tritonlab.decisions.gate import EXIT_UNDECIDED

WORKFLOW = Path(__file__).resolve().parents[2] / "docs" / "ci" / "tritonlab-check.yml"


def test_the_example_workflow_uses_real_options() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = workflow["jobs"]["check"]["steps"]
    scripts = "\n".join(s.get("run", "") for s in steps)
    command = re.search(r"tritonlab check (.*?)\n\s*status=", scripts, re.S)
    assert command is not None, "the workflow must run `tritonlab check`"
    words = shlex.split(command.group(1).replace("\\\n", " "))
    flags = {w for w in words if w.startswith("--")}
    help_text = CliRunner().invoke(app, ["check", "--help"], terminal_width=200).output
    for flag in flags:
        assert flag in help_text, f"{flag} is not an option of tritonlab check"
    # 3 is handled as a warning; any other non-zero status fails the step
    assert f'"$status" -eq {EXIT_UNDECIDED}' in scripts
    # the gate step names every exit status the command has
    gate_step = next(s["name"] for s in steps if "tritonlab check" in s.get("run", ""))
    listed = re.findall(r"(\d) [a-z]", gate_step)
    assert sorted(int(n) for n in listed) == sorted(EXIT_MEANINGS), gate_step
