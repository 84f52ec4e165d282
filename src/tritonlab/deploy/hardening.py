"""What the written manifests do by default to keep a replica contained, and image checks.

Every container runs as a non-root user (uid 1000, the NGC image's ``triton-server``) with no
privilege escalation, every Linux capability dropped, the runtime's default seccomp profile and
a read-only root filesystem; ``/tmp`` is an ``emptyDir`` with a size limit (``TMP_SIZE_LIMIT``),
for the KServe predictor too; the Python backend's shared memory is the pod's ``/dev/shm``. No
pod mounts a service-account token (Triton calls no Kubernetes API).

Triton's HTTP and gRPC API has no authentication, so a ``NetworkPolicy`` admits to the inference
ports only the pods the user names (``--allow-from``; by default those labelled
``tritonlab-client: "true"``) and to the metrics port only the named scrapers
(``--allow-metrics-from``). A selector is ``[NAMESPACE:]key=value[,key=value]``, checked as
Kubernetes label syntax.

The default image is a pinned NGC release past NVIDIA's August 2025 Triton security fixes
(``DEFAULT_IMAGE``; the fixes came in 25.07); ``--image`` is checked as an image reference and
dated when it is an NGC ``tritonserver`` tag (``image_advisory``), and ``--image-digest`` pins
it by digest instead of by a tag that can be moved.

Checked here only against the Kubernetes schema, offline: no cluster was at hand to run the
hardened pod, so that the NGC image starts as uid 1000 with these settings, and that a cluster's
network plugin enforces the policy, is not verified.
"""

from __future__ import annotations

import re
from typing import Any

from tritonlab.errors import ConfigError

RUN_AS_USER = 1000
TMP_VOLUME = "tmp"
TMP_SIZE_LIMIT = "1Gi"  # Triton's scratch (the Python backend's stubs, a cache's spill)

# NGC's tritonserver, pinned to a release past NVIDIA's August 2025 Triton security bulletin.
NGC_REPOSITORY = "nvcr.io/nvidia/tritonserver"
DEFAULT_IMAGE = f"{NGC_REPOSITORY}:25.10-py3"
FIXED_RELEASE = (25, 7)  # the first release with the fixes below
ADVISORIES = (
    "CVE-2025-23310",
    "CVE-2025-23311",
    "CVE-2025-23319",
    "CVE-2025-23320",
    "CVE-2025-23334",
)
_RELEASE_TAG = re.compile(r"(\d{2})\.(\d{2})(?:[-.].*)?")

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_RE = re.compile(
    rf"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")

# Kubernetes names and labels (RFC 1123 labels and subdomains; label keys and values).
DNS_LABEL_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
DNS_SUBDOMAIN_RE = re.compile(
    r"(?=.{1,253}$)[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*"
)
_LABEL_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LABEL_NAME_RE = re.compile(_LABEL_NAME)
DEFAULT_CLIENTS = "tritonlab-client=true"
NAMESPACE_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every namespace


def container_security() -> dict[str, Any]:
    """The container ``securityContext``: non-root, read-only, no privileges, default seccomp."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def tmp_volume() -> dict[str, Any]:
    """The pod's writable ``/tmp``: an ``emptyDir`` with a size limit (the kubelet evicts a
    pod that writes past it, rather than let it fill the node's disk)."""
    return {"name": TMP_VOLUME, "emptyDir": {"sizeLimit": TMP_SIZE_LIMIT}}


def tmp_mount() -> dict[str, Any]:
    return {"name": TMP_VOLUME, "mountPath": "/tmp"}


def harden_container(container: dict[str, Any]) -> dict[str, Any]:
    """``container`` with the security context and a writable ``/tmp``."""
    container["securityContext"] = container_security()
    container.setdefault("volumeMounts", []).append(tmp_mount())
    return container


