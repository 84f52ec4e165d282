"""Manifests for the pick: a Triton Deployment (or a KServe InferenceService), Service, HPA.

Every manifest is a Python mapping dumped by PyYAML and parsed back before it is written: no
text from a run is pasted into YAML, so none can start a document or a key; what the run says
about itself is in ``tritonlab/*`` annotations, as string values. Every file goes through the out
folder's ``Gateway``, and ``--out`` may neither be, hold nor lie inside the run folder.

Written: a pinned NGC ``tritonserver`` release past NVIDIA's August 2025 fixes
(``hardening``); the model repository (``served_repository``), delivered by object storage or a
persistent volume, never a ConfigMap (it caps at 1 MiB); readiness, liveness and startup probes;
CPU requests of instances x threads (one GPU for a KIND_GPU pick); Prometheus scrape annotations
for the metrics port; a NetworkPolicy (Triton's API has no authentication); and an HPA on queue
time per request (``autoscaling``), with the measured per-replica capacity in its annotations.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tritonlab.deploy.autoscaling import (
    adapter_config,
    add_sizing_notes,
    hpa_manifest,
    replicas_for_target,
)
from tritonlab.deploy.hardening import (
    DEFAULT_IMAGE,
    DNS_SUBDOMAIN_RE,
    checked_image,
    checked_namespace,
    container_security,
    harden_container,
    harden_pod,
    image_advisory,
    image_tag,
    network_policy,
    peers,
    selector_words,
    tmp_mount,
    tmp_volume,
)
from tritonlab.deploy.pick import DeployPick
from tritonlab.deploy.readme_text import ReadmeFacts, readme
from tritonlab.deploy.served_repository import check_stored_names, write_repository
from tritonlab.errors import ConfigError
from tritonlab.gateway import Gateway, refuse_overlap

# Triton releases by server version (the container tag of each): named in the README as what
# was measured; none is deployed by default (all are before NVIDIA's August 2025 fixes).
NGC_TAGS = {"2.51.0": "24.10-py3", "2.50.0": "24.09-py3", "2.49.0": "24.08-py3"}
TARGETS = ("kubernetes", "kserve")
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
STORAGE_SCHEMES = ("s3://", "gs://", "as://", "pvc://")
MODELS_MOUNT = "/models"
# What a --repository URI may hold: it is shown in the README's shell commands.
URI_RE = re.compile(r"[A-Za-z0-9._~/:%+=@,-]+")
# The label KServe gives an InferenceService's predictor pods.
KSERVE_POD_LABEL = "serving.kserve.io/inferenceservice"
HEADER = (
    "# Written by `tritonlab deploy`. Where the configuration and its measured capacity come\n"
    "# from: the tritonlab/* annotations below, and README.md. A replica on other hardware\n"
    "# carries a different load: measure the service with `tritonlab perf --url` once it runs.\n"
)


@dataclass(frozen=True)
class DeployOptions:
    """What ``tritonlab deploy`` writes: target, names, image, repository and replica range."""

    target: str = "kubernetes"
    name: str | None = None  # default: the model name, as a DNS label
    namespace: str = "default"
    # Where the cluster finds the repository: s3://, gs://, as:// or pvc://CLAIM[/path];
    # None: a PersistentVolumeClaim of our own (pvc.yaml), filled as the README says.
    repository_uri: str | None = None
    image: str | None = None  # default: hardening.DEFAULT_IMAGE (past the August 2025 fixes)
    image_digest: str | None = None  # sha256:...: pin the image by digest, not by its tag
    # NetworkPolicy peers, each [NAMESPACE:]key=value[,key=value]; () the default label
    allow_from: tuple[str, ...] = ()
    allow_metrics_from: tuple[str, ...] = ()
    min_replicas: int = 1
    max_replicas: int = 4
    target_load_infer_per_s: float | None = None  # sizes minReplicas from the capacity


def dns_label(text: str) -> str:
    """``text`` as a Kubernetes name: lower-case alphanumerics and dashes, at most 50 characters."""
    label = "".join(c if c.isascii() and c.isalnum() else "-" for c in text.lower()).strip("-")
    return (label or "triton")[:50].rstrip("-")


@dataclass(frozen=True)
class Written:
    """The manifests ``write_deployment`` wrote, and warnings to read before applying them."""

    manifests: list[Path]
    warnings: list[str] = field(default_factory=list)


def checked_repository_uri(uri: str) -> str:
    """``uri`` when tritonlab can deliver a repository by it (and show it in a command)."""
    if not uri.startswith(STORAGE_SCHEMES):
        raise ConfigError(
            f"--repository {uri}: give s3://, gs://, as:// or pvc://CLAIM[/path] (a ConfigMap "
            "cannot hold a real model)"
        )
    if not URI_RE.fullmatch(uri):
        raise ConfigError(
            f"--repository {uri!r}: only letters, digits and ._~/:%+=@,- may appear in it "
            "(it is shown in the README's commands)"
        )
    if uri.startswith("pvc://"):
        claim, _, sub = uri.removeprefix("pvc://").partition("/")
        if not DNS_SUBDOMAIN_RE.fullmatch(claim) or ".." in Path(sub).parts:
            raise ConfigError(
                f"--repository {uri!r}: pvc://CLAIM[/path] needs a claim name (lower-case "
                "letters, digits, '-' and '.') and a path inside it (no '..')"
            )
    return uri


def write_deployment(
    pick: DeployPick, run_dir: Path, out_dir: Path, options: DeployOptions
) -> Written:
    """Write the repository and ``options.target``'s manifests under ``out_dir``; list them."""
    if options.target not in TARGETS:
        raise ConfigError(f"--to must be one of {', '.join(TARGETS)}, got {options.target!r}")
    uri = options.repository_uri
    if uri is not None:
        checked_repository_uri(uri)
    if options.min_replicas > options.max_replicas:
        raise ConfigError("--min-replicas must not exceed --max-replicas")
    namespace = checked_namespace(options.namespace)
    clients = peers(options.allow_from, "--allow-from")
    scrapers = peers(options.allow_metrics_from, "--allow-metrics-from")
    check_stored_names(pick, run_dir)  # before any path is made of one
    name = dns_label(options.name or pick.model_name)
    image = checked_image(options.image or DEFAULT_IMAGE, options.image_digest)
    fixed, advisory = image_advisory(image)
    refuse_overlap(out_dir, {"the run folder": run_dir})
    gate = Gateway(out_dir)
    gate.mkdir(out_dir)
    repo_bytes = write_repository(pick, run_dir, out_dir / "model_repository", gate)
    min_replicas = options.min_replicas
    sized = replicas_for_target(pick, options.target_load_infer_per_s)
    if sized is not None:
        # at a p99 budget, the cautious end of the range (what `tritonlab capacity` says to
        # provision); without one, the median as before (the pick's point holds no budget)
        min_replicas = max(min_replicas, sized.cautious if pick.budget_sized else sized.at_median)
    max_replicas = max(options.max_replicas, min_replicas)
    own_pvc = uri is None
    claim = f"{name}-model-repository"
    if uri is None:
        uri = f"pvc://{claim}"
    manifests: dict[str, list[dict[str, Any]]] = {}
    kserve = options.target == "kserve"
    workload = f"{name}-predictor" if kserve else name
    if kserve:
        manifests["inferenceservice.yaml"] = [
            _inference_service(pick, name, namespace, image, uri, min_replicas, max_replicas)
        ]
    else:
        manifests["deployment.yaml"] = [
            _deployment(pick, name, namespace, image, uri, min_replicas)
        ]
        manifests["service.yaml"] = [_service(name, namespace)]
    pods = {KSERVE_POD_LABEL: name} if kserve else {"app.kubernetes.io/name": name}
    ports = None if kserve else (HTTP_PORT, GRPC_PORT)
    policy = network_policy(name, namespace, pods, clients, scrapers, ports, METRICS_PORT)
    policy["metadata"]["labels"] = _labels(name)
    manifests["networkpolicy.yaml"] = [policy]
    if own_pvc:
        manifests["pvc.yaml"] = [_pvc(claim, namespace, repo_bytes)]
    hpa = hpa_manifest(pick, workload, namespace, min_replicas, max_replicas)
    add_sizing_notes(hpa, pick, sized)
    manifests["hpa.yaml"] = [hpa]
    notes = _provenance(pick, run_dir)
    for docs in manifests.values():
        for doc in docs:
            doc["metadata"].setdefault("annotations", {}).update(notes)
    manifests["metrics-adapter-config.yaml"] = [adapter_config(namespace)]
    for file_name, docs in manifests.items():
        gate.write_text(out_dir / file_name, dump_manifests(docs))
    facts = ReadmeFacts(
        target=options.target,
        namespace=namespace,
        uri=uri,
        own_pvc=own_pvc,
        workload=workload,
        replicas=(min_replicas, max_replicas),
        cores=_cpu_cores(pick),
        image=image,
        advisory=advisory,
        measured_tag=NGC_TAGS.get(pick.server_version),
        clients=selector_words(options.allow_from, namespace),
        scrapers=selector_words(options.allow_metrics_from, namespace),
        ports=(HTTP_PORT, GRPC_PORT, METRICS_PORT),
    )
    gate.write_text(out_dir / "README.md", readme(pick, facts))
    return Written([out_dir / f for f in manifests], [] if fixed else [advisory])


