"""No committed run (examples/*, tests/fixtures/*) holds an absolute path of the machine that
recorded it: tritonlab stores paths portably (``tritonlab.paths``: run-folder-relative,
``$VIRTUAL_ENV/...``, ``$TRITONLAB_CACHE/...``, ``$HOME/...``), and so must every file committed
next to its records, so that a clone on another machine shows nothing of this one.

What counts as a machine path: one under the usual per-machine roots (``MACHINE_ROOTS``: home
folders, temporary folders, work and mount points), and any path under this machine's own
repository checkout, home folder, temporary folder or virtualenv, found at run time.

Not machine paths, so deliberately not matched (no allowance needed): paths inside a container
image or pod, the same on every machine (``--model-repository=/models`` and ``mountPath:
/models`` in the Kubernetes manifests under examples/deploy, ``/opt/tritonserver`` in NGC
images); interpreter lines such as ``#!/usr/bin/env bash``; URLs (``s3://models/...``).
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
FOLDERS = ("examples", "tests/fixtures")

# Roots that hold one machine's (or one user's) files, never a path valid elsewhere.
MACHINE_ROOTS = ("work", "tmp", "root", "home", "Users", "mnt", "scratch", "var/folders")

# Folders Python writes locally (byte code holds its source's absolute path); git ignores them.
SKIPPED_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})

# (path relative to the repository, the matched text) -> why it is not a machine path.
ALLOWED: dict[tuple[str, str], str] = {
    ("examples/deploy/simple_mlp_sweep_kubernetes/deployment.yaml", "/tmp"): (
        "mountPath of the pod's writable emptyDir (tritonlab.deploy.hardening: the root "
        "filesystem is read-only); a folder inside the container, not of any machine"
    ),
    ("examples/deploy/simple_mlp_sweep_kubernetes/README.md", "/tmp"): (
        "the README's words for the pod's writable emptyDir; a folder inside the container"
    ),
    ("examples/deploy/resnet18_cnn_tune_kserve/README.md", "/tmp"): (
        "the README's words for the predictor's writable emptyDir; a folder inside the container"
    ),
    ("examples/deploy/resnet18_cnn_tune_kserve/inferenceservice.yaml", "/tmp"): (
        "mountPath of the KServe predictor's writable emptyDir beside its read-only root "
        "filesystem; a folder inside the container, not of any machine"
    ),
}

# A path starts at a word boundary: not inside a word, a URL, a relative path or a variable.
_START = rb"(?<![\w.~$/\\-])"
_END = rb"(?=[/\"'\s`),:;]|$)"  # the root's name ends there (``/tmpfs`` is another folder)
_REST = rb"[^\s\"'`),;]*"  # the rest of the path, up to a quote, space or separator


def _this_machine_roots() -> list[str]:
    """Absolute folders of this machine that a committed file must never name."""
    roots = [str(ROOT), str(Path.home()), tempfile.gettempdir()]
    if sys.prefix != sys.base_prefix:  # a virtualenv (the base prefix, e.g. /usr, is shared)
        roots.append(sys.prefix)
    return [r for r in roots if r.strip("/")]


def machine_path_pattern(extra_roots: list[str]) -> re.Pattern[bytes]:
    """A pattern matching an absolute path under ``MACHINE_ROOTS`` or one of ``extra_roots``."""
    roots = set(MACHINE_ROOTS) | {r.strip("/") for r in extra_roots}
    alternatives = "|".join(re.escape(r) for r in sorted(roots, key=len, reverse=True))
    root = b"/(?:" + alternatives.encode() + b")"
    return re.compile(_START + root + _END + _REST)


PATTERN = machine_path_pattern(_this_machine_roots())


def committed_files() -> Iterator[Path]:
    """Every file under ``FOLDERS``, without the folders Python writes locally."""
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and not SKIPPED_DIRS.intersection(path.parts):
                yield path


def machine_paths(data: bytes, pattern: re.Pattern[bytes] = PATTERN) -> list[str]:
    """The machine paths found in ``data`` (text or binary), as text."""
    return [m.group(0).decode(errors="replace") for m in pattern.finditer(data)]


@pytest.mark.parametrize(
    "text",
    [
        '"-f", "/tmp/demo1/benchmarks/baseline/grpc_b1_c8__r1.csv"',
        '"--model-repository=/tmp/demo1/models"',
        '"/root/.cache/tritonlab/tritonserver-2.51.0/bin/tritonserver"',
        '"binary": "/work/main/.venv/bin/perf_analyzer"',
        "see /home/user/run for the logs",
        "model at /tmp",
    ],
)
def test_the_pattern_finds_machine_paths(text: str) -> None:
    assert machine_paths(text.encode())


@pytest.mark.parametrize(
    "text",
    [
        '"binary": "$VIRTUAL_ENV/bin/perf_analyzer"',
        '"$TRITONLAB_CACHE/tritonserver-2.51.0/bin/tritonserver", "--model-repository=models"',
        '"-f", "benchmarks/baseline/grpc_b1_c8__r1.csv"',
        "--model-repository=/models",
        "mountPath: /models",
        "#!/usr/bin/env bash",
        "aws s3 sync model_repository/ s3://models/resnet18_cnn/",
        "https://example.org/home/tmp/page",
        '"/layers.5/attention_out/MatMul"',
        "a/work/b and ~/tmp/x and $HOME/work/run",
        "/tmpfs and /rooted are other folders",
    ],
)
def test_the_pattern_leaves_portable_and_container_paths(text: str) -> None:
    assert machine_paths(text.encode()) == []


def test_this_machines_own_folders_are_matched() -> None:
    pattern = machine_path_pattern(["/srv/checkout"])
    assert machine_paths(b'"/srv/checkout/examples/x.csv"', pattern)
    assert machine_paths(b'"/srv/checkout_2/x"', pattern) == []


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_committed_file_holds_a_machine_path(folder: str) -> None:
    found: dict[str, list[str]] = {}
    for path in committed_files():
        name = str(path.relative_to(ROOT))
        if not name.startswith(folder + "/"):
            continue
        hits = [p for p in machine_paths(path.read_bytes()) if (name, p) not in ALLOWED]
        if hits:
            found[name] = sorted(set(hits))
    shown = "\n".join(f"{name}: {', '.join(hits[:3])}" for name, hits in sorted(found.items()))
    assert not found, f"{len(found)} files hold machine paths (store them portably):\n{shown}"


def test_every_allowance_is_still_needed() -> None:
    for (name, text), reason in ALLOWED.items():
        assert reason, name
        assert text.encode() in (ROOT / name).read_bytes(), f"{name}: {text} is gone; drop it"
