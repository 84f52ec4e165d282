"""The block engine's measuring: every configuration loaded at once, short monitored cells in
a shuffled order per block, co-loaded configurations reloaded every few blocks.

What it decides and keeps across resumes (co-loading, the seed, each load point's window, the
reloads) is ``blocks.EngineRecord``, in ``results/engine.json``; ``blocks.py`` says why the
engine is built as it is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tritonlab.errors import PerfAnalyzerError, ServerError
from tritonlab.experiments.blocks import (
    ENGINE_BLOCKS,
    RELOAD_EVERY_BLOCKS,
    SEARCH_KEY,
    WARMUP_WINDOW_MS,
    CoLoad,
    EngineRecord,
    Reload,
    block_order,
    cell_measurement,
    decide_coload,
    load_engine_record,
    save_engine_record,
    window_ms_for,
)
from tritonlab.experiments.engine import ClassicEngine
from tritonlab.experiments.plan import LoadPoint
from tritonlab.experiments.session import CellSession, Round
from tritonlab.experiments.store import CellResult
from tritonlab.perf.runner import run_perf
from tritonlab.repository.layout import RepositoryModel
from tritonlab.run_layout import RunLayout, cell_id


class BlockEngine(ClassicEngine):
    """The block engine around a ``CellSession``: which models are loaded, each load point's
    window, the order of every block's cells, and cells measured with the interference monitor
    (a disturbed one measured again)."""

    def __init__(
        self, session: CellSession, models: list[RepositoryModel], record: EngineRecord
    ) -> None:
        super().__init__(session)
        self.models, self.record = models, record
        self.model_file_bytes = 0
        self._epoch: int | None = None  # the reload epoch the loaded processes belong to
        if self.co_loaded:
            session.held = list(models)  # a restarted server gets them all back

    @property
    def co_loaded(self) -> bool:
        """True when every configuration stays loaded for the whole run."""
        return self.record.coload is not None and self.record.coload.co_loaded

    @property
    def search_window_ms(self) -> int:
        """A search's window in ms: the calibrated one, else the plan's measurement interval."""
        return self.record.windows_ms.get(
            SEARCH_KEY, self.session.plan.measurement.measurement_interval_ms
        )

    @classmethod
    def for_search(
        cls,
        session: CellSession,
        start: RepositoryModel,
        model_file_bytes: int,
        seed: str,
        cores: int,
        first_load: LoadPoint,
    ) -> BlockEngine:
        """The engine of an adaptive search (``tune``): configurations arrive one by one and
        stay loaded while the memory estimate fits; one window for every load, set from a
        warm-up of the start at its first load (kept across resumes, so the path replays)."""
        run_dir, plan = session.run_dir, session.plan
        started = time.monotonic()
        record = load_engine_record(run_dir) or EngineRecord(ENGINE_BLOCKS, seed)
        record.cores = cores
        decision = decide_coload([start, start], model_file_bytes)
        one_mib, available_mib = decision.estimate_bytes / 2**21, decision.available_bytes / 2**20
        record.coload = replace(
            decision,
            co_loaded=True,
            reason="the search's configurations stay loaded as it adds them, while the memory "
            f"estimate fits in half the memory available (one configuration: {one_mib:,.0f} "
            f"MiB of {available_mib:,.0f} MiB); past that it loads one at a time",
        )
        engine = cls(session, [start], record)
        engine.model_file_bytes = model_file_bytes
        if SEARCH_KEY not in record.windows_ms:
            session.load(start)
            try:
                speed = engine.warm(start, first_load)
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
            self.session.held = []
        return fits.co_loaded

    @classmethod
    def start(
        cls,
        session: CellSession,
        models: list[RepositoryModel],
        loads: Sequence[LoadPoint],
        coload: CoLoad,
        seed: str,
        cores: int,
    ) -> BlockEngine:
        """Load as ``coload`` decided (``decide_coload``), warm every configuration up at every
        load point and set each load point's window (kept from an earlier attempt on a resume)."""
        run_dir, plan = session.run_dir, session.plan
        started = time.monotonic()
        record = load_engine_record(run_dir) or EngineRecord(ENGINE_BLOCKS, seed)
        record.coload = coload
        record.cores = cores
        engine = cls(session, models, record)
        record.reload_every_blocks = RELOAD_EVERY_BLOCKS if engine.co_loaded else 0
        if engine.co_loaded:
            # In a shuffled order too: whatever favours the first or last model loaded (a
            # stub's place in memory, say) then falls on no configuration in particular.
            order = block_order(models, record.seed, -1)
            record.load_order = [m.variant.name for m in order]
            session.load_together(order)
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
                    speed = engine.warm(model, load)
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

    def warm(self, model: RepositoryModel, load: LoadPoint) -> float | None:
        """A discarded warm-up cell of a configuration loaded; its throughput, or None when it
        failed (the fault is recorded, a dead server restarted with every configuration loaded
        again: the cells that follow are what counts)."""
        session = self.session
        warmup = replace(
            self.session.plan, measurement=cell_measurement(self.session.plan, WARMUP_WINDOW_MS)
        )
        url = session.server.url(load.protocol)
        settings = session.input_files.for_load(load).settings(warmup, load, model.model_name, url)
        session.recovery.mark()
        try:
            perf = run_perf(
                session.perf_install,
                settings,
                RunLayout(session.run_dir).benchmark_dir(model.variant.name),
                f"warmup_{load.key}",
                retries=0,
                timeout_s=settings.deadline_s,  # a trace's whole cycles included
                cpus=session.client_cpus,
            )
        except (PerfAnalyzerError, ServerError) as exc:
            if not session.recovery.recoverable(exc):
                raise
            restarted = session.recovery.handle(f"warm-up of {model.model_name}", exc, False)
            if restarted and self.co_loaded:
                session.load_together(self.models)
            return None
        return perf.measurement.throughput_infer_per_s if perf.measurement else None

    def measure(
        self, model: RepositoryModel, load: LoadPoint, repeat: int, note: str = ""
    ) -> CellResult | None:
        """One cell of the loaded ``model`` in its load point's window, monitored (a disturbed
        one measured again, at most ``DISTURBED_RETRIES`` times); None: given up on. A search
        has one window for every load."""
        window = self.record.windows_ms.get(load.key, self.search_window_ms)
        plan = replace(self.session.plan, measurement=cell_measurement(self.session.plan, window))
        return self.session.measure(model, load, repeat, note, plan=plan, monitored=True)

    def measure_rounds(self, rounds: Sequence[Round], ids: list[str], note: str = "") -> bool:
        """Every round is a block: its cells in a shuffled order; False when the time budget
        ran out first (the cells measured until then are kept)."""
        session = self.session
        for round_ in rounds:
            cells = [(model, load, repeat) for model, todo in round_ for load, repeat in todo]
            if not cells:
                continue
            block = min(repeat for _, _, repeat in cells)
            self._reload_if_due(block, cells)
            for model, load, repeat in block_order(cells, self.record.seed, block):
                if session.over_budget():
                    return False
                if load.key not in self.record.windows_ms:  # a rate from the peak, set now
                    self.record.windows_ms[load.key] = (
                        self.session.plan.measurement.measurement_interval_ms
                    )
                    save_engine_record(session.run_dir, self.record)
                if not self.co_loaded:
                    session.load(model)
                try:
                    if self.measure(model, load, repeat, note) is not None:
                        ids.append(cell_id(model.variant.name, load.key, repeat + 1))
                finally:
                    if not self.co_loaded:
                        session.unload(model, quietly=True)
        return True

    def _reload_if_due(self, block: int, cells: list[tuple[RepositoryModel, Any, int]]) -> None:
        """Before the first block of a new epoch (``reload_every_blocks``), unload every
        co-loaded configuration, load them again in a shuffled order and warm each up once
        (discarded) at a load of this block. The processes loaded when the session started
        serve the epoch of the first block measured, so a resume reloads nothing at once."""
        session, every = self.session, self.record.reload_every_blocks
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
        first_load = {m.variant.name: ld for m, ld, _ in reversed(cells)}
        for model in order:
            if (load := first_load.get(model.variant.name)) is not None:
                self.warm(model, load)
        self._epoch = epoch
        self.record.reloads.append(
            Reload(
                before_block=block,
                load_order=tuple(m.variant.name for m in order),
                seconds=round(time.monotonic() - started, 1),
            )
        )
        save_engine_record(session.run_dir, self.record)