def dump_manifests(docs: list[dict[str, Any]]) -> str:
    """``docs`` as one YAML file (PyYAML's safe dumper, documents separated by ``---``) under
    the fixed header; parsed back and compared, so what is written is exactly ``docs``. Text
    beyond ASCII is escaped (PyYAML's ``allow_unicode`` would write a NEL or U+2028 raw, which
    its reader takes for a line break)."""
    text = HEADER + yaml.safe_dump_all(docs, sort_keys=False)
    if list(yaml.safe_load_all(text)) != docs:
        raise ConfigError("the manifests did not read back as written; report this as a bug")
    return text


def _provenance(pick: DeployPick, run_dir: Path) -> dict[str, str]:
    """Where the deployment came from, as annotations (string values, whatever they hold)."""
    v = pick.variant
    notes = {
        "tritonlab/run": run_dir.name,
        "tritonlab/pick": pick.source,
        "tritonlab/configuration": f"{v.description} ({v.name})",
        "tritonlab/measured-capacity-per-replica": pick.capacity_comment(),
    }
    if pick.trust is not None:
        notes["tritonlab/run-trust"] = pick.trust.state
        if caveat := pick.trust.caveat():
            notes["tritonlab/run-doubt"] = caveat
    return notes


def _labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "tritonlab"}


