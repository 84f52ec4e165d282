"""``tritonlab deploy``: manifests for the committed examples' picks, validated offline against
the Kubernetes schema, and a broken manifest refused (the validator is not a rubber stamp)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tritonlab.deploy.kubernetes import DeployOptions, write_deployment
from tritonlab.deploy.pick import resolve_pick
from tritonlab.deploy.validate import validate_files, validate_resource
from tritonlab.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RUNS = ["simple_mlp_sweep", "bert_encoder_sweep", "resnet18_cnn_tune", "simple_mlp"]


def _docs(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("target", ["kubernetes", "kserve"])
def test_manifests_of_every_example_validate(run: str, target: str, tmp_path: Path) -> None:
    pick = resolve_pick(EXAMPLES / run)
    written = write_deployment(pick, EXAMPLES / run, tmp_path, DeployOptions(target=target))
    assert validate_files(written.manifests) >= 3
    names = {p.name for p in written.manifests}
    assert {"hpa.yaml", "pvc.yaml", "metrics-adapter-config.yaml"} <= names
    config = (tmp_path / "model_repository" / pick.model_name / "config.pbtxt").read_text()
    assert config.startswith(f'name: "{pick.model_name}"')
    served = EXAMPLES / run / "models" / f"{pick.model_name}__{pick.variant.name}"
    measured = (served / "config.pbtxt").read_text().splitlines()[1:]
    assert config.splitlines()[1:] == measured  # the configuration measured, as measured


def test_deployment_matches_the_measured_configuration(tmp_path: Path) -> None:
    run = EXAMPLES / "simple_mlp_sweep"
    pick = resolve_pick(run)
    assert pick.source == "the sweep's throughput-first pick"
    written = write_deployment(
        pick,
        run,
        tmp_path,
        DeployOptions(repository_uri="s3://bucket/mlp", target_load_infer_per_s=20000),
    )
    (deployment,) = _docs(tmp_path / "deployment.yaml")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    # past NVIDIA's August 2025 fixes (25.07), not the measured 2.51.0's 24.10
    assert container["image"] == "nvcr.io/nvidia/tritonserver:25.10-py3"
    assert not written.warnings
    assert "--model-repository=s3://bucket/mlp" in container["args"]
    threads = pick.variant.intra_op_threads or 2
    assert container["resources"]["requests"]["cpu"] == str(pick.variant.instance_count * threads)
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert "pvc.yaml" not in {p.name for p in written.manifests}
    (hpa,) = _docs(tmp_path / "hpa.yaml")
    # 20,000 infer/s over a measured 6,912 per replica: 3 replicas at least.
    assert hpa["spec"]["minReplicas"] == 3
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "avg_time_queue_us"
    assert (
        "6,912 infer/s" in hpa["metadata"]["annotations"]["tritonlab/measured-capacity-per-replica"]
    )
    assert (
        "6,912 infer/s"
        in deployment["metadata"]["annotations"]["tritonlab/measured-capacity-per-replica"]
    )


def test_a_broken_manifest_is_refused_in_one_line(tmp_path: Path) -> None:
    run = EXAMPLES / "simple_mlp_sweep"
    write_deployment(resolve_pick(run), run, tmp_path, DeployOptions())
    (deployment,) = _docs(tmp_path / "deployment.yaml")
    deployment["spec"]["replicas"] = "two"
    with pytest.raises(ConfigError, match=r"Deployment simple-mlp: spec\.replicas"):
        validate_resource(deployment)
    (service,) = _docs(tmp_path / "service.yaml")
    service["spec"]["portz"] = []
    with pytest.raises(ConfigError, match="Service simple-mlp"):
        validate_resource(service)


def test_bad_options_are_refused(tmp_path: Path) -> None:
    run = EXAMPLES / "simple_mlp_sweep"
    pick = resolve_pick(run)
    with pytest.raises(ConfigError, match="ConfigMap cannot hold"):
        write_deployment(pick, run, tmp_path, DeployOptions(repository_uri="/data/models"))
    with pytest.raises(ConfigError, match="--to must be one of"):
        write_deployment(pick, run, tmp_path, DeployOptions(target="nomad"))
    with pytest.raises(ConfigError, match="--pick must be one of"):
        resolve_pick(run, "cheapest")


def test_a_baseline_pick_deploys_from_the_baseline_folder(tmp_path: Path) -> None:
    """The latency-first pick of the demo sweep is the baseline, served under the plain model
    name (no ``__baseline`` folder): deploy failed on it (issue 20, 7)."""
    run = EXAMPLES / "simple_mlp_sweep"
    pick = resolve_pick(run, "latency")
    assert pick.variant.name == "baseline"
    write_deployment(pick, run, tmp_path, DeployOptions())
    config = (tmp_path / "model_repository" / pick.model_name / "config.pbtxt").read_text()
    measured = (run / "models" / pick.model_name / "config.pbtxt").read_text().splitlines()
    assert config.splitlines()[1:] == measured[1:]


def test_the_manifests_are_hardened_and_still_valid(tmp_path: Path) -> None:
    """Issue 20, 7: non-root, no escalation, no capabilities, read-only root, no token."""
    run = EXAMPLES / "simple_mlp_sweep"
    for target in ("kubernetes", "kserve"):
        out = tmp_path / target
        written = write_deployment(resolve_pick(run), run, out, DeployOptions(target=target))
        validate_files(written.manifests)  # the Kubernetes 1.31 schema, offline
        if target == "kubernetes":
            (deployment,) = _docs(out / "deployment.yaml")
            pod = deployment["spec"]["template"]["spec"]
            container = pod["containers"][0]
            assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
        else:
            (service,) = _docs(out / "inferenceservice.yaml")
            pod = service["spec"]["predictor"]
            container = pod["model"]
        assert pod["automountServiceAccountToken"] is False
        security = container["securityContext"]
        assert security["runAsNonRoot"] and security["readOnlyRootFilesystem"]
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}


def test_the_image_is_checked_and_can_be_pinned_by_digest(tmp_path: Path) -> None:
    run = EXAMPLES / "simple_mlp_sweep"
    pick = resolve_pick(run)
    digest = "sha256:" + "ab" * 32
    write_deployment(pick, run, tmp_path, DeployOptions(image_digest=digest))
    (deployment,) = _docs(tmp_path / "deployment.yaml")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"nvcr.io/nvidia/tritonserver:25.10-py3@{digest}"
    for bad in ("nvcr.io/x:tag; rm -rf /", "UPPER/Case", "a b", "x:tag\n"):
        with pytest.raises(ConfigError, match="not an image reference"):
            write_deployment(pick, run, tmp_path, DeployOptions(image=bad))
    with pytest.raises(ConfigError, match="--image-digest"):
        write_deployment(pick, run, tmp_path, DeployOptions(image_digest="sha256:xyz"))


@pytest.mark.parametrize("forged", ["../../etc", "/abs", "a/b", "..", "x\n", ""])
def test_a_forged_model_name_in_the_manifest_never_becomes_a_path(
    tmp_path: Path, forged: str
) -> None:
    """Issue 20, 5: the manifest's model name was joined into the output paths unchecked."""
    from dataclasses import replace

    run = EXAMPLES / "simple_mlp_sweep"
    pick = replace(resolve_pick(run), model_name=forged)
    with pytest.raises(ConfigError, match="not a model name tritonlab writes"):
        write_deployment(pick, run, tmp_path / "out", DeployOptions())
    assert not (tmp_path / "etc").exists() and not (tmp_path / "out" / "model_repository").exists()
