"""A Triton repository as input (issue 23), on the real server: ``run`` and ``tune`` on a user's
ONNX config, a Python model, an ensemble and a BLS model; the repository byte-identical after
every command; a backend the bundled server lacks refused in one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from integration_support import FAST_RUN_FLAGS, cli_env, tritonlab_command
from repository_factory import tree_digest, write_reference, write_test_repository

from tritonlab.repository.config import read_config

pytestmark = pytest.mark.integration

# One configuration fewer than the default rounds: classic engine, one repeat (behaviour, not
# precision), so each run measures the baseline and its one-change variants once.
RUN_FLAGS = [*FAST_RUN_FLAGS, "--engine", "classic", "--window-ms", "250"]
TUNE_FLAGS = ["--time-budget", "3", "--window-ms", "400", "--stability", "80"]
TUNE_FLAGS += ["--engine", "classic"]


def _cli(args: list[str], cwd: Path, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*tritonlab_command(), *args],
        cwd=cwd,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    return write_test_repository(tmp_path / "user-repo")


def _cells(out_dir: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((out_dir / "results/cells").glob("*.json"))]


@pytest.mark.timeout(300)
def test_run_on_a_users_onnx_config_starts_from_it(repo: Path, tmp_path: Path) -> None:
    before = tree_digest(repo)
    out = tmp_path / "scorer-run"
    result = _cli(
        ["run", "--repository", str(repo), "--model", "scorer", "--out", str(out), *RUN_FLAGS],
        tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert tree_digest(repo) == before, "the repository given as input was written"
    # the baseline is the user's config as given (only the name field is the served one)
    user = read_config(repo / "scorer" / "config.pbtxt")
    served = read_config(out / "models" / "scorer" / "config.pbtxt")
    assert served == user
    # every other configuration is one change from it, inside the user's own config
    one_fewer = read_config(out / "models" / "scorer__batch_100us_x1" / "config.pbtxt")
    assert one_fewer.instance_group[0].count == 1
    assert one_fewer.platform == "onnxruntime_onnx" and one_fewer.input[0].name == "features_in"
    assert one_fewer.dynamic_batching.max_queue_delay_microseconds == 100
    names = {c["variant"]["name"] for c in _cells(out)}  # type: ignore[index]
    assert names == {
        "baseline",
        "nobatch_x2",
        "batch_5000us_x2",
        "batch_100us_x3",
        "batch_100us_x1",
        "batch_100us_x2_t2",
    }
    log = (out / "docs" / "experiment_log.md").read_text()
    assert "of the Triton repository `user-repo`, an ONNX model" in log
    assert "your configuration (batching (100 µs), count=2)" in log
    assert "max abs diff against onnxruntime" in log


@pytest.mark.timeout(300)
def test_run_on_an_ensemble_varies_the_step_that_binds(repo: Path, tmp_path: Path) -> None:
    reference = write_reference(tmp_path / "ref.npz", repo)
    before = tree_digest(repo)
    out = tmp_path / "chain-run"
    args = ["run", "--repository", str(repo), "--model", "chain", "--out", str(out)]
    # --step: the opening probe that chooses otherwise is the ensemble tune test's
    result = _cli([*args, "--step", "double", "--reference", str(reference), *RUN_FLAGS], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert tree_digest(repo) == before
    manifest = json.loads((out / "results" / "manifest.json").read_text())
    source = manifest["model"]["repository"]
    assert source["kind"] == "ensemble" and source["called"] == ["double", "scorer"]
    assert source["tuned_reason"] == "chosen with --step"
    tuned = source["tuned"]
    assert tuned == "double"
    cells = _cells(out)
    for cell in cells:  # each step's statistics over the same window, in every cell
        steps = cell["steps"]  # type: ignore[index]
        assert set(steps) == {"double", "scorer"}  # type: ignore[arg-type]
        assert all(s["request_count"] > 0 for s in steps.values())  # type: ignore[union-attr]
    # a variant's ensemble calls its own copy of the tuned step; the other step is shared
    variant = next(c for c in cells if c["variant"]["name"] != "baseline")  # type: ignore[index]
    ensemble = read_config(out / "models" / str(variant["model_name"]) / "config.pbtxt")
    steps = [s.model_name for s in ensemble.ensemble_scheduling.step]
    assert f"{tuned}__{variant['variant']['name']}" in steps  # type: ignore[index]
    log = (out / "docs" / "experiment_log.md").read_text()
    assert "## Pipeline steps" in log and "What Triton attributes" in log
    assert f"The configurations change step `{tuned}`" in log
    assert "max abs diff against ref.npz 0" in log
    # a reference the answer does not match is one line (infer: one request, no measuring)
    wrong = tmp_path / "wrong.npz"
    import numpy as np

    data = dict(np.load(reference))
    np.savez(wrong, X=data["X"], SCORES=data["SCORES"] + 1.0)
    bad = _cli(["infer", *args[1:5], "--reference", str(wrong)], tmp_path, 120)
    assert bad.returncode != 0 and "differs from wrong.npz" in bad.stderr, bad.stderr
    assert tree_digest(repo) == before


@pytest.mark.timeout(300)
def test_run_and_tune_on_a_python_model(repo: Path, tmp_path: Path) -> None:
    before = tree_digest(repo)
    out = tmp_path / "double-run"
    args = ["--repository", str(repo), "--model", "double"]
    result = _cli(["run", *args, "--out", str(out), *RUN_FLAGS], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    log = (out / "docs" / "experiment_log.md").read_text()
    assert "a Python-backend model" in log
    assert "output shapes and dtypes as the config declares them" in log
    assert "`intra_op_thread_count`: the python backend does not read it" in log
    tuned = _tune(repo, "double", tmp_path)
    pick = read_config(tuned / "pick" / "double" / "config.pbtxt")
    assert pick.backend == "python" and "intra_op_thread_count" not in pick.parameters
    assert tree_digest(repo) == before


def _tune(repo: Path, model: str, tmp_path: Path) -> Path:
    """``tune`` on ``model`` of ``repo``, checked to end with a pick; its run folder."""
    out = tmp_path / f"{model}-tune"
    args = ["tune", "--repository", str(repo), "--model", model, "--out", str(out)]
    tuned = _cli([*args, *TUNE_FLAGS], tmp_path)
    assert tuned.returncode == 0, model + tuned.stdout + tuned.stderr
    assert "pick:" in tuned.stdout
    assert (out / "pick" / model / "config.pbtxt").is_file()
    return out


@pytest.mark.timeout(300)
def test_run_and_tune_on_a_bls_model(repo: Path, tmp_path: Path) -> None:
    before = tree_digest(repo)
    args = ["--repository", str(repo), "--model", "bls_chain"]
    out = tmp_path / "bls-run"
    result = _cli(["run", *args, "--out", str(out), *RUN_FLAGS], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    log = (out / "docs" / "experiment_log.md").read_text()
    assert "that calls `double`, `scorer` through BLS" in log
    assert "the BLS model's compute" in log and "do not split it further" in log
    for cell in _cells(out):
        assert set(cell["steps"]) == {"double", "scorer"}  # type: ignore[arg-type]
    tuned = _tune(repo, "bls_chain", tmp_path)
    # the pick holds the BLS model and the models it calls
    assert {p.name for p in (tuned / "pick").iterdir()} == {"bls_chain", "double", "scorer"}
    assert tree_digest(repo) == before


@pytest.mark.timeout(300)
def test_tune_on_a_users_onnx_config_and_on_an_ensemble(repo: Path, tmp_path: Path) -> None:
    before = tree_digest(repo)
    scorer = _tune(repo, "scorer", tmp_path)
    start = json.loads((scorer / "results" / "tune.json").read_text())["steps"][0]
    assert start["configuration"]["instances"] == 2, "tune starts at the user's 2 instances"
    assert start["configuration"]["batching"] and start["configuration"]["max_batch"] == 8
    chain = _tune(repo, "chain", tmp_path)
    manifest = json.loads((chain / "results" / "manifest.json").read_text())
    assert "opening probe" in manifest["model"]["repository"]["tuned_reason"], "chosen by measuring"
    # the ensemble's pick holds the whole pipeline
    assert {p.name for p in (chain / "pick").iterdir()} == {"chain", "double", "scorer"}
    assert tree_digest(repo) == before


@pytest.mark.timeout(60)
def test_a_backend_the_bundled_server_lacks_is_one_line(repo: Path, tmp_path: Path) -> None:
    before = tree_digest(repo)
    out = tmp_path / "out"  # apart from the repository (an --out around it is refused first)
    for command in ("run", "tune"):
        result = _cli(
            [command, "--repository", str(repo), "--model", "engine_plan", "--out", str(out)],
            tmp_path,
            60,
        )
        assert result.returncode != 0
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, result.stderr
        assert "tensorrt_plan" in lines[0] and "--server-bin" in lines[0]
    assert tree_digest(repo) == before