def harden_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` (a PodSpec) with no service-account token and the ``/tmp`` volume."""
    pod["automountServiceAccountToken"] = False
    pod.setdefault("volumes", []).append(tmp_volume())
    return pod


def checked_image(image: str, digest: str | None = None) -> str:
    """``image`` as the manifests will name it: a valid reference, pinned by ``digest``."""
    if not IMAGE_RE.fullmatch(image):
        raise ConfigError(
            f"--image {image!r} is not an image reference (REGISTRY/REPOSITORY[:TAG][@DIGEST], "
            f"e.g. {DEFAULT_IMAGE})"
        )
    if digest is None:
        return image
    if not DIGEST_RE.fullmatch(digest):
        raise ConfigError(f"--image-digest {digest!r}: give sha256: and 64 hex digits")
    return f"{image.split('@', 1)[0]}@{digest}"


def image_tag(image: str) -> str | None:
    """The tag of ``image`` (``25.10-py3``), without any digest; None when it has none."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else None


def image_advisory(image: str) -> tuple[bool, str]:
    """Whether ``image`` is past NVIDIA's August 2025 fixes, and a sentence saying so (or not)."""
    fixes = ", ".join(ADVISORIES)
    fixed = f"{FIXED_RELEASE[0]}.{FIXED_RELEASE[1]:02d}"
    tag = image_tag(image)
    match = _RELEASE_TAG.fullmatch(tag or "")
    if not image.startswith(f"{NGC_REPOSITORY}:") or match is None:
        return False, (
            f"{image} is not an NGC tritonserver release tag tritonlab can date: make sure it "
            f"is built from Triton {fixed} or later (NVIDIA's August 2025 fixes for {fixes})"
        )
    if (int(match.group(1)), int(match.group(2))) < FIXED_RELEASE:
        return False, (
            f"{image} is OLDER than {fixed}: it has the flaws NVIDIA fixed in August 2025 "
            f"({fixes}; unauthenticated requests can crash the server or run code in it); "
            f"deploy {DEFAULT_IMAGE} or another release from {fixed} on"
        )
    return True, (
        f"{image} is release {tag}, past NVIDIA's August 2025 Triton security fixes (in "
        f"{fixed}: {fixes})"
    )


def checked_namespace(namespace: str) -> str:
    """``namespace`` when it is a Kubernetes namespace name (an RFC 1123 label)."""
    if not DNS_LABEL_RE.fullmatch(namespace):
        raise ConfigError(
            f"--namespace {namespace!r} is not a namespace name (lower-case letters, digits "
            "and '-', at most 63, starting and ending with a letter or digit)"
        )
    return namespace


def _label_key_ok(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and not DNS_SUBDOMAIN_RE.fullmatch(prefix):
        return False
    return bool(LABEL_NAME_RE.fullmatch(name))


def parse_selector(text: str, option: str) -> dict[str, Any]:
    """One ``[NAMESPACE:]key=value[,key=value]`` selector as a NetworkPolicy peer."""
    namespace, colon, pairs = text.partition(":") if ":" in text else ("", "", text)
    if colon and not DNS_LABEL_RE.fullmatch(namespace):
        raise ConfigError(f"{option} {text!r}: {namespace!r} is not a namespace name")
    labels: dict[str, str] = {}
    for pair in pairs.split(","):
        key, equals, value = pair.partition("=")
        if not equals or not _label_key_ok(key) or (value and not LABEL_NAME_RE.fullmatch(value)):
            raise ConfigError(
                f"{option} {text!r}: give [NAMESPACE:]key=value[,key=value] pod labels "
                f"(e.g. {DEFAULT_CLIENTS}, or monitoring:app.kubernetes.io/name=prometheus); "
                f"{pair!r} is not a label key=value"
            )
        labels[key] = value
    peer: dict[str, Any] = {"podSelector": {"matchLabels": labels}}
    if colon:
        peer["namespaceSelector"] = {"matchLabels": {NAMESPACE_LABEL: namespace}}
    return peer


def peers(selectors: tuple[str, ...], option: str) -> list[dict[str, Any]]:
    """The NetworkPolicy peers ``selectors`` name (the default clients' label when none)."""
    return [parse_selector(s, option) for s in (selectors or (DEFAULT_CLIENTS,))]


def network_policy(
    name: str,
    namespace: str,
    pods: dict[str, str],
    clients: list[dict[str, Any]],
    scrapers: list[dict[str, Any]],
    ports: tuple[int, ...] | None,
    metrics_port: int,
) -> dict[str, Any]:
    """A NetworkPolicy on the pods labelled ``pods``: ``clients`` reach ``ports`` (every port
    when None: KServe's runtime chooses its own), ``scrapers`` the metrics port; nothing else
    reaches them. Egress is not restricted (an object store, the storage initializer)."""
    client_rule: dict[str, Any] = {"from": clients}
    if ports is not None:
        client_rule["ports"] = [{"protocol": "TCP", "port": p} for p in ports]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{name}-clients", "namespace": namespace},
        "spec": {
            "podSelector": {"matchLabels": pods},
            "policyTypes": ["Ingress"],
            "ingress": [
                client_rule,
                {"from": scrapers, "ports": [{"protocol": "TCP", "port": metrics_port}]},
            ],
        },
    }


def selector_words(selectors: tuple[str, ...], namespace: str) -> str:
    """``selectors`` in words for the README: pods labelled `a=b` in namespace `default`."""
    words = []
    for s in selectors or (DEFAULT_CLIENTS,):
        where, _, labels = s.partition(":") if ":" in s else (namespace, "", s)
        words.append(f"`{labels}` in namespace `{where}`")
    return "pods labelled " + " or ".join(words)
