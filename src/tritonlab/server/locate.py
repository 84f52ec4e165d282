"""Find the tritonserver that ships in ``nvidia-pytriton`` and prepare a runnable copy of it.

The wheel carries a genuine tritonserver 2.51.0 with the Python backend, but the backend needs a
stub built for the running interpreter and our Python-based backends next to it. Those are laid
out once per (server, Python, backend sources) in a cache folder; later runs reuse it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from tritonlab.backends import BACKENDS_DIR
from tritonlab.errors import ServerError
from tritonlab.paths import cache_root as _cache_root
from tritonlab.procenv import environment_with_libraries

SERVED_BACKENDS = ("onnxruntime", "openvino", "identity")
PYTRITON_HINT = "pip install nvidia-pytriton==0.7.0 (it ships tritonserver 2.51.0)"


@dataclass(frozen=True)
class ServerInstall:
    """A tritonserver binary with the folders and environment it needs to run."""

    binary: Path
    backend_dir: Path
    cache_dir: Path | None
    library_path: tuple[Path, ...]
    bundled: bool

    def environment(self) -> dict[str, str]:
        """The process environment: its libraries, and this Python's ``bin`` first on PATH.

        The Python backend stub imports packages (onnxruntime, numpy) from the environment
        first on PATH, not from PYTHONPATH, so the running interpreter's environment goes first.
        """
        env = environment_with_libraries(self.library_path)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env.pop("PYTHONHOME", None)
        return env


def _pytriton_root() -> Path:
    try:
        import pytriton
    except ImportError as exc:
        raise ServerError(f"the bundled tritonserver is missing: {PYTRITON_HINT}") from exc
    return Path(pytriton.__file__).parent


def _sources_digest() -> str:
    digest = hashlib.sha256()
    for name in SERVED_BACKENDS:
        digest.update((BACKENDS_DIR / name / "model.py").read_bytes())
    return digest.hexdigest()[:12]


def default_cache_root() -> Path:
    """Where prepared servers live: ``$TRITONLAB_CACHE``, else ``~/.cache/tritonlab``."""
    return _cache_root()


def prepare_bundled_server(cache_root: Path | None = None) -> ServerInstall:
    """Lay out the bundled tritonserver with the stub and our backends; reuse if present."""
    root = _pytriton_root()
    source = root / "tritonserver"
    libs = root.parent / "nvidia_pytriton.libs"
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = source / "python_backend_stubs" / py / "triton_python_backend_stub"
    if not (source / "bin" / "tritonserver").exists():
        raise ServerError(f"{source}/bin/tritonserver not found: reinstall, {PYTRITON_HINT}")
    if not stub.exists():
        raise ServerError(
            f"the bundled Python backend has no stub for Python {py}; use Python 3.8 to 3.13"
        )
    work = (cache_root or default_cache_root()) / f"tritonserver-2.51.0-py{py}-{_sources_digest()}"
    marker = work / ".complete"
    if not marker.exists():
        tmp = work.with_name(work.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(source / "bin", tmp / "bin")
        shutil.copytree(source / "caches", tmp / "caches")
        shutil.copytree(source / "backends" / "python", tmp / "backends" / "python")
        shutil.copy2(stub, tmp / "backends" / "python" / "triton_python_backend_stub")
        for name in SERVED_BACKENDS:
            (tmp / "backends" / name).mkdir(parents=True)
            shutil.copy2(BACKENDS_DIR / name / "model.py", tmp / "backends" / name / "model.py")
        (tmp / ".complete").write_text("ok\n")
        try:
            tmp.rename(work)
        except OSError:  # another process finished first; use its copy
            shutil.rmtree(tmp, ignore_errors=True)
    return ServerInstall(
        binary=work / "bin" / "tritonserver",
        backend_dir=work / "backends",
        cache_dir=work / "caches",
        library_path=(libs,),
        bundled=True,
    )


def external_server(binary: Path, backend_dir: Path | None = None) -> ServerInstall:
    """Use a tritonserver the user provides (for example inside an NGC container).

    Its own backend folder is used unless ``backend_dir`` is given; the native onnxruntime
    backend there serves the same repository.
    """
    resolved = shutil.which(str(binary)) if not binary.exists() else str(binary)
    if not resolved or not os.access(resolved, os.X_OK):
        raise ServerError(f"--server-bin {binary} is not an executable tritonserver")
    return ServerInstall(
        binary=Path(resolved),
        backend_dir=backend_dir or Path("/opt/tritonserver/backends"),
        cache_dir=None,
        library_path=(),
        bundled=False,
    )
