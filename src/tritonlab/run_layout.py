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
    docs/  plots/  report.html  README.md    the reports
    scripts/  client/           scripts to reproduce the measurements, and a client
    pick/<model>/config.pbtxt   a tune's chosen configuration

Every stage asks ``RunLayout`` for these paths; nothing else joins a run-folder path.
Standard library only, so every layer may import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Folders directly in the run folder.
RESULTS_DIR = "results"
MODELS_DIR = "models"
SERVER_DIR = "server"
BENCHMARKS_DIR = "benchmarks"
INPUTS_DIR = "inputs"  # perf_analyzer's JSON --input-data files (regenerated on a resume)
DOCS_DIR = "docs"
PLOTS_DIR = "plots"
PICK_DIR = "pick"  # written by pipeline/tune.py
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
STOPPING_FILE = "stopping.json"  # why the adaptive rounds stopped, and what a cell cost
INFER_CHECK_FILE = "infer_check.json"
FAULTS_FILE = "faults.json"
ENGINE_FILE = "engine.json"
TUNE_FILE = "tune.json"  # written by pipeline/tune.py
COST_MODEL_FILE = "cost_model.json"
SUMMARY_FILE = "summary.json"
RECOMMENDATIONS_FILE = "recommendations.json"

# Other files.
SERVER_LOG_FILE = "tritonserver.log"
SERVER_NOTE_FILE = "README.txt"  # server/ of a cluster run: where each node's log stayed
NULL_MODEL_FILE = "null_model.onnx"
EXPERIMENT_LOG_FILE = "experiment_log.md"
REPORT_FILE = "report.html"
README_FILE = "README.md"
START_SERVER_SCRIPT = "start_server.sh"
RUN_PERF_SCRIPT = "run_perf.sh"
EXPORT_MODEL_SCRIPT = "export_model.py"
INFER_CLIENT_SCRIPT = "infer_client.py"
PICK_CONFIG_FILE = "config.pbtxt"

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
    PLOTS_DIR,
    SCRIPTS_DIR,
    CLIENT_DIR,
)
RUN_FILES = (REPORT_FILE, README_FILE)
RUN_OUTPUTS = RUN_SUBFOLDERS + RUN_FILES


def cell_id(variant: str, load_key: str, repeat: int) -> str:
    """A cell's id and file stem: ``variant__load__rN`` (``repeat``: the round, from 1)."""
    return f"{variant}__{load_key}__r{repeat}"


