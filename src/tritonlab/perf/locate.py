"""Find the real perf_analyzer (from ``tritonclient==2.51.0``) and the libraries it loads."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from tritonlab.errors import PerfAnalyzerError
from tritonlab.procenv import child_environment, environment_with_libraries

_MISSING_LIB_HINTS = {
    "libb64.so.0d": "apt-get install libb64-0d",
    "libcudart.so.12": "pip install nvidia-cuda-runtime-cu12",
}


@dataclass(frozen=True)
class PerfAnalyzerInstall:
    """A perf_analyzer binary found on this machine, the libraries it needs, its version."""

    binary: Path
    library_path: tuple[Path, ...]
    version: str

    def environment(self) -> dict[str, str]:
        """This process's environment with the install's libraries first on ``LD_LIBRARY_PATH``."""
        return environment_with_libraries(self.library_path)


def _cuda_runtime_lib() -> tuple[Path, ...]:
    try:
        import nvidia.cuda_runtime as cuda_runtime
    except ImportError:
        return ()
    return tuple(Path(p) / "lib" for p in cuda_runtime.__path__ if (Path(p) / "lib").is_dir())


def _find_binary(explicit: Path | None) -> Path:
    if explicit is not None:
        if not explicit.exists():
            raise PerfAnalyzerError(f"--perf-analyzer {explicit} does not exist")
        return explicit
    beside_python = Path(sys.executable).parent / "perf_analyzer"
    if beside_python.exists():
        return beside_python
    if found := shutil.which("perf_analyzer"):
        return Path(found)
    raise PerfAnalyzerError(
        "perf_analyzer not found: pip install 'tritonclient[grpc,http]==2.51.0' "
        "(its wheel ships the binary), or pass --perf-analyzer PATH"
    )


@functools.lru_cache(maxsize=4)
def locate_perf_analyzer(explicit: Path | None = None) -> PerfAnalyzerInstall:
    """Find perf_analyzer, check that it starts, and report a missing library by package."""
    binary = _find_binary(explicit)
    install = PerfAnalyzerInstall(binary, _cuda_runtime_lib(), "unknown")
    try:
        proc = subprocess.run(
            [str(binary), "--version"],
            env=child_environment(install.environment()),  # without the API key
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError as exc:
        raise PerfAnalyzerError(f"cannot run {binary}: {exc}") from exc
    output = proc.stdout + proc.stderr
    if missing := re.search(r"error while loading shared libraries: (\S+?):", output):
        lib = missing.group(1)
        hint = _MISSING_LIB_HINTS.get(lib, "install the package that provides it")
        raise PerfAnalyzerError(f"perf_analyzer cannot load {lib}: {hint}")
    version = re.search(r"Perf Analyzer Version (\S+)", output)
    return replace(install, version=version.group(1)) if version else install
