"""``tritonlab deploy`` safe by construction (issue 32): the run's free text cannot inject YAML,
a NetworkPolicy admits only the named clients, every ``emptyDir`` is size-limited (KServe's
``/tmp`` too), the default image is past NVIDIA's August 2025 Triton fixes, and a hostile name
in the stored run is refused in one line before anything is written."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tritonlab.deploy.kubernetes import DeployOptions, write_deployment
from tritonlab.deploy.pick import DeployPick, resolve_pick
from tritonlab.deploy.validate import validate_files, validate_resource
from tritonlab.errors import ConfigError
from tritonlab.models.source import RepositorySource

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SWEEP = EXAMPLES / "simple_mlp_sweep"
# NVIDIA's August 2025 Triton bulletin, fixed in release 25.07
ADVISORIES = (
    "CVE-2025-23310",
    "CVE-2025-23311",
    "CVE-2025-23319",
    "CVE-2025-23320",
    "CVE-2025-23334",
)
DEFAULT_IMAGE = "nvcr.io/nvidia/tritonserver:25.10-py3"

KINDS = {
    "kubernetes": {
        "deployment.yaml": ["Deployment"],
        "service.yaml": ["Service"],
        "networkpolicy.yaml": ["NetworkPolicy"],
        "pvc.yaml": ["PersistentVolumeClaim"],
        "hpa.yaml": ["HorizontalPodAutoscaler"],
        "metrics-adapter-config.yaml": ["ConfigMap"],
    },
    "kserve": {
        "inferenceservice.yaml": ["InferenceService"],
        "networkpolicy.yaml": ["NetworkPolicy"],
        "pvc.yaml": ["PersistentVolumeClaim"],
        "hpa.yaml": ["HorizontalPodAutoscaler"],
        "metrics-adapter-config.yaml": ["ConfigMap"],
    },
}

INJECTED_POD = (
    "fast\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: evil\n  namespace: default\n"
    "spec:\n  containers:\n  - name: evil\n    image: busybox\n    securityContext:\n"
    "      privileged: true\n"
)
# What the old header (the description pasted into a YAML comment) turned into a privileged Pod
# in every file, which the offline validation passed.
INJECTION = INJECTED_POD + "---\n#"
DESCRIPTIONS = [
    INJECTED_POD,
    INJECTION,
    "x\r\n---\r\nkind: Pod\r\nmetadata: {name: evil}",
    "x\u2028---\u2028kind: Pod",  # line breaks to PyYAML (YAML 1.1), as NEL below
    "x\x85---\x85kind: Pod",
    "batching: on, delay: 100",  # ': ' would start a key
    "fast # not a comment",
    "#all of it",
    "- a list item",
    "'quoted' \"twice\" {flow: map} [seq] &anchor *alias !tag | >",
]


@pytest.fixture(scope="module")
def sweep_pick() -> DeployPick:
    """The demo sweep's pick, resolved once (``load_run`` analyses the whole run)."""
    return resolve_pick(SWEEP)


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _copy_run(tmp_path: Path, *, results_only: bool = False) -> Path:
    """The files of the demo sweep deploy reads (results, models, the ONNX file)."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copytree(SWEEP / "results", run / "results")
    if not results_only:
        shutil.copytree(SWEEP / "models", run / "models")
        shutil.copy(SWEEP / "simple_mlp.onnx", run / "simple_mlp.onnx")
    return run


def _tree_hash(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` with the hash of its bytes (folders: "dir")."""
    seen: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            seen[rel] = "link"
        elif path.is_dir():
            seen[rel] = "dir"
        else:
            seen[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


@pytest.mark.parametrize("target", ["kubernetes", "kserve"])
@pytest.mark.parametrize("description", DESCRIPTIONS)
def test_a_description_cannot_inject_a_document_or_a_key(
    tmp_path: Path, target: str, description: str, sweep_pick: DeployPick
) -> None:
    pick = replace(sweep_pick, variant=replace(sweep_pick.variant, description=description))
    written = write_deployment(pick, SWEEP, tmp_path, DeployOptions(target=target))
    kinds = {p.name: [d["kind"] for d in _docs(p)] for p in written.manifests}
    assert kinds == KINDS[target]  # no Pod, no document or file of its own
    validate_files(written.manifests)
    expected = f"{description} ({pick.variant.name})"
    for path in written.manifests:
        for doc in _docs(path):
            if doc["kind"] == "ConfigMap":
                continue  # the adapter's rule, in the monitoring namespace
            # the description is one string value, as it was given, and nothing else moved
            assert doc["metadata"]["annotations"]["tritonlab/configuration"] == expected
            assert set(doc) <= {"apiVersion", "kind", "metadata", "spec"}
    title = (tmp_path / "README.md").read_text().splitlines()[0]
    assert title == f"# Deploying simple_mlp: {' '.join(description.split())}"


def test_a_description_stored_in_the_runs_cells_reaches_no_manifest_as_yaml(
    tmp_path: Path,
) -> None:
    """The finding as reproduced: a plan's free text, stored with every cell of the variant."""
    run = _copy_run(tmp_path)
    name = resolve_pick(run).variant.name
    for cell in (run / "results" / "cells").glob("*.json"):
        data = json.loads(cell.read_text())
        if data["variant"]["name"] == name:
            data["variant"]["description"] = INJECTION
            cell.write_text(json.dumps(data))
    pick = resolve_pick(run)
    assert pick.variant.description == INJECTION
    out = tmp_path / "out"
    written = write_deployment(pick, run, out, DeployOptions())
    assert validate_files(written.manifests) == 6
    everything = [d for p in written.manifests for d in _docs(p)]
    assert "Pod" not in {d["kind"] for d in everything}
    (deployment,) = _docs(out / "deployment.yaml")
    assert deployment["metadata"]["annotations"]["tritonlab/configuration"].startswith(INJECTED_POD)


def test_the_network_policy_admits_only_the_default_clients(
    tmp_path: Path, sweep_pick: DeployPick
) -> None:
    written = write_deployment(sweep_pick, SWEEP, tmp_path, DeployOptions())
    validate_files(written.manifests)
    (policy,) = _docs(tmp_path / "networkpolicy.yaml")
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "simple-mlp"}}
    assert spec["policyTypes"] == ["Ingress"]
    clients, scrapers = spec["ingress"]
    only_clients = [{"podSelector": {"matchLabels": {"tritonlab-client": "true"}}}]
    assert clients["from"] == only_clients  # pods of the policy's own namespace only
    assert [p["port"] for p in clients["ports"]] == [8000, 8001]
    assert scrapers["from"] == only_clients
    assert [p["port"] for p in scrapers["ports"]] == [8002]
    # the Service's three ports are each admitted by one rule
    (service,) = _docs(tmp_path / "service.yaml")
    assert {p["port"] for p in service["spec"]["ports"]} == {8000, 8001, 8002}
    readme = (tmp_path / "README.md").read_text()
    assert "networkpolicy.yaml" in readme and "`tritonlab-client=true`" in readme


