"""Smaller misuse cases of issue 20 (5): each failed before its fix."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

import pytest

from tritonlab.errors import PlanError, ResultFileError
from tritonlab.experiments.manifest import Manifest
from tritonlab.experiments.plan_file import parse_plan
from tritonlab.experiments.store import load_manifest
from tritonlab.records import RecordError
from tritonlab.server.locate import ServerInstall
from tritonlab.server.process import TritonServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "simple_mlp" / "results"


def test_a_huge_concurrency_range_is_refused_before_it_is_built() -> None:
    with pytest.raises(PlanError, match="at most 64"):
        parse_plan(
            {"model": "demo", "loads": {"concurrency": {"stop": 1000, "step": 1}}},
            "plan.yaml",
            Path("."),
        )
    with pytest.raises(PlanError, match="at most 4096"):
        parse_plan(
            {"model": "demo", "loads": {"concurrency": {"stop": 10**9, "step": 1}}},
            "plan.yaml",
            Path("."),
        )


def test_a_damaged_manifest_is_one_line_naming_what_is_missing(tmp_path: Path) -> None:
    data = json.loads((EXAMPLE / "manifest.json").read_text())
    assert Manifest.from_dict(data).model.name  # the example parses
    del data["plan"]
    with pytest.raises(RecordError, match="no 'plan' entry"):
        Manifest.from_dict(data)
    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    (run / "results" / "manifest.json").write_text(json.dumps({**data, "plan": 3}))
    with pytest.raises(ResultFileError, match=r"manifest\.json is damaged .*plan") as exc:
        load_manifest(run)
    assert "\n" not in str(exc.value)


def test_a_repository_path_with_a_space_is_linked_from_a_private_folder(tmp_path: Path) -> None:
    """Before: a predictable /tmp/tritonlab-repo-<digest> link, reused if it resolved to the
    repository (another user could plant it)."""
    repo = tmp_path / "my models"
    repo.mkdir()
    install = ServerInstall(Path("/bin/true"), tmp_path, None, (), bundled=False)
    server = TritonServer(install, repo, tmp_path / "log")
    served = server.served_repository
    assert served.resolve() == repo.resolve() and served.is_symlink()
    folder = served.parent
    assert folder.parent == Path(tempfile.gettempdir())
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert " " not in str(served)
    assert server.served_repository == served  # the same link while the server lives
    server.stop()
    assert not folder.exists()
