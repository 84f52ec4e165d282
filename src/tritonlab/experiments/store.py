"""The result store: one JSON file per measured cell, written atomically the moment it exists.

Reports read only these files, so a crash, Ctrl-C or a dead server never leaves a half-written
result, and ``tritonlab report`` can rebuild everything from disk alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from tritonlab import gateway
from tritonlab.bounded_read import FileRefused, read_capped
from tritonlab.experiments.interference import Interference
from tritonlab.perf.runner import PerfRun
from tritonlab.records import Record, RecordError
from tritonlab.repository.variants import ServingVariant
from tritonlab.run_layout import CELLS_DIR, RunLayout
from tritonlab.server.stats import ServerStatsDelta

R = TypeVar("R", bound=Record)
T = TypeVar("T")

# Cell files: 1 = written before the version was stored (still read), 2 = versioned.
CELL_SCHEMA_VERSION = 2
# The other files under results/ (operators, infer check, faults, adaptive rounds, cost model,
# summary, recommendations): 1 = before they carried a version (still read), 2 = versioned.
RESULT_SCHEMA_VERSION = 2
# The most a stored results file (a cell, the manifest, any results/*.json) may hold: tritonlab
# writes kilobytes; a bigger file is damaged or planted, and is refused unread.
MAX_RESULT_BYTES = 64 * 1024 * 1024
CORRUPT_SUFFIX = ".corrupt"
REPLACED_SUFFIX = ".replaced"  # a cell the user asked to measure again (--remeasure), kept


def stored_json(path: Path) -> Any:
    """The JSON in the stored file at ``path``, read in bounded time and memory: a regular file
    of at most ``MAX_RESULT_BYTES`` (``bounded_read``; else ``FileRefused``), no deeper than
    Python's recursion limit (else ``RecursionError``). ``OSError``, ``ValueError`` (not UTF-8,
    not JSON, an int of over 4,300 digits) for the rest."""
    return json.loads(read_capped(path, MAX_RESULT_BYTES).decode("utf-8"))


def read_json(path: Path, default: Any = None) -> Any:
    """A stored JSON file, ``default`` when absent; a corrupt one, one over
    ``MAX_RESULT_BYTES`` or one that is not a regular file (a FIFO, a device) is a one-line
    error naming it."""
    if not path.exists():
        return default
    from tritonlab.errors import ResultFileError

    try:
        return stored_json(path)
    except FileRefused as exc:
        raise ResultFileError(
            f"{path} {exc}, so it is not what tritonlab wrote there; restore it or delete it "
            "(a re-run measures or derives what it held again)"
        ) from None
    except (OSError, ValueError, RecursionError) as exc:
        raise ResultFileError(
            f"{path} is unreadable ({type(exc).__name__}: {_reason(exc)}); restore it or "
            "delete it (a re-run measures or derives what it held again)"
        ) from exc


def _reason(exc: BaseException) -> str:
    """An error's message on one line of at most 200 characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as indented, key-sorted JSON through a temporary file and a rename."""
    gateway.write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def load_record(path: Path, record: type[R], default: R | None = None) -> R | None:
    """The results file at ``path`` read into ``record`` (``default`` when absent); a damaged
    file, or one that does not fit the record, is a one-line ``ResultFileError`` naming it."""
    data = read_result(path)
    if data is None:
        return default
    return _parsed(path, lambda: record.from_dict(data))


def load_records(path: Path, record: type[R]) -> list[R]:
    """A results file holding a list (``write_result`` of a list) read into ``record``s; an
    absent file is an empty list, a damaged one a one-line ``ResultFileError`` naming it."""
    data = read_result(path, default=[])
    if not isinstance(data, list):
        data = [data]  # lets the record's own check name what is wrong
    return _parsed(path, lambda: [record.from_dict(item) for item in data])


