"""A run folder's typed face: where its files are, and everything the reports draw from.

``load_run`` reads the stored files once (manifest, cells, checks, operator timings, adaptive
rounds), and derives the analyses, the cost model with its predictions and the picks; every
renderer takes the resulting ``RunData`` and reads no file of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonlab.analysis.aggregate import VariantSummary, summarise
from tritonlab.analysis.cost_model import CostModel, Prediction, ServingPathPoint
from tritonlab.analysis.efficiency import (
    Efficiency,
    parse_ceilings,
    serving_efficiency,
    thread_speedup,
)
from tritonlab.analysis.explain import Analysis, analyse
from tritonlab.analysis.noise_floor import NoiseFloor, noise_floors
from tritonlab.analysis.operators import OperatorsRecord
from tritonlab.analysis.recommend import RECOMMENDATIONS_FILE, recommendations_from_manifest
from tritonlab.analysis.recommend_records import Recommendations
from tritonlab.analysis.tune_record import TuneRecord
from tritonlab.client.infer import InferCheck
from tritonlab.errors import TritonlabError
from tritonlab.experiments.blocks import EngineRecord, load_engine_record
from tritonlab.experiments.manifest import FaultRecord, Manifest
from tritonlab.experiments.recovery import load_faults
from tritonlab.experiments.rounds import AdaptiveRound, StoppingRecord
from tritonlab.experiments.store import (
    ADAPTIVE_FILE,
    CELLS_DIR,
    MANIFEST_FILE,
    OPERATORS_FILE,
    RESULTS_DIR,
    SERVING_PATH_DIR,
    STOPPING_FILE,
    CellResult,
    load_cells,
    load_manifest,
    load_record,
    load_records,
    read_result,
)
from tritonlab.paths import portable_command, portable_path, recorded_run_dir

COST_MODEL_FILE = "cost_model.json"
TUNE_FILE = "tune.json"  # written by pipeline/tune.py
INFER_CHECK_FILE = "infer_check.json"
SUMMARY_FILE = "summary.json"
PLOTS_DIR = "plots"


@dataclass(frozen=True)
class RunPaths:
    """Where a run folder keeps what it measured and what the report writes."""

    root: Path

    @property
    def results(self) -> Path:
        """The folder of measured results: ``results/``."""
        return self.root / RESULTS_DIR

    @property
    def cells(self) -> Path:
        """One JSON file per measured cell: ``results/cells/``."""
        return self.results / CELLS_DIR

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

    @property
    def docs(self) -> Path:
        """The folder of written documents: ``docs/``."""
        return self.root / "docs"

    @property
    def experiment_log(self) -> Path:
        """The experiment log in markdown: ``docs/experiment_log.md``."""
        return self.docs / "experiment_log.md"

    @property
    def plots(self) -> Path:
        """The folder of PNG plots: ``plots/``."""
        return self.root / PLOTS_DIR

    @property
    def html_report(self) -> Path:
        """The self-contained HTML page: ``report.html``."""
        return self.root / "report.html"

    @property
    def readme(self) -> Path:
        """The run folder's ``README.md``."""
        return self.root / "README.md"


@dataclass(frozen=True)
class RunData:
    """A run folder, loaded once: what was measured and what the analysis made of it."""

    paths: RunPaths
    manifest: Manifest  # commands shown portably
    cells: list[CellResult]  # commands shown portably
    infer_checks: list[InferCheck]
    operators: OperatorsRecord | None
    adaptive_rounds: list[AdaptiveRound]
    analyses: list[Analysis]
    cost_model: CostModel | None
    predictions: list[Prediction]
    recommendations: Recommendations | None
    efficiencies: list[Efficiency]
    faults: list[FaultRecord]
    tune: TuneRecord | None = None  # results/tune.json of a tune run
    engine: EngineRecord | None = None  # results/engine.json of a block-engine run
    stopping: StoppingRecord | None = None  # results/stopping.json: why extra rounds stopped
    noise_floors: list[NoiseFloor] = field(default_factory=list)  # the A/A controls

    @property
    def summaries(self) -> list[VariantSummary]:
        """Every configuration at every load, in analysis order (one VariantSummary each)."""
        return [r.summary for a in self.analyses for r in a.reports]


