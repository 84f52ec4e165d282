"""``tritonlab deploy`` of a run whose model came from a user's Triton repository: the deployed
repository holds the whole pipeline (the picked configuration of the tuned model, every model it
calls), each under its own name, copied from the run folder's ``models/``."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from repository_factory import write_test_repository

from tritonlab.deploy.kubernetes import DeployOptions, write_deployment
from tritonlab.deploy.pick import DeployPick, resolve_pick
from tritonlab.errors import ConfigError
from tritonlab.experiments.repository_plan import one_change_variants, repository_baseline
from tritonlab.repository.config import read_config
from tritonlab.repository.layout import build_repository
from tritonlab.repository.user_repo import read_repository_model
from tritonlab.repository.variants import ServingVariant
from tritonlab.run_layout import RunLayout

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def user_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_test_repository(tmp_path_factory.mktemp("user") / "models")


def _run_folder(run_dir: Path, user_repo: Path, model: str) -> tuple[DeployPick, ServingVariant]:
    """A run folder's models/ as `run --repository` writes it (the baseline and the one-change
    variant of one more instance), and a pick of that variant."""
    info = read_repository_model(user_repo, model)
    assert info.source is not None
    baseline = repository_baseline(info)
    more = next(
        v
        for v in one_change_variants(baseline, info.source.tuned_backend)
        if v.instance_count > baseline.instance_count
    )
    build_repository(RunLayout(run_dir).models, info, model, [baseline, more])
    pick = DeployPick(
        variant=more,
        model_name=model,
        source="a test's pick",
        load_key="grpc_b1_c8",
        protocol="grpc",
        concurrency=8,
        throughput_infer_per_s=1000.0,
        throughput_range=None,
        latency_p99_us=5000.0,
        queue_us_per_request=10.0,
        repeats=1,
        machine="test x2",
        machine_cores=2,
        server_version="2.51.0",
        repository=info.source,
    )
    return pick, more


def test_an_ensemble_deploys_with_its_tuned_step_and_every_step(
    tmp_path: Path, user_repo: Path
) -> None:
    run_dir = tmp_path / "run"
    pick, more = _run_folder(run_dir, user_repo, "chain")
    assert (run_dir / "models" / f"scorer__{more.name}").is_dir()  # the variant's step
    written = write_deployment(pick, run_dir, tmp_path / "out", DeployOptions())
    repo = tmp_path / "out" / "model_repository"
    assert sorted(p.name for p in repo.iterdir()) == ["chain", "double", "scorer"]
    chain = read_config(repo / "chain" / "config.pbtxt")
    assert chain.name == "chain"
    # the ensemble calls its tuned step by the step's own name again
    assert [s.model_name for s in chain.ensemble_scheduling.step] == ["double", "scorer"]
    scorer = read_config(repo / "scorer" / "config.pbtxt")
    assert scorer.name == "scorer"
    assert scorer.instance_group[0].count == more.instance_count == 3  # the picked variant
    assert scorer.dynamic_batching.max_queue_delay_microseconds == 100  # the user's, kept
    assert (repo / "scorer" / "1" / "model.onnx").read_bytes() == (
        user_repo / "scorer" / "1" / "model.onnx"
    ).read_bytes()
    assert (repo / "double" / "1" / "model.py").read_text() == (
        user_repo / "double" / "1" / "model.py"
    ).read_text()
    assert read_config(repo / "double" / "config.pbtxt") == read_config(
        user_repo / "double" / "config.pbtxt"
    )
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "`chain`, `double`, `scorer` (the whole pipeline)" in readme
    (pvc,) = [d for d in yaml.safe_load_all((tmp_path / "out" / "pvc.yaml").read_text()) if d]
    assert pvc["kind"] == "PersistentVolumeClaim"
    assert {p.name for p in written.manifests} >= {"deployment.yaml", "hpa.yaml"}


def test_a_bls_model_deploys_with_its_callees_under_the_picked_name(
    tmp_path: Path, user_repo: Path
) -> None:
    run_dir = tmp_path / "run"
    pick, more = _run_folder(run_dir, user_repo, "bls_chain")
    write_deployment(pick, run_dir, tmp_path / "out", DeployOptions(target="kserve"))
    repo = tmp_path / "out" / "model_repository"
    assert sorted(p.name for p in repo.iterdir()) == ["bls_chain", "double", "scorer"]
    bls = read_config(repo / "bls_chain" / "config.pbtxt")
    assert (bls.name, bls.instance_group[0].count) == ("bls_chain", more.instance_count)
    # the BLS model.py calls its callees by name: they keep the user's configuration
    assert read_config(repo / "scorer" / "config.pbtxt") == read_config(
        user_repo / "scorer" / "config.pbtxt"
    )
    (service,) = [
        d for d in yaml.safe_load_all((tmp_path / "out" / "inferenceservice.yaml").read_text()) if d
    ]
    assert service["spec"]["predictor"]["model"]["modelFormat"] == {"name": "triton"}


def test_a_baseline_pick_deploys_the_users_own_configuration(
    tmp_path: Path, user_repo: Path
) -> None:
    run_dir = tmp_path / "run"
    pick, _ = _run_folder(run_dir, user_repo, "chain")
    info = read_repository_model(user_repo, "chain")
    pick = replace(pick, variant=repository_baseline(info))
    write_deployment(pick, run_dir, tmp_path / "out", DeployOptions())
    repo = tmp_path / "out" / "model_repository"
    for name in ("chain", "double", "scorer"):
        assert read_config(repo / name / "config.pbtxt") == read_config(
            user_repo / name / "config.pbtxt"
        ), name


def test_a_missing_callee_folder_or_a_forged_callee_name_is_one_line(
    tmp_path: Path, user_repo: Path
) -> None:
    run_dir = tmp_path / "run"
    pick, _ = _run_folder(run_dir, user_repo, "chain")
    shutil.rmtree(run_dir / "models" / "double")
    with pytest.raises(ConfigError, match=r"double/config\.pbtxt is missing"):
        write_deployment(pick, run_dir, tmp_path / "out", DeployOptions())
    assert pick.repository is not None
    forged = replace(pick, repository=replace(pick.repository, called=("../../etc", "scorer")))
    with pytest.raises(ConfigError, match="not a folder name tritonlab copies"):
        write_deployment(forged, run_dir, tmp_path / "forged", DeployOptions())
    assert not (tmp_path / "etc").exists()


def test_the_pick_of_a_repository_run_carries_where_its_model_came_from(tmp_path: Path) -> None:
    """resolve_pick reads the manifest's repository record into the pick; an ONNX run's pick
    has none, and its deployment stays one model folder."""
    run_dir = tmp_path / "run"
    shutil.copytree(EXAMPLES / "simple_mlp" / "results", run_dir / "results")
    assert resolve_pick(run_dir).repository is None
    manifest_path = run_dir / "results" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["model"]["repository"] = {
        "repository": "models",
        "model": "chain",
        "kind": "ensemble",
        "tuned": "scorer",
        "tuned_backend": "onnxruntime",
        "called": ["double", "scorer"],
        "needed": ["double", "scorer", "chain"],
        "tuned_reason": "the first step that runs a model graph (no --step given)",
        "reference": None,
    }
    manifest_path.write_text(json.dumps(manifest))
    source = resolve_pick(run_dir).repository
    assert source is not None
    assert (source.model, source.tuned, source.called) == ("chain", "scorer", ("double", "scorer"))
    del manifest["model"]["repository"]["tuned"]
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="manifest is damaged"):
        resolve_pick(run_dir)
