"""Run an experiment plan against a real server: one model loaded at a time, cells saved at once.

Repeats are interleaved (every variant once, then again), so slow drift of a shared machine hits
all variants alike. Each variant is loaded alone (explicit model control), measured under every
load point, and unloaded, so variants never compete for the CPU. A finished cell's JSON exists
on disk before the next cell starts; a re-run with the same plan skips finished cells.

Loads at a fraction of the measured peak (``LoadPoint.peak_fraction``) are measured in a second
pass, after every closed-loop cell: ``open_loop_rates`` is then called once to turn the stored
closed-loop cells into a request rate per (variant, load key). The plan, and so its fingerprint,
is the same for both passes, so an interrupted sweep resumes wherever it stopped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from tritonlab.client.infer import InferCheck, infer_and_check
from tritonlab.errors import PerfAnalyzerError, PlanError, ServerError
from tritonlab.experiments.blocks import ENGINE_BLOCKS, BlockSession
from tritonlab.experiments.interference import DISTURBED_RETRIES, Window, idle_stubs
from tritonlab.experiments.manifest import (
    AdaptiveEntry,
    MachineInfo,
    Manifest,
    ModelRecord,
    PerfAnalyzerRecord,
    ServerRecord,
    SweepEntry,
    ToolInfo,
    available_cores,
    package_versions,
    utc_now,
)
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint
from tritonlab.experiments.recovery import ATTEMPTS_PER_CELL, Recovery, load_faults
from tritonlab.experiments.serving_path import (
    PROBE_REPEATS,
    add_identity_model,
    add_null_model,
    probe_done,
    probe_load,
    probe_variants,
)
from tritonlab.experiments.store import (
    ADAPTIVE_FILE,
    CELLS_DIR,
    INPUTS_DIR,
    RESULTS_DIR,
    SERVING_PATH_DIR,
    STOPPING_FILE,
    CellResult,
    cell_path,
    cell_problem,
    load_manifest,
    quarantine,
    read_result,
    save_cell,
    save_manifest,
    write_result,
)
from tritonlab.models.inputs import ModelInputs, derive_inputs, with_dynamic_dim
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.paths import portable_command, portable_file, portable_path
from tritonlab.perf.locate import PerfAnalyzerInstall, locate_perf_analyzer
from tritonlab.perf.runner import run_perf
from tritonlab.repository.layout import RepositoryModel, build_repository
from tritonlab.server.endpoint import ServerEndpoint
from tritonlab.server.launch import ServerOptions, running_server
from tritonlab.server.process import TritonServer
from tritonlab.server.stats import StatsSnapshot, stats_delta, tree_cpu_seconds

ProgressCallback = Callable[[int, int, str], None]
# After the planned rounds: which (variant name, load key) cells need another round, and why.
UndecidedCells = Callable[[], tuple[list[tuple[str, str]], list[str]]]


@dataclass(frozen=True)
class AdaptiveRepeats:
    """Measure more interleaved rounds of the cells ``undecided`` names, up to ``max_repeats``."""

    max_repeats: int
    undecided: UndecidedCells
    # Seconds the extra rounds may take in all; a round starts only if it is expected to fit
    # (its cells times the median cell of this run). None: no limit but ``max_repeats``.
    budget_s: float | None = None
    # Whether ``undecided`` also counts intervals wider than their target (the block engine).
    precision: bool = False


# One interleaved round: every configuration's (load, repeat) cells, in measuring order.
Round = list[tuple[RepositoryModel, list[tuple[LoadPoint, int]]]]

# Called after the closed-loop pass: (variant name, load key) -> request rate (req/s).
OpenLoopRates = Callable[[], Mapping[tuple[str, str], float]]


@dataclass(frozen=True)
class RunOutcome:
    """What a run did: cells measured now, cells found from an earlier run, and why it stopped."""

    measured: list[str]
    skipped: list[str]
    stopped_early: str | None
    infer_checks: list[InferCheck]
    wall_s: float
    # Open-loop cells that could not be measured: no peak was measured to derive their rate.
    without_rate: list[str] = field(default_factory=list)
    # Unusable cell files found on resume, moved aside (``*.json.corrupt``) and re-measured.
    quarantined: list[str] = field(default_factory=list)
    # Cells given up on after repeated faults (results/faults.json says why), and restarts.
    failed: list[str] = field(default_factory=list)
    server_restarts: int = 0


def cell_id(variant_name: str, load: LoadPoint, repeat: int) -> str:
    return f"{variant_name}__{load.key}__r{repeat + 1}"


def plan_fingerprint(
    plan: ExperimentPlan, model_sha256: str, inputs: ModelInputs | None = None
) -> str:
    record: dict[str, object] = {"plan": plan.to_dict(with_notes=False), "model": model_sha256}
    if inputs is not None:
        record["inputs"] = inputs.fingerprint_dict()
    text = json.dumps(record, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class LoadInputs:
    """What perf_analyzer sends under one load: shapes for dynamic dims and its data file."""

    shapes: dict[str, tuple[int, ...]]
    data_file: str | None


class InputFiles:
    """perf_analyzer's JSON data files under ``run_dir/inputs``, one per sequence length."""

    def __init__(self, inputs: ModelInputs, info: OnnxModelInfo, run_dir: Path) -> None:
        self.inputs, self.info, self.run_dir = inputs, info, run_dir
        self._made: dict[int | None, LoadInputs] = {}

    def for_load(self, load: LoadPoint) -> LoadInputs:
        length = load.sequence_length
        if length not in self._made:
            inputs = (
                self.inputs if length is None else with_dynamic_dim(self.inputs, self.info, length)
            )
            name = "perf_data.json" if length is None else f"perf_data_s{length}.json"
            path = inputs.write_perf_data(self.run_dir / INPUTS_DIR / name)
            dynamic = {s.name for s in self.info.inputs if -1 in s.dims}
            shapes = {k: v for k, v in inputs.shapes.items() if k in dynamic}
            self._made[length] = LoadInputs(shapes, str(path))
        return self._made[length]


