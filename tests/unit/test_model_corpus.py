"""The corpus of real models (issue 35): entries are checked before anything is fetched, a file
whose sha256 differs is not used, and the wheel's other files are never written anywhere."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]


def _corpus() -> ModuleType:
    return load_script("benchmarks/model_corpus.py")


def test_the_committed_corpus_is_eight_kinds_or_more_each_with_a_sha256() -> None:
    models = _corpus().load_corpus()
    assert len({m.kind for m in models}) >= 8
    assert all(len(m.sha256) == 64 for m in models)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "../escape"),
        ("package", "--index-url=http://example.com"),
        ("version", "1.0; rm -rf /"),
        ("member", "../../etc/passwd"),
        ("member", "/etc/passwd"),
    ],
)
def test_a_hostile_entry_is_refused(tmp_path: Path, field: str, value: str) -> None:
    entry = {"name": "m", "kind": "k", "package": "p", "version": "1.0", "member": "p/m.onnx"}
    entry |= {"sha256": "0" * 64, field: value}
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({"models": [entry]}))
    with pytest.raises(SystemExit):
        _corpus().load_corpus(corpus)


def _cached_wheel(cache: Path, content: bytes) -> None:
    wheels = cache / "tritonlab" / "corpus" / "wheels"
    wheels.mkdir(parents=True)
    with zipfile.ZipFile(wheels / "p-1.0-py3-none-any.whl", "w") as wheel:
        wheel.writestr("p/m.onnx", content)
        wheel.writestr("p/other.py", "print('never run')")


def test_a_file_is_kept_only_with_its_recorded_sha256(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _cached_wheel(tmp_path, b"model bytes")
    corpus = _corpus()
    good = hashlib.sha256(b"model bytes").hexdigest()
    model = corpus.CorpusModel("m", "k", "p", "1.0", "p/m.onnx", good)
    path = corpus.fetch(model)
    assert path.read_bytes() == b"model bytes"
    assert sorted(p.name for p in path.parent.iterdir()) == ["m.onnx"]  # nothing else taken out
    path.unlink()
    with pytest.raises(SystemExit, match="differs from the recorded"):
        corpus.fetch(corpus.CorpusModel("m", "k", "p", "1.0", "p/m.onnx", "0" * 64))
    assert not path.exists()
    with pytest.raises(SystemExit, match="no sha256 recorded"):
        corpus.fetch(corpus.CorpusModel("m", "k", "p", "1.0", "p/m.onnx", ""))
