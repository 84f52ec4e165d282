"""Find the tritonserver that ships in ``nvidia-pytriton`` and prepare a runnable copy of it.

The wheel carries a genuine tritonserver 2.51.0 with the Python backend, but the backend needs a
stub built for the running interpreter and our Python-based backends next to it. Those are laid
out once per (server, Python, backend sources) in a cache folder; later runs reuse it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tritonlab import gateway
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
        """The environment: its libraries, this Python's ``bin`` first on PATH (the stub imports
        onnxruntime and numpy from the environment first on PATH, not from PYTHONPATH)."""
        env = environment_with_libraries(self.library_path)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env.pop("PYTHONHOME", None)
        return env


def default_cache_root() -> Path:
    """Where prepared servers live: ``$TRITONLAB_CACHE``, else ``~/.cache/tritonlab``."""
    return _cache_root()


def prepare_bundled_server(cache_root: Path | None = None) -> ServerInstall:
    """Lay out the bundled tritonserver with the stub and our backends; reuse if present."""
    try:
        import pytriton
    except ImportError as exc:
        raise ServerError(f"the bundled tritonserver is missing: {PYTRITON_HINT}") from exc
    root = Path(pytriton.__file__).parent
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
    cache_gate = gateway.open_root(cache_root or default_cache_root())
    layout = {
        "bin": source / "bin",
        "caches": source / "caches",
        "backends/python": source / "backends" / "python",
        "backends/python/triton_python_backend_stub": stub,
        **{
            f"backends/{name}/model.py": BACKENDS_DIR / name / "model.py"
            for name in SERVED_BACKENDS
        },
    }
    expected = _digests(layout)
    # Named by what it holds: a changed wheel or backend is a new folder, and a folder another
    # tritonlab may be serving from is never deleted under it (a damaged one is set aside).
    content = hashlib.sha256(json.dumps(expected, sort_keys=True).encode()).hexdigest()[:12]
    work = cache_gate.root / f"tritonserver-2.51.0-py{py}-{content}"
    if not _prepared_intact(work, expected):
        # One at a time: another process may be starting a server from a folder set aside.
        with cache_gate.lock(cache_gate.root / f".{work.name}.lock"):
            if not _prepared_intact(work, expected):
                _prepare(cache_gate, layout, expected, work)
        if not _prepared_intact(work, expected):
            raise ServerError(f"{work}: the prepared server does not match its sources; delete it")
    return ServerInstall(
        binary=work / "bin" / "tritonserver",
        backend_dir=work / "backends",
        cache_dir=work / "caches",
        library_path=(libs,),
        bundled=True,
    )


PREPARED_MARKER = ".complete"


def _prepare(
    cache_gate: gateway.Gateway, layout: dict[str, Path], expected: dict[str, str], work: Path
) -> None:
    """Copy ``layout`` into a new private folder and put it in ``work``'s place; a folder there
    that does not match (changed since it was prepared) is set aside, never used again."""
    tmp = cache_gate.private_temp(f".{work.name}.tmp")
    for rel, src in layout.items():
        if src.is_dir():
            cache_gate.copy_tree_in(src, tmp / rel, skip=_byte_code)
        else:
            cache_gate.copy_in(src, tmp / rel)
    cache_gate.write_text(tmp / PREPARED_MARKER, json.dumps(expected, sort_keys=True) + "\n")
    if os.path.lexists(work):
        aside = f".{work.name}.damaged-{os.getpid()}-{time.time_ns()}"
        cache_gate.move(work, work.with_name(aside))
    cache_gate.move(tmp, work)


def _digests(layout: dict[str, Path]) -> dict[str, str]:
    """sha256 of every file the prepared server holds, by its path there."""
    digests: dict[str, str] = {}
    for rel, src in layout.items():
        files = (
            sorted(p for p in src.rglob("*") if p.is_file() and not _byte_code(p))
            if src.is_dir()
            else [src]
        )
        for path in files:
            name = rel if path == src else f"{rel}/{path.relative_to(src).as_posix()}"
            digests[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def _byte_code(path: Path) -> bool:
    """Python's byte code: rewritten by whatever imports the copy (its recorded mtime is the
    source's), so it is left out of the copy and of the digests; Python writes its own."""
    return path.name == "__pycache__" or path.suffix == ".pyc" or "__pycache__" in path.parts


def _prepared_intact(work: Path, expected: dict[str, str]) -> bool:
    """Whether the prepared server at ``work`` is this user's, writable by no one else, and
    holds exactly the files it was made from (every file's sha256, not the marker alone)."""
    marker = work / PREPARED_MARKER
    try:
        info = os.lstat(work)
        if info.st_uid != os.getuid() or info.st_mode & 0o022 or not stat.S_ISDIR(info.st_mode):
            return False
        if json.loads(marker.read_text()) != expected:
            return False
        for rel, digest in expected.items():
            path = work / rel
            if path.is_symlink() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                return False
    except (OSError, ValueError):
        return False
    return True


def external_server(binary: Path, backend_dir: Path | None = None) -> ServerInstall:
    """Use a tritonserver the user provides, with its own backends unless ``backend_dir``."""
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