def model_record(plan: ExperimentPlan, info: OnnxModelInfo) -> ModelRecord:
    """The manifest's record of the model file a run measures."""
    return ModelRecord(
        name=plan.model_name,
        onnx_file=info.path.name,
        sha256=file_sha256(info.path),
        size_bytes=info.file_size_bytes,
        opset=info.opset,
        inputs=tuple(info.inputs),
        outputs=tuple(info.outputs),
    )


def new_manifest(
    plan: ExperimentPlan,
    info: OnnxModelInfo,
    fingerprint: str,
    inputs: ModelInputs,
    perf_install: PerfAnalyzerInstall,
    run_dir: Path,
    machine: MachineInfo,
    server: ServerRecord,
) -> Manifest:
    """A run's manifest as it starts: this tritonlab, the model, plan, inputs, the machine that
    measures, the server, perf_analyzer and the faults an earlier attempt recorded."""
    return Manifest(
        tool=ToolInfo.current(),
        packages=package_versions(),
        machine=machine,
        created_utc=utc_now(),
        plan=plan,
        plan_fingerprint=fingerprint,
        model=model_record(plan, info),
        server=server,
        perf_analyzer=PerfAnalyzerRecord(
            binary=portable_path(perf_install.binary, run_dir), version=perf_install.version
        ),
        inputs=inputs,
        faults=tuple(f.to_dict() for f in load_faults(run_dir)),
    )


def perf_deadline_s(plan: ExperimentPlan) -> float:
    """How long one perf_analyzer attempt may run before it is taken as hung and killed:
    every window it may open, at twice the length (a retry's), twice over, plus 30 s."""
    m = plan.measurement
    return 30.0 + 2 * m.max_trials * 2 * m.measurement_interval_ms / 1000


def check_resume(run_dir: Path, fingerprint: str) -> None:
    manifest_path = run_dir / RESULTS_DIR / "manifest.json"
    if not manifest_path.exists():
        return
    previous = load_manifest(run_dir).get("plan_fingerprint")
    if previous and previous != fingerprint:
        raise PlanError(
            f"{run_dir} holds results of a different plan or model; pass another --out, "
            "or --fresh to discard them"
        )


