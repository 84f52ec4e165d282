"""The environment for the binaries tritonlab starts (tritonserver, perf_analyzer)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def environment_with_libraries(library_path: Iterable[Path]) -> dict[str, str]:
    """This process's environment with ``library_path`` put first on ``LD_LIBRARY_PATH``."""
    env = dict(os.environ)
    libs = [str(p) for p in library_path]
    if env.get("LD_LIBRARY_PATH"):
        libs.append(env["LD_LIBRARY_PATH"])
    if libs:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libs)
    return env