def _cpu_cores(pick: DeployPick) -> int:
    """Instances x threads: what the measured configuration ran on (threads unset: every core
    of the measured machine, as onnxruntime then uses them all)."""
    v = pick.variant
    return max(1, v.instance_count * (v.intra_op_threads or pick.machine_cores))


def _resources(pick: DeployPick) -> dict[str, Any]:
    """Instances x threads requested; one core more allowed for the server's own threads
    (its HTTP/gRPC front ends). Memory is not measured: a floor, to be raised for big models."""
    cores = _cpu_cores(pick)
    requests: dict[str, Any] = {"cpu": str(cores), "memory": "1Gi"}
    limits: dict[str, Any] = {"cpu": str(cores + 1), "memory": "4Gi"}
    if pick.variant.instance_kind == "KIND_GPU":
        limits["nvidia.com/gpu"] = 1
        requests["nvidia.com/gpu"] = 1
    return {"requests": requests, "limits": limits}


def _probe(path: str, period_s: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period_s,
        "failureThreshold": failures,
    }


def _container(pick: DeployPick, image: str, uri: str) -> tuple[dict[str, Any], list[Any]]:
    """The tritonserver container and the pod's volumes for the repository at ``uri``."""
    pvc = uri.startswith("pvc://")
    container: dict[str, Any] = {
        "name": "tritonserver",
        "image": image,
        "command": ["tritonserver"],
        "args": [
            f"--model-repository={MODELS_MOUNT if pvc else uri}",
            f"--http-port={HTTP_PORT}",
            f"--grpc-port={GRPC_PORT}",
            f"--metrics-port={METRICS_PORT}",
            "--allow-metrics=true",
            "--strict-readiness=true",
        ],
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT},
            {"name": "grpc", "containerPort": GRPC_PORT},
            {"name": "metrics", "containerPort": METRICS_PORT},
        ],
        "resources": _resources(pick),
        "startupProbe": _probe("/v2/health/ready", 5, 60),
        "readinessProbe": _probe("/v2/health/ready", 5, 3),
        "livenessProbe": _probe("/v2/health/live", 10, 3),
    }
    volumes: list[dict[str, Any]] = []
    if pvc:
        claim, _, sub = uri.removeprefix("pvc://").partition("/")
        claimed = {"claimName": claim, "readOnly": True}
        volumes.append({"name": "model-repository", "persistentVolumeClaim": claimed})
        mount = {"name": "model-repository", "mountPath": MODELS_MOUNT, "readOnly": True}
        container["volumeMounts"] = [mount | ({"subPath": sub} if sub else {})]
    else:
        # Object-store credentials (AWS_*, GOOGLE_APPLICATION_CREDENTIALS, AZURE_*), if any.
        container["envFrom"] = [{"secretRef": {"name": "triton-storage", "optional": True}}]
    return harden_container(container), volumes