@pytest.mark.parametrize("target", ["kubernetes", "kserve"])
def test_the_network_policy_admits_the_clients_named(
    tmp_path: Path, target: str, sweep_pick: DeployPick
) -> None:
    options = DeployOptions(
        target=target,
        namespace="serving",
        allow_from=("app=web,tier=front", "batch:app.kubernetes.io/name=jobs"),
        allow_metrics_from=("monitoring:app.kubernetes.io/name=prometheus",),
    )
    written = write_deployment(sweep_pick, SWEEP, tmp_path, options)
    validate_files(written.manifests)
    (policy,) = _docs(tmp_path / "networkpolicy.yaml")
    assert policy["metadata"]["namespace"] == "serving"
    clients, scrapers = policy["spec"]["ingress"]
    assert clients["from"] == [
        {"podSelector": {"matchLabels": {"app": "web", "tier": "front"}}},
        {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "jobs"}},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "batch"}},
        },
    ]
    assert scrapers["from"] == [
        {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
        }
    ]
    pods = policy["spec"]["podSelector"]["matchLabels"]
    if target == "kserve":
        assert pods == {"serving.kserve.io/inferenceservice": "simple-mlp"}
        assert "ports" not in clients  # KServe's runtime chooses the predictor's ports
    else:
        assert pods == {"app.kubernetes.io/name": "simple-mlp"}


