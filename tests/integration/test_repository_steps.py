"""The single steps on a Triton repository as it is (``--repository DIR --model NAME``): infer
checks against the user's reference or the config's shapes and dtypes, perf prints each called
model's statistics and the one that binds, serve loads the model with its callees; the
repository is byte-identical after every command, and a backend the bundled server lacks is one
line."""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.request
from pathlib import Path

import pytest
from integration_support import kill_tree, run_cli, start_cli, wait_for
from repository_factory import tree_digest, write_reference, write_test_repository

pytestmark = pytest.mark.integration
READY_RE = re.compile(r"Triton ready: HTTP (\S+),")
# "  scorer: 2,339 requests, queue 586 µs, compute 1,010 µs per request, 44% of their ..."
STEP_RE = re.compile(r"([\d,]+) requests, queue [\d,]+ µs, compute [\d,]+ µs per request, (\d+)%")


class UserRepository:
    """The test repository, its reference file, and its digest as written."""

    def __init__(self, folder: Path) -> None:
        self.root = write_test_repository(folder / "models")
        self.reference = write_reference(folder / "ref.npz", self.root)
        self.digest = tree_digest(self.root)

    def unchanged(self) -> bool:
        return tree_digest(self.root) == self.digest


@pytest.fixture(scope="module")
def user_repo(tmp_path_factory: pytest.TempPathFactory) -> UserRepository:
    return UserRepository(tmp_path_factory.mktemp("user"))


@pytest.mark.timeout(120)
def test_infer_of_an_ensemble_checks_the_users_reference(
    user_repo: UserRepository, tmp_path: Path
) -> None:
    args = ["infer", "--repository", str(user_repo.root), "--model", "chain"]
    done = run_cli([*args, "--reference", str(user_repo.reference)], tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert f"checked against --reference {user_repo.reference}: " in done.stdout, done.stdout
    lines = [ln for ln in done.stdout.splitlines() if "max abs diff vs --reference ref.npz" in ln]
    assert [ln.split(" ", 1)[0] for ln in lines] == ["http", "grpc"], done.stdout
    assert user_repo.unchanged()


@pytest.mark.timeout(120)
def test_infer_of_a_bls_model_checks_shapes_and_dtypes(
    user_repo: UserRepository, tmp_path: Path
) -> None:
    args = ["infer", "--repository", str(user_repo.root), "--model", "bls_chain"]
    done = run_cli([*args, "--protocol", "grpc"], tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "calling double, scorer" in done.stdout
    assert "{'SCORES': [2, 10]}, checked against the config's shapes and dtypes only" in (
        done.stdout
    )
    assert user_repo.unchanged()


@pytest.mark.timeout(120)
def test_perf_of_an_ensemble_names_the_step_that_binds(
    user_repo: UserRepository, tmp_path: Path
) -> None:
    args = ["perf", "--repository", str(user_repo.root), "--model", "chain"]
    args += ["--window-ms", "400", "--stability", "80", "--concurrency", "4", "--out", "perf"]
    done = run_cli(args, tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    steps = {}
    for name in ("double", "scorer"):
        (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith(f"  {name}: ")]
        match = STEP_RE.search(line)
        assert match, line
        steps[name] = int(match[2])
        assert int(match[1].replace(",", "")) > 0
    assert 99 <= sum(steps.values()) <= 101
    binding = max(steps, key=lambda n: steps[n])
    assert f"binding in this window: {binding} ({steps[binding]}%" in done.stdout, done.stdout
    assert (tmp_path / "perf" / "chain.csv").is_file()
    assert user_repo.unchanged()


@pytest.mark.timeout(120)
def test_serve_loads_the_model_with_its_callees_from_a_copy(
    user_repo: UserRepository, tmp_path: Path
) -> None:
    args = ["serve", "--repository", str(user_repo.root), "--model", "bls_chain"]
    args += ["--http-port", "0", "--grpc-port", "0", "--metrics-port", "0", "--repo", "served"]
    proc, stdout, stderr = start_cli(args, tmp_path, "serve")
    try:
        wait_for(proc, lambda: "Triton ready" in stdout.read_text(), "a ready server", 90)
        match = READY_RE.search(stdout.read_text())
        assert match, stdout.read_text()
        request = urllib.request.Request(
            f"http://{match[1]}/v2/repository/index", data=b"{}", method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            index = {m["name"]: m.get("state") for m in json.loads(response.read())}
        # the model and what it calls, loaded under explicit model control; nothing else
        assert index == dict.fromkeys(("bls_chain", "double", "scorer"), "READY"), index
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130, stderr.read_text()
    finally:
        if proc.poll() is None:
            kill_tree(proc)
    assert (tmp_path / "served" / "models" / "bls_chain" / "config.pbtxt").is_file()
    assert user_repo.unchanged()


def test_a_backend_the_bundled_server_lacks_is_one_line(
    user_repo: UserRepository, tmp_path: Path
) -> None:
    started = time.monotonic()
    done = run_cli(
        ["infer", "--repository", str(user_repo.root), "--model", "engine_plan"], tmp_path
    )
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "tensorrt_plan" in lines[0] and "--server-bin" in lines[0]
    assert time.monotonic() - started < 30  # refused before any server starts
    assert user_repo.unchanged()


@pytest.mark.timeout(120)
def test_a_link_the_repository_ships_is_never_written_through(tmp_path: Path) -> None:
    """Issue 32, 3, from the CLI: a repository that ships ``config.pbtxt.tmp`` as a link to a
    user's file had that file overwritten with protobuf text when its copy was written; now the
    copy is served and the user's file and the repository stay byte-identical."""
    dotfile = tmp_path / "home" / ".bashrc"
    dotfile.parent.mkdir()
    dotfile.write_text("export PATH=/usr/bin\n")
    repo = UserRepository(tmp_path / "user")
    (repo.root / "scorer" / "config.pbtxt.tmp").symlink_to(dotfile)
    repo.digest = tree_digest(repo.root)
    done = run_cli(["infer", "--repository", str(repo.root), "--model", "scorer"], tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert dotfile.read_text() == "export PATH=/usr/bin\n"
    assert repo.unchanged()
