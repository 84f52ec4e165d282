"""Issue 32's reproductions: no command writes, moves or deletes outside its run folder.

Each case was reproduced on 5de1d9e as a user (or a third-party repository) would hand things
in; each is run here from the CLI (in-process, with no gateway root open beforehand, as in a
fresh process) or the library call a command makes, and every file outside the run folder is
hashed, links included, before and after. Each answers in one line with no traceback.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.repository_factory import write_scorer_onnx, write_test_repository
from tritonlab import gateway
from tritonlab.cli import app
from tritonlab.errors import ConfigError
from tritonlab.experiments.repository_plan import repository_baseline
from tritonlab.experiments.run_folder import discard_results, open_run_folder
from tritonlab.repository.layout import add_model
from tritonlab.repository.user_repo import read_repository_model
from tritonlab.run_layout import MARKER, RunLayout

pytestmark = pytest.mark.closed_roots
runner = CliRunner()


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root`` without following links: a file's sha256 and mode, a link's
    target, a folder's mode."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            info = path.lstat()
            if path.is_symlink():
                out[rel] = "link -> " + os.readlink(path)
            elif path.is_dir():
                out[rel] = f"dir {info.st_mode:o}"
            else:
                out[rel] = f"{hashlib.sha256(path.read_bytes()).hexdigest()} {info.st_mode:o}"
    return out


def one_line_error(args: list[str]) -> str:
    """Run the CLI; it must fail with a single line and no traceback. Returns that line."""
    result = runner.invoke(app, args)
    assert result.exit_code not in (0, 1), result.output  # 1 is an uncaught exception
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


def test_run_with_out_over_the_users_repository_deletes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1. `run --repository models --model scorer --out .` removed models/scorer/ (5de1d9e)."""
    work = tmp_path / "work"
    write_test_repository(work / "models")
    before = snapshot(work)
    monkeypatch.chdir(work)
    line = one_line_error(["run", "--repository", "models", "--model", "scorer", "--out", "."])
    assert "overlaps --repository models" in line and "never writes" in line
    assert snapshot(work) == before


@pytest.mark.parametrize("where", ["same", "parent", "inside"])
@pytest.mark.parametrize("command", ["run", "tune", "perf"])
def test_no_command_writes_over_or_around_its_repository(
    tmp_path: Path, command: str, where: str
) -> None:
    """The --out overlap check is in every command, before anything is written."""
    repo = write_test_repository(tmp_path / "user" / "models")
    out = {"same": repo, "parent": repo.parent, "inside": repo / "scorer"}[where]
    before = snapshot(tmp_path)
    args = [command, "--repository", str(repo), "--model", "scorer", "--out", str(out)]
    if command == "tune":
        args += ["--p99-budget-ms", "10"]
    assert "never writes it" in one_line_error(args)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("option", ["model", "--input-data", "--load-trace"])
def test_an_input_inside_a_folder_the_run_writes_is_refused(tmp_path: Path, option: str) -> None:
    """A file input may sit beside the run's folders (the model file), never inside them."""
    out = tmp_path / "run"
    model = write_scorer_onnx_path(tmp_path / "model.onnx")
    planted = {
        "model": out / "models" / "m.onnx",
        "--input-data": out / "inputs" / "samples.npz",
        "--load-trace": out / "traces" / "t.csv",
    }[option]
    planted.parent.mkdir(parents=True)
    planted.write_bytes(model.read_bytes() if option == "model" else b"interval_us\n1000\n")
    before = snapshot(tmp_path)
    args = ["run", str(planted if option == "model" else model), "--out", str(out)]
    if option != "model":
        args += [option, str(planted)]
    assert "never writes it" in one_line_error(args)
    assert snapshot(tmp_path) == before


def write_scorer_onnx_path(path: Path) -> Path:
    write_scorer_onnx(path)
    return path


def _tritonlab_run_folder(root: Path) -> Path:
    """A run folder tritonlab made (its marker) with results of an earlier run."""
    (root / "results" / "cells").mkdir(parents=True)
    (root / "results" / "manifest.json").write_text("{}\n")
    (root / MARKER).write_text('{"made_by": "tritonlab"}\n')
    return root


def test_fresh_never_follows_a_linked_trash(tmp_path: Path) -> None:
    """2. `--fresh` moved results into a linked .trash and pruned the user folder it named
    (a folder with five sub-folders lost two)."""
    user = tmp_path / "user"
    for k in range(5):
        (user / f"20260101T00000{k}.000000Z").mkdir(parents=True)
        (user / f"20260101T00000{k}.000000Z" / "keep.txt").write_text(f"mine {k}\n")
    run = _tritonlab_run_folder(tmp_path / "run")
    (run / ".trash").symlink_to(user, target_is_directory=True)
    model = write_scorer_onnx_path(tmp_path / "model.onnx")
    before = snapshot(tmp_path)
    line = one_line_error(["run", str(model), "--out", str(run), "--fresh"])
    assert ".trash is a symbolic link" in line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name", ["results", "models", "traces", "benchmarks"])
