"""One run-folder layout: every name a run folder holds, and the path of each thing in it.

A run folder (what ``run``, ``demo``, ``sweep`` and ``tune`` write with ``--out``) looks like::

    .tritonlab                  the marker: tritonlab made this folder (experiments/run_folder)
    .trash/<UTC time>/          what --fresh set aside
    <model>.onnx                the model a built-in export wrote (the measured input: kept)
    results/                    what was measured and derived (manifest.json, cells/, ...)
    results/cells/<cell>.json   one measured cell
    results/serving_path/       the serving-path probes behind the cost model
    serving_path/               their null model
    models/<served name>/       the Triton model repository
    server/                     the server's log
    benchmarks/<variant>/       perf_analyzer's raw output
    inputs/                     perf_analyzer's --input-data files
    traces/                     replayed traces: the CSV given and its --request-intervals file
    docs/  plots/  report.html  README.md    the reports
    scripts/  client/           scripts to reproduce the measurements, and a client
    pick/<model>/config.pbtxt   a tune's chosen configuration
    candidate/<model>/          a live check's new ONNX file served with the baseline's config

Every stage asks ``RunLayout`` for these paths; nothing else joins a run-folder path.
Standard library only, so every layer may import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

# Folders directly in the run folder.
RESULTS_DIR = "results"
MODELS_DIR = "models"
SERVER_DIR = "server"
BENCHMARKS_DIR = "benchmarks"
INPUTS_DIR = "inputs"  # perf_analyzer's JSON --input-data files (regenerated on a resume)
TRACES_DIR = "traces"  # replayed traces (perf/trace.py): the CSV and its interval file
DOCS_DIR = "docs"
PLOTS_DIR = "plots"
PICK_DIR = "pick"  # written by pipeline/tune.py
CANDIDATE_DIR = "candidate"  # a live check's new ONNX file, as a repository (pipeline/check.py)
SCRIPTS_DIR = "scripts"
CLIENT_DIR = "client"
# The serving-path probes: their cells under results/, their null model in the run folder.
SERVING_PATH_DIR = "serving_path"
# Folders under results/.
CELLS_DIR = "cells"

# Files under results/.
MANIFEST_FILE = "manifest.json"
OPERATORS_FILE = "operators.json"
ADAPTIVE_FILE = "adaptive.json"  # the extra rounds adaptive repeats measured, and why
INFER_CHECK_FILE = "infer_check.json"
FAULTS_FILE = "faults.json"
COST_MODEL_FILE = "cost_model.json"
RECOMMENDATIONS_FILE = "recommendations.json"

# Other files.
SERVER_LOG_FILE = "tritonserver.log"
REPORT_FILE = "report.html"
README_FILE = "README.md"

MARKER = ".tritonlab"
TRASH = ".trash"

# What a run writes directly in its folder, and ``--fresh`` sets aside (the model file, the
# marker, the trash and anything else stay).
RUN_SUBFOLDERS = (
    RESULTS_DIR,
    BENCHMARKS_DIR,
    MODELS_DIR,
    SERVER_DIR,
    DOCS_DIR,
    SERVING_PATH_DIR,
    PICK_DIR,
    INPUTS_DIR,
    TRACES_DIR,
    PLOTS_DIR,
    SCRIPTS_DIR,
    CLIENT_DIR,
    CANDIDATE_DIR,
)
RUN_FILES = (REPORT_FILE, README_FILE)
RUN_OUTPUTS = RUN_SUBFOLDERS + RUN_FILES


def cell_id(variant: str, load_key: str, repeat: int) -> str:
    """A cell's id and file stem: ``variant__load__rN`` (``repeat``: the round, from 1)."""
    return f"{variant}__{load_key}__r{repeat}"


class _LayoutPath:
    """A fixed path of the layout, ``parts`` below the run folder: ``RunLayout(root).<name>``
    is ``root`` joined with them, and its docstring says what the path holds and where."""

    def __init__(self, parts: tuple[str, ...], doc: str) -> None:
        self.parts = parts
        self.__doc__ = doc

    @overload
    def __get__(self, layout: None, owner: type[Any]) -> _LayoutPath: ...

    @overload
    def __get__(self, layout: RunLayout, owner: type[Any]) -> Path: ...

    def __get__(self, layout: RunLayout | None, owner: type[Any]) -> Path | _LayoutPath:
        return self if layout is None else layout.root.joinpath(*self.parts)


def _folder(name: str, what: str) -> _LayoutPath:
    """A folder directly in the run folder; its docstring is ``<what>: ``<name>/``.``."""
    return _LayoutPath((name,), f"{what}: ``{name}/``.")


def _file(folder: str, name: str, what: str) -> _LayoutPath:
    """A file in a folder of the run folder; its docstring is ``<what>: ``<folder>/<name>``.``."""
    return _LayoutPath((folder, name), f"{what}: ``{folder}/{name}``.")


def _result(name: str, what: str) -> _LayoutPath:
    """A file in ``results/``."""
    return _file(RESULTS_DIR, name, what)


