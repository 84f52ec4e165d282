"""What nodes send the driver: plain JSON bytes that the driver parses and checks.

A node is untrusted input. Its answers are not Python objects but JSON documents (bytes), and
the driver accepts one only when it is well formed: a size within ``MAX_ANSWER_BYTES``, every
file path relative, free of ``..`` and contained in the run folder once resolved, the cell the
one that was asked for (its id, variant, load and repeat), the fault records of the
expected types. Anything else is a ``NodeAnswerError`` naming the node's mistake; nothing of it
is written.

What this does not close: Ray's own transport deserializes what it carries (with pickle) before
these checks see the bytes, so a hostile process that can join the Ray cluster can still run
code in the driver. A Ray cluster must therefore be on a trusted network, with Ray's token
authentication (``RAY_AUTH_MODE=token``) where it is reachable by others (docs/scaling.md).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from tritonlab.errors import TritonlabError
from tritonlab.experiments.store import CellResult
from tritonlab.names import is_path_name
from tritonlab.run_layout import (
    BENCHMARKS_DIR,
    CELLS_DIR,
    FAULTS_FILE,
    INFER_CHECK_FILE,
    INPUTS_DIR,
    MANIFEST_FILE,
    MODELS_DIR,
    RESULTS_DIR,
    SERVING_PATH_DIR,
    cell_id,
)

MAX_ANSWER_BYTES = 256 * 2**20


class NodeAnswerError(TritonlabError):
    """A node's answer is not what the driver asked for, or not well formed."""


@dataclass(frozen=True)
class Answer:
    """One node answer, checked: the cell (None: given up on), the files it wrote (run-folder path
    -> bytes), the faults met meanwhile (a server restart among them)."""

    cell: CellResult | None
    files: dict[str, bytes]
    faults: list[dict[str, Any]]


def encode_answer(
    cell: CellResult | None, files: dict[str, bytes], faults: list[dict[str, Any]]
) -> bytes:
    """The node side: one answer as JSON bytes."""
    return json.dumps(
        {
            "cell": None if cell is None else cell.to_dict(),
            "files": {rel: base64.b64encode(data).decode("ascii") for rel, data in files.items()},
            "faults": faults,
        }
    ).encode()


def encode(data: dict[str, Any]) -> bytes:
    """Any other node report (its facts, its prepared server) as JSON bytes."""
    return json.dumps(data).encode()


def decode(raw: object, what: str) -> dict[str, Any]:
    """A node report's JSON object, or ``NodeAnswerError``."""
    if not isinstance(raw, bytes):
        raise NodeAnswerError(f"{what}: expected JSON bytes, got {type(raw).__name__}")
    if len(raw) > MAX_ANSWER_BYTES:
        raise NodeAnswerError(f"{what}: {len(raw):,} bytes, over {MAX_ANSWER_BYTES:,}")
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise NodeAnswerError(f"{what}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise NodeAnswerError(f"{what}: not a JSON object")
    return data


# Where a node's files may go in the driver's run folder: perf_analyzer's raw output and its
# input data, the serving-path probes' null model, measured records under results/ (but the
# cells, manifest, checks and faults, which the driver writes itself), and in the repository a
# configuration's ``config.pbtxt`` and ``1/model.onnx`` (a tune builds its variants there);
# never scripts/, client/, docs/, the reports or any other file of the repository (a
# ``model.py`` or a script would run when the user starts the run's server later).
_NODE_FOLDERS = ((BENCHMARKS_DIR,), (INPUTS_DIR,), (SERVING_PATH_DIR,), (RESULTS_DIR,))
_DRIVER_OWNED = {
    (RESULTS_DIR, CELLS_DIR),
    (RESULTS_DIR, MANIFEST_FILE),
    (RESULTS_DIR, INFER_CHECK_FILE),
    (RESULTS_DIR, FAULTS_FILE),
}
_NODE_MODEL_FILES = (("config.pbtxt",), ("1", "model.onnx"))


def contained_name(name: object) -> str:
    """A file name the driver sent (the model's), when it is one plain path part."""
    if not is_path_name(name):
        raise NodeAnswerError(f"file name {name!r} is not a plain file name")
    assert isinstance(name, str)
    return name


def contained(run_dir: Path, rel: object, what: str) -> Path:
    """``run_dir / rel`` when ``rel`` is a plain relative path that stays inside ``run_dir``,
    where a node's files may go (``_NODE_FOLDERS``, a configuration's files)."""
    if not isinstance(rel, str) or not rel or "\0" in rel or "\\" in rel or "\n" in rel:
        raise NodeAnswerError(f"{what}: file path {rel!r} is not a plain relative path")
    parts = PurePosixPath(rel).parts
    if rel.startswith("/") or not parts or ".." in parts:
        raise NodeAnswerError(f"{what}: file path {rel!r} leaves the run folder")
    model_file = (
        len(parts) >= 3
        and parts[0] == MODELS_DIR
        and is_path_name(parts[1])
        and parts[2:] in _NODE_MODEL_FILES
    )
    in_folder = any(
        len(parts) > len(folder) and parts[: len(folder)] == folder for folder in _NODE_FOLDERS
    )
    owned = tuple(parts[:2]) in _DRIVER_OWNED
    if not (model_file or in_folder) or owned or any(p.startswith(".") for p in parts):
        folders = ", ".join("/".join(f) + "/" for f in _NODE_FOLDERS)
        raise NodeAnswerError(
            f"{what}: file path {rel!r} is not in {folders} (but the driver's own records) "
            "nor a configuration's config.pbtxt or 1/model.onnx, the only files a node may send"
        )
    path = run_dir / Path(*parts)
    root = run_dir.resolve()
    resolved = path.resolve()
    if resolved != root and root not in resolved.parents:
        raise NodeAnswerError(f"{what}: file path {rel!r} resolves outside the run folder")
    return path


def decode_answer(raw: object, what: str, run_dir: Path, expected_cell: str | None) -> Answer:
    """The driver side: a node's answer, checked against what was asked (``expected_cell``:
    the cell id it was sent, None for an answer that carries no cell)."""
    data = decode(raw, what)
    files_in = data.get("files", {})
    if not isinstance(files_in, dict):
        raise NodeAnswerError(f"{what}: files must be an object")
    files: dict[str, bytes] = {}
    for rel, text in files_in.items():
        contained(run_dir, rel, what)
        if not isinstance(text, str):
            raise NodeAnswerError(f"{what}: file {rel!r} is not base64 text")
        try:
            files[rel] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise NodeAnswerError(f"{what}: file {rel!r} is not valid base64") from None
    faults = data.get("faults", [])
    if not isinstance(faults, list) or not all(isinstance(f, dict) for f in faults):
        raise NodeAnswerError(f"{what}: faults must be a list of objects")
    return Answer(_cell(data.get("cell"), what, expected_cell), files, faults)


def _cell(value: object, what: str, expected: str | None) -> CellResult | None:
    if value is None:
        return None
    if expected is None:
        raise NodeAnswerError(f"{what}: a cell was not asked for")
    if not isinstance(value, dict):
        raise NodeAnswerError(f"{what}: the cell must be an object")
    try:
        cell = CellResult.from_dict(value)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise NodeAnswerError(f"{what}: the cell is not a valid record ({exc!r})") from None
    implied = cell_id(cell.variant.name, cell.load_key, cell.repeat)
    if cell.cell_id != expected or implied != expected:
        raise NodeAnswerError(
            f"{what}: answered cell {cell.cell_id!r} ({implied}), but {expected!r} was asked for"
        )
    return cell