@pytest.mark.parametrize(
    "selector",
    ["app", "=web", "app=web app", "a=b\n", "Bad_NS:app=web", "app=web,", "a/b/c=d", "app=-x"],
)
def test_a_selector_that_is_not_label_syntax_is_refused_in_one_line(
    tmp_path: Path, selector: str, sweep_pick: DeployPick
) -> None:
    for option in ("allow_from", "allow_metrics_from"):
        options = DeployOptions(**{option: (selector,)})  # type: ignore[arg-type]
        with pytest.raises(ConfigError) as caught:
            write_deployment(sweep_pick, SWEEP, tmp_path / "out", options)
        assert "\n" not in str(caught.value)
        assert option.replace("_", "-") in str(caught.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("target", ["kubernetes", "kserve"])
def test_every_empty_dir_has_a_size_limit_and_kserve_a_writable_tmp(
    tmp_path: Path, target: str, sweep_pick: DeployPick
) -> None:
    written = write_deployment(sweep_pick, SWEEP, tmp_path, DeployOptions(target=target))
    validate_files(written.manifests)
    empty_dirs = [
        v for p in written.manifests for d in _docs(p) for k, v in _walk(d) if k == "emptyDir"
    ]
    assert empty_dirs and all(e.get("sizeLimit") == "1Gi" for e in empty_dirs)
    if target == "kserve":
        (service,) = _docs(tmp_path / "inferenceservice.yaml")
        predictor = service["spec"]["predictor"]
        assert predictor["model"]["securityContext"]["readOnlyRootFilesystem"] is True
        assert {"name": "tmp", "mountPath": "/tmp"} in predictor["model"]["volumeMounts"]
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}} in predictor["volumes"]


def test_the_validation_refuses_an_unlimited_empty_dir_and_a_mount_of_nothing(
    tmp_path: Path, sweep_pick: DeployPick
) -> None:
    for target, file_name in (
        ("kubernetes", "deployment.yaml"),
        ("kserve", "inferenceservice.yaml"),
    ):
        out = tmp_path / target
        write_deployment(sweep_pick, SWEEP, out, DeployOptions(target=target))
        (doc,) = _docs(out / file_name)
        pod = (
            doc["spec"]["template"]["spec"] if target == "kubernetes" else doc["spec"]["predictor"]
        )
        pod["volumes"][-1]["emptyDir"] = {}
        with pytest.raises(ConfigError, match="an emptyDir needs a sizeLimit"):
            validate_resource(doc)
        pod["volumes"] = [v for v in pod["volumes"] if v["name"] != "tmp"]
        with pytest.raises(ConfigError, match="'tmp', which is not a volume of the pod"):
            validate_resource(doc)


def test_the_default_image_is_past_the_august_2025_fixes(
    tmp_path: Path, sweep_pick: DeployPick
) -> None:
    run = SWEEP
    written = write_deployment(sweep_pick, run, tmp_path / "new", DeployOptions())
    assert written.warnings == []
    (deployment,) = _docs(tmp_path / "new" / "deployment.yaml")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == DEFAULT_IMAGE
    readme = (tmp_path / "new" / "README.md").read_text()
    assert all(cve in readme for cve in ADVISORIES) and "--image-digest" in readme
    # the measured release (24.10) may still be asked for, and is then flagged
    old = "nvcr.io/nvidia/tritonserver:24.10-py3"
    written = write_deployment(sweep_pick, run, tmp_path / "old", DeployOptions(image=old))
    assert len(written.warnings) == 1 and "OLDER than 25.07" in written.warnings[0]
    assert "OLDER than 25.07" in (tmp_path / "old" / "README.md").read_text()
    from tritonlab.deploy.hardening import image_advisory

    assert image_advisory("nvcr.io/nvidia/tritonserver:25.07-py3")[0]
    assert not image_advisory("nvcr.io/nvidia/tritonserver:25.06-py3")[0]
    assert not image_advisory("example.com/triton:latest")[0]  # not datable: said so


def test_kserve_takes_the_tag_not_the_digest_as_its_runtime_version(
    tmp_path: Path, sweep_pick: DeployPick
) -> None:
    digest = "sha256:" + "ab" * 32
    write_deployment(
        sweep_pick, SWEEP, tmp_path, DeployOptions(target="kserve", image_digest=digest)
    )
    (service,) = _docs(tmp_path / "inferenceservice.yaml")
    assert service["spec"]["predictor"]["model"]["runtimeVersion"] == "25.10-py3"


HOSTILE = ["../x", "../../../../x", "/abs", "a/b", "a\\b", "..", ".", "x\ny", "x\x00y"]


