"""The result store: one JSON file per measured cell, written atomically the moment it exists.

Reports read only these files, so a crash, Ctrl-C or a dead server never leaves a half-written
result, and ``tritonlab report`` can rebuild everything from disk alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

from tritonlab import gateway
from tritonlab.bounded_read import FileRefused
from tritonlab.errors import ConfigError, ResultFileError, TritonlabError
from tritonlab.experiments.interference import Interference
from tritonlab.experiments.manifest import Manifest
from tritonlab.experiments.rounds import AdaptiveRound
from tritonlab.perf.runner import PerfRun
from tritonlab.records import NOT_STORED, Record, RecordError, later
from tritonlab.repository.variants import ServingVariant
from tritonlab.result_files import (
    error_line,
    load_records,
    read_json,
    stored_json,
    write_json_atomic,
)
from tritonlab.run_layout import CELLS_DIR, RunLayout
from tritonlab.server.stats import ServerStatsDelta

# Cell files: 1 = written before the version was stored (still read), 2 = versioned.
CELL_SCHEMA_VERSION = 2
CORRUPT_SUFFIX = ".corrupt"
REPLACED_SUFFIX = ".replaced"  # a cell the user asked to measure again (--remeasure), kept


@dataclass(frozen=True)
class CellResult(Record):
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
    backend_fallbacks: int = later(0)
    # The cluster node that measured it (``distributed/``); "" for a cell measured locally.
    node: str = later("")
    # What the interference monitor saw (the block engine); None for cells measured without it.
    interference: Interference | None = later()
    # The round (0-based) an extra round measured it in, from ``results/adaptive.json`` (set by
    # ``load_cells``, not stored in the cell): a cell's repeat counts its own configuration's
    # cells, and an extra round holds configurations at different counts. None: its repeat.
    measured_round: Annotated[int | None, NOT_STORED] = None
    # True when the cell's configuration was served by one process for the whole run (co-loaded
    # by the block engine, ``results/engine.json``; set by ``load_cells``, not stored): its cells
    # share that process's own speed (``stats/process_term.py``).
    whole_run_process: Annotated[bool, NOT_STORED] = False
    # The models the measured one called (an ensemble's steps, a BLS model's callees, from a
    # user's repository): each one's statistics over the same window, by its name there.
    steps: dict[str, ServerStatsDelta] = later(factory=dict)

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
        raise ResultFileError(
            f"cannot write {path}: {exc.strerror or exc}; free space or fix the folder's "
            "permissions, then run the same command to resume (finished cells are kept)"
        ) from exc
    return path


def read_cell(path: Path) -> CellResult:
    """One cell file; a truncated, corrupt or newer-schema file is a one-line error naming it."""
    again = f"run the same command with --remeasure {path.stem} to measure that cell again"
    try:
        data = stored_json(path)
    except (OSError, ValueError, RecursionError, FileRefused) as exc:
        raise ResultFileError(
            f"{path} is unreadable ({type(exc).__name__}: {error_line(exc)}); {again}"
        ) from exc
    version = data.get("schema_version", 1) if isinstance(data, dict) else None
    if not isinstance(version, int) or version > CELL_SCHEMA_VERSION:
        raise ResultFileError(
            f"{path} has cell schema {version!r}, this tritonlab reads up to "
            f"{CELL_SCHEMA_VERSION}; upgrade tritonlab, or {again}"
        )
    try:
        return CellResult.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultFileError(
            f"{path} is not a complete cell record (missing or bad {exc}); {again}"
        ) from exc


def cell_problem(path: Path) -> str | None:
    """Why the cell file at ``path`` cannot be used, or None when it reads."""
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
    ``dyn_batch__*``) aside as ``X.json.replaced`` (an earlier copy overwritten) so the next
    run measures them again. A pattern that matches no stored cell is a one-line error."""
    from fnmatch import fnmatchcase

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
    """Every cell stored under ``results/<folder_name>/``, sorted by file name ([] without it;
    ``ResultFileError`` for a truncated, corrupt or newer-schema file)."""
    folder = RunLayout(run_dir).cell_folder(folder_name)
    if not folder.is_dir():
        return []
    cells = [read_cell(p) for p in sorted(folder.glob("*.json"))]
    if folder_name != CELLS_DIR:
        return cells
    return with_process_lifetimes(run_dir, with_measured_rounds(run_dir, cells))


def with_process_lifetimes(run_dir: Path, cells: list[CellResult]) -> list[CellResult]:
    """``cells`` marked ``whole_run_process`` when the block engine co-loaded the run's
    configurations (each served by one process for the whole run)."""
    from tritonlab.experiments.blocks import load_engine_record

    record = load_engine_record(run_dir)
    if record is None or record.coload is None or not record.coload.co_loaded:
        return cells
    return [replace(c, whole_run_process=True) for c in cells]


def with_measured_rounds(run_dir: Path, cells: list[CellResult]) -> list[CellResult]:
    """``cells`` with the round each extra round (``results/adaptive.json``, in order) measured
    it in: the k-th extra round is round ``planned + k``, ``planned`` one past the highest
    repeat of the cells no extra round holds."""
    rounds = load_records(RunLayout(run_dir).adaptive, AdaptiveRound)
    extra = {cid: k for k, record in enumerate(rounds) for cid in record.cells}
    if not extra:
        return cells
    planned = 1 + max((c.repeat for c in cells if c.cell_id not in extra), default=-1)
    return [
        replace(c, measured_round=planned + extra[c.cell_id]) if c.cell_id in extra else c
        for c in cells
    ]


def save_manifest(run_dir: Path, manifest: Manifest) -> None:
    """Write ``manifest`` to ``results/manifest.json`` atomically."""
    write_json_atomic(RunLayout(run_dir).manifest, manifest.to_dict())


def load_manifest(run_dir: Path) -> Manifest:
    """The run's ``results/manifest.json``: ``TritonlabError`` if it is missing,
    ``ResultFileError`` (one line naming it) if it is damaged or from a newer tritonlab."""
    path = RunLayout(run_dir).manifest
    if not path.exists():
        raise TritonlabError(f"{path} not found: {run_dir} is not a tritonlab run folder")
    data = read_json(path)
    if not isinstance(data, dict):
        raise ResultFileError(
            f"{path} is not a tritonlab manifest (not a JSON object); restore it, or pass "
            "--fresh to measure this folder again"
        )
    try:
        return Manifest.from_dict(data)
    except RecordError as exc:
        raise ResultFileError(
            f"{path} is damaged or from a newer tritonlab ({exc}); restore it from a copy, or "
            "pass --fresh to measure the folder again"
        ) from None