def _json_or(path: Path, default: Any) -> Any:
    return read_result(path, default)


def load_operators(run_dir: Path) -> OperatorsRecord | None:
    """``results/operators.json`` of ``run_dir`` as its record; None when not measured yet."""
    return load_record(RunPaths(run_dir).operators, OperatorsRecord)


def fit_cost_model(run_dir: Path, cores: int) -> CostModel | None:
    """The run's cost model: serving-path cells + in-process timings, both from disk."""
    return _cost_model(run_dir, cores, load_operators(run_dir))


def _cost_model(run_dir: Path, cores: int, operators: OperatorsRecord | None) -> CostModel | None:
    if operators is None:
        return None
    groups: dict[str, list[Any]] = {}
    for cell in load_cells(run_dir, SERVING_PATH_DIR):
        groups.setdefault(cell.variant.name, []).append(cell)
    points = [p for cells in groups.values() if (p := ServingPathPoint.from_cells(cells))]
    empty = operators.null_in_process_us_per_execution or {}
    timings = {
        b: max(0.0, t - empty.get(b, 0.0)) for b, t in operators.in_process_us_per_execution.items()
    }
    engines = {
        engine: {b: max(0.0, t - empty.get(b, 0.0)) for b, t in ts.items()}
        for engine, ts in (operators.engines_in_process_us_per_execution or {}).items()
    }
    return CostModel.fit(
        points,
        timings,
        cores,
        thread_speedup(parse_ceilings(operators)),
        engines,
        operators.engines_precision_used or {},
    )


def portable_records(
    run_dir: Path, manifest: Manifest, cells: list[CellResult]
) -> tuple[Manifest, list[CellResult]]:
    """The manifest and cells with their stored commands rewritten portably for display.

    Runs stored before commands were written portably hold absolute paths: of the run folder
    they were measured in (read from the server command), of the cache and the virtualenv.
    """
    server = manifest.server
    roots = tuple(d for d in (recorded_run_dir(server.command), run_dir) if d)
    if server.command:
        server = replace(server, command=tuple(portable_command(server.command, roots)))
    perf_analyzer = manifest.perf_analyzer
    if perf_analyzer.binary:
        perf_analyzer = replace(perf_analyzer, binary=portable_path(perf_analyzer.binary, roots))
    cells = [
        replace(c, perf=replace(c.perf, command=portable_command(c.perf.command, roots)))
        for c in cells
    ]
    return replace(manifest, server=server, perf_analyzer=perf_analyzer), cells


def load_run(run_dir: Path) -> RunData:
    """Read ``run_dir``'s stored files once and derive everything the reports show."""
    paths = RunPaths(run_dir)
    manifest, cells = portable_records(
        run_dir, Manifest.from_dict(load_manifest(run_dir)), load_cells(run_dir)
    )
    if not cells:
        raise TritonlabError(f"{run_dir} has no measured cells yet; run the experiment first")
    cores = manifest.machine.cpu_affinity_count or 1
    operators = load_operators(run_dir)
    model = _cost_model(run_dir, cores, operators)
    analyses = analyse(summarise(cells, manifest.variant_order), cores, model)
    summaries = [r.summary for a in analyses for r in a.reports]
    return RunData(
        paths=paths,
        manifest=manifest,
        cells=cells,
        infer_checks=load_records(paths.infer_check, InferCheck),
        operators=operators,
        adaptive_rounds=load_records(paths.adaptive, AdaptiveRound),
        analyses=analyses,
        cost_model=model,
        # the cost model prices model executions; a response from the cache runs none
        predictions=[model.predict(s) for s in summaries if not s.cache_hits] if model else [],
        recommendations=recommendations_from_manifest(manifest, summaries),
        efficiencies=serving_efficiency(summaries, parse_ceilings(operators)),
        faults=load_faults(run_dir),
        tune=load_record(paths.results / TUNE_FILE, TuneRecord),
        engine=load_engine_record(run_dir),
        stopping=load_record(paths.results / STOPPING_FILE, StoppingRecord),
        noise_floors=noise_floors(cells),
    )
