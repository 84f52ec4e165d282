"""``--fresh`` moves only what tritonlab made, after every argument is checked (issue 20, 1)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritonlab.cli import app
from tritonlab.errors import ConfigError
from tritonlab.experiments.run_folder import (
    KEEP_TRASH,
    claim,
    discard_results,
    is_run_folder,
)
from tritonlab.run_layout import MARKER, RUN_OUTPUTS, RUN_SUBFOLDERS, TRASH, RunLayout

runner = CliRunner()


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> sha256), folders included as empty names."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
    return out


def _decoy(root: Path) -> Path:
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "notes.md").write_text("my notes\n")
    (root / "models").mkdir()
    (root / "models" / "m.txt").write_text("my model\n")
    return root


def test_the_reported_data_loss_no_longer_happens(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`tritonlab tune nonexistent.onnx --out . --fresh` deleted docs/ and models/ (2026-12-01)."""
    folder = _decoy(tmp_path / "work")
    before = tree_digest(folder)
    monkeypatch.chdir(folder)
    result = runner.invoke(app, ["tune", "nonexistent.onnx", "--out", ".", "--fresh"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert tree_digest(folder) == before


def test_fresh_refuses_a_folder_tritonlab_did_not_make(tmp_path: Path) -> None:
    folder = _decoy(tmp_path / "work")
    before = tree_digest(folder)
    claim(folder)  # it holds docs/ and models/ already: not marked
    assert not is_run_folder(folder)
    with pytest.raises(ConfigError, match="tritonlab did not make it"):
        discard_results(folder)
    assert tree_digest(folder) == before


def test_fresh_moves_a_run_folders_results_into_its_trash(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    claim(folder)
    assert (folder / MARKER).is_file()
    (folder / "results").mkdir()
    (folder / "results" / "cell.json").write_text("{}")
    (folder / "model.onnx").write_bytes(b"kept")
    moved = discard_results(folder)
    assert moved is not None and moved.parent == folder / TRASH
    assert (moved / "results" / "cell.json").read_text() == "{}"
    assert not (folder / "results").exists() and (folder / "model.onnx").read_bytes() == b"kept"
    assert discard_results(folder) is None  # nothing left to move


def test_the_trash_keeps_the_newest_entries_only(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    claim(folder)
    kept = []
    for i in range(KEEP_TRASH + 2):
        (folder / "docs").mkdir()
        (folder / "docs" / "log.md").write_text(str(i))
        kept.append(discard_results(folder))
    entries = sorted((folder / TRASH).iterdir())
    assert entries == kept[-KEEP_TRASH:]
    assert (entries[-1] / "docs" / "log.md").read_text() == str(KEEP_TRASH + 1)


def _fill_with_run_outputs(folder: Path) -> None:
    """One file in each folder a run writes, and the files it writes in the folder itself."""
    layout = RunLayout(folder)
    for name in RUN_OUTPUTS:
        path = layout.root / name
        if name in RUN_SUBFOLDERS:
            path.mkdir()
            (path / "x.txt").write_text(name)
        else:
            path.write_text(name)


def test_fresh_sets_aside_everything_a_run_wrote_and_keeps_the_model(tmp_path: Path) -> None:
    """inputs/, plots/, scripts/, client/, report.html and README.md went stale beside
    the new results before: they are the run's outputs too."""
    folder = tmp_path / "run"
    claim(folder)
    _fill_with_run_outputs(folder)
    layout = RunLayout(folder)
    layout.exported_model("m").write_bytes(b"kept")
    moved = discard_results(folder)
    assert moved is not None
    assert sorted(p.name for p in folder.iterdir()) == sorted([MARKER, TRASH, "m.onnx"])
    assert sorted(p.name for p in moved.iterdir()) == sorted(RUN_OUTPUTS)
    assert (moved / "plots" / "x.txt").read_text() == "plots"
    assert (moved / "README.md").read_text() == "README.md"


@pytest.mark.parametrize("name", ["README.md", "scripts", "plots"])
def test_a_users_readme_or_scripts_keeps_a_folder_unmarked(tmp_path: Path, name: str) -> None:
    """A folder that holds a user's README.md (or scripts/, plots/) is not claimed, and
    --fresh refuses it, naming what it holds, without moving anything."""
    folder = tmp_path / "work"
    folder.mkdir()
    if name in RUN_SUBFOLDERS:
        (folder / name).mkdir()
        (folder / name / "mine.txt").write_text("mine")
    else:
        (folder / name).write_text("mine")
    before = tree_digest(folder)
    claim(folder)
    assert not is_run_folder(folder)
    shown = name + "/" if name in RUN_SUBFOLDERS else name
    with pytest.raises(ConfigError, match=f"holds {shown} but tritonlab did not make it"):
        discard_results(folder)
    assert tree_digest(folder) == before
