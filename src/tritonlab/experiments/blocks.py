"""The block engine: every configuration loaded at once, many short cells in random block order.

Why: on a shared 2-core machine a stretch in which the scheduler, a neighbour or the hypervisor
slows everything can last longer than one cell. The classic engine loaded one configuration at a
time and measured it for ~10 s, so such a stretch could land on one configuration and not the
other, and three rounds gave a t-interval that
one bad round could blow up. This engine:

1. **Co-loads** every configuration of the plan into one server (each is its own model name),
   when the memory estimate fits; switching is then free and cells can be short. Otherwise it
   falls back to loading one configuration at a time, with the reason recorded.
2. **Warms up** each configuration once per load point (discarded), and sets the load point's
   window from the slowest warm-up so that a window holds at least ``REQUESTS_PER_WINDOW``
   requests: ``MIN_WINDOW_MS`` for a fast model, up to the plan's window for a slow one.
3. Measures **blocks**: every (configuration, load) cell once, in an order shuffled with the
   run's seed and the block number (periodic interference cannot alias onto one
   configuration). The seed is the plan's fingerprint and a random part drawn when the run
   starts (``run_seed``), recorded in ``engine.json`` and kept on a resume: every order is
   reproducible from the record, and two fresh runs of one plan are independent replicates,
   so whatever favours a place in the order does not repeat from one to the next. A cell is
   ``WINDOWS_PER_CELL`` windows, which perf_analyzer takes whatever they read (its stability
   check is off: the engine's statistics handle the spread across blocks). The verdicts pair
   cells by block.
4. Monitors **interference** per cell (``interference.py``) and re-measures disturbed cells.

The statistics (``stats/robust.py``) and the stopping rule (``decisions/adaptive.py``) are
the other half; ``results/engine.json`` records what this engine decided and why.
"""

from __future__ import annotations

import math
import random
import secrets
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from tritonlab.errors import PerfAnalyzerError, ServerError
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint, MeasurementSettings
from tritonlab.perf.runner import run_perf
from tritonlab.records import Record
from tritonlab.repository.layout import RepositoryModel
from tritonlab.result_files import read_result, write_result
from tritonlab.run_layout import RunLayout

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tritonlab.experiments.session import CellSession, Round

ENGINE_BLOCKS = "blocks"
ENGINE_CLASSIC = "classic"
ENGINES = (ENGINE_BLOCKS, ENGINE_CLASSIC)
SEARCH_KEY = "*"  # windows_ms key of a search's one window (tune)

MIN_WINDOW_MS = 200
WARMUP_WINDOW_MS = 300
REQUESTS_PER_WINDOW = 100
WINDOWS_PER_CELL = 3
# perf_analyzer's stability threshold, in %, that accepts any three windows.
ANY_STABILITY_PCT = 1000.0
# Defaults of a block-engine run: blocks first measured, at most, and seconds for the extra ones.
DEFAULT_BLOCKS = 10
# Co-loaded configurations can be reloaded (new stub processes) before every this many blocks,
# so that each is spread over several processes in case a process has a speed of its own for
# its lifetime. Measured side by side (`make aa-bench`, benchmarks/results/aa_floor.md), the
# reloads did not pay: identical configurations were told apart no less often without them,
# and each reload cost a load and a warm-up of every configuration. So 0 (never) by default;
# the benchmark keeps the comparison.
RELOAD_EVERY_BLOCKS = 0
DEFAULT_MAX_BLOCKS = 40
DEFAULT_EXTRA_BUDGET_S = 150.0

# Memory allowed per model instance (an allowance, not a measurement): a Python backend stub
# with onnxruntime (or OpenVINO) imported, plus the model's weights held about three times (the
# file read, the session's initializers, its arena). Co-loading uses at most half of the memory
# available when the run starts.
STUB_BYTES = 200 * 2**20
MODEL_COPIES = 3
COLOAD_SHARE_OF_AVAILABLE = 0.5


@dataclass(frozen=True)
class CoLoad:
    """Whether every configuration is loaded at once, with the estimate behind the decision."""

    co_loaded: bool
    estimate_bytes: int
    available_bytes: int
    instances: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """The decision and its estimate as JSON (sizes in bytes)."""
        return asdict(self)


