"""GPU checks for ``KIND_GPU`` instance groups, made before a server starts.

On a machine without a visible NVIDIA GPU, a ``KIND_GPU`` instance cannot load: say so up front
with the field to change. On a GPU host, the onnxruntime backend uses the CUDA execution provider
when ``onnxruntime-gpu`` is installed (checked here too). A remote server (``--url``) is not
checked: its GPUs are not visible from here.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable

from tritonlab.errors import ConfigError
from tritonlab.procenv import child_environment
from tritonlab.repository.variants import ServingVariant


def gpu_names() -> list[str]:
    """The names of the NVIDIA GPUs nvidia-smi sees; empty without one (or without nvidia-smi)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            env=child_environment(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return (
        [ln.strip() for ln in out.stdout.splitlines() if ln.strip()] if out.returncode == 0 else []
    )


def check_gpu_variants(variants: Iterable[ServingVariant], remote: bool) -> None:
    """Raise ``ConfigError`` if a ``KIND_GPU`` variant cannot run on this machine."""
    gpu_variants = [v.name for v in variants if v.instance_kind == "KIND_GPU"]
    if not gpu_variants or remote:
        return
    if not gpu_names():
        raise ConfigError(
            f"variant(s) {', '.join(gpu_variants)} use instance_group kind KIND_GPU but no NVIDIA "
            "GPU is visible here (nvidia-smi found none); use KIND_CPU, or run on a GPU host"
        )
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise ConfigError(
            f"variant(s) {', '.join(gpu_variants)} use KIND_GPU but onnxruntime has no CUDA "
            "execution provider; pip install onnxruntime-gpu (replacing onnxruntime)"
        )
