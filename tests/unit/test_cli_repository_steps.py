"""serve, infer and perf with ``--repository DIR --model NAME``: what each refuses before any
server starts (one line each), and how perf words the called models' statistics."""

from __future__ import annotations

from pathlib import Path

import pytest
from repository_factory import tree_digest, write_test_repository
from typer.testing import CliRunner

from tritonlab.cli import app
from tritonlab.cli.step_cmds import called_lines
from tritonlab.server.called_models import called_window
from tritonlab.server.stats import StatsSnapshot

runner = CliRunner()


@pytest.fixture(scope="module")
def user_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_test_repository(tmp_path_factory.mktemp("user") / "models")


def _one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return " ".join(lines[0].split())


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["perf", "--step", "scorer"], "--step chooses the ensemble step that run, sweep and tune"),
        (["serve", "--step", "scorer"], "serve serves the model as its config.pbtxt says"),
        (["serve", "--reference", "ref.npz"], "--reference is what infer and run check"),
        (["perf", "--reference", "ref.npz"], "perf checks none"),
        (["perf", "--instances", "2"], "configure an ONNX file; a --repository model is served"),
        (["serve", "--dynamic-batching"], "--dynamic-batching, --max-queue-delay-us"),
        (["infer", "--backend", "openvino"], "--backend and --precision configure an ONNX file"),
    ],
)
def test_flags_a_step_has_no_use_for_are_refused(
    user_repo: Path, args: list[str], says: str
) -> None:
    before = tree_digest(user_repo)
    command, *rest = args
    line = _one_line_error([command, "--repository", str(user_repo), "--model", "chain", *rest])
    assert says in line
    assert tree_digest(user_repo) == before


@pytest.mark.parametrize("command", ["serve", "infer", "perf"])
def test_half_a_repository_or_no_model_at_all_is_one_line(command: str, tmp_path: Path) -> None:
    line = _one_line_error([command, "--model", "chain"])
    assert "--repository and --model go together" in line
    assert "give " in _one_line_error([command])
    model = tmp_path / "m.onnx"
    line = _one_line_error([command, str(model), "--repository", str(tmp_path), "--model", "x"])
    assert "not both" in line


@pytest.mark.parametrize("inside", [".", "..", "chain"])
def test_serve_never_writes_into_the_users_repository(user_repo: Path, inside: str) -> None:
    """--repo R (R/models), R's parent (R itself is its models/) or a folder within it: the copy
    would land in the user's repository, so it is refused before anything is written."""
    before = tree_digest(user_repo)
    repo = user_repo / inside
    args = ["serve", "--repository", str(user_repo), "--model", "chain", "--repo", str(repo)]
    assert "tritonlab never writes it" in _one_line_error(args)
    assert tree_digest(user_repo) == before


def _snapshot(requests: int, queue_ns: int, infer_ns: int) -> StatsSnapshot:
    return StatsSnapshot.from_triton(
        {
            "inference_count": requests,
            "execution_count": requests,
            "inference_stats": {
                "success": {"count": requests, "ns": queue_ns + infer_ns},
                "queue": {"ns": queue_ns},
                "compute_infer": {"ns": infer_ns},
            },
        }
    )


def test_perf_names_the_called_model_with_the_largest_share_as_binding() -> None:
    before = {"double": _snapshot(0, 0, 0), "scorer__b": _snapshot(0, 0, 0)}
    # double: 100 requests x 100 µs; scorer: 100 requests x (200 + 100) µs
    after = {
        "double": _snapshot(100, 0, 10_000_000),
        "scorer__b": _snapshot(100, 20_000_000, 10_000_000),
    }
    window = called_window([("double", "double"), ("scorer", "scorer__b")], before, after)
    assert [round(m.server_time_share, 2) for m in window.models] == [0.25, 0.75]
    lines = called_lines(window)
    assert lines[1] == (
        "  double: 100 requests, queue 0 µs, compute 100 µs per request, 25% of their summed "
        "server time"
    )
    assert lines[2].startswith("  scorer: 100 requests, queue 200 µs, compute 100 µs")
    assert lines[-1] == (
        "binding in this window: scorer (75% of the called models' summed server time)"
    )
    assert called_lines(called_window([], {}, {})) == []  # an ONNX file calls nothing


def test_perf_shows_no_binding_model_from_inconsistent_or_idle_statistics() -> None:
    idle = called_window(
        [("double", "double")], {"double": _snapshot(5, 0, 0)}, {"double": _snapshot(5, 0, 0)}
    )
    assert idle.binding is None
    assert called_lines(idle)[-1] == "no called model saw a request in this window, so none binds"
    # a service behind a load balancer: the second call answered by a replica that saw less
    shrunk = called_window(
        [("double", "double")], {"double": _snapshot(50, 0, 10)}, {"double": _snapshot(5, 0, 1)}
    )
    assert shrunk.binding is None and not shrunk.consistent
    (line,) = called_lines(shrunk)
    assert "changed inconsistently" in line
