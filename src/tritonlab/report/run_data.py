"""A run folder's typed face: where its files are, and everything the reports draw from.

``load_run`` reads the stored files once (manifest, cells, checks, operator timings, adaptive
rounds), and derives the analyses, the cost model with its predictions and the picks; every
renderer takes the resulting ``RunData`` and reads no file of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonlab.client.infer import InferCheck
from tritonlab.decisions.efficiency import (
    Efficiency,
    parse_ceilings,
    parse_timings,
    serving_efficiency,
    thread_speedup,
)
from tritonlab.decisions.recommend import recommendations_from_manifest
from tritonlab.decisions.recommend_records import Recommendations
from tritonlab.decisions.tune_record import TuneRecord
from tritonlab.errors import TritonlabError
from tritonlab.experiments.blocks import EngineRecord, load_engine_record
from tritonlab.experiments.manifest import FaultRecord, Manifest
from tritonlab.experiments.recovery import load_faults
from tritonlab.experiments.rounds import AdaptiveRound, StoppingRecord
from tritonlab.experiments.store import CellResult, load_cells, load_manifest
from tritonlab.explanation.cost_model import CostModel, ServingPathPoint
from tritonlab.explanation.cost_prediction import Prediction
from tritonlab.explanation.explain import Analysis, analyse
from tritonlab.paths import portable_command, portable_path, recorded_run_dir
from tritonlab.perf.operator_profile import OperatorsRecord
from tritonlab.result_files import load_record, load_records
from tritonlab.run_layout import SERVING_PATH_DIR, RunLayout
from tritonlab.stats.aggregate import VariantSummary, summarise
from tritonlab.stats.noise_floor import NoiseFloor, noise_floors
from tritonlab.stats.run_trust import RunTrust, run_trust


@dataclass(frozen=True)
class RunData:
    """A run folder, loaded once: what was measured and what the analysis made of it."""

    paths: RunLayout
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
    # the run's trust, computed once from its cells and controls; every quote of it carries it
    trust: RunTrust = field(default_factory=lambda: run_trust([], []))
    # load keys whose rows sent other input shapes than the cost model was fitted at
    unfitted_loads: list[str] = field(default_factory=list)

    @property
    def summaries(self) -> list[VariantSummary]:
        """Every configuration at every load, in analysis order (one VariantSummary each)."""
        return [r.summary for a in self.analyses for r in a.reports]


def server_core_count(manifest: Manifest) -> int | None:
    """The server's own cores under the CPU split; None where it shared the machine's."""
    split = manifest.cpu_split
    return None if split is None else split.server_core_count


def split_cores(manifest: Manifest) -> tuple[int, int] | None:
    """(the server's own cores, the machine's) under the CPU split; None where it shared."""
    own = server_core_count(manifest)
    return None if own is None else (own, manifest.machine.cpu_affinity_count or own)


def changed_step(manifest: Manifest) -> str | None:
    """The step of a user's pipeline its configurations change (``repository["tuned"]``), or
    None where they change the measured model itself."""
    repository = manifest.model.repository or {}
    step = repository.get("tuned")
    return str(step) if step and step != repository.get("model") else None


def _cost_model(
    run_dir: Path, cores: int, operators: OperatorsRecord | None, manifest: Manifest
) -> CostModel | None:
    """The run's cost model: serving-path cells + in-process timings."""
    if operators is None:
        return None
    groups: dict[str, list[Any]] = {}
    for cell in load_cells(run_dir, SERVING_PATH_DIR):
        groups.setdefault(cell.variant.name, []).append(cell)
    points = [p for cells in groups.values() if (p := ServingPathPoint.from_cells(cells))]
    empty = operators.null_in_process_us_per_execution or {}

    def net(timings: dict[int, float]) -> dict[int, float]:
        return {b: max(0.0, t - empty.get(b, 0.0)) for b, t in timings.items()}

    own = server_core_count(manifest)
    apart = own is not None
    model = CostModel.fit(
        points,
        net(operators.in_process_us_per_execution),
        own or cores,
        thread_speedup(parse_ceilings(operators)),
        {e: net(ts) for e, ts in (operators.engines_in_process_us_per_execution or {}).items()},
        operators.engines_precision_used or {},
    )
    if model is None:
        return None
    model = replace(model, client_apart=apart)
    # the in-process timings were taken at the manifest's inputs (sized for the reference
    # load); runs that did not record them have no shapes
    inputs = manifest.inputs
    return replace(model, input_shapes=tuple(sorted(inputs.shapes.items())) if inputs else None)


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
    paths = RunLayout(run_dir)
    manifest, cells = portable_records(run_dir, load_manifest(run_dir), load_cells(run_dir))
    if not cells:
        raise TritonlabError(f"{run_dir} has no measured cells yet; run the experiment first")
    cores = manifest.machine.cpu_affinity_count or 1
    operators = load_record(paths.operators, OperatorsRecord)  # None when not measured yet
    model = _cost_model(run_dir, cores, operators, manifest)
    floors = noise_floors(cells)
    analyses = analyse(
        summarise(cells, manifest.variant_order),
        cores,
        model,
        server_core_count(manifest),
        changed_step(manifest),
        floors,
    )
    summaries = [r.summary for a in analyses for r in a.reports]
    # the cost model prices model executions at the shapes it was timed at; a response from
    # the cache runs none, and a row at another sequence length is other work
    priced = [s for s in summaries if not s.cache_hits]
    trust = run_trust(cells, floors)
    return RunData(
        paths=paths,
        manifest=manifest,
        cells=cells,
        infer_checks=load_records(paths.infer_check, InferCheck),
        operators=operators,
        adaptive_rounds=load_records(paths.adaptive, AdaptiveRound),
        analyses=analyses,
        cost_model=model,
        predictions=[model.predict(s) for s in priced if model.fits(s)] if model else [],
        unfitted_loads=(
            list(dict.fromkeys(s.load_key for s in priced if not model.fits(s))) if model else []
        ),
        recommendations=(
            replace(
                recs,
                trust=trust,
                cores=(
                    manifest.machine.cpu_affinity_count or manifest.machine.cpu_count_logical or 1,
                    server_core_count(manifest),
                ),
            )
            if (recs := recommendations_from_manifest(manifest, summaries)) is not None
            else None
        ),
        efficiencies=serving_efficiency(
            summaries, parse_ceilings(operators), parse_timings(operators)
        ),
        faults=load_faults(run_dir),
        tune=load_record(paths.tune, TuneRecord),
        engine=load_engine_record(run_dir),
        stopping=load_record(paths.stopping, StoppingRecord),
        noise_floors=floors,
        trust=trust,
    )