@dataclass(frozen=True)
class RunLayout:
    """Where a run folder keeps each thing: every path below ``root``."""

    root: Path

    # results/

    @property
    def results(self) -> Path:
        """The folder of measured and derived results: ``results/``."""
        return self.root / RESULTS_DIR

    def cell_folder(self, folder: str = CELLS_DIR) -> Path:
        """A folder of cell files under ``results/``: ``cells/``, or ``serving_path/``."""
        return self.results / folder

    @property
    def cells(self) -> Path:
        """One JSON file per measured cell: ``results/cells/``."""
        return self.cell_folder(CELLS_DIR)

    @property
    def serving_path_cells(self) -> Path:
        """The serving-path probes' cells: ``results/serving_path/``."""
        return self.cell_folder(SERVING_PATH_DIR)

    def cell(self, cell_id: str, folder: str = CELLS_DIR) -> Path:
        """The result file of ``cell_id``: ``results/<folder>/<cell_id>.json``."""
        return self.cell_folder(folder) / f"{cell_id}.json"

    @property
    def manifest(self) -> Path:
        """What the run was and where: ``results/manifest.json``."""
        return self.results / MANIFEST_FILE

    @property
    def infer_check(self) -> Path:
        """The correctness checks against onnxruntime: ``results/infer_check.json``."""
        return self.results / INFER_CHECK_FILE

    @property
    def operators(self) -> Path:
        """onnxruntime's per-operator timings (the roofline's data): ``results/operators.json``."""
        return self.results / OPERATORS_FILE

    @property
    def adaptive(self) -> Path:
        """The adaptive repeats' rounds: ``results/adaptive.json``."""
        return self.results / ADAPTIVE_FILE

    @property
    def stopping(self) -> Path:
        """Why the adaptive rounds stopped: ``results/stopping.json``."""
        return self.results / STOPPING_FILE

    @property
    def faults(self) -> Path:
        """What went wrong while measuring and how it was recovered: ``results/faults.json``."""
        return self.results / FAULTS_FILE

    @property
    def engine(self) -> Path:
        """The block engine's record (seed, order, interference): ``results/engine.json``."""
        return self.results / ENGINE_FILE

    @property
    def tune(self) -> Path:
        """A tune's steps and pick: ``results/tune.json``."""
        return self.results / TUNE_FILE

    @property
    def summary(self) -> Path:
        """The analyses the report wrote: ``results/summary.json``."""
        return self.results / SUMMARY_FILE

    @property
    def cost_model(self) -> Path:
        """The fitted serving cost model and its predictions: ``results/cost_model.json``."""
        return self.results / COST_MODEL_FILE

    @property
    def recommendations(self) -> Path:
        """A sweep's picks and Pareto frontier: ``results/recommendations.json``."""
        return self.results / RECOMMENDATIONS_FILE

    # what the measuring stages serve, run and write beside the results

    @property
    def models(self) -> Path:
        """The Triton model repository: ``models/``."""
        return self.root / MODELS_DIR

    def model_dir(self, served_name: str) -> Path:
        """One served model's folder in the repository: ``models/<served_name>/``."""
        return self.models / served_name

    @property
    def server(self) -> Path:
        """The server's folder: ``server/``."""
        return self.root / SERVER_DIR

    @property
    def server_log(self) -> Path:
        """tritonserver's log: ``server/tritonserver.log``."""
        return self.server / SERVER_LOG_FILE

    @property
    def server_note(self) -> Path:
        """A cluster run's note on where each node's server log stayed: ``server/README.txt``."""
        return self.server / SERVER_NOTE_FILE

    @property
    def benchmarks(self) -> Path:
        """perf_analyzer's raw output: ``benchmarks/``."""
        return self.root / BENCHMARKS_DIR

    def benchmark_dir(self, variant: str) -> Path:
        """One configuration's raw perf_analyzer output: ``benchmarks/<variant>/``."""
        return self.benchmarks / variant

    @property
    def inputs(self) -> Path:
        """perf_analyzer's ``--input-data`` files: ``inputs/``."""
        return self.root / INPUTS_DIR

    def perf_data(self, sequence_length: int | None = None) -> Path:
        """The ``--input-data`` file for a sequence length: ``inputs/perf_data[_s<N>].json``."""
        name = "perf_data.json" if sequence_length is None else f"perf_data_s{sequence_length}.json"
        return self.inputs / name

    @property
    def serving_path(self) -> Path:
        """What the serving-path probes serve: ``serving_path/``."""
        return self.root / SERVING_PATH_DIR

    @property
    def null_model(self) -> Path:
        """The probes' null model (inputs, no work): ``serving_path/null_model.onnx``."""
        return self.serving_path / NULL_MODEL_FILE

    def exported_model(self, model: str) -> Path:
        """A built-in model exported into the run folder: ``<model>.onnx``."""
        return self.root / f"{model}.onnx"

    # the reports

    @property
    def docs(self) -> Path:
        """The folder of written documents: ``docs/``."""
        return self.root / DOCS_DIR

    @property
    def experiment_log(self) -> Path:
        """The experiment log in markdown: ``docs/experiment_log.md``."""
        return self.docs / EXPERIMENT_LOG_FILE

    @property
    def plots(self) -> Path:
        """The folder of PNG plots: ``plots/``."""
        return self.root / PLOTS_DIR

    def plot(self, name: str) -> Path:
        """One plot: ``plots/<name>.png``."""
        return self.plots / f"{name}.png"

    @property
    def html_report(self) -> Path:
        """The self-contained HTML page: ``report.html``."""
        return self.root / REPORT_FILE

    @property
    def readme(self) -> Path:
        """The run folder's ``README.md``."""
        return self.root / README_FILE

    @property
    def scripts(self) -> Path:
        """Scripts that reproduce the measurements: ``scripts/``."""
        return self.root / SCRIPTS_DIR

    @property
    def start_server_script(self) -> Path:
        """Starts tritonserver on the repository: ``scripts/start_server.sh``."""
        return self.scripts / START_SERVER_SCRIPT

    @property
    def run_perf_script(self) -> Path:
        """The baseline perf_analyzer command: ``scripts/run_perf.sh``."""
        return self.scripts / RUN_PERF_SCRIPT

    @property
    def export_model_script(self) -> Path:
        """Re-creates the model file: ``scripts/export_model.py``."""
        return self.scripts / EXPORT_MODEL_SCRIPT

    @property
    def client(self) -> Path:
        """The client's folder: ``client/``."""
        return self.root / CLIENT_DIR

    @property
    def infer_client(self) -> Path:
        """A standalone client that sends one request: ``client/infer_client.py``."""
        return self.client / INFER_CLIENT_SCRIPT

    @property
    def pick(self) -> Path:
        """A tune's chosen configurations: ``pick/``."""
        return self.root / PICK_DIR

    def pick_config(self, model: str) -> Path:
        """The configuration a tune picked for ``model``: ``pick/<model>/config.pbtxt``."""
        return self.pick / model / PICK_CONFIG_FILE

    # what tritonlab keeps for itself

    @property
    def marker(self) -> Path:
        """The file that says tritonlab made the folder: ``.tritonlab``."""
        return self.root / MARKER

    @property
    def trash(self) -> Path:
        """Where ``--fresh`` sets earlier results aside: ``.trash/``."""
        return self.root / TRASH

    def relative(self, path: Path) -> str:
        """``path`` (one of this layout's) relative to the run folder, with ``/`` separators."""
        return path.relative_to(self.root).as_posix()


__all__ = [
    "ADAPTIVE_FILE",
    "BENCHMARKS_DIR",
    "CELLS_DIR",
    "CLIENT_DIR",
    "COST_MODEL_FILE",
    "DOCS_DIR",
    "ENGINE_FILE",
    "EXPERIMENT_LOG_FILE",
    "EXPORT_MODEL_SCRIPT",
    "FAULTS_FILE",
    "INFER_CHECK_FILE",
    "INFER_CLIENT_SCRIPT",
    "INPUTS_DIR",
    "MANIFEST_FILE",
    "MARKER",
    "MODELS_DIR",
    "NULL_MODEL_FILE",
    "OPERATORS_FILE",
    "PICK_CONFIG_FILE",
    "PICK_DIR",
    "PLOTS_DIR",
    "README_FILE",
    "RECOMMENDATIONS_FILE",
    "REPORT_FILE",
    "RESULTS_DIR",
    "RUN_FILES",
    "RUN_OUTPUTS",
    "RUN_PERF_SCRIPT",
    "RUN_SUBFOLDERS",
    "SCRIPTS_DIR",
    "SERVER_DIR",
    "SERVER_LOG_FILE",
    "SERVER_NOTE_FILE",
    "SERVING_PATH_DIR",
    "START_SERVER_SCRIPT",
    "STOPPING_FILE",
    "SUMMARY_FILE",
    "TRASH",
    "TUNE_FILE",
    "RunLayout",
    "cell_id",
]
