"""Run an experiment plan against a real server, cells saved at once.

Repeats are interleaved (every variant once, then again), so slow drift of a shared machine hits
all variants alike. The block engine (``block_engine.py``, the default of run and demo) loads
every variant at once where memory allows and shuffles each round; the classic engine
(``engine.py``) loads each variant alone (explicit model control), measures it under every load
point and unloads it. A finished cell's JSON exists on disk before the next cell starts; a re-run
with the same plan skips finished cells.

Loads at a fraction of the measured peak (``LoadPoint.peak_fraction``) are measured in a second
pass, after every closed-loop cell: ``open_loop_rates`` is then called once to turn the stored
closed-loop cells into a request rate per (variant, load key). The plan, and so its fingerprint,
is the same for both passes, so an interrupted sweep resumes wherever it stopped.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tritonlab.client.infer import InferCheck
from tritonlab.errors import PlanError
from tritonlab.experiments.adaptive_run import AdaptiveRepeats, AdaptiveRun, rated_loads
from tritonlab.experiments.block_engine import BlockEngine
from tritonlab.experiments.blocks import ENGINE_BLOCKS, CoLoad, decide_coload, run_seed
from tritonlab.experiments.engine import ClassicEngine, MeasuringSession
from tritonlab.experiments.manifest import AdaptiveEntry, RunEntries, SweepEntry, available_cores
from tritonlab.experiments.opening import (
    SessionRequest,
    check_resume,
    open_session,
    plan_fingerprint,
)
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint
from tritonlab.experiments.serving_path import probes_pending
from tritonlab.experiments.session import CellSession, Progress, ProgressCallback, Round
from tritonlab.experiments.store import (
    cell_path,
    cell_problem,
    load_manifest,
    quarantine,
    save_manifest,
)
from tritonlab.models.inputs import ModelInputs, derive_inputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.perf.locate import locate_perf_analyzer
from tritonlab.repository.layout import RepositoryModel, build_repository
from tritonlab.result_files import load_records
from tritonlab.run_layout import CELLS_DIR, SERVING_PATH_DIR, RunLayout, cell_id
from tritonlab.server.launch import ServerOptions

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
    # Cells given up on after repeated faults (results/faults.json says why).
    failed: list[str] = field(default_factory=list)


# Opens a cluster's measuring session for a request.
ClusterOpener = Callable[[SessionRequest], contextlib.AbstractContextManager[MeasuringSession]]


def run_experiment(
    plan: ExperimentPlan,
    info: OnnxModelInfo,
    run_dir: Path,
    options: ServerOptions,
    progress: ProgressCallback | None = None,
    time_budget_s: float | None = None,
    sweep: SweepEntry | None = None,
    open_loop_rates: OpenLoopRates | None = None,
    adaptive: AdaptiveRepeats | None = None,
    inputs: ModelInputs | None = None,
    cluster: ClusterOpener | None = None,
    models: list[RepositoryModel] | None = None,
    probes: bool = True,
    alternate: bool = False,
) -> RunOutcome:
    """Measure every cell of ``plan`` not yet on disk; results go under ``run_dir``.

    ``inputs``: what every request carries (default: derived from the graph). ``cluster``: the
    opener of a cluster's session (``pipeline/`` binds ``distributed.ray_session``, which
    imports this module): whole rounds are then measured on its nodes, each cell written here
    as it arrives. Loads at a fraction of the peak get their rates from ``open_loop_rates``
    once the others are measured. ``models``: the variants already written in the run's
    repository (``pipeline/check.py`` serves two model files); the first one's answers are
    checked against ``info``, and each round measures them in this order. ``probes``: measure
    the serving-path probes (a check does not need them). ``alternate``: reverse the order every
    other round (the classic engine; the block engine shuffles).
    """
    started = time.monotonic()
    plan.validate(info.batched)
    derived_loads = [ld for ld in plan.loads if ld.kind.from_peak]
    direct_loads = [ld for ld in plan.loads if not ld.kind.from_peak]
    if derived_loads and open_loop_rates is None:
        raise PlanError(
            "loads at a fraction of the measured peak need the peak first: run them with "
            "`tritonlab sweep`"
        )
    inputs = inputs or derive_inputs(info)
    fingerprint = plan_fingerprint(plan, info.origin.sha256(), inputs)
    check_resume(run_dir, fingerprint)
    perf_install = locate_perf_analyzer()
    if models is None:
        models = build_repository(
            RunLayout(run_dir).models, info, plan.model_name, list(plan.variants)
        )
    quarantined = quarantine_unusable(run_dir)
    todo = [
        (repeat, model, load)
        for repeat in range(plan.repeats)
        for model in models
        for load in plan.loads
    ]
    skipped = [
        cell_id(m.variant.name, ld.key, r + 1)
        for r, m, ld in todo
        if cell_path(run_dir, cell_id(m.variant.name, ld.key, r + 1)).exists()
    ]
    finished = set(skipped)
    deadline = None if time_budget_s is None else started + time_budget_s
    entries = RunEntries(
        sweep=sweep,
        adaptive=AdaptiveEntry(adaptive.max_repeats, adaptive.budget_s, adaptive.measuring_budget_s)
        if adaptive
        else None,
    )
    request = SessionRequest(
        options, run_dir, info, inputs, plan, fingerprint, perf_install, entries,
        Progress(progress, len(skipped), len(todo)), deadline,
    )  # fmt: skip
    with contextlib.ExitStack() as stack:
        session: MeasuringSession
        lazy: LazySession | None = None
        if cluster is not None:
            session = stack.enter_context(cluster(request))
        else:
            # a local run starts its server only when a cell is left to measure (a re-run of a
            # finished run starts nothing); a first run, with nothing stored, starts at once.
            # The models checked first stay loaded where the block engine co-loads them next.
            coload = decide_coload(models, info.file_size_bytes)
            keep_loaded = plan.measurement.engine == ENGINE_BLOCKS and coload.co_loaded
            session = lazy = LazySession(
                request,
                lambda: open_session(request, models[0], models, keep_loaded),
                lambda opened: _start_engine(opened, fingerprint, models, direct_loads, coload),
                stack,
            )
            layout = RunLayout(run_dir)
            # A session that never starts leaves an earlier start's manifest and answer check
            # in place; without them (a first run) it starts at once.
            if not (layout.manifest.exists() and layout.infer_check.exists()):
                lazy.start()
        stopped, without_rate = _measure_passes(
            session, request, models, todo, finished, open_loop_rates, adaptive, time_budget_s,
            probes, alternate,
        )  # fmt: skip
        if lazy is not None:
            lazy.close_unopened()
        measured = session.measured
        request.progress.tell("done")
    return RunOutcome(
        measured,
        skipped,
        stopped,
        session.checks,
        time.monotonic() - started,
        without_rate,
        quarantined,
        session.recovery.failed_cells,
    )


def _measure_passes(
    session: MeasuringSession,
    request: SessionRequest,
    models: list[RepositoryModel],
    todo: list[tuple[int, RepositoryModel, LoadPoint]],
    finished: set[str],
    open_loop_rates: OpenLoopRates | None,
    adaptive: AdaptiveRepeats | None,
    time_budget_s: float | None,
    probes: bool = True,
    alternate: bool = False,
) -> tuple[str | None, list[str]]:
    """Measure the direct loads, then the loads at a fraction of the peak, the serving path,
    the adaptive rounds and the operator profile, while nothing stopped the run; why it
    stopped early (None: it did not), and the derived cells left without a rate."""
    plan = request.plan
    derived_loads = [ld for ld in plan.loads if ld.kind.from_peak]
    direct_loads = [ld for ld in plan.loads if not ld.kind.from_peak]
    over_budget = f"time budget of {time_budget_s or 0:.0f} s reached"
    without_rate: list[str] = []
    rates: Mapping[tuple[str, str], float] = {}  # the derived loads' rates, read once

    def measure_pass(loads_of: Callable[[RepositoryModel], list[LoadPoint]]) -> str | None:
        rounds = planned_rounds(plan.repeats, models, loads_of, finished, alternate)
        return None if session.measure_rounds(rounds, []) else over_budget

    stopped = measure_pass(lambda model: direct_loads)
    if stopped is None and derived_loads and open_loop_rates is not None:
        rates = open_loop_rates()
        without_rate = [
            cell_id(m.variant.name, ld.key, r + 1)
            for r, m, ld in todo
            if ld.kind.from_peak
            and (m.variant.name, ld.key) not in rates
            and cell_id(m.variant.name, ld.key, r + 1) not in finished
        ]
        stopped = measure_pass(lambda model: rated_loads(derived_loads, rates, model))
    if stopped is None and probes:
        session.measure_serving_path(request.info)
    if stopped is None and adaptive is not None:
        AdaptiveRun(
            session, adaptive, request.run_dir, models, direct_loads, derived_loads, rates,
            plan.repeats, alternate, request.progress,
        ).run()  # fmt: skip
        if session.over_budget():
            stopped = over_budget
    if stopped is None:
        session.profile_operators()
    return stopped, without_rate


def _start_engine(
    session: CellSession,
    fingerprint: str,
    models: list[RepositoryModel],
    loads: list[LoadPoint],
    coload: CoLoad,
) -> ClassicEngine:
    """The engine a local session measures through: the block engine where the plan asks for
    it (with the co-loading decided before the session opened), else the classic one."""
    if session.plan.measurement.engine == ENGINE_BLOCKS:
        seed = run_seed(fingerprint)
        return BlockEngine.start(session, models, loads, coload, seed, available_cores())
    return ClassicEngine(session)


def planned_rounds(
    repeats: int,
    models: Sequence[RepositoryModel],
    loads_of: Callable[[RepositoryModel], list[LoadPoint]],
    finished: set[str],
    alternate: bool = False,
) -> list[Round]:
    """The planned rounds still to measure, interleaved: every model's unfinished cells of
    round 1, then of round 2, ...; rounds with nothing left are dropped. ``alternate``: every
    other round takes the models in reverse order."""
    rounds: list[Round] = []
    for repeat in range(repeats):
        round_: Round = []
        for model in reversed(models) if alternate and repeat % 2 else models:
            cells = [
                (ld, repeat)
                for ld in loads_of(model)
                if cell_id(model.variant.name, ld.key, repeat + 1) not in finished
            ]
            if cells:
                round_.append((model, cells))
        if round_:
            rounds.append(round_)
    return rounds


def quarantine_unusable(run_dir: Path) -> list[str]:
    """Move truncated or corrupt cell files aside so a resume measures their cells again."""
    moved = []
    for folder in (CELLS_DIR, SERVING_PATH_DIR):
        for path in sorted(RunLayout(run_dir).cell_folder(folder).glob("*.json")):
            if (problem := cell_problem(path)) is not None:
                target = quarantine(path)
                moved.append(f"{problem.split(';')[0]}; kept as {target.name}, re-measuring it")
    return moved


@dataclass
class _NothingRecovered:
    """The faults side of a session that never started: none met, none given up on."""

    failed_cells: list[str] = field(default_factory=list)


class LazySession:
    """``MeasuringSession``'s calls, the session opened and its engine started (``on_open``)
    on the first one with something to measure; until then, what a session that measured
    nothing says.

    Re-running a finished run (to rebuild its reports, or after a resume that measured
    everything) used to start the server, load every configuration, check the answers again,
    warm the block engine up and stop the server: about 25 s on 2 cores for nothing measured,
    and a manifest, an answer check and an engine record rewritten although no figure changed.
    This holds off all of it until the first round with a cell in it, the serving-path probes
    with a cell missing, or an adaptive round; a run that needs none of them keeps its records
    as they are, and only the manifest's run-level entries (``sweep``, ``adaptive``) are brought
    up to date.
    """

    def __init__(
        self,
        request: SessionRequest,
        opener: Callable[[], contextlib.AbstractContextManager[CellSession]],
        on_open: Callable[[CellSession], MeasuringSession],
        stack: contextlib.ExitStack,
    ) -> None:
        self._request = request
        self._opener, self._on_open, self._stack = opener, on_open, stack
        self._session: MeasuringSession | None = None
        self._recovered = _NothingRecovered()
        self._checks: list[InferCheck] | None = None

    def start(self) -> MeasuringSession:
        """The engine, its session opened now if it was not."""
        if self._session is None:
            self._session = self._on_open(self._stack.enter_context(self._opener()))
        return self._session

    # -- what a session that has not started says ------------------------------------------

    @property
    def measured(self) -> list[str]:
        return self._session.measured if self._session is not None else []

    @property
    def checks(self) -> list[InferCheck]:
        """This start's answer checks, or the stored ones of the start that made them."""
        if self._session is not None:
            return self._session.checks
        if self._checks is None:
            self._checks = load_records(RunLayout(self._request.run_dir).infer_check, InferCheck)
        return self._checks

    @property
    def cell_seconds(self) -> list[float]:
        return list(getattr(self._session, "cell_seconds", []))

    @property
    def recovery(self) -> _NothingRecovered:
        return self._session.recovery if self._session is not None else self._recovered  # type: ignore[return-value]

    def over_budget(self) -> bool:
        if self._session is not None:
            return self._session.over_budget()
        deadline = self._request.deadline
        return deadline is not None and time.monotonic() > deadline

    # -- the calls that measure ------------------------------------------------------------

    def measure_rounds(self, rounds: Sequence[Round], ids: list[str], note: str = "") -> bool:
        if not any(cells for round_ in rounds for _model, cells in round_):
            return True
        return self.start().measure_rounds(rounds, ids, note)

    def measure_serving_path(self, info: OnnxModelInfo) -> None:
        request = self._request
        if self._session is None and not probes_pending(request.run_dir, request.plan, info):
            return
        self.start().measure_serving_path(info)

    def profile_operators(self) -> None:
        if self._session is not None:  # a local session profiles after its server stopped
            self._session.profile_operators()

    def close_unopened(self) -> None:
        """Where no session started: the manifest's run-level entries as this run gives them
        (``RunEntries.apply``), the rest kept."""
        if self._session is not None:
            return
        run_dir = self._request.run_dir
        stored = load_manifest(run_dir)
        updated = self._request.entries.apply(stored)
        if updated != stored:
            save_manifest(run_dir, updated)
