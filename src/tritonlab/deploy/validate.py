"""Offline validation of the written manifests against Kubernetes' own OpenAPI schemas.

``kubernetes-validate`` (the schemas of each Kubernetes release, bundled) checks every core
resource strictly (unknown fields are errors). KServe's InferenceService is a custom resource
with no schema there: its predictor container is checked as the core ``Container`` it becomes
(inside a Pod), and its own required fields are checked here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tritonlab.errors import ConfigError

KUBERNETES_VERSION = "1.31"  # a release every maintained cluster still serves these APIs on


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
        model = dict(resource["spec"]["predictor"]["model"])
        for key in ("modelFormat", "runtime", "runtimeVersion", "storageUri"):
            model.pop(key, None)
        model.update({"name": "kserve-container", "image": "kserve-runtime"})
        resource = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "predictor-check"},
            "spec": {"containers": [model]},
        }
    try:
        kv.validate(resource, version, strict=True)
    except kv.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        raise ConfigError(f"{what}: {path or '(top)'}: {exc.message}") from exc


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
