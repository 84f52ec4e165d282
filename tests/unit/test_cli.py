"""The typer CLI: help for every command, one-line errors, and ``report`` on a recorded run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tritonlab import __version__
from tritonlab.cli import app
from tritonlab.errors import ModelError

runner = CliRunner()
COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def _assert_one_line_error(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("error: ")
    assert "Traceback" not in output
    return lines[0]


def test_expected_commands_are_registered() -> None:
    assert {"demo", "run", "report", "serve", "infer", "perf"} <= set(COMMANDS)


def test_top_level_help_lists_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    words = " ".join(result.output.split())  # rich wraps help text to the terminal width
    assert "Example:" in words
    assert f"Example: tritonlab {command}" in words


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"tritonlab {__version__}"


def test_run_missing_onnx_is_a_one_line_error(tmp_path: Path) -> None:
    out = tmp_path / "project"
    result = runner.invoke(app, ["run", str(tmp_path / "missing.onnx"), "--out", str(out)])
    assert result.exit_code == 2
    line = _assert_one_line_error(result.output)
    assert "ONNX file not found" in line
    assert str(tmp_path / "missing.onnx") in line
    assert not out.exists()  # nothing is written before the model is known to be good


def test_error_keeps_square_brackets_of_user_paths(tmp_path: Path) -> None:
    # Regression: the message went through rich markup, so "[bold]" vanished from the path.
    missing = tmp_path / "[bold]model.onnx"
    result = runner.invoke(app, ["run", str(missing), "--out", str(tmp_path / "o"), "--name", "m"])
    assert result.exit_code == 2
    assert str(missing) in _assert_one_line_error(result.output)


def test_run_corrupt_onnx_is_a_one_line_error(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"\x00\x01 not a protobuf \xff" * 50)
    result = runner.invoke(app, ["run", str(model), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "model.onnx" in _assert_one_line_error(result.output)


def test_debug_shows_the_exception(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["--debug", "run", str(tmp_path / "missing.onnx"), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code != 0
    assert isinstance(result.exception, ModelError)


def test_report_on_empty_folder_is_a_one_line_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2
    line = _assert_one_line_error(result.output)
    assert "not a tritonlab run folder" in line


def test_report_rebuilds_a_recorded_run(seed_run_dir: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(seed_run_dir, run_dir)
    result = runner.invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert (run_dir / "docs" / "experiment_log.md").exists()
    assert (run_dir / "README.md").exists()
    assert "wrote" in result.output
    # The results table (rich wraps it to the test terminal's width, so look for words).
    assert "grpc_b1_c8" in result.output
    assert "baseline" in result.output
    assert "Traceback" not in result.output


def test_serve_flags_reach_the_served_variant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextlib
    from collections.abc import Iterator

    from tritonlab.pipeline import steps
    from tritonlab.repository.variants import ServingVariant

    seen: list[ServingVariant] = []

    @contextlib.contextmanager
    def serving(*args: object) -> Iterator[None]:
        seen.append(args[2])  # type: ignore[arg-type]
        raise KeyboardInterrupt
        yield

    monkeypatch.setattr(steps, "serving", serving)
    flags = ["--dynamic-batching", "--max-queue-delay-us", "300", "--instances", "2"]
    flags += ["--max-batch-size", "8", "--kind", "KIND_CPU"]
    runner.invoke(app, ["serve", str(tmp_path / "m.onnx"), *flags])
    (variant,) = seen
    assert (variant.dynamic_batching, variant.max_queue_delay_us) == (True, 300)
    assert (variant.instance_count, variant.max_batch_size) == (2, 8)
    assert (variant.backend, variant.precision) == ("onnxruntime", "f32")
