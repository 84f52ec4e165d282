"""Manifests for the pick: a Triton Deployment (or a KServe InferenceService), Service, HPA.

What is written, and why:
- the NGC ``tritonserver`` image of the release that was measured (2.51.0 is 24.10): its native
  onnxruntime and OpenVINO backends read the same ``config.pbtxt`` parameters tritonlab's
  adapters do, so the configuration served is the configuration measured;
- the model repository (``model_repository/``: the pick's ``config.pbtxt`` under the model's
  own name, and ``model.onnx`` where the run folder has it; for a model of a user's repository
  the whole pipeline, ``served_repository``), delivered by object storage (Triton
  reads ``s3://``/``gs://``/``as://`` itself; KServe's storage initializer pulls it) or by a
  persistent volume: never a ConfigMap, which caps at 1 MiB;
- probes on ``/v2/health/ready`` and ``/v2/health/live``, a startup probe for the model load;
- CPU requests of instances x threads, the pick's instance count and threads; one GPU per pod
  for a KIND_GPU pick; metrics on port 8002 with Prometheus scrape annotations;
- a HorizontalPodAutoscaler on queue time per request (``deploy.autoscaling``), with the
  measured per-replica capacity in a comment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tritonlab.deploy.autoscaling import (
    QUEUE_METRIC,
    adapter_config,
    add_sizing_notes,
    hpa_manifest,
    replicas_for_target,
)
from tritonlab.deploy.hardening import (
    checked_image,
    container_security,
    harden_container,
    harden_pod,
)
from tritonlab.deploy.pick import DeployPick
from tritonlab.deploy.served_repository import pipeline_models, write_repository
from tritonlab.errors import ConfigError

NGC_IMAGE = "nvcr.io/nvidia/tritonserver:{tag}"
# Triton releases by server version (the container tag of each).
NGC_TAGS = {"2.51.0": "24.10-py3", "2.50.0": "24.09-py3", "2.49.0": "24.08-py3"}
TARGETS = ("kubernetes", "kserve")
HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
STORAGE_SCHEMES = ("s3://", "gs://", "as://", "pvc://")
MODELS_MOUNT = "/models"


@dataclass(frozen=True)
class DeployOptions:
    """What ``tritonlab deploy`` writes: target, names, image, repository and replica range."""

    target: str = "kubernetes"
    name: str | None = None  # default: the model name, as a DNS label
    namespace: str = "default"
    # Where the cluster finds the repository: s3://, gs://, as:// or pvc://CLAIM[/path];
    # None: a PersistentVolumeClaim of our own (pvc.yaml), filled as the README says.
    repository_uri: str | None = None
    image: str | None = None  # default: the NGC image of the measured release
    image_digest: str | None = None  # sha256:...: pin the image by digest, not by its tag
    min_replicas: int = 1
    max_replicas: int = 4
    target_load_infer_per_s: float | None = None  # sizes minReplicas from the capacity


def dns_label(text: str) -> str:
    """``text`` as a Kubernetes name: lower-case alphanumerics and dashes, at most 50 characters."""
    label = "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
    return (label or "triton")[:50].rstrip("-")


def ngc_image(server_version: str) -> str:
    """NGC's tritonserver image for ``server_version``; ``ConfigError`` if its tag is unknown."""
    tag = NGC_TAGS.get(server_version)
    if tag is None:
        raise ConfigError(
            f"no NGC tritonserver tag known for server {server_version!r}; pass --image "
            "nvcr.io/nvidia/tritonserver:<YY.MM>-py3 of that release"
        )
    return NGC_IMAGE.format(tag=tag)


@dataclass(frozen=True)
class Written:
    """The manifest files ``write_deployment`` wrote (besides README.md and the repository)."""

    manifests: list[Path]


def write_deployment(
    pick: DeployPick, run_dir: Path, out_dir: Path, options: DeployOptions
) -> Written:
    """Write the repository and ``options.target``'s manifests under ``out_dir``; list them.

    Raises ``ConfigError`` for an unknown target, an unsupported repository URI, min replicas
    above max, or an image that cannot be named.
    """
    if options.target not in TARGETS:
        raise ConfigError(f"--to must be one of {', '.join(TARGETS)}, got {options.target!r}")
    uri = options.repository_uri
    if uri is not None and not uri.startswith(STORAGE_SCHEMES):
        raise ConfigError(
            f"--repository {uri}: give s3://, gs://, as:// or pvc://CLAIM[/path] (a ConfigMap "
            "cannot hold a real model)"
        )
    if options.min_replicas > options.max_replicas:
        raise ConfigError("--min-replicas must not exceed --max-replicas")
    name = dns_label(options.name or pick.model_name)
    image = checked_image(options.image or ngc_image(pick.server_version), options.image_digest)
    out_dir.mkdir(parents=True, exist_ok=True)
    repo_bytes = write_repository(pick, run_dir, out_dir / "model_repository")
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
    header = _header(pick, run_dir)
    manifests: dict[str, list[dict[str, Any]]] = {}
    workload = f"{name}-predictor" if options.target == "kserve" else name
    if options.target == "kserve":
        manifests["inferenceservice.yaml"] = [
            _inference_service(
                pick, name, options.namespace, image, uri, min_replicas, max_replicas
            )
        ]
    else:
        manifests["deployment.yaml"] = [
            _deployment(pick, name, options.namespace, image, uri, min_replicas)
        ]
        manifests["service.yaml"] = [_service(name, options.namespace)]
    if own_pvc:
        manifests["pvc.yaml"] = [_pvc(claim, options.namespace, repo_bytes)]
    hpa = hpa_manifest(pick, workload, options.namespace, min_replicas, max_replicas)
    add_sizing_notes(hpa, pick, sized)
    manifests["hpa.yaml"] = [hpa]
    manifests["metrics-adapter-config.yaml"] = [adapter_config(options.namespace)]
    written = []
    for file_name, docs in manifests.items():
        path = out_dir / file_name
        text = header + "\n---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs)
        path.write_text(text)
        written.append(path)
    readme = out_dir / "README.md"
    readme.write_text(
        _readme(pick, name, options, uri, own_pvc, workload, min_replicas, max_replicas)
    )
    return Written(written)