def test_a_run_folder_whose_folders_are_links_is_refused_before_writing(
    tmp_path: Path, name: str
) -> None:
    """2. `models/`, `results/` and `traces/` as links redirected writes and deletes."""
    user = tmp_path / "user"
    (user / "cells").mkdir(parents=True)
    (user / "cells" / "mine.json").write_text("{}\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / name).symlink_to(user, target_is_directory=True)
    model = write_scorer_onnx_path(tmp_path / "model.onnx")
    before = snapshot(tmp_path)
    for extra in ([], ["--fresh"]):
        line = one_line_error(["run", str(model), "--out", str(run), *extra])
        assert f"{name} is a symbolic link" in line
    assert snapshot(tmp_path) == before


def test_discard_results_refuses_a_link_among_the_outputs(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "x.txt").write_text("mine\n")
    run = _tritonlab_run_folder(tmp_path / "run")
    (run / "docs").symlink_to(user, target_is_directory=True)
    before = snapshot(tmp_path)
    gateway.open_root(run)
    with pytest.raises(ConfigError, match="docs is a symbolic link"):
        discard_results(run)
    assert snapshot(tmp_path) == before


def test_a_planted_config_tmp_link_in_a_users_repository_is_never_written_through(
    tmp_path: Path,
) -> None:
    """3. A repository shipping `config.pbtxt.tmp` as a link to a user's file had that file
    overwritten with protobuf text when a variant was written."""
    dotfile = tmp_path / "home" / ".bashrc"
    dotfile.parent.mkdir()
    dotfile.write_text("export PATH=/usr/bin\n")
    repo = write_test_repository(tmp_path / "repo")
    (repo / "scorer" / "config.pbtxt.tmp").symlink_to(dotfile)
    run = tmp_path / "run"
    before = snapshot(tmp_path / "home"), snapshot(repo)
    open_run_folder(run, {"--repository": repo})
    info = read_repository_model(repo, "scorer")
    written = add_model(RunLayout(run).models, info, "scorer", repository_baseline(info))
    assert (written.folder / "config.pbtxt").read_text().startswith('name: "scorer"')
    assert (snapshot(tmp_path / "home"), snapshot(repo)) == before


@pytest.mark.parametrize("step", ["ABSOLUTE", "../other/victim", "sub/dir"])
def test_ensemble_step_names_are_names(tmp_path: Path, step: str) -> None:
    """4. A step named by an absolute path (or ../) was read, copied and deleted outside the
    repository (the other folder lost its model, with a traceback)."""
    other = write_test_repository(tmp_path / "other")
    repo = write_test_repository(tmp_path / "repo")
    name = str(other / "scorer") if step == "ABSOLUTE" else step
    config = (repo / "chain" / "config.pbtxt").read_text()
    (repo / "chain" / "config.pbtxt").write_text(
        config.replace('model_name: "scorer"', f"model_name: {name!r}".replace("'", '"'))
    )
    before = snapshot(tmp_path)
    args = ["run", "--repository", str(repo), "--model", "chain", "--out", str(tmp_path / "o")]
    line = one_line_error(args)
    assert "is not a model name" in line
    assert snapshot(tmp_path) == before


def test_a_write_with_no_open_root_is_refused(tmp_path: Path) -> None:
    """A stage that forgot to open its folder fails loudly instead of writing anywhere."""
    with pytest.raises(ConfigError, match="no folder this command writes holds it"):
        gateway.write_text(tmp_path / "x.txt", "x")
    assert not (tmp_path / "x.txt").exists()


def test_the_gateway_refuses_outside_its_root_and_through_links(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("mine\n")
    gate = gateway.open_root(root)
    gate.mkdir(root / "a")
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "a" / "file_link").symlink_to(outside / "f.txt")
    before = snapshot(outside)
    for attempt in (
        lambda: gate.write_text(root / ".." / "outside" / "g.txt", "x"),
        lambda: gate.write_text(outside / "g.txt", "x"),
        lambda: gate.write_text(root / "link" / "f.txt", "x"),
        lambda: gate.write_text(root / "a" / "file_link", "x"),
        lambda: gate.remove_tree(root / "link"),
        lambda: gate.mkdir(root / "link" / "sub"),
        lambda: gate.move(root / "a", root / "link" / "a"),
        lambda: gate.remove_tree(root),
    ):
        with pytest.raises(ConfigError):
            attempt()
    gate.remove(root / "a" / "file_link")  # the link itself may go; its target stays
    assert snapshot(outside) == before


def test_a_hard_linked_file_is_replaced_never_written_through(tmp_path: Path) -> None:
    user = tmp_path / "user.txt"
    user.write_text("mine\n")
    gate = gateway.open_root(tmp_path / "root")
    gate.link_in(user, tmp_path / "root" / "copy.txt")
    gate.write_text(tmp_path / "root" / "copy.txt", "changed\n")
    assert user.read_text() == "mine\n"
    assert (tmp_path / "root" / "copy.txt").read_text() == "changed\n"
    with pytest.raises(ConfigError, match="hard link"):
        os.link(user, tmp_path / "root" / "log.txt")
        gate.open_append(tmp_path / "root" / "log.txt")


def test_the_marker_is_not_written_into_a_users_folder(tmp_path: Path) -> None:
    """10. The .tritonlab marker could be written into a pre-existing user folder."""
    from tritonlab.experiments.run_folder import claim

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    gateway.open_root(folder)
    claim(folder)
    assert not (folder / MARKER).exists()
    empty = tmp_path / "new"
    gateway.open_root(empty)
    claim(empty)
    assert (empty / MARKER).is_file()


def test_a_report_file_is_never_written_into_the_run_it_reads(
    tmp_path: Path, seed_run_dir: Path
) -> None:
    """`capacity RUN --json RUN/results/manifest.json` would have overwritten the run's record."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(seed_run_dir, run)
    before = snapshot(run)
    target = run / "results" / "manifest.json"
    args = ["capacity", str(run), "--target-load", "100", "--p99-budget-ms", "50"]
    line = one_line_error([*args, "--json", str(target)])
    assert "which this command only reads" in line
    assert snapshot(run) == before


def test_check_of_stored_runs_needs_two_run_folders(tmp_path: Path, seed_run_dir: Path) -> None:
    """`check NEW_RUN --against X` never checked that X is a run folder."""
    plain = tmp_path / "plain"
    (plain / "results").mkdir(parents=True)
    line = one_line_error(["check", str(seed_run_dir), "--against", str(plain)])
    assert "not a finished tritonlab run" in line


def test_deploy_from_the_cli_never_turns_a_description_into_yaml(tmp_path: Path) -> None:
    """5. A newline in a stored variant description injected whole documents (a privileged
    Pod) into the manifests, and the offline validation passed them; here from the CLI."""
    import json
    import shutil

    import yaml

    from tests.unit.test_deploy_hardening import INJECTION, SWEEP

    run = tmp_path / "run"
    for part in ("results", "models"):
        shutil.copytree(SWEEP / part, run / part)
    shutil.copy(SWEEP / "simple_mlp.onnx", run / "simple_mlp.onnx")
    for cell in (run / "results" / "cells").glob("*.json"):
        data = json.loads(cell.read_text())
        data["variant"]["description"] = INJECTION
        cell.write_text(json.dumps(data))
    before = snapshot(run)
    out = tmp_path / "k8s"
    result = runner.invoke(app, ["deploy", str(run), "--to", "kubernetes", "--out", str(out)])
    assert result.exit_code == 0, result.output
    kinds = [
        doc["kind"]
        for path in sorted(out.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc is not None
    ]
    assert "Pod" not in kinds and "NetworkPolicy" in kinds and "Deployment" in kinds
    assert snapshot(run) == before


def test_a_link_loop_in_a_model_folder_is_one_error_not_an_endless_copy(tmp_path: Path) -> None:
    """A repository whose model folder links back to itself was walked without end."""
    repo = write_test_repository(tmp_path / "repo")
    (repo / "scorer" / "1" / "again").symlink_to(repo / "scorer", target_is_directory=True)
    gate = gateway.open_root(tmp_path / "run")
    with pytest.raises(ConfigError, match="links back to a folder above it"):
        gate.copy_tree_in(repo / "scorer", tmp_path / "run" / "models" / "scorer")


def test_only_a_temporary_root_is_ever_deleted_whole(tmp_path: Path) -> None:
    """remove_temporary deletes a folder whole: only one temporary_root made, never a run
    folder handed to it by mistake."""
    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    with pytest.raises(ConfigError, match="not a temporary folder"):
        gateway.remove_temporary(gateway.open_root(run))
    assert (run / "results").is_dir()
    temp = gateway.temporary_root("tritonlab-test-", tmp_path)
    gateway.remove_temporary(temp)
    assert not temp.root.exists()
