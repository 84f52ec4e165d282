"""What produced a result: tool, server and library versions, machine, OS, commit, date."""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import tritonlab

_PACKAGES = ("tritonclient", "nvidia-pytriton", "onnxruntime", "onnx", "numpy", "torch")


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def gpu_names() -> list[str]:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return (
        [ln.strip() for ln in out.stdout.splitlines() if ln.strip()] if out.returncode == 0 else []
    )


def _tool_commit() -> str | None:
    source = Path(tritonlab.__file__).resolve().parent
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        if out.returncode == 0:
            dirty = subprocess.run(
                ["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            return out.stdout.strip() + ("-dirty" if dirty else "")
    return None


def package_versions() -> dict[str, str]:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def machine_info() -> dict[str, Any]:
    return {
        "cpu_model": cpu_model(),
        "cpu_count_logical": os.cpu_count(),
        "cpu_affinity_count": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "gpus": gpu_names(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def build_manifest(**extra: Any) -> dict[str, Any]:
    """The reproducibility manifest, with ``extra`` (server command, plan, ...) merged in."""
    return {
        "tool": {"name": "tritonlab", "version": tritonlab.__version__, "commit": _tool_commit()},
        "packages": package_versions(),
        "machine": machine_info(),
        "created_utc": utc_now(),
        **extra,
    }