def _deployment(
    pick: DeployPick, name: str, namespace: str, image: str, uri: str, replicas: int
) -> dict[str, Any]:
    container, volumes = _container(pick, image, uri)
    pod: dict[str, Any] = {"containers": [container]}
    if volumes:
        pod["volumes"] = volumes
    harden_pod(pod)
    if pick.variant.instance_kind == "KIND_GPU":
        pod["tolerations"] = [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": _labels(name)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {
                    "labels": _labels(name),
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(METRICS_PORT),
                        "prometheus.io/path": "/metrics",
                    },
                },
                "spec": pod,
            },
        },
    }


def _service(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": _labels(name),
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": str(METRICS_PORT),
            },
        },
        "spec": {
            "selector": {"app.kubernetes.io/name": name},
            "ports": [
                {"name": "http", "port": HTTP_PORT, "targetPort": "http"},
                {"name": "grpc", "port": GRPC_PORT, "targetPort": "grpc"},
                {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"},
            ],
        },
    }


def _pvc(claim: str, namespace: str, repo_bytes: int) -> dict[str, Any]:
    gib = max(1, math.ceil(2 * repo_bytes / 2**30))  # room for the next model version
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": namespace},
        "spec": {
            # Every replica mounts it read-only; fill it once (README.md).
            "accessModes": ["ReadOnlyMany"],
            "resources": {"requests": {"storage": f"{gib}Gi"}},
        },
    }


def _inference_service(
    pick: DeployPick,
    name: str,
    namespace: str,
    image: str,
    uri: str,
    min_replicas: int,
    max_replicas: int,
) -> dict[str, Any]:
    """KServe's InferenceService with the Triton runtime, in raw-deployment mode so that the
    HPA in ``hpa.yaml`` (queue time) scales its ``<name>-predictor`` Deployment."""
    tag = image_tag(image)  # KServe runs its runtime's image at this tag (a digest: README)
    model: dict[str, Any] = {
        # a user's repository model (Python, ensemble, BLS) is Triton's own format
        "modelFormat": {"name": "onnx" if pick.repository is None else "triton"},
        "runtime": "kserve-tritonserver",
        **({"runtimeVersion": tag} if tag else {}),
        "storageUri": uri,
        "args": [f"--metrics-port={METRICS_PORT}", "--allow-metrics=true"],
        "resources": _resources(pick),
        "readinessProbe": _probe("/v2/health/ready", 5, 3),
        "livenessProbe": _probe("/v2/health/live", 10, 3),
        "securityContext": container_security(),
        "volumeMounts": [tmp_mount()],  # the root filesystem is read-only
    }
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": _labels(name),
            "annotations": {
                "serving.kserve.io/deploymentMode": "RawDeployment",
                "serving.kserve.io/autoscalerClass": "external",
                "serving.kserve.io/enable-prometheus-scraping": "true",
                "prometheus.kserve.io/port": str(METRICS_PORT),
                "prometheus.kserve.io/path": "/metrics",
            },
        },
        "spec": {
            "predictor": {
                "minReplicas": min_replicas,
                "maxReplicas": max_replicas,
                "model": model,
                "automountServiceAccountToken": False,
                "volumes": [tmp_volume()],
            }
        },
    }
