"""The CLI's shared options (issue 21): every option two commands share is declared once, and
the option groups reach the commands as records, in the order ``--help`` lists them."""

from __future__ import annotations

import inspect
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any, get_args

import pytest
import typer
from typer.models import OptionInfo
from typer.testing import CliRunner

from tritonlab.cli import app, project_cmds
from tritonlab.cli.options import (
    EndpointFlags,
    InputFlags,
    RunFlags,
    ServerFlags,
    option_groups,
)

runner = CliRunner()


def _option_infos() -> list[tuple[str, OptionInfo]]:
    found = []
    for command in app.registered_commands:
        assert command.callback is not None
        for param in inspect.signature(command.callback).parameters.values():
            for meta in get_args(param.annotation)[1:]:
                if isinstance(meta, OptionInfo):
                    found.append((param.name, meta))
    return found


def test_an_option_two_commands_share_is_declared_once() -> None:
    declared: dict[tuple[Any, ...], set[int]] = defaultdict(set)
    for _, info in _option_infos():
        key = (info.default, *(info.param_decls or ()), info.help)
        declared[key].add(id(info))
    repeated = {key: ids for key, ids in declared.items() if len(ids) > 1}
    assert not repeated, f"declared more than once: {sorted(k[0] for k in repeated)}"


def test_the_server_options_come_from_one_group_in_every_measuring_command() -> None:
    declarations = {id(info) for _, info in _option_infos() if info.default == "--url"}
    assert len(declarations) == 1  # one declaration, shared by every command
    for command in ("run", "demo", "sweep", "tune"):
        result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200", "TERM": "dumb"})
        words = result.output
        positions = [words.index(flag) for flag in ("--url", "--grpc-url", "--server-bin")]
        assert positions == sorted(positions), command


def test_run_receives_its_flags_as_records(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def fake(
        onnx: Path, out_dir: Path, name: str | None, demo: str | None, flags: RunFlags, repo: Any
    ) -> None:
        seen.update(onnx=onnx, out_dir=out_dir, name=name, demo=demo, flags=flags, repo=repo)

    monkeypatch.setattr(project_cmds, "_run_pipeline", fake)
    args = ["run", "m.onnx", "--out", "o", "--shape", "x:4", "--fresh", "--repeats", "2"]
    args += ["--engine", "classic", "--window-ms", "500", "--url", "h:1", "--max-batch-size", "8"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    flags = seen["flags"]
    assert (seen["onnx"], seen["name"], seen["demo"], seen["repo"]) == (
        Path("m.onnx"),
        None,
        None,
        None,
    )
    assert flags.inputs == InputFlags(shape=["x:4"], input_data=None)
    assert flags.results.fresh and flags.results.remeasure is None
    assert (flags.rounds.repeats, flags.rounds.engine) == (2, "classic")
    assert (flags.plan.window_ms, flags.plan.max_batch_size, flags.plan.protocol) == (
        500,
        8,
        "grpc",
    )
    assert flags.server == ServerFlags(url="h:1")
    assert flags.server.options().url == "h:1"


def test_a_group_spreads_in_place_and_packs_back() -> None:
    small = typer.Typer()
    got: list[Any] = []

    @small.command()
    @option_groups
    def cmd(
        first: Annotated[str, typer.Option("--first")] = "a",
        *,
        server: EndpointFlags,
        last: Annotated[bool, typer.Option("--last")] = False,
    ) -> None:
        got.append((first, server, last))

    names = list(inspect.signature(cmd).parameters)
    assert names == ["first", "url", "grpc_url", "server_bin", "backend_dir", "last"]
    result = runner.invoke(small, ["--first", "b", "--url", "h:1", "--last"])
    assert result.exit_code == 0, result.output
    assert got == [("b", EndpointFlags(url="h:1"), True)]


def test_an_option_declared_twice_is_refused() -> None:
    def cmd(*, server: EndpointFlags, other: ServerFlags) -> None:
        del server, other

    with pytest.raises(TypeError, match="declared twice"):
        option_groups(cmd)


@pytest.mark.parametrize("command", ["run", "tune"])
def test_an_unknown_engine_stops_before_anything_starts(command: str, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    args = [command, str(tmp_path / "m.onnx"), "--out", str(out_dir), "--engine", "nope"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "--engine must be one of blocks, classic, got 'nope'" in result.output
    assert not out_dir.exists()
