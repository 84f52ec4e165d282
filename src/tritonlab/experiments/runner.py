"""Run an experiment plan against a real server, cells saved at once.

Repeats are interleaved (every variant once, then again), so slow drift of a shared machine hits
all variants alike. The block engine (``blocks.py``, the default of run and demo) loads every
variant at once where memory allows and shuffles each round; the classic engine loads each
variant alone (explicit model control), measures it under every load point and unloads it. A
finished cell's JSON exists on disk before the next cell starts; a re-run with the same plan
skips finished cells.

Loads at a fraction of the measured peak (``LoadPoint.peak_fraction``) are measured in a second
pass, after every closed-loop cell: ``open_loop_rates`` is then called once to turn the stored
closed-loop cells into a request rate per (variant, load key). The plan, and so its fingerprint,
is the same for both passes, so an interrupted sweep resumes wherever it stopped.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from tritonlab.client.infer import InferCheck
from tritonlab.errors import PlanError
from tritonlab.experiments.blocks import ENGINE_BLOCKS, BlockSession, run_seed
from tritonlab.experiments.manifest import (
    AdaptiveEntry,
    SweepEntry,
    available_cores,
)
from tritonlab.experiments.opening import check_resume, file_sha256, open_session, plan_fingerprint
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint
from tritonlab.experiments.rounds import AdaptiveRound, StoppingRecord, append_round
from tritonlab.experiments.session import (
    CellSession,
    ProgressCallback,
    Round,
    cell_id,
)
from tritonlab.experiments.store import (
    cell_path,
    cell_problem,
    quarantine,
    write_result,
)
from tritonlab.models.inputs import ModelInputs, derive_inputs
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.perf.locate import locate_perf_analyzer
from tritonlab.repository.layout import RepositoryModel, build_repository
from tritonlab.run_layout import CELLS_DIR, SERVING_PATH_DIR, RunLayout
from tritonlab.server.launch import ServerOptions

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


class MeasuringSession(Protocol):
    """What ``run_experiment`` measures through: a local ``CellSession`` or a cluster's."""

    measured: list[str]
    checks: list[InferCheck]
    done: int
    total: int

    @property
    def recovery(self) -> Recovered:
        """The faults met so far and the cells given up on."""

    def over_budget(self) -> bool:
        """True once the run's time budget (if any) has passed."""

    def measure_rounds(self, rounds: Sequence[Round], ids: list[str], note: str = "") -> bool:
        """Measure ``rounds`` and store each cell; False when the time budget ran out first."""

    def measure_serving_path(self, info: OnnxModelInfo) -> None:
        """Measure the null-model cells behind the cost model (where the session can; see each)."""

    def profile_operators(self) -> None:
        """Profile the model's operators where the session does it (a local run profiles later)."""


# Opens a cluster's measuring session from (options, run folder, model info, inputs, plan,
# fingerprint, perf_analyzer, progress, deadline, manifest extras).
ClusterOpener = Callable[..., contextlib.AbstractContextManager[MeasuringSession]]


class Recovered(Protocol):
    """The faults side of a session, as the outcome reports it."""

    failed_cells: list[str]

    @property
    def restarts(self) -> int:
        """Server restarts during the run."""


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
    cluster: ClusterOpener | None = None,
) -> RunOutcome:
    """Measure every cell of ``plan`` not yet on disk; results go under ``run_dir``.

    ``inputs`` says what every request carries (default: derived from the graph).
    ``cluster``: the opener of a cluster's measuring session (``pipeline/`` binds
    ``distributed.ray_session.open_ray_session`` to a Ray address): whole rounds are then
    measured on the cluster's nodes, each cell written here as it arrives. The runner does not
    import ``distributed/``, which imports it.

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
    models = build_repository(RunLayout(run_dir).models, info, plan.model_name, list(plan.variants))
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
    if cluster is not None:
        opened = cluster(
            options, run_dir, info, inputs, plan, fingerprint, perf_install,
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
                session,
                models,
                direct_loads,
                info.file_size_bytes,
                run_seed(fingerprint),
                available_cores(),
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
                    append_round(
                        RunLayout(run_dir).adaptive,
                        AdaptiveRound(
                            round=max(r for _, _, r in todo_now) + 1,
                            reasons=tuple(reasons),
                            cells=tuple(round_cells),
                        ),
                    )
                return None if complete else "the run's time budget was reached"

            adaptive_started = time.monotonic()
            stop_reason = "the run's time budget was reached"
            while not over_budget():
                reason = extra_round()
                if reason is not None:
                    stop_reason = reason
                    break
            stopping = StoppingRecord(
                reason=stop_reason,
                max_rounds=adaptive.max_repeats,
                budget_s=adaptive.budget_s,
                extra_s=round(time.monotonic() - adaptive_started, 1),
                cell_cost_s=round(cell_cost_s(session), 3),
                cells_wall_s=round(sum(getattr(session, "cell_seconds", [])), 1),
                precision=adaptive.precision,
            )
            write_result(RunLayout(run_dir).stopping, stopping.to_dict())
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


def quarantine_unusable(run_dir: Path) -> list[str]:
    """Move truncated or corrupt cell files aside so a resume measures their cells again."""
    moved = []
    for folder in (CELLS_DIR, SERVING_PATH_DIR):
        for path in sorted(RunLayout(run_dir).cell_folder(folder).glob("*.json")):
            problem = cell_problem(path)
            if problem is not None:
                target = quarantine(path)
                moved.append(f"{problem.split(';')[0]}; kept as {target.name}, re-measuring it")
    return moved


def _next_repeat(run_dir: Path, variant_name: str, load: LoadPoint) -> int:
    """The first repeat (0-based) of (variant, load) not yet stored."""
    repeat = 0
    while cell_path(run_dir, cell_id(variant_name, load, repeat)).exists():
        repeat += 1
    return repeat
