"""``tritonlab sweep`` without a server: plan errors, argument checks, progress and its ETA."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tritonlab.cli import app, sweep_cmd
from tritonlab.cli.sweep_cmd import SweepProgress, progress_mode

runner = CliRunner()


def _error_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def test_a_bad_plan_is_one_line_naming_the_key(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("model: demo\nloads:\n  concurrency: [1, 2, x]\n")
    result = runner.invoke(app, ["sweep", str(plan), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    line = _error_line(result.output)
    assert line == f"error: {plan}: loads.concurrency[2]: must be an integer >= 1, got 'x'"
    assert not (tmp_path / "out").exists()  # nothing written before the plan is valid


def test_plan_argument_is_required_and_exclusive_with_demo(tmp_path: Path) -> None:
    result = runner.invoke(app, ["sweep", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "give a plan file" in _error_line(result.output)
    result = runner.invoke(app, ["sweep", "x.yaml", "--demo", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "either a plan file or --demo" in _error_line(result.output)
    result = runner.invoke(app, ["sweep", str(tmp_path / "none.yaml"), "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "cannot read the plan" in _error_line(result.output)


def test_help_names_the_demo_plan() -> None:
    result = runner.invoke(app, ["sweep", "--help"])
    assert result.exit_code == 0
    assert "tritonlab sweep demo" in result.output


def test_progress_mode() -> None:
    assert progress_mode(no_progress=True, is_terminal=True) == "off"
    assert progress_mode(no_progress=False, is_terminal=True) == "rich"
    assert progress_mode(no_progress=False, is_terminal=False) == "plain"


def test_eta_counts_only_cells_measured_in_this_session(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.StringIO()
    monkeypatch.setattr(sweep_cmd, "err", Console(file=buffer, width=200))
    clock = iter([0.0, 0.0, 10.0, 16.0, 30.0])
    progress = SweepProgress("plain", clock=lambda: next(clock))  # started at t=0
    progress(40, 50, "a__grpc_b1_c8__r1")  # 40 cells found on disk: no estimate yet
    progress(41, 50, "b__grpc_b1_c8__r1")  # the first measured cell took 10 s
    progress(42, 50, "c__grpc_b1_c8__r1")  # the second 6 s: mean 8 s x 8 left
    progress(50, 50, "done")
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "[40/50] measuring a__grpc_b1_c8__r1 (elapsed 0:00, ETA --)"
    assert lines[1] == "[41/50] measuring b__grpc_b1_c8__r1 (elapsed 0:10, ETA 1:30)"
    assert lines[2] == "[42/50] measuring c__grpc_b1_c8__r1 (elapsed 0:16, ETA 1:04)"
    assert lines[3] == "[50/50] finished (elapsed 0:30, ETA 0:00)"


def test_rich_progress_draws_a_bar_with_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=120, force_terminal=True, color_system=None)
    monkeypatch.setattr(sweep_cmd, "err", console)
    with SweepProgress("rich") as progress:
        progress(0, 4, "baseline__grpc_b1_c8__r1")
        progress(1, 4, "baseline__grpc_b1_c1__r1")
        progress(4, 4, "done")
    text = buffer.getvalue()
    assert "4/4" in text and "finished" in text and "ETA" in text


def test_no_progress_prints_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.StringIO()
    monkeypatch.setattr(sweep_cmd, "err", Console(file=buffer))
    with SweepProgress("off") as progress:
        progress(0, 2, "x")
        progress(2, 2, "done")
    assert buffer.getvalue() == ""