def coload_estimate_bytes(models: list[RepositoryModel], model_file_bytes: int) -> int:
    """Bytes that loading ``models`` at once would take: per instance a backend stub plus
    ``MODEL_COPIES`` copies of the model file (a deliberate over-estimate).
    """
    instances = sum(m.variant.instance_count for m in models)
    return instances * (STUB_BYTES + MODEL_COPIES * model_file_bytes)


def decide_coload(
    models: list[RepositoryModel], model_file_bytes: int, available_bytes: int | None = None
) -> CoLoad:
    """Co-load when the estimate fits in half the available memory; the reason either way."""
    available = psutil.virtual_memory().available if available_bytes is None else available_bytes
    estimate = coload_estimate_bytes(models, model_file_bytes)
    instances = sum(m.variant.instance_count for m in models)
    limit = int(COLOAD_SHARE_OF_AVAILABLE * available)
    mib = 2**20
    if len(models) < 2:
        return CoLoad(
            False, estimate, available, instances, "one configuration: nothing to co-load"
        )
    if estimate <= limit:
        return CoLoad(
            True,
            estimate,
            available,
            instances,
            f"{len(models)} configurations ({instances} instances) co-loaded: estimated "
            f"{estimate / mib:,.0f} MiB ({instances} x ({STUB_BYTES / mib:.0f} MiB stub + "
            f"{MODEL_COPIES} x {model_file_bytes / mib:,.1f} MiB model)), within half of the "
            f"{available / mib:,.0f} MiB available",
        )
    return CoLoad(
        False,
        estimate,
        available,
        instances,
        f"one configuration loaded at a time: co-loading {len(models)} configurations "
        f"({instances} instances) was estimated at {estimate / mib:,.0f} MiB, over half of the "
        f"{available / mib:,.0f} MiB available",
    )


def run_seed(fingerprint: str) -> str:
    """A fresh run's seed: the plan's fingerprint and 32 random bits."""
    return f"{fingerprint}-{secrets.token_hex(4)}"


def block_order(cells: list[Any], seed: str, block: int) -> list[Any]:
    """``cells`` shuffled for ``block`` (reproducible from the seed and the block number)."""
    shuffled = list(cells)
    random.Random(f"{seed}:{block}").shuffle(shuffled)
    return shuffled


def window_ms_for(throughput_infer_per_s: float, batch_size: int, max_window_ms: int) -> int:
    """The shortest window (from MIN_WINDOW_MS, in 50 ms steps) that holds REQUESTS_PER_WINDOW
    requests at the warm-up's throughput, capped at the plan's window."""
    requests_per_s = throughput_infer_per_s / max(1, batch_size)
    if requests_per_s <= 0:
        return max_window_ms
    needed = 1000.0 * REQUESTS_PER_WINDOW / requests_per_s
    stepped = 50 * math.ceil(needed / 50)
    return int(min(max_window_ms, max(MIN_WINDOW_MS, stepped)))


def cell_measurement(plan: ExperimentPlan, window_ms: int) -> MeasurementSettings:
    """A block cell's perf_analyzer settings: WINDOWS_PER_CELL windows of ``window_ms``."""
    return replace(
        plan.measurement,
        measurement_interval_ms=window_ms,
        stability_percentage=ANY_STABILITY_PCT,
        max_trials=WINDOWS_PER_CELL,
        retries_when_unstable=0,
    )


@dataclass(frozen=True)
class Reload(Record):
    """One reload of the co-loaded configurations: the block it came before (0-based), the
    order they were loaded in, and its wall seconds with the warm-ups that followed it."""

    before_block: int
    load_order: tuple[str, ...]
    seconds: float = 0.0