def _pick_with(
    pick: DeployPick, tmp_path: Path, where: str, hostile: str
) -> tuple[DeployPick, Path, str]:
    """A pick carrying ``hostile`` as a stored name, the run folder, the file to be named."""
    run = _copy_run(tmp_path, results_only=True)  # refused before models/ is read
    if where == "model":  # forged in the stored manifest, read back as deploy reads it
        manifest = run / "results" / "manifest.json"
        data = json.loads(manifest.read_text())
        data["model"]["name"] = hostile
        manifest.write_text(json.dumps(data))
        return resolve_pick(run), run, "manifest.json"
    if where == "variant":
        return replace(pick, variant=replace(pick.variant, name=hostile)), run, "cells"
    source = RepositorySource(
        root=Path("models"),
        model=pick.model_name,
        kind="ensemble",
        tuned="scorer" if where == "callee" else hostile,
        tuned_backend="onnxruntime",
        called=(hostile, "scorer") if where == "callee" else ("scorer",),
        needed=("scorer", pick.model_name),
    )
    return replace(pick, repository=source), run, "manifest.json"


@pytest.mark.parametrize("where", ["model", "variant", "callee", "tuned"])
@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_stored_name_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, where: str, hostile: str, sweep_pick: DeployPick
) -> None:
    pick, run, file_name = _pick_with(sweep_pick, tmp_path, where, hostile)
    decoy = tmp_path / "decoy"
    for rel in ("x", "abs", "a/b", "deep/er/keep.txt"):
        (decoy / rel).parent.mkdir(parents=True, exist_ok=True)
        (decoy / rel).write_text(f"decoy {rel}\n")
    out = decoy / "deep" / "er" / "out"
    before = _tree_hash(tmp_path)
    with pytest.raises(ConfigError) as caught:
        write_deployment(pick, run, out, DeployOptions())
    message = str(caught.value)
    assert "\n" not in message and "\x00" not in message
    assert file_name in message and repr(hostile) in message
    assert re.search(r"damaged or forged", message)
    assert _tree_hash(tmp_path) == before  # not one file or folder written, in or out of --out
    assert not out.exists()


@pytest.mark.parametrize("inside", [".", "deploy"])
def test_out_may_not_be_or_lie_inside_the_run_folder(tmp_path: Path, inside: str) -> None:
    run = _copy_run(tmp_path)
    before = _tree_hash(run)
    with pytest.raises(ConfigError, match="overlaps the run folder") as caught:
        write_deployment(resolve_pick(run), run, run / inside, DeployOptions())
    assert "\n" not in str(caught.value)
    assert _tree_hash(run) == before


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("namespace", "Default", "--namespace"),
        ("namespace", "a b", "--namespace"),
        ("namespace", "ns\nkind: Pod", "--namespace"),
        ("repository_uri", "s3://bucket/my model", "--repository"),
        ("repository_uri", "s3://bucket/$(reboot)", "--repository"),
        ("repository_uri", "s3://bucket/x\n---", "--repository"),
        ("repository_uri", "pvc://claim/../../etc", "--repository"),
        ("repository_uri", "pvc://Bad_Claim", "--repository"),
    ],
)
def test_a_bad_namespace_or_repository_is_refused_in_one_line(
    tmp_path: Path, field: str, value: str, words: str, sweep_pick: DeployPick
) -> None:
    options = DeployOptions(**{field: value})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=re.escape(words)) as caught:
        write_deployment(sweep_pick, SWEEP, tmp_path / "out", options)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "out").exists()


DEPLOY_SRC = Path(__file__).resolve().parents[2] / "src" / "tritonlab" / "deploy"
# A write, copy or delete anywhere but the out folder's Gateway (``gate.``), or YAML as text.
FORBIDDEN = re.compile(
    r"(?<!gate)\.(?:write_text|write_bytes|unlink|rmdir|touch)\(|shutil\.|copytree|"
    r"\.mkdir\(parents|open\([^)]*[\"'][wa]|os\.(?:remove|rename|replace|unlink)|"
    r"yaml\.(?:dump|safe_dump)\(|\\n---"
)


def test_deploy_writes_only_through_the_gateway_and_never_yaml_as_text() -> None:
    found = [
        f"{path.name}: {line.strip()}"
        for path in sorted(DEPLOY_SRC.glob("*.py"))
        for line in path.read_text().splitlines()
        if FORBIDDEN.search(line)
    ]
    # the adapter rule is YAML inside a ConfigMap's data, dumped by PyYAML too
    assert found == [
        'autoscaling.py: "data": {"config.yaml": yaml.safe_dump({"rules": [rule]}, '
        "sort_keys=False)},"
    ]