@dataclass(frozen=True)
class RunLayout:
    """Where a run folder keeps each thing: every path below ``root``."""

    root: Path

    # results/

    results = _folder(RESULTS_DIR, "The folder of measured and derived results")

    def cell_folder(self, folder: str = CELLS_DIR) -> Path:
        """A folder of cell files under ``results/``: ``cells/``, or ``serving_path/``."""
        return self.results / folder

    cells = _result(CELLS_DIR, "One JSON file per measured cell")
    serving_path_cells = _result(SERVING_PATH_DIR, "The serving-path probes' cells")

    def cell(self, cell_id: str, folder: str = CELLS_DIR) -> Path:
        """The result file of ``cell_id``: ``results/<folder>/<cell_id>.json``."""
        return self.cell_folder(folder) / f"{cell_id}.json"

    manifest = _result(MANIFEST_FILE, "What the run was and where")
    infer_check = _result(INFER_CHECK_FILE, "The correctness checks against onnxruntime")
    operators = _result(OPERATORS_FILE, "onnxruntime's per-operator timings (the roofline's data)")
    adaptive = _result(ADAPTIVE_FILE, "The adaptive repeats' rounds")
    stopping = _result("stopping.json", "Why the adaptive rounds stopped")
    faults = _result(FAULTS_FILE, "What went wrong while measuring and how it was recovered")
    engine = _result("engine.json", "The block engine's record (seed, order, interference)")
    tune = _result("tune.json", "A tune's steps and pick")
    summary = _result("summary.json", "The analyses and the run's trust the report wrote")
    cost_model = _result(COST_MODEL_FILE, "The fitted serving cost model and its predictions")
    recommendations = _result(RECOMMENDATIONS_FILE, "A sweep's picks and Pareto frontier")

    check = _result("check.json", "A live check's gate results")
    check_markdown = _file(DOCS_DIR, "check.md", "A live check's summary")
    candidate = _folder(CANDIDATE_DIR, "A live check's new model file as a repository")

    # what the measuring stages serve, run and write beside the results

    models = _folder(MODELS_DIR, "The Triton model repository")

    def model_dir(self, served_name: str) -> Path:
        """One served model's folder in the repository: ``models/<served_name>/``."""
        return self.models / served_name

    server = _folder(SERVER_DIR, "The server's folder")
    server_log = _file(SERVER_DIR, SERVER_LOG_FILE, "tritonserver's log")
    server_note = _file(
        SERVER_DIR, "README.txt", "A cluster run's note on where each node's server log stayed"
    )
    benchmarks = _folder(BENCHMARKS_DIR, "perf_analyzer's raw output")

    def benchmark_dir(self, variant: str) -> Path:
        """One configuration's raw perf_analyzer output: ``benchmarks/<variant>/``."""
        return self.benchmarks / variant

    inputs = _folder(INPUTS_DIR, "perf_analyzer's ``--input-data`` files")

    def perf_data(self, sequence_length: int | None = None) -> Path:
        """The ``--input-data`` file for a sequence length: ``inputs/perf_data[_s<N>].json``."""
        name = "perf_data.json" if sequence_length is None else f"perf_data_s{sequence_length}.json"
        return self.inputs / name

    traces = _folder(TRACES_DIR, "Replayed traces")

    def trace_csv(self, name: str) -> Path:
        """The trace CSV a load replays, as given: ``traces/<name>.csv``."""
        return self.traces / f"{name}.csv"

    def trace_intervals(self, name: str) -> Path:
        """perf_analyzer's ``--request-intervals`` file of a trace (µs, one per line):
        ``traces/<name>.intervals.txt``."""
        return self.traces / f"{name}.intervals.txt"

    serving_path = _folder(SERVING_PATH_DIR, "What the serving-path probes serve")
    null_model = _file(
        SERVING_PATH_DIR, "null_model.onnx", "The probes' null model (inputs, no work)"
    )

    def exported_model(self, model: str) -> Path:
        """A built-in model exported into the run folder: ``<model>.onnx``."""
        return self.root / f"{model}.onnx"

    # the reports

    docs = _folder(DOCS_DIR, "The folder of written documents")
    experiment_log = _file(DOCS_DIR, "experiment_log.md", "The experiment log in markdown")
    plots = _folder(PLOTS_DIR, "The folder of PNG plots")

    def plot(self, name: str) -> Path:
        """One plot: ``plots/<name>.png``."""
        return self.plots / f"{name}.png"

    html_report = _LayoutPath((REPORT_FILE,), "The self-contained HTML page: ``report.html``.")

    readme = _LayoutPath((README_FILE,), "The run folder's ``README.md``.")

    scripts = _folder(SCRIPTS_DIR, "Scripts that reproduce the measurements")
    start_server_script = _file(
        SCRIPTS_DIR, "start_server.sh", "Starts tritonserver on the repository"
    )
    run_perf_script = _file(SCRIPTS_DIR, "run_perf.sh", "The baseline perf_analyzer command")
    export_model_script = _file(SCRIPTS_DIR, "export_model.py", "Re-creates the model file")
    client = _folder(CLIENT_DIR, "The client's folder")
    infer_client = _file(
        CLIENT_DIR, "infer_client.py", "A standalone client that sends one request"
    )
    pick = _folder(PICK_DIR, "A tune's chosen configurations")

    def pick_config(self, model: str) -> Path:
        """The configuration a tune picked for ``model``: ``pick/<model>/config.pbtxt``."""
        return self.pick / model / "config.pbtxt"

    # what tritonlab keeps for itself

    marker = _LayoutPath((MARKER,), "The file that says tritonlab made the folder: ``.tritonlab``.")

    trash = _folder(TRASH, "Where ``--fresh`` sets earlier results aside")

    def relative(self, path: Path) -> str:
        """``path`` (one of this layout's) relative to the run folder, with ``/`` separators."""
        return path.relative_to(self.root).as_posix()