@dataclass
class EngineRecord:
    """``results/engine.json``: what the block engine decided (kept across resumes)."""

    engine: str
    seed: str
    coload: CoLoad | None = None
    windows_ms: dict[str, int] = field(default_factory=dict)
    warmup_infer_per_s: dict[str, dict[str, float]] = field(default_factory=dict)
    cores: int = 0
    warmup_s: float = 0.0  # wall seconds of the co-loading and warm-up cells
    load_order: list[str] = field(default_factory=list)  # the configurations, as co-loaded
    reload_every_blocks: int = 0
    reloads: list[Reload] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON, with the engine's fixed constants (windows, requests) beside it."""
        return {
            "engine": self.engine,
            "seed": self.seed,
            "coload": self.coload.to_dict() if self.coload else None,
            "windows_ms": self.windows_ms,
            "warmup_infer_per_s": self.warmup_infer_per_s,
            "windows_per_cell": WINDOWS_PER_CELL,
            "min_window_ms": MIN_WINDOW_MS,
            "requests_per_window": REQUESTS_PER_WINDOW,
            "cores": self.cores,
            "warmup_s": self.warmup_s,
            "load_order": self.load_order,
            "reload_every_blocks": self.reload_every_blocks,
            "reloads": [r.to_dict() for r in self.reloads],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineRecord:
        """The record stored by :meth:`to_dict`; ``KeyError`` without ``engine`` or ``seed``."""
        coload = data.get("coload")
        return cls(
            engine=str(data["engine"]),
            seed=str(data["seed"]),
            coload=CoLoad(**coload) if coload else None,
            windows_ms={str(k): int(v) for k, v in data.get("windows_ms", {}).items()},
            warmup_infer_per_s={
                str(k): {str(n): float(t) for n, t in v.items()}
                for k, v in data.get("warmup_infer_per_s", {}).items()
            },
            cores=int(data.get("cores", 0)),
            warmup_s=float(data.get("warmup_s", 0.0)),
            load_order=[str(n) for n in data.get("load_order", [])],
            reload_every_blocks=int(data.get("reload_every_blocks", 0)),
            reloads=[Reload.from_dict(r) for r in data.get("reloads", [])],
        )


def engine_path(run_dir: Path) -> Path:
    """``results/engine.json`` of ``run_dir``: the block engine's record."""
    return RunLayout(run_dir).engine


def load_engine_record(run_dir: Path) -> EngineRecord | None:
    """The block engine's record of ``run_dir``, or None when there is none yet.

    ``ResultFileError`` for a corrupt file or one from a newer tritonlab.
    """
    data = read_result(engine_path(run_dir))
    return EngineRecord.from_dict(data) if isinstance(data, dict) and data else None


def save_engine_record(run_dir: Path, record: EngineRecord) -> None:
    """Write ``record`` to ``results/engine.json`` atomically, with its schema version."""
    write_result(engine_path(run_dir), record.to_dict())


class BlockSession:
    """The block engine's side of a ``CellSession``: which models are loaded, each load
    point's window, and the order of every block's cells."""

    def __init__(
        self, plan: ExperimentPlan, models: list[RepositoryModel], record: EngineRecord
    ) -> None:
        self.plan, self.models, self.record = plan, models, record
        self.model_file_bytes = 0
        self._epoch: int | None = None  # the reload epoch the loaded processes belong to

    @property
    def co_loaded(self) -> bool:
        """True when every configuration stays loaded for the whole run."""
        return self.record.coload is not None and self.record.coload.co_loaded

    def plan_for(self, load: LoadPoint, plan: ExperimentPlan | None = None) -> ExperimentPlan:
        """``plan`` (default: the one the engine started with) with the block cell's settings:
        the load point's window (a search's one window for every load)."""
        plan = plan or self.plan
        windows = self.record.windows_ms
        window = windows.get(
            load.key, windows.get(SEARCH_KEY, plan.measurement.measurement_interval_ms)
        )
        return replace(plan, measurement=cell_measurement(plan, window))

    @property
    def search_window_ms(self) -> int:
        """A search's window in ms: the calibrated one, else the plan's measurement interval."""
        return self.record.windows_ms.get(SEARCH_KEY, self.plan.measurement.measurement_interval_ms)

    @classmethod
    def for_search(
        cls,
        session: CellSession,
        start: RepositoryModel,
        model_file_bytes: int,
        seed: str,
        cores: int,
        first_load: LoadPoint,
    ) -> BlockSession:
        """The engine of an adaptive search (``tune``): configurations arrive one by one and
        stay loaded while the memory estimate fits; one window for every load, set from a
        warm-up of the start at its first load (kept across resumes, so the path replays)."""
        run_dir, plan = session.run_dir, session.plan
        started = time.monotonic()
        record = load_engine_record(run_dir) or EngineRecord(ENGINE_BLOCKS, seed)
        record.cores = cores
        engine = cls(plan, [start], record)
        engine.model_file_bytes = model_file_bytes
        decision = decide_coload([start, start], model_file_bytes)
        one_mib, available_mib = decision.estimate_bytes / 2**21, decision.available_bytes / 2**20
        record.coload = replace(
            decision,
            co_loaded=True,
            reason="the search's configurations stay loaded as it adds them, while the memory "
            f"estimate fits in half the memory available (one configuration: {one_mib:,.0f} "
            f"MiB of {available_mib:,.0f} MiB); past that it loads one at a time",
        )
        if SEARCH_KEY not in record.windows_ms:
            session.load(start)
            try:
                speed = engine.warm(session, start, first_load)
            finally:
                session.unload(start, quietly=True)
            record.windows_ms[SEARCH_KEY] = window_ms_for(
                speed or 0.0, first_load.batch_size, plan.measurement.measurement_interval_ms
            )
        record.warmup_s = round(time.monotonic() - started, 1)
        save_engine_record(run_dir, record)
        return engine

    def keep_loaded(self, models: list[RepositoryModel]) -> bool:
        """Whether ``models`` may all stay loaded (the co-load estimate fits); the first time
        they do not, the record says the search fell back to one at a time."""
        fits = decide_coload(models, self.model_file_bytes)
        if not fits.co_loaded and len(models) > 1 and self.record.coload and self.co_loaded:
            self.record.coload = replace(fits, reason="the search fell back to " + fits.reason)
        return fits.co_loaded

    def warm(self, session: CellSession, model: RepositoryModel, load: LoadPoint) -> float | None:
        """A discarded warm-up cell of a configuration just loaded; its throughput."""
        warmup = replace(session.plan, measurement=cell_measurement(session.plan, WARMUP_WINDOW_MS))
        return self._warm_up(session, warmup, model, load)

    @classmethod
    def start(
        cls,
        session: CellSession,
        models: list[RepositoryModel],
        loads: Sequence[LoadPoint],
        coload: CoLoad,
        seed: str,
        cores: int,
    ) -> BlockSession:
        """Load as ``coload`` decided (``decide_coload``), warm every configuration up at every
        load point and set each load point's window (kept from an earlier attempt on a resume)."""
        run_dir, plan = session.run_dir, session.plan
        started = time.monotonic()
        record = load_engine_record(run_dir) or EngineRecord(ENGINE_BLOCKS, seed)
        record.coload = coload
        record.cores = cores
        engine = cls(plan, models, record)
        record.reload_every_blocks = RELOAD_EVERY_BLOCKS if engine.co_loaded else 0
        if engine.co_loaded:
            # In a shuffled order too: whatever favours the first or last model loaded (a
            # stub's place in memory, say) then falls on no configuration in particular.
            order = block_order(models, record.seed, -1)
            record.load_order = [m.variant.name for m in order]
            session.load_together(order)
        warmup = replace(plan, measurement=cell_measurement(plan, WARMUP_WINDOW_MS))
        for load in loads:
            if load.open_loop and load.request_rate_per_s is None:
                # a share of the peak: its rate (and window) come later; a trace's window is
                # whole cycles of it (LoadPoint.window_ms), not calibrated
                continue
            speeds: dict[str, float] = {}
            for model in models:
                if not engine.co_loaded:
                    session.load(model)
                try:
                    speed = engine._warm_up(session, warmup, model, load)
                finally:
                    if not engine.co_loaded:
                        session.unload(model, quietly=True)
                if speed is not None:
                    speeds[model.variant.name] = speed
            record.warmup_infer_per_s[load.key] = speeds
            if load.key not in record.windows_ms:
                slowest = min(speeds.values(), default=0.0)
                record.windows_ms[load.key] = window_ms_for(
                    slowest, load.batch_size, plan.measurement.measurement_interval_ms
                )
        record.warmup_s = round(time.monotonic() - started, 1)
        save_engine_record(run_dir, record)
        return engine

    def _warm_up(
        self, session: CellSession, warmup: ExperimentPlan, model: RepositoryModel, load: LoadPoint
    ) -> float | None:
        """One discarded cell; its throughput, or None when it failed (the fault is recorded,
        a dead server restarted with every configuration loaded again: the cells that follow
        are what counts)."""
        inputs = session.input_files.for_load(load)
        settings = warmup.perf_settings(
            load,
            model.model_name,
            session.server.url(load.protocol),
            inputs.shapes,
            inputs.data_file,
            request_intervals=inputs.intervals_file,
        )
        session.recovery.mark()
        try:
            perf = run_perf(
                session.perf_install,
                settings,
                RunLayout(session.run_dir).benchmark_dir(model.variant.name),
                f"warmup_{load.key}",
                retries=0,
                timeout_s=settings.deadline_s,  # a trace's whole cycles included
            )
        except (PerfAnalyzerError, ServerError) as exc:
            if not session.recovery.recoverable(exc):
                raise
            restarted = session.recovery.handle(f"warm-up of {model.model_name}", exc, False)
            if restarted and self.co_loaded:
                session.load_together(self.models)
            return None
        return perf.measurement.throughput_infer_per_s if perf.measurement else None

    def measure_rounds(
        self, session: CellSession, rounds: Sequence[Round], ids: list[str], note: str = ""
    ) -> bool:
        """Every round is a block: its cells in a shuffled order; False when the time budget
        ran out first (the cells measured until then are kept)."""
        from tritonlab.run_layout import cell_id

        for round_ in rounds:
            cells = [(model, load, repeat) for model, todo in round_ for load, repeat in todo]
            if not cells:
                continue
            block = min(repeat for _, _, repeat in cells)
            self._reload_if_due(session, block, cells)
            for model, load, repeat in block_order(cells, self.record.seed, block):
                if session.over_budget():
                    return False
                if load.key not in self.record.windows_ms:  # a rate from the peak, set now
                    self.record.windows_ms[load.key] = self.plan.measurement.measurement_interval_ms
                    save_engine_record(session.run_dir, self.record)
                if not self.co_loaded:
                    session.load(model)
                try:
                    if session.measure(model, load, repeat, note) is not None:
                        ids.append(cell_id(model.variant.name, load.key, repeat + 1))
                finally:
                    if not self.co_loaded:
                        session.unload(model, quietly=True)
        return True

    def _reload_if_due(
        self, session: CellSession, block: int, cells: list[tuple[RepositoryModel, Any, int]]
    ) -> None:
        """Before the first block of a new epoch (``reload_every_blocks``), unload every
        co-loaded configuration, load them again in a shuffled order and warm each up once
        (discarded) at a load of this block. The processes loaded when the session started
        serve the epoch of the first block measured, so a resume reloads nothing at once."""
        every = self.record.reload_every_blocks
        if not self.co_loaded or every <= 0:
            return
        epoch = block // every
        if self._epoch is None or epoch == self._epoch:
            self._epoch = epoch
            return
        if session.over_budget():
            return  # the block will not be measured: nothing to reload for
        started = time.monotonic()
        for model in self.models:
            session.unload(model, quietly=True)
        order = block_order(self.models, self.record.seed, -1 - epoch)
        session.load_together(order)
        warmup = replace(self.plan, measurement=cell_measurement(self.plan, WARMUP_WINDOW_MS))
        first_load = {m.variant.name: ld for m, ld, _ in reversed(cells)}
        for model in order:
            load = first_load.get(model.variant.name)
            if load is not None:
                self._warm_up(session, warmup, model, load)
        self._epoch = epoch
        self.record.reloads.append(
            Reload(
                before_block=block,
                load_order=tuple(m.variant.name for m in order),
                seconds=round(time.monotonic() - started, 1),
            )
        )
        save_engine_record(session.run_dir, self.record)