def _measure_cell(
    server: ServerEndpoint,
    perf_install: PerfAnalyzerInstall,
    plan: ExperimentPlan,
    model: RepositoryModel,
    load: LoadPoint,
    repeat: int,
    run_dir: Path,
    load_inputs: LoadInputs,
    folder: str = CELLS_DIR,
    monitor_tries: int = 0,
) -> CellResult:
    """Measure and save one cell; with ``monitor_tries`` (the block engine), the interference
    monitor's reading is stored with it (``monitor_tries``: this cell's attempt number)."""
    cid = cell_id(model.variant.name, load, repeat)
    settings = plan.perf_settings(
        load,
        model.model_name,
        server.url(load.protocol),
        load_inputs.shapes,
        load_inputs.data_file,
    )
    processes = server.process_tree() if isinstance(server, TritonServer) else []
    log_offset = _log_size(server)
    before = StatsSnapshot.from_triton(server.model_statistics(model.model_name))
    idle = idle_stubs(processes, model.model_name) if monitor_tries else []
    idle_before = tree_cpu_seconds(idle)
    cpu_before = tree_cpu_seconds(processes)
    started = utc_now()
    window = Window() if monitor_tries else None
    try:
        perf = run_perf(
            perf_install,
            settings,
            run_dir / "benchmarks" / model.variant.name,
            f"{load.key}__r{repeat + 1}",
            retries=plan.measurement.retries_when_unstable,
            timeout_s=perf_deadline_s(plan),
        )
    except PerfAnalyzerError as exc:
        if isinstance(server, TritonServer) and not server.is_alive():
            raise ServerError(
                f"tritonserver died while measuring {cid}; finished cells are kept; "
                f"log: {server.failure_detail()}"
            ) from exc
        raise
    cpu_after = tree_cpu_seconds(processes)
    interference = None
    if window is not None:
        interference = replace(
            window.close(
                cpu_after - cpu_before + perf.perf_analyzer_cpu_s,
                tree_cpu_seconds(idle) - idle_before,
            ),
            attempts=monitor_tries,
        )
    after = StatsSnapshot.from_triton(server.model_statistics(model.model_name))
    # The exact command, written portably (run folder relative, cache and venv as variables).
    settings = perf.settings
    if settings.input_data is not None:
        settings = replace(settings, input_data=portable_path(settings.input_data, run_dir))
    perf = replace(
        perf, command=portable_command(perf.command, run_dir, cwd=Path.cwd()), settings=settings
    )
    cell = CellResult(
        cell_id=cid,
        variant=model.variant,
        model_name=model.model_name,
        repeat=repeat + 1,
        perf=perf,
        server=stats_delta(before, after),
        server_cpu_s=cpu_after - cpu_before if processes else 0.0,
        config_pbtxt=model.config_path.read_text(),
        started_utc=started,
        load_key=load.key,
        backend_fallbacks=_fallbacks_since(server, log_offset),
        interference=interference,
    )
    save_cell(run_dir, cell, folder)
    return cell