def _parsed(path: Path, parse: Callable[[], T]) -> T:
    try:
        return parse()
    except RecordError as exc:
        from tritonlab.errors import ResultFileError

        raise ResultFileError(
            f"{path} does not hold what tritonlab wrote there ({exc}); restore it or delete it "
            "(a re-run measures or derives what it held again)"
        ) from exc


def write_result(path: Path, payload: dict[str, Any] | list[Any]) -> None:
    """Write a results file with its schema version: an object gains ``schema_version``, a list
    is stored as ``{"schema_version": N, "records": [...]}``."""
    if isinstance(payload, list):
        write_json_atomic(path, {"schema_version": RESULT_SCHEMA_VERSION, "records": payload})
    else:
        write_json_atomic(path, payload | {"schema_version": RESULT_SCHEMA_VERSION})


def read_result(path: Path, default: Any = None) -> Any:
    """What ``write_result`` stored (or an unversioned file of schema 1), ``default`` when absent;
    a corrupt file or one from a newer tritonlab is a one-line error naming it."""
    data = read_json(path)
    if data is None:
        return default
    if isinstance(data, list):  # schema 1: lists were stored bare
        return data
    from tritonlab.errors import ResultFileError

    if not isinstance(data, dict):
        raise ResultFileError(
            f"{path} is not a tritonlab results file (a JSON {type(data).__name__}); restore it "
            "or delete it (a re-run measures or derives what it held again)"
        )
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version > RESULT_SCHEMA_VERSION:
        raise ResultFileError(
            f"{path} has schema {version!r}, this tritonlab reads up to {RESULT_SCHEMA_VERSION}; "
            "upgrade tritonlab, or delete the file (a re-run measures or derives it again)"
        )
    if "records" in data and version >= 2:
        return data["records"]
    return {k: v for k, v in data.items() if k != "schema_version"}


