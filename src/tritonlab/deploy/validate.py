"""Offline validation of the written manifests against Kubernetes' own OpenAPI schemas.

``kubernetes-validate`` (the schemas of each Kubernetes release, bundled) checks every core
resource strictly (unknown fields are errors). KServe's InferenceService is a custom resource
with no schema there: its predictor is checked as the core Pod it becomes (its ``model`` as the
container, its PodSpec fields, such as ``volumes``, as the pod's), and its own required fields
are checked here.

Beyond the schema, every pod (a Deployment's template, the KServe predictor) is checked for what
the schema cannot see: every ``volumeMount`` names a volume of the pod, and every ``emptyDir``
has a ``sizeLimit`` (an unlimited one can fill the node's disk).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tritonlab.errors import ConfigError

KUBERNETES_VERSION = "1.31"  # a release every maintained cluster still serves these APIs on
# A KServe predictor's own fields (ComponentExtensionSpec and its model); the rest is a PodSpec.
KSERVE_PREDICTOR_FIELDS = frozenset(
    {
        "model",
        "minReplicas",
        "maxReplicas",
        "scaleTarget",
        "scaleMetric",
        "scaleMetricType",
        "containerConcurrency",
        "timeout",
        "canaryTrafficPercent",
        "logger",
        "batcher",
        "labels",
        "annotations",
        "deploymentStrategy",
        "autoScaling",
        "workerSpec",
    }
)


def _validator() -> Any:
    try:
        import kubernetes_validate
    except ImportError as exc:
        raise ConfigError(
            "validating manifests needs kubernetes-validate: pip install kubernetes-validate "
            "(or pass --no-validate)"
        ) from exc
    return kubernetes_validate


def validate_resource(resource: dict[str, Any], version: str = KUBERNETES_VERSION) -> None:
    """Raise a one-line ConfigError naming the resource and the first schema violation."""
    kv = _validator()
    what = f"{resource.get('kind')} {resource.get('metadata', {}).get('name')}"
    if resource.get("apiVersion", "").startswith("serving.kserve.io/"):
        _check_inference_service(resource, what)
        predictor = resource["spec"]["predictor"]
        kserve_only = ("modelFormat", "runtime", "runtimeVersion", "storageUri")
        model = {k: v for k, v in predictor["model"].items() if k not in kserve_only}
        model |= {"name": "kserve-container", "image": "kserve-runtime"}
        pod = {k: v for k, v in predictor.items() if k not in KSERVE_PREDICTOR_FIELDS}
        resource = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "predictor-check"},
            "spec": {**pod, "containers": [model]},
        }
    try:
        kv.validate(resource, version, strict=True)
    except kv.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        raise ConfigError(f"{what}: {path or '(top)'}: {exc.message}") from exc
    pod_spec = _pod_spec(resource)
    if pod_spec is not None:
        _check_pod(pod_spec, what)


def _pod_spec(resource: dict[str, Any]) -> dict[str, Any] | None:
    spec = resource.get("spec") or {}
    if resource.get("kind") == "Pod":
        return spec
    template = spec.get("template") or {}
    return template.get("spec") if isinstance(template, dict) else None


def _check_pod(pod: dict[str, Any], what: str) -> None:
    """What the schema cannot see: mounts of volumes the pod has, and size-limited emptyDirs."""
    volumes = pod.get("volumes") or []
    names = {v.get("name") for v in volumes}
    for volume in volumes:
        if "emptyDir" in volume and not (volume["emptyDir"] or {}).get("sizeLimit"):
            raise ConfigError(
                f"{what}: volume {volume.get('name')!r}: an emptyDir needs a sizeLimit"
            )
    for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
        for mount in container.get("volumeMounts") or []:
            if mount.get("name") not in names:
                raise ConfigError(
                    f"{what}: container {container.get('name')!r} mounts "
                    f"{mount.get('name')!r}, which is not a volume of the pod"
                )


def _check_inference_service(resource: dict[str, Any], what: str) -> None:
    predictor = (resource.get("spec") or {}).get("predictor") or {}
    model = predictor.get("model") or {}
    missing = [
        key
        for key, value in (
            ("metadata.name", (resource.get("metadata") or {}).get("name")),
            ("spec.predictor.model.modelFormat.name", (model.get("modelFormat") or {}).get("name")),
            ("spec.predictor.model.storageUri", model.get("storageUri")),
        )
        if not value
    ]
    if resource.get("kind") != "InferenceService" or missing:
        raise ConfigError(f"{what}: not a complete InferenceService (missing {missing})")


def validate_files(paths: list[Path], version: str = KUBERNETES_VERSION) -> int:
    """Validate every document of every file; the number of resources checked."""
    count = 0
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is None:
                continue
            try:
                validate_resource(doc, version)
            except ConfigError as exc:
                raise ConfigError(f"{path.name}: {exc}") from exc
            count += 1
    return count