class CellSession:
    """A started server and what measuring on it needs: load a configuration, measure its
    cells (each saved at once, faults recovered), unload it. The caller decides which cells;
    the session does not know whether a project, a sweep or a tune asked for them."""

    def __init__(
        self,
        server: ServerEndpoint,
        perf_install: PerfAnalyzerInstall,
        plan: ExperimentPlan,
        run_dir: Path,
        input_files: InputFiles,
        recovery: Recovery,
        progress: ProgressCallback | None,
        deadline: float | None,
        manifest: Manifest,
    ) -> None:
        self.server, self.perf_install, self.plan = server, perf_install, plan
        self.run_dir, self.input_files, self.recovery = run_dir, input_files, recovery
        self.progress, self.deadline, self.manifest = progress, deadline, manifest
        self.measured: list[str] = []
        self.checks: list[InferCheck] = []
        self.done = 0
        self.total = 0
        # Wall seconds of every cell measured in this session (retries included): what the
        # stopping rule's budget check estimates a cell's cost from.
        self.cell_seconds: list[float] = []
        self.engine: BlockSession | None = None

    def over_budget(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def load(self, model: RepositoryModel) -> None:
        """Load a configuration (a server that dies while loading is restarted once)."""
        _load_recovering(self.server, self.recovery, model.model_name)

    def unload(self, model: RepositoryModel, quietly: bool = False) -> None:
        """Unload it; a failed unload stops the run unless another error is on its way up."""
        if quietly:
            _unload_quietly(self.server, model.model_name)
        else:
            self.server.unload_model(model.model_name)

    def measure(
        self, model: RepositoryModel, load: LoadPoint, repeat: int, note: str = ""
    ) -> CellResult | None:
        """Measure one cell of the loaded ``model`` and save it; None when it was given up on
        after repeated faults (``results/faults.json`` says why). Under the block engine a cell
        the interference monitor flags is measured again, at most ``DISTURBED_RETRIES`` times."""
        cid = cell_id(model.variant.name, load, repeat)
        if self.progress:
            self.progress(self.done, self.total, cid + note)
        started = time.monotonic()
        tries = 1 + (DISTURBED_RETRIES if self.engine is not None else 0)
        try:
            cell = None
            for attempt in range(1, tries + 1):
                cell = self._measure_recovering(model, load, repeat, attempt)
                if cell is None or cell.interference is None or not cell.interference.disturbed:
                    break
            if cell is not None:
                self.measured.append(cid)
            return cell
        finally:
            self.done += 1
            self.cell_seconds.append(time.monotonic() - started)

    def _measure_recovering(
        self, model: RepositoryModel, load: LoadPoint, repeat: int, tries: int
    ) -> CellResult | None:
        server, recovery = self.server, self.recovery
        cid = cell_id(model.variant.name, load, repeat)
        plan = self.engine.plan_for(load, self.plan) if self.engine is not None else self.plan
        for attempt in range(1, ATTEMPTS_PER_CELL + 1):
            try:
                return _measure_cell(
                    server,
                    self.perf_install,
                    plan,
                    model,
                    load,
                    repeat,
                    self.run_dir,
                    self.input_files.for_load(load),
                    monitor_tries=tries if self.engine is not None else 0,
                )
            except (ServerError, PerfAnalyzerError) as exc:
                last = attempt == ATTEMPTS_PER_CELL
                if not recovery.recoverable(exc, last):
                    raise
                restarted = recovery.handle(cid, exc, last_attempt=last)
                if restarted and self.engine is not None and self.engine.co_loaded:
                    for other in self.engine.models:  # a new server has nothing loaded
                        _load_recovering(server, recovery, other.model_name)
                    continue
                if not restarted:  # reload: a stub that died starts afresh
                    _unload_quietly(server, model.model_name)
                _load_recovering(server, recovery, model.model_name)
        return None

    def measure_model(
        self,
        model: RepositoryModel,
        cells: list[tuple[LoadPoint, int]],
        ids: list[str],
        note: str = "",
    ) -> bool:
        """Load ``model``, measure its (load, repeat) cells into ``ids``, unload it; False when
        the time budget ran out first (the cells measured until then are kept)."""
        if self.over_budget():
            return False
        self.load(model)
        finished = False
        try:
            for load, repeat in cells:
                if self.over_budget():
                    finished = True
                    return False
                if self.measure(model, load, repeat, note) is not None:
                    ids.append(cell_id(model.variant.name, load, repeat))
            finished = True
        finally:
            self.unload(model, quietly=not finished)  # the first error is the one shown
        return True

    def measure_rounds(self, rounds: Sequence[Round], ids: list[str], note: str = "") -> bool:
        """Measure ``rounds`` in order, each configuration's cells in one load; False when the
        time budget ran out first. (A cluster session spreads whole rounds over its nodes; the
        block engine measures each round's cells in a shuffled order, co-loaded.)"""
        if self.engine is not None:
            return self.engine.measure_rounds(self, rounds, ids, note)
        for round_ in rounds:
            for model, cells in round_:
                if not self.measure_model(model, cells, ids, note):
                    return False
        return True

    def measure_serving_path(self, info: OnnxModelInfo) -> None:
        """The null-model cells behind the cost model (only on a server this run started)."""
        if isinstance(self.server, TritonServer):
            _measure_serving_path(
                self.server, self.perf_install, self.plan, info, self.run_dir, self.input_files
            )

    def profile_operators(self) -> None:
        """Nothing here: a local run profiles after its server stopped (``run_project``)."""

    def save_manifest(self, **changes: Any) -> None:
        """Rewrite the manifest with ``changes`` (e.g. a plan that grew during a tune)."""
        self.manifest = replace(self.manifest, **changes)
        save_manifest(self.run_dir, self.manifest.to_dict())


class MeasuringSession(Protocol):
    """What ``run_experiment`` measures through: a local ``CellSession`` or a cluster's."""

    measured: list[str]
    checks: list[InferCheck]
    done: int
    total: int

    @property
    def recovery(self) -> Recovered: ...

    def over_budget(self) -> bool: ...

    def measure_rounds(self, rounds: Sequence[Round], ids: list[str], note: str = "") -> bool: ...

    def measure_serving_path(self, info: OnnxModelInfo) -> None: ...

    def profile_operators(self) -> None: ...


class Recovered(Protocol):
    """The faults side of a session, as the outcome reports it."""

    failed_cells: list[str]

    @property
    def restarts(self) -> int: ...


@contextlib.contextmanager
def open_session(
    options: ServerOptions,
    run_dir: Path,
    info: OnnxModelInfo,
    inputs: ModelInputs,
    plan: ExperimentPlan,
    fingerprint: str,
    perf_install: PerfAnalyzerInstall,
    check_model: RepositoryModel,
    progress: ProgressCallback | None = None,
    deadline: float | None = None,
    manifest_extra: Mapping[str, object] | None = None,
    engine_models: Sequence[RepositoryModel] = (),
) -> Iterator[CellSession]:
    """Start the server on ``run_dir/models``, write the manifest, check ``check_model``'s
    answers on both protocols (``infer_check.json``), and yield a session to measure with.

    ``engine_models``: the plan's models; the first of every other backend and precision is
    checked too (over gRPC), so each engine's accuracy against onnxruntime is on record.

    ``manifest_extra`` sets further manifest fields (``sweep``, ``adaptive``, ``tune``).
    """
    log_path = run_dir / "server" / "tritonserver.log"
    with running_server(
        options, run_dir / "models", log_path, explicit_model_control=True
    ) as server:
        manifest = new_manifest(
            plan,
            info,
            fingerprint,
            inputs,
            perf_install,
            run_dir,
            MachineInfo.current(),
            ServerRecord(
                source=options.describe,
                version=server.server_version(),
                command=(
                    tuple(portable_command(server.command(redact=True), run_dir))
                    if isinstance(server, TritonServer)
                    else None
                ),
                http_url=server.http_url,
                grpc_url=server.grpc_url,
            ),
        )
        recovery = Recovery(
            server,
            run_dir,
            options.ready_timeout_s,
            on_fault=lambda faults: session.save_manifest(
                faults=tuple(f.to_dict() for f in faults)
            ),
        )
        session = CellSession(
            server,
            perf_install,
            plan,
            run_dir,
            InputFiles(inputs, info, run_dir),
            recovery,
            progress,
            deadline,
            manifest,
        )
        session.save_manifest(**dict(manifest_extra or {}))
        to_check: list[tuple[RepositoryModel, tuple[str, ...]]] = [(check_model, ("http", "grpc"))]
        engines = {check_model.variant.engine}
        for other in engine_models:
            if other.variant.engine not in engines:
                engines.add(other.variant.engine)
                to_check.append((other, ("grpc",)))
        for model, protocols in to_check:
            server.load_model(model.model_name)
            try:
                session.checks += [
                    infer_and_check(
                        server,
                        model.model_name,
                        info,
                        protocol,
                        inputs=inputs,
                        engine=model.variant.engine,
                        precision=model.variant.precision,
                    )
                    for protocol in protocols
                ]
            finally:
                server.unload_model(model.model_name)
        write_result(
            run_dir / RESULTS_DIR / "infer_check.json", [c.to_dict() for c in session.checks]
        )
        yield session
    portable_file(log_path, run_dir)  # the server log names the repository and the cache


def run_experiment(
    plan: ExperimentPlan,
    info: OnnxModelInfo,
    run_dir: Path,
    options: ServerOptions,
    progress: ProgressCallback | None = None,
    time_budget_s: float | None = None,
    perf_analyzer: Path | None = None,
    sweep: SweepEntry | None = None,
    open_loop_rates: OpenLoopRates | None = None,
    adaptive: AdaptiveRepeats | None = None,
    inputs: ModelInputs | None = None,
    cluster: str | None = None,
) -> RunOutcome:
    """Measure every cell of ``plan`` not yet on disk; results go under ``run_dir``.

    ``inputs`` says what every request carries (default: derived from the graph).
    ``cluster``: a Ray address ("auto" too): whole rounds are then measured on the cluster's
    nodes, each cell written here as it arrives (``distributed/ray_session.py``).

    Closed-loop and fixed-rate loads are measured first; loads at a fraction of the peak then
    get their rates from ``open_loop_rates`` (required when the plan has such loads).
    """
    started = time.monotonic()
    plan.validate(info.batched)
    derived_loads = [ld for ld in plan.loads if ld.peak_fraction is not None]
    direct_loads = [ld for ld in plan.loads if ld.peak_fraction is None]
    if derived_loads and open_loop_rates is None:
        raise PlanError(
            "loads at a fraction of the measured peak need the peak first: run them with "
            "`tritonlab sweep`"
        )
    inputs = inputs or derive_inputs(info)
    fingerprint = plan_fingerprint(plan, file_sha256(info.path), inputs)
    check_resume(run_dir, fingerprint)
    perf_install = locate_perf_analyzer(perf_analyzer)
    models = build_repository(run_dir / "models", info, plan.model_name, list(plan.variants))
    quarantined = quarantine_unusable(run_dir)
    todo = [
        (repeat, model, load)
        for repeat in range(plan.repeats)
        for model in models
        for load in plan.loads
    ]
    total = len(todo)
    skipped = [
        cell_id(m.variant.name, ld, r)
        for r, m, ld in todo
        if cell_path(run_dir, cell_id(m.variant.name, ld, r)).exists()
    ]
    finished = set(skipped)
    stopped: str | None = None
    deadline = None if time_budget_s is None else started + time_budget_s
    manifest_extra: dict[str, object] = {
        "sweep": sweep,
        "adaptive": AdaptiveEntry(adaptive.max_repeats, adaptive.budget_s) if adaptive else None,
    }
    opened: contextlib.AbstractContextManager[MeasuringSession]
    if cluster:
        from tritonlab.distributed.ray_session import open_ray_session

        opened = open_ray_session(
            cluster, options, run_dir, info, inputs, plan, fingerprint, perf_install,
            progress, deadline, manifest_extra,
        )  # fmt: skip
    else:
        opened = open_session(
            options, run_dir, info, inputs, plan, fingerprint, perf_install, models[0],
            progress, deadline, manifest_extra, engine_models=models,
        )  # fmt: skip
    with opened as session:
        session.done, session.total = len(skipped), total
        if plan.measurement.engine == ENGINE_BLOCKS and isinstance(session, CellSession):
            session.engine = BlockSession.start(
                session, models, direct_loads, info.file_size_bytes, fingerprint, available_cores()
            )
        measured = session.measured
        without_rate: list[str] = []

        def over_budget() -> bool:
            return session.over_budget()

        def measure_pass(loads_of: Callable[[RepositoryModel], list[LoadPoint]]) -> str | None:
            rounds: list[Round] = []
            for repeat in range(plan.repeats):
                round_: Round = []
                for model in models:
                    cells = [
                        (ld, repeat)
                        for ld in loads_of(model)
                        if cell_id(model.variant.name, ld, repeat) not in finished
                    ]
                    if cells:
                        round_.append((model, cells))
                if round_:
                    rounds.append(round_)
            if not session.measure_rounds(rounds, []):
                return f"time budget of {time_budget_s:.0f} s reached"
            return None

        stopped = measure_pass(lambda model: direct_loads)
        if stopped is None and derived_loads and open_loop_rates is not None:
            rates = open_loop_rates()

            def rated_loads(model: RepositoryModel) -> list[LoadPoint]:
                name = model.variant.name
                return [
                    replace(ld, request_rate_per_s=rates[(name, ld.key)])
                    for ld in derived_loads
                    if (name, ld.key) in rates
                ]

            without_rate = [
                cell_id(m.variant.name, ld, r)
                for r, m, ld in todo
                if ld.peak_fraction is not None
                and (m.variant.name, ld.key) not in rates
                and cell_id(m.variant.name, ld, r) not in finished
            ]
            stopped = measure_pass(rated_loads)
        if stopped is None:
            session.measure_serving_path(info)
        if stopped is None and adaptive is not None:
            loads_by_key = {ld.key: ld for ld in direct_loads}
            rates = open_loop_rates() if derived_loads and open_loop_rates is not None else {}

            def extra_round() -> str | None:
                """One more round of the undecided cells; the reason to stop instead."""
                targets, reasons = adaptive.undecided()
                if not targets:
                    return "every verdict the rule watches was decided" + (
                        " and within its target width" if adaptive.precision else ""
                    )
                todo_now: list[tuple[RepositoryModel, LoadPoint, int]] = []
                for model in models:
                    for key in sorted({k for name, k in targets if name == model.variant.name}):
                        load = loads_by_key.get(key)
                        derived = next((ld for ld in derived_loads if ld.key == key), None)
                        if (
                            load is None
                            and derived is not None
                            and (model.variant.name, key) in rates
                        ):
                            load = replace(
                                derived, request_rate_per_s=rates[(model.variant.name, key)]
                            )
                        if load is None:
                            continue
                        repeat = _next_repeat(run_dir, model.variant.name, load)
                        if repeat < adaptive.max_repeats:
                            todo_now.append((model, load, repeat))
                if not todo_now:
                    return (
                        f"the limit of {adaptive.max_repeats} rounds was reached with "
                        f"{len(reasons)} verdict(s) still open"
                    )
                if adaptive.budget_s is not None:
                    spent = time.monotonic() - adaptive_started
                    cost = cell_cost_s(session)
                    if spent + len(todo_now) * cost > adaptive.budget_s:
                        return (
                            f"the next round ({len(todo_now)} cells x {cost:.1f} s, the median "
                            f"cell) would pass the {adaptive.budget_s:.0f} s budget "
                            f"({spent:.0f} s spent), with {len(reasons)} verdict(s) still open"
                        )
                session.total += len(todo_now)  # progress counts the added cells
                round_cells: list[str] = []
                round_: Round = []
                for model in models:
                    mine = [(ld, r) for m, ld, r in todo_now if m is model]
                    if mine:
                        round_.append((model, mine))
                complete = session.measure_rounds([round_], round_cells, " (adaptive)")
                if round_cells:
                    _append_adaptive(
                        run_dir,
                        {
                            "round": max(r for _, _, r in todo_now) + 1,
                            "reasons": reasons,
                            "cells": round_cells,
                        },
                    )
                return None if complete else "the run's time budget was reached"

            adaptive_started = time.monotonic()
            stop_reason = "the run's time budget was reached"
            while not over_budget():
                reason = extra_round()
                if reason is not None:
                    stop_reason = reason
                    break
            write_result(
                run_dir / RESULTS_DIR / STOPPING_FILE,
                {
                    "reason": stop_reason,
                    "max_rounds": adaptive.max_repeats,
                    "budget_s": adaptive.budget_s,
                    "extra_s": round(time.monotonic() - adaptive_started, 1),
                    "cell_cost_s": round(cell_cost_s(session), 3),
                    "cells_wall_s": round(sum(getattr(session, "cell_seconds", [])), 1),
                    "precision": adaptive.precision,
                },
            )
            if over_budget():
                stopped = f"time budget of {time_budget_s:.0f} s reached"
        if stopped is None:
            session.profile_operators()
        if progress:
            progress(session.done, session.total, "done")
    return RunOutcome(
        measured,
        skipped,
        stopped,
        session.checks,
        time.monotonic() - started,
        without_rate,
        quarantined,
        session.recovery.failed_cells,
        session.recovery.restarts,
    )


def cell_cost_s(session: MeasuringSession) -> float:
    """What one more cell is expected to take: the median wall time of the cells this session
    measured (retries included), not the run's elapsed time over its cells (which counted the
    server's start, the export and the in-process timings as measuring). 0 before any cell."""
    seconds = getattr(session, "cell_seconds", [])
    return statistics.median(seconds) if seconds else 0.0


FALLBACK_MARKER = "tritonlab-adapter-fallback"  # backends/adapter.py prints it


def _log_size(server: ServerEndpoint) -> int:
    if isinstance(server, TritonServer) and server.log_path.exists():
        return server.log_path.stat().st_size
    return 0


def _fallbacks_since(server: ServerEndpoint, offset: int) -> int:
    """Backend fallback lines the server log gained since ``offset`` (0 for a remote server)."""
    if not isinstance(server, TritonServer) or not server.log_path.exists():
        return 0
    with open(server.log_path, "rb") as log:
        log.seek(offset)
        return log.read().count(FALLBACK_MARKER.encode())


def quarantine_unusable(run_dir: Path) -> list[str]:
    """Move truncated or corrupt cell files aside so a resume measures their cells again."""
    moved = []
    for folder in (CELLS_DIR, SERVING_PATH_DIR):
        for path in sorted((run_dir / RESULTS_DIR / folder).glob("*.json")):
            problem = cell_problem(path)
            if problem is not None:
                target = quarantine(path)
                moved.append(f"{problem.split(';')[0]}; kept as {target.name}, re-measuring it")
    return moved


def _load_recovering(server: ServerEndpoint, recovery: Recovery, model_name: str) -> None:
    """Load a configuration; a server that dies while loading is restarted once and retried."""
    try:
        server.load_model(model_name)
    except ServerError as exc:
        if not recovery.server_died():
            raise
        recovery.handle(f"loading {model_name}", exc, last_attempt=False)
        server.load_model(model_name)


def _unload_quietly(server: ServerEndpoint, model_name: str) -> None:
    """Unload while another error is already on its way up (that error is the one to show)."""
    with contextlib.suppress(Exception):
        server.unload_model(model_name)


def _next_repeat(run_dir: Path, variant_name: str, load: LoadPoint) -> int:
    """The first repeat (0-based) of (variant, load) not yet stored."""
    repeat = 0
    while cell_path(run_dir, cell_id(variant_name, load, repeat)).exists():
        repeat += 1
    return repeat


def _append_adaptive(run_dir: Path, record: dict[str, object]) -> None:
    path = run_dir / RESULTS_DIR / ADAPTIVE_FILE
    rounds = read_result(path, [])
    rounds.append(record)
    write_result(path, rounds)


def _measure_serving_path(
    server: TritonServer,
    perf_install: PerfAnalyzerInstall,
    plan: ExperimentPlan,
    info: OnnxModelInfo,
    run_dir: Path,
    input_files: InputFiles,
) -> None:
    """The null-model cells the cost model needs (``PROBE_REPEATS`` of each probe).

    Kept across resumes. A server that cannot load the probe (an external binary without
    tritonlab's backends) leaves the run without them; the log then says the cost model is
    unavailable.
    """
    load = probe_load(list(plan.loads))
    if load is None or not info.batched:
        return
    variants = probe_variants(load, min(v.max_batch_size for v in plan.variants))
    repo = run_dir / "models"
    models = [
        add_null_model(repo, info, plan.model_name, v)
        or add_identity_model(repo, info, plan.model_name, v)
        for v in variants
    ]
    for repeat in range(PROBE_REPEATS):
        for model in models:
            if probe_done(run_dir, model.variant, load, repeat):
                continue
            try:
                server.load_model(model.model_name)
            except ServerError:
                return
            try:
                _measure_cell(
                    server,
                    perf_install,
                    plan,
                    model,
                    load,
                    repeat,
                    run_dir,
                    input_files.for_load(load),
                    SERVING_PATH_DIR,
                )
            except BaseException:
                _unload_quietly(server, model.model_name)
                raise
            server.unload_model(model.model_name)