def _header(pick: DeployPick, run_dir: Path) -> str:
    v = pick.variant
    return (
        f"# Written by `tritonlab deploy` from {run_dir.name}: {pick.source}.\n"
        f"# Configuration: {v.description} ({v.name}).\n"
        f"# Capacity {pick.capacity_comment()}.\n"
        "# A replica on other hardware carries a different load: measure the service with\n"
        "# `tritonlab perf --url` once it runs.\n"
    )


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


def _server_args(repository: str) -> list[str]:
    return [
        f"--model-repository={repository}",
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        f"--metrics-port={METRICS_PORT}",
        "--allow-metrics=true",
        "--strict-readiness=true",
    ]


def _probe(path: str, period_s: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period_s,
        "failureThreshold": failures,
    }


def _container(pick: DeployPick, image: str, uri: str) -> tuple[dict[str, Any], list[Any]]:
    """The tritonserver container and the pod's volumes for the repository at ``uri``."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if uri.startswith("pvc://"):
        claim, _, sub = uri.removeprefix("pvc://").partition("/")
        volumes.append(
            {
                "name": "model-repository",
                "persistentVolumeClaim": {"claimName": claim, "readOnly": True},
            }
        )
        mount: dict[str, Any] = {
            "name": "model-repository",
            "mountPath": MODELS_MOUNT,
            "readOnly": True,
        }
        if sub:
            mount["subPath"] = sub
        mounts.append(mount)
        repository = MODELS_MOUNT
    else:
        repository = uri
    container: dict[str, Any] = {
        "name": "tritonserver",
        "image": image,
        "command": ["tritonserver"],
        "args": _server_args(repository),
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
    if not uri.startswith("pvc://"):
        # Object-store credentials (AWS_*, GOOGLE_APPLICATION_CREDENTIALS, AZURE_*), if any.
        container["envFrom"] = [{"secretRef": {"name": "triton-storage", "optional": True}}]
    if mounts:
        container["volumeMounts"] = mounts
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
    tag = image.rsplit(":", 1)[-1]
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
                "model": {
                    # a user's repository model (Python, ensemble, BLS) is Triton's own format
                    "modelFormat": {"name": "onnx" if pick.repository is None else "triton"},
                    "runtime": "kserve-tritonserver",
                    "runtimeVersion": tag,
                    "storageUri": uri,
                    "args": [f"--metrics-port={METRICS_PORT}", "--allow-metrics=true"],
                    "resources": _resources(pick),
                    "readinessProbe": _probe("/v2/health/ready", 5, 3),
                    "livenessProbe": _probe("/v2/health/live", 10, 3),
                    "securityContext": container_security(),
                },
                "automountServiceAccountToken": False,
            }
        },
    }


def _metric_path(namespace: str) -> str:
    return f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/*/{QUEUE_METRIC}"


def _readme(
    pick: DeployPick,
    name: str,
    options: DeployOptions,
    uri: str,
    own_pvc: bool,
    workload: str,
    min_replicas: int,
    max_replicas: int,
) -> str:
    v = pick.variant
    models = pipeline_models(pick)
    each = (
        f" for each of {', '.join(f'`{n}`' for n in models)} (the whole pipeline)"
        if len(models) > 1
        else ""
    )
    copy = f"model_repository/{pick.model_name}" if len(models) == 1 else "model_repository/<model>"
    fill = (
        f"`pvc.yaml` claims a read-only volume; fill it once, e.g. from a pod that mounts it "
        f"read-write: `kubectl cp {copy} <pod>:/models/`{each}."
        if own_pvc
        else f"Upload the repository: `aws s3 sync model_repository/ {uri}/` (or gsutil/az); "
        "credentials go in the optional Secret `triton-storage`."
    )
    apply = (
        "kubectl apply -f inferenceservice.yaml -f hpa.yaml"
        if options.target == "kserve"
        else "kubectl apply -f deployment.yaml -f service.yaml -f hpa.yaml"
    )
    return f"""# Deploying {pick.model_name}: {v.description}

Written by `tritonlab deploy` ({options.target}) from the run's {pick.source}.

- Capacity {pick.capacity_comment()}.
- Replicas: {min_replicas} to {max_replicas}, scaled on `{QUEUE_METRIC}` (mean queue time per
  request over 30 s, from Triton's metrics on port {METRICS_PORT}).
- CPU: {_cpu_cores(pick)} cores requested per replica ({v.instance_count} instances x
  {v.intra_op_threads or "all"} threads, as measured).

## Steps

1. Model repository (`model_repository/`, the measured `config.pbtxt`): {fill}
2. `{apply}`{" -f pvc.yaml" if own_pvc else ""}
3. Metrics adapter: merge `metrics-adapter-config.yaml`'s rule into your Prometheus adapter's
   rules (it turns Triton's queue-duration counter into `{QUEUE_METRIC}` per pod), so that
   `kubectl get --raw {_metric_path(options.namespace)}` answers.
4. Measure the service as deployed: `tritonlab perf --url http://<{workload}>:{HTTP_PORT}
   --grpc-url <{workload}>:{GRPC_PORT} --model {pick.model_name}` (a service, not one server:
   the per-replica figures stay unknown).

The manifests were validated offline against the Kubernetes schema by `tritonlab deploy`
(`kubernetes-validate`); nothing was applied to a cluster.
"""
