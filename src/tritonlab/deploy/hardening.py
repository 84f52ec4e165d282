"""What the written manifests do by default to keep a replica contained, and image checks.

Every container runs as a non-root user (uid 1000, the NGC image's ``triton-server``) with no
privilege escalation, every Linux capability dropped, the runtime's default seccomp profile and
a read-only root filesystem (``/tmp`` is an ``emptyDir``; the Python backend's shared memory
is the pod's ``/dev/shm``); no pod mounts a service-account token (Triton calls no Kubernetes
API). ``--image`` is checked as an image reference, and ``--image-digest`` pins it by digest
instead of by a tag that can be moved.

Checked here only against the Kubernetes schema, offline: no cluster was at hand to run the
hardened pod, so that the NGC image starts as uid 1000 with these settings is not verified.
"""

from __future__ import annotations

import re
from typing import Any

from tritonlab.errors import ConfigError

RUN_AS_USER = 1000
TMP_VOLUME = "tmp"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_RE = re.compile(
    rf"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")


def container_security() -> dict[str, Any]:
    """The container ``securityContext``: non-root, read-only root, no privilege escalation or
    capabilities, the runtime's default seccomp profile.
    """
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def harden_container(container: dict[str, Any]) -> dict[str, Any]:
    """``container`` with the security context and a writable ``/tmp``."""
    container["securityContext"] = container_security()
    mounts = container.setdefault("volumeMounts", [])
    mounts.append({"name": TMP_VOLUME, "mountPath": "/tmp"})
    return container


def harden_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` (a PodSpec) with no service-account token and the ``/tmp`` volume."""
    pod["automountServiceAccountToken"] = False
    pod.setdefault("volumes", []).append({"name": TMP_VOLUME, "emptyDir": {}})
    return pod


def checked_image(image: str, digest: str | None = None) -> str:
    """``image`` as the manifests will name it: a valid reference, pinned by ``digest``."""
    if not IMAGE_RE.fullmatch(image):
        raise ConfigError(
            f"--image {image!r} is not an image reference (REGISTRY/REPOSITORY[:TAG][@DIGEST], "
            "e.g. nvcr.io/nvidia/tritonserver:24.10-py3)"
        )
    if digest is None:
        return image
    if not DIGEST_RE.fullmatch(digest):
        raise ConfigError(f"--image-digest {digest!r}: give sha256: and 64 hex digits")
    return f"{image.split('@', 1)[0]}@{digest}"
