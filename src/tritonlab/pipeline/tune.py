"""``tritonlab tune``: an adaptive search for the best configuration, on the real server.

The policy (``decisions/search.py``) picks each next cell from the cells measured so far; this
module measures it through the same cell session as ``run`` and ``sweep`` (one configuration
loaded at a time, every cell saved the moment it exists), writes the search's path to
``results/tune.json`` after every step, and at the end the pick's ``config.pbtxt`` and the usual
reports. The policy is deterministic, so a re-run replays the stored cells and goes on where
the last run stopped (Ctrl-C, a time budget, a crash).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol

from tritonlab import gateway
from tritonlab.decisions.search import (
    Goal,
    Knobs,
    Observation,
    Step,
    choose,
    next_step,
    race_verdict,
)
from tritonlab.decisions.tune_record import TunePick, TuneRecord, TuneSettingsRecord, TuneStep
from tritonlab.errors import PerfAnalyzerError
from tritonlab.experiments.block_engine import BlockEngine
from tritonlab.experiments.blocks import ENGINE_BLOCKS
from tritonlab.experiments.manifest import RunEntries, available_cores
from tritonlab.experiments.opening import SessionRequest, check_resume, open_session
from tritonlab.experiments.plan import (
    ExperimentPlan,
    LoadPoint,
    MeasurementSettings,
    install_traces,
    trace_load,
)
from tritonlab.experiments.repository_plan import batching_off, own_baseline
from tritonlab.experiments.runner import quarantine_unusable
from tritonlab.experiments.session import CellSession
from tritonlab.experiments.store import CellResult, cell_path, read_cell
from tritonlab.models.inputs import ModelInputs, derive_inputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.perf.locate import locate_perf_analyzer
from tritonlab.perf.trace import Trace, delayed_pct
from tritonlab.pipeline.project import write_scripts
from tritonlab.repository.config import build_model_config, config_to_text
from tritonlab.repository.knobs import KNOBS
from tritonlab.repository.layout import RepositoryModel, add_model
from tritonlab.repository.variants import ServingVariant
from tritonlab.result_files import write_result
from tritonlab.run_layout import RunLayout, cell_id
from tritonlab.server.launch import ServerOptions
from tritonlab.server.process import TritonServer
from tritonlab.stats.verdicts import VerdictRecord


@dataclass(frozen=True)
class TuneSettings:
    """What ``tritonlab tune`` was asked for."""

    goal: Goal
    time_budget_s: float = 900.0
    measurement: MeasurementSettings = field(default_factory=MeasurementSettings)
    batch_size: int = 1
    # A replayed trace (``--load-trace``): every configuration measured under it, no ramp.
    trace: Trace | None = None

    def load(self, knobs: Knobs, concurrency: int) -> LoadPoint:
        """The load of a search point: ``concurrency`` at the knobs' protocol, or the trace."""
        if self.trace is not None:
            return trace_load(self.trace, knobs.protocol, self.batch_size)
        return LoadPoint(
            protocol=knobs.protocol, batch_size=self.batch_size, concurrency=concurrency
        )

    def stored(self) -> TuneSettingsRecord:
        """The settings as the manifest and ``tune.json`` store them (and fingerprint them)."""
        g, record = self.goal, TuneSettingsRecord
        return record(
            **{f.name: getattr(g, f.name) for f in fields(record) if hasattr(g, f.name)}
            | {"fixed_load": g.fixed_load if self.trace is not None else None},
            goal=g.kind,
            time_budget_s=self.time_budget_s,
            batch_size=self.batch_size,
            measurement=self.measurement,
            trace=self.trace.stats if self.trace is not None else None,
        )

    def fingerprint(self, model_sha256: str, inputs: ModelInputs) -> str:
        """What a resume must share with the run it continues (not the time budget)."""
        record = {k: v for k, v in self.stored().to_dict().items() if k != "time_budget_s"}
        text = json.dumps(
            {"tune": record, "model": model_sha256, "inputs": inputs.fingerprint_dict()},
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def variant_for(
    knobs: Knobs, start: Knobs, baseline: ServingVariant | None = None
) -> ServingVariant:
    """The serving variant of ``knobs``; the start configuration is the plan's baseline.

    ``baseline``: a repository model's own configuration (the start): the knobs tune moves
    come from ``knobs``, every other (the batcher's delay, the instance kind, the backend) stays
    the user's, so the start is exactly the user's config."""
    variant = knobs.variant()
    if baseline is not None:
        moved = {k.field: getattr(variant, k.field) for k in KNOBS if k.tune_field or k.tune_held}
        variant = replace(baseline, name=variant.name, description=variant.description, **moved)
        if not variant.dynamic_batching:
            variant = batching_off(variant)
    if replace(knobs, protocol=start.protocol) == start:
        variant = replace(variant, name="baseline", description="start: " + variant.description)
    return variant


def observation_of(cell: CellResult, knobs: Knobs, step: str | None = None) -> Observation:
    """The policy's view of a stored cell (a cell without a measurement served nothing); a
    cell under a trace has no concurrency: 0, the search's fixed-load point. ``step``: the
    pipeline step tune's knobs change, whose own queue, compute and batches steer the search
    (an ensemble's counters show no queue and batches of one whatever its steps do)."""
    m = cell.perf.measurement
    s = cell.server
    if step is not None and (own := cell.steps.get(step)) is not None and own.execution_count:
        s = own
    return Observation(
        knobs=knobs,
        concurrency=int(cell.perf.settings.concurrency or 0),
        repeat=cell.repeat - 1,
        throughput_infer_per_s=m.throughput_infer_per_s if m else 0.0,
        latency_p99_us=m.latency_p99_us if m else None,
        queue_us=s.queue_us_per_request if s else None,
        compute_us=(
            s.compute_input_us_per_request
            + s.compute_infer_us_per_request
            + s.compute_output_us_per_request
            if s
            else None
        ),
        execution_us=s.compute_us_per_execution if s else None,
        mean_batch=s.mean_batch_size if s else None,
        server_cores=cell.server_cores_used if cell.server_cpu_s else None,
        load_generator_cores=cell.perf_analyzer_cores_used,
        late_pct=(
            delayed_pct(list(cell.perf.warnings)) if cell.perf.settings.request_intervals else 0.0
        ),
    )


class TuneSession(Protocol):
    """What the search measures through: a local ``CellSession`` or a cluster node's."""

    plan: ExperimentPlan
    server: Any

    def over_budget(self) -> bool: ...

    def load(self, model: RepositoryModel) -> None: ...

    def unload(self, model: RepositoryModel, quietly: bool = False) -> None: ...

    def measure(
        self, model: RepositoryModel, load: LoadPoint, repeat: int, note: str = ""
    ) -> CellResult | None: ...

    def save_manifest(self, **changes: Any) -> None: ...


class _Tuner:
    """One tune run: the loop of policy steps over a cell session."""

    def __init__(
        self,
        info: OnnxModelInfo,
        run_dir: Path,
        model_name: str,
        settings: TuneSettings,
        started: float,
    ) -> None:
        self.info, self.run_dir, self.model_name = info, run_dir, model_name
        self.settings, self.started = settings, started
        self.goal = settings.goal
        # a repository model's own configuration: what every variant keeps but tune's knobs
        self.baseline = own_baseline(info) if info is not None else None
        self.models: dict[str, RepositoryModel] = {}
        self.observations: list[Observation] = []
        self.steps: list[TuneStep] = []
        self.measured: list[str] = []
        self.reused: list[str] = []
        self.loaded: RepositoryModel | None = None
        self.kept: dict[str, RepositoryModel] = {}  # loaded besides ``loaded`` (block engine)
        self.engine: BlockEngine | None = None  # a local search's block engine, if any
        self.failures: dict[str, str] = {}  # cell id -> why perf_analyzer could not measure it
        # the pipeline step whose knobs tune changes (None: the measured model itself)
        origin = info.origin if info is not None else None
        self.step = origin.tuned if origin is not None and origin.tuned != origin.model else None

    def model(self, knobs: Knobs) -> RepositoryModel:
        variant = variant_for(knobs, self.goal.start, self.baseline)
        if variant.name not in self.models:
            variant.validate(model_batches=self.info.batched)
            self.models[variant.name] = add_model(
                RunLayout(self.run_dir).models, self.info, self.model_name, variant
            )
        return self.models[variant.name]

    def plan(self) -> ExperimentPlan:
        """The plan so far: every configuration and load the search has measured."""
        loads = list(
            dict.fromkeys(self.settings.load(o.knobs, o.concurrency) for o in self.observations)
        ) or [self.settings.load(self.goal.start, self.goal.first_concurrency)]
        repeats = max([o.repeat + 1 for o in self.observations] or [1])
        return ExperimentPlan(
            self.model_name,
            tuple(m.variant for m in self.models.values()),
            tuple(loads),
            repeats,
            self.settings.measurement,
            notes=(
                "Measured by `tritonlab tune`: an adaptive search, not a grid; each "
                "configuration was measured only at the loads its search path visited "
                "(results/tune.json).",
            ),
        )

    def switch_to(self, session: TuneSession, model: RepositoryModel, load: LoadPoint) -> None:
        """Make ``model`` the one measured. The block engine keeps every configuration the
        search has loaded (while the memory estimate fits), and warms a newly loaded one up
        with a discarded cell; the classic engine unloads the previous one."""
        if self.loaded is not None and self.loaded.model_name == model.model_name:
            return
        engine = self.engine
        if engine is not None and model.model_name in self.kept:
            if self.loaded is not None:
                self.kept[self.loaded.model_name] = self.loaded
            self.loaded = self.kept.pop(model.model_name)
            return
        if self.loaded is not None:
            loaded, self.loaded = self.loaded, None
            if engine is not None and engine.keep_loaded([*self.kept.values(), loaded, model]):
                self.kept[loaded.model_name] = loaded
            else:
                for other in [*self.kept.values(), loaded]:
                    session.unload(other)
                self.kept.clear()
        session.load(model)
        self.loaded = model
        if engine is not None:
            engine.warm(model, load)

    def take(
        self, session: TuneSession, step: Step, knobs: Knobs
    ) -> tuple[str, Observation, bool] | None:
        """The step's cell: reused from disk, else measured; None when a new cell would start
        after the time budget. Returns its id, observation, and whether it was reused."""
        model = self.model(knobs)
        load = self.settings.load(knobs, step.concurrency)
        cid = cell_id(model.variant.name, load.key, step.repeat + 1)
        path = cell_path(self.run_dir, cid)
        if path.exists():
            self.reused.append(cid)
            return cid, observation_of(read_cell(path), knobs, self.step), True
        if session.over_budget() and self.observations:
            return None  # the start is measured whatever the budget: a tune has a pick
        self.switch_to(session, model, load)
        try:
            measurer = session if self.engine is None else self.engine
            cell = measurer.measure(model, load, step.repeat, f" ({step.phase})")
        except PerfAnalyzerError as exc:
            # perf_analyzer could not measure this point (e.g. no request came back within a
            # window) while the server lives on: the point is out, the search goes on, and the
            # step says why. A resume measures it again, so the path stays deterministic.
            if isinstance(session.server, TritonServer) and not session.server.is_alive():
                raise
            self.failures[cid] = str(exc)
            cell = None
        if cell is None:
            return cid, Observation(knobs, step.concurrency, step.repeat, math.nan, None), False
        self.measured.append(cid)
        return cid, observation_of(cell, knobs, self.step), False

    def record(self, stop_reason: str | None) -> TuneRecord:
        best, runner_up, tie_break = choose(self.observations, self.goal)
        return TuneRecord(
            settings=self.settings.stored(),
            steps=tuple(self.steps),
            stop_reason=stop_reason,
            cells_measured=len(self.measured),
            cells_reused=len(self.reused),
            wall_s=round(time.monotonic() - self.started, 1),
            pick=TunePick.of(best, self.goal) if best else None,
            runner_up=TunePick.of(runner_up, self.goal) if runner_up else None,
            verdict=VerdictRecord.of(race_verdict(best, runner_up, self.goal))
            if best is not None and runner_up is not None
            else None,
            tie_break=tie_break,
        )

    def save(self, stop_reason: str | None) -> TuneRecord:
        record = self.record(stop_reason)
        write_result(RunLayout(self.run_dir).tune, record.to_dict())
        return record


def run_tune(
    info: OnnxModelInfo,
    run_dir: Path,
    model_name: str,
    settings: TuneSettings,
    options: ServerOptions,
    inputs: ModelInputs | None = None,
    on_step: Callable[[TuneStep], None] | None = None,
    builtin: str | None = None,
    cluster: str | None = None,
) -> tuple[TuneRecord, Path | None]:
    """Search, measuring on a real server, until the policy stops or the budget is spent; the
    search's record (as ``tune.json`` holds it) and the pick's ``config.pbtxt``. ``cluster``:
    a Ray address, measured on one node of it (each step depends on the last, so it is not
    spread; a lost node hands over to the next). ``builtin``: the built-in model ``info`` was
    exported from (its export script is written; else the script copies the user's file)."""
    started = time.monotonic()
    inputs = inputs or derive_inputs(info)
    fingerprint = settings.fingerprint(info.origin.sha256(), inputs)
    check_resume(run_dir, fingerprint)
    quarantine_unusable(run_dir)
    if settings.trace is not None:
        install_traces(run_dir, [settings.trace])
    perf_install = locate_perf_analyzer()
    tuner = _Tuner(info, run_dir, model_name, settings, started)
    start_model = tuner.model(settings.goal.start)
    deadline = started + settings.time_budget_s
    opened: contextlib.AbstractContextManager[TuneSession]
    request = SessionRequest(
        options, run_dir, info, inputs, tuner.plan(), fingerprint, perf_install,
        deadline=deadline, entries=RunEntries(tune=settings.stored().to_dict()),
    )  # fmt: skip
    if cluster:
        from tritonlab.distributed.ray_session import open_ray_session

        opened = open_ray_session(cluster, request, max_nodes=1)
    else:
        opened = open_session(request, start_model)
    goal = settings.goal
    with opened as session:
        if settings.measurement.engine == ENGINE_BLOCKS and isinstance(session, CellSession):
            tuner.engine = BlockEngine.for_search(
                session, start_model, info.file_size_bytes, fingerprint, available_cores(),
                settings.load(goal.start, goal.first_concurrency),
            )  # fmt: skip
            # the policy judges whether a load outgrows one window by the window measured with
            goal = replace(goal, window_ms=tuner.engine.search_window_ms)
        stop_reason = _search(tuner, session, goal, started, on_step)
    record = tuner.save(stop_reason)
    pick_config = _write_pick(run_dir, info, model_name, record.pick, tuner.baseline)
    write_scripts(run_dir, info, inputs, tuner.plan(), options, info.path, builtin)
    return record, pick_config


def _search(
    tuner: _Tuner,
    session: TuneSession,
    goal: Goal,
    started: float,
    on_step: Callable[[TuneStep], None] | None,
) -> str:
    """Take the policy's steps on ``session`` until it stops or the time budget is spent;
    returns why the search stopped. Every configuration still loaded is unloaded at the end."""
    try:
        while True:
            step = next_step(tuner.observations, goal)
            if step.stop:
                return step.reason
            assert step.knobs is not None
            taken = tuner.take(session, step, step.knobs)
            if taken is None:
                return (
                    f"time budget of {tuner.settings.time_budget_s:.0f} s reached; run the same "
                    "command to go on"
                )
            cid, obs, reused = taken
            tuner.observations.append(obs)
            tuner.steps.append(
                TuneStep.of(
                    step, cid, obs, time.monotonic() - started, reused, tuner.failures.get(cid)
                )
            )
            session.plan = tuner.plan()
            session.save_manifest(plan=session.plan)
            tuner.save(None)
            if on_step is not None:
                on_step(tuner.steps[-1])
    finally:
        for loaded in [*tuner.kept.values(), *([tuner.loaded] if tuner.loaded else [])]:
            session.unload(loaded, quietly=True)
        tuner.loaded = None
        tuner.kept.clear()


def _write_pick(
    run_dir: Path,
    info: OnnxModelInfo,
    model_name: str,
    pick: TunePick | None,
    baseline: ServingVariant | None = None,
) -> Path | None:
    """The pick's ready-to-deploy config.pbtxt (served under the model's own name); for a
    repository model, the whole pipeline (the tuned model patched, every model it calls)."""
    if pick is None:
        return None
    layout = RunLayout(run_dir)
    if baseline is not None:  # the model's own configuration, patched
        variant = variant_for(pick.configuration, pick.configuration, baseline)
        add_model(layout.pick, info, model_name, variant)
    else:
        config = build_model_config(info, pick.configuration.variant(), model_name)
        gateway.write_text(layout.pick_config(model_name), config_to_text(config))
    return layout.pick_config(model_name)