@dataclass(frozen=True)
class CellResult:
    """One measured cell: a variant at one load, one repeat, with every fact behind it."""

    cell_id: str
    variant: ServingVariant
    model_name: str
    repeat: int
    perf: PerfRun
    server: ServerStatsDelta | None
    server_cpu_s: float
    config_pbtxt: str
    started_utc: str
    load_key: str = ""
    schema_version: int = CELL_SCHEMA_VERSION
    # Executions the onnxruntime backend ran request by request because a batch failed (its
    # log lines during this cell); 0 when none, or for a server whose log tritonlab cannot read.
    backend_fallbacks: int = 0
    # The cluster node that measured it (``distributed/``); "" for a cell measured locally.
    node: str = ""
    # What the interference monitor saw (the block engine); None for cells measured without it.
    interference: Interference | None = None
    # The round (0-based) an extra round measured it in, from ``results/adaptive.json`` (set by
    # ``load_cells``, not stored in the cell): a cell's repeat counts its own configuration's
    # cells, and an extra round holds configurations at different counts. None: its repeat.
    measured_round: int | None = None
    # The models the measured one called (an ensemble's steps, a BLS model's callees, from a
    # user's repository): each one's statistics over the same window, by its name there.
    steps: dict[str, ServerStatsDelta] = field(default_factory=dict)

    @property
    def block(self) -> int | str:
        """What verdicts pair this cell by: the round it was measured in, and on a cluster its
        node as well."""
        round_ = self.repeat if self.measured_round is None else self.measured_round
        return f"{self.node}#{round_}" if self.node else round_

    @property
    def server_cores_used(self) -> float:
        """Server CPU seconds per wall second of the run: cores busy (0.0 for an empty run)."""
        return self.server_cpu_s / self.perf.wall_s if self.perf.wall_s else 0.0

    @property
    def perf_analyzer_cores_used(self) -> float:
        """perf_analyzer's CPU seconds per wall second: the client's cores (0.0 if no run)."""
        return self.perf.perf_analyzer_cpu_s / self.perf.wall_s if self.perf.wall_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The cell as JSON, as its file stores it; optional fields only when set."""
        data: dict[str, Any] = {} if self.schema_version < 2 else {"schema_version": 2}
        if self.backend_fallbacks:
            data["backend_fallbacks"] = self.backend_fallbacks
        if self.node:
            data["node"] = self.node
        if self.interference is not None:
            data["interference"] = self.interference.to_dict()
        if self.steps:
            data["steps"] = {name: delta.to_dict() for name, delta in self.steps.items()}
        return data | {
            "cell_id": self.cell_id,
            "variant": self.variant.to_dict(),
            "model_name": self.model_name,
            "repeat": self.repeat,
            "perf": self.perf.to_dict(),
            "server": self.server.to_dict() if self.server else None,
            "server_cpu_s": self.server_cpu_s,
            "config_pbtxt": self.config_pbtxt,
            "started_utc": self.started_utc,
            "load_key": self.load_key,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellResult:
        """The cell stored by :meth:`to_dict`; ``KeyError`` or ``ValueError`` if it is damaged."""
        return cls(
            cell_id=data["cell_id"],
            variant=ServingVariant.from_dict(data["variant"]),
            model_name=data["model_name"],
            repeat=int(data["repeat"]),
            perf=PerfRun.from_dict(data["perf"]),
            server=ServerStatsDelta.from_dict(data["server"]) if data.get("server") else None,
            server_cpu_s=float(data["server_cpu_s"]),
            config_pbtxt=data["config_pbtxt"],
            started_utc=data["started_utc"],
            load_key=data.get("load_key", ""),
            schema_version=int(data.get("schema_version", 1)),
            backend_fallbacks=int(data.get("backend_fallbacks", 0)),
            node=str(data.get("node", "")),
            interference=(
                Interference.from_dict(data["interference"]) if data.get("interference") else None
            ),
            steps={
                str(name): ServerStatsDelta.from_dict(delta)
                for name, delta in (data.get("steps") or {}).items()
            },
        )


def cell_path(run_dir: Path, cell_id: str, folder: str = CELLS_DIR) -> Path:
    """The result file of ``cell_id`` under ``results/<folder>/``."""
    return RunLayout(run_dir).cell(cell_id, folder)


def save_cell(run_dir: Path, cell: CellResult, folder: str = CELLS_DIR) -> Path:
    """Write one cell atomically; a full or read-only disk is a one-line error (nothing half
    written: the temporary file is removed, earlier cells are untouched)."""
    path = cell_path(run_dir, cell.cell_id, folder)
    try:
        write_json_atomic(path, cell.to_dict())
    except OSError as exc:
        from tritonlab.errors import ResultFileError

        raise ResultFileError(
            f"cannot write {path}: {exc.strerror or exc}; free space or fix the folder's "
            "permissions, then run the same command to resume (finished cells are kept)"
        ) from exc
    return path


def read_cell(path: Path) -> CellResult:
    """One cell file; a truncated, corrupt or newer-schema file is a one-line error naming it."""
    from tritonlab.errors import ResultFileError

    try:
        data = stored_json(path)
    except (OSError, ValueError, RecursionError, FileRefused) as exc:
        raise ResultFileError(
            f"{path} is unreadable ({type(exc).__name__}: {_reason(exc)}); run the same "
            f"command with --remeasure {path.stem} to measure that cell again"
        ) from exc
    version = data.get("schema_version", 1) if isinstance(data, dict) else None
    if not isinstance(version, int) or version > CELL_SCHEMA_VERSION:
        raise ResultFileError(
            f"{path} has cell schema {version!r}, this tritonlab reads up to "
            f"{CELL_SCHEMA_VERSION}; upgrade tritonlab, or run the same command with "
            f"--remeasure {path.stem} to measure that cell again"
        )
    try:
        return CellResult.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultFileError(
            f"{path} is not a complete cell record (missing or bad {exc}); run the same command "
            f"with --remeasure {path.stem} to measure that cell again"
        ) from exc


def cell_problem(path: Path) -> str | None:
    """Why the cell file at ``path`` cannot be used, or None when it reads."""
    from tritonlab.errors import ResultFileError

    try:
        read_cell(path)
    except ResultFileError as exc:
        return str(exc)
    return None


def quarantine(path: Path) -> Path:
    """Move an unusable cell file aside (kept, never deleted) so its cell is measured again."""
    return gateway.move(path, path.with_name(path.name + CORRUPT_SUFFIX))


def set_aside_cells(run_dir: Path, patterns: list[str] | tuple[str, ...]) -> list[Path]:
    """Move the stored cells whose ids match ``patterns`` (exact ids or shell-style globs such as
    ``dyn_batch__*``) aside as ``X.json.replaced`` so the next run measures them again.

    The files are kept (an earlier ``.replaced`` copy is overwritten). A pattern that matches
    no stored cell is a one-line error that lists where the ids are.
    """
    from fnmatch import fnmatchcase

    from tritonlab.errors import ConfigError

    folder = RunLayout(run_dir).cells
    stored = sorted(folder.glob("*.json")) if folder.is_dir() else []
    chosen: list[Path] = []
    for pattern in patterns:
        matched = [p for p in stored if fnmatchcase(p.stem, pattern)]
        if not matched:
            raise ConfigError(
                f"--remeasure {pattern}: no stored cell matches it in {folder}; cell ids are "
                "the file names there without .json (globs such as 'dyn*' work)"
            )
        chosen.extend(p for p in matched if p not in chosen)
    for path in chosen:
        gateway.move(path, path.with_name(path.name + REPLACED_SUFFIX))
    return chosen


def load_cells(run_dir: Path, folder_name: str = CELLS_DIR) -> list[CellResult]:
    """Every cell stored under ``results/<folder_name>/``, sorted by file name ([] without it).

    ``ResultFileError`` for a truncated, corrupt or newer-schema file.
    """
    folder = RunLayout(run_dir).cell_folder(folder_name)
    if not folder.is_dir():
        return []
    cells = [read_cell(p) for p in sorted(folder.glob("*.json"))]
    return with_measured_rounds(run_dir, cells) if folder_name == CELLS_DIR else cells


def with_measured_rounds(run_dir: Path, cells: list[CellResult]) -> list[CellResult]:
    """``cells`` with the round each extra round (``results/adaptive.json``, in order) measured
    it in: the k-th extra round is round ``planned + k``, ``planned`` one past the highest
    repeat of the cells no extra round holds."""
    from tritonlab.experiments.rounds import AdaptiveRound

    rounds = load_records(RunLayout(run_dir).adaptive, AdaptiveRound)
    extra = {cid: k for k, record in enumerate(rounds) for cid in record.cells}
    if not extra:
        return cells
    planned = 1 + max((c.repeat for c in cells if c.cell_id not in extra), default=-1)
    return [
        replace(c, measured_round=planned + extra[c.cell_id]) if c.cell_id in extra else c
        for c in cells
    ]


def save_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest`` to ``results/manifest.json`` atomically."""
    write_json_atomic(RunLayout(run_dir).manifest, manifest)


def load_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's ``results/manifest.json`` as a dict.

    ``TritonlabError`` if it is missing, ``ResultFileError`` if it is not a JSON object.
    """
    path = RunLayout(run_dir).manifest
    if not path.exists():
        from tritonlab.errors import TritonlabError

        raise TritonlabError(f"{path} not found: {run_dir} is not a tritonlab run folder")
    data = read_json(path)
    if not isinstance(data, dict):
        from tritonlab.errors import ResultFileError

        raise ResultFileError(
            f"{path} is not a tritonlab manifest (not a JSON object); restore it, or pass "
            "--fresh to measure this folder again"
        )
    return dict(data)
