"""Measuring one cell on a started server, and the session that loads configurations for it.

``CellSession`` loads a configuration, measures a cell as it is told (each saved the moment it
exists, faults recovered through ``recovery.py``, a monitored cell the interference monitor
flags measured again) and unloads it. It knows no engine: the engines (``engine.py``,
``block_engine.py``) decide the order, the windows, what stays loaded (``held``); the runner
(``runner.py``) decides which cells, and the session does not know whether a project, a sweep
or a tune asked for them.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from tritonlab.client.infer import InferCheck
from tritonlab.errors import ModelError, PerfAnalyzerError, PlanError, ServerError
from tritonlab.experiments.interference import DISTURBED_RETRIES, RetryPolicy, Window, idle_stubs
from tritonlab.experiments.manifest import Manifest, utc_now
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint
from tritonlab.experiments.recovery import ATTEMPTS_PER_CELL, Recovery, stub_died
from tritonlab.experiments.store import CellResult, save_cell, save_manifest
from tritonlab.models.inputs import ModelInputs, with_dynamic_dim
from tritonlab.models.inspect import OnnxModelInfo
from tritonlab.paths import portable_command, portable_path
from tritonlab.perf.locate import PerfAnalyzerInstall
from tritonlab.perf.runner import run_perf
from tritonlab.perf.settings import PerfSettings
from tritonlab.repository.layout import RepositoryModel, load_order
from tritonlab.run_layout import CELLS_DIR, RunLayout, cell_id
from tritonlab.server.endpoint import UNLOAD_WAIT_S, ServerEndpoint
from tritonlab.server.process import TritonServer
from tritonlab.server.stats import StatsSnapshot, stats_delta, tree_cpu_seconds

ProgressCallback = Callable[[int, int, str], None]

# One interleaved round: every configuration's (load, repeat) cells, in measuring order.
Round = list[tuple[RepositoryModel, list[tuple[LoadPoint, int]]]]

T = TypeVar("T")


@dataclass
class Progress:
    """How far a run is, cells done of cells to do, told to ``callback`` as each cell starts
    (the runner counts what is on disk; the adaptive rounds add their cells)."""

    callback: ProgressCallback | None = None
    done: int = 0
    total: int = 0

    def tell(self, text: str) -> None:
        """Tell the callback (if any) where the run is, with ``text``."""
        if self.callback is not None:
            self.callback(self.done, self.total, text)


@dataclass(frozen=True)
class LoadInputs:
    """What perf_analyzer sends under one load (``intervals_file``: under a trace)."""

    shapes: dict[str, tuple[int, ...]]
    data_file: str | None
    intervals_file: str | None = None

    def settings(self, plan: ExperimentPlan, load: LoadPoint, model: str, url: str) -> PerfSettings:
        """``plan``'s perf_analyzer settings for ``load`` on ``model`` at ``url``, sending these."""
        return plan.perf_settings(
            load, model, url, self.shapes, self.data_file, self.intervals_file
        )


class InputFiles:
    """perf_analyzer's JSON data files under ``run_dir/inputs``, one per sequence length;
    with ``fresh``, rewritten with samples drawn afresh before every cell (none repeats)."""

    def __init__(
        self, inputs: ModelInputs, info: OnnxModelInfo, run_dir: Path, fresh: bool = False
    ) -> None:
        if fresh and inputs.samples:
            raise ModelError(
                "fresh_inputs draws its own samples for every cell: leave out --input-data, "
                "or measure your samples without fresh_inputs"
            )
        self.inputs, self.info, self.run_dir, self.fresh = inputs, info, run_dir, fresh
        self._made: dict[int | None, LoadInputs] = {}
        self._sized: dict[int | None, ModelInputs] = {}
        # Where fresh samples start: a new draw each run, so that a resumed run's cells do not
        # repeat an earlier process's samples either.
        self._next_seed = secrets.randbits(31)

    def for_load(self, load: LoadPoint) -> LoadInputs:
        """Shapes and perf_analyzer data file for ``load``'s sequence length (written once each,
        or before every cell when ``fresh``).

        ``ModelError`` when a sequence length is asked of the user's ``--input-data`` samples.
        """
        length = load.sequence_length
        if length not in self._sized:
            self._sized[length] = (
                self.inputs if length is None else with_dynamic_dim(self.inputs, self.info, length)
            )
        inputs = self._sized[length]
        if length not in self._made or self.fresh:
            path = RunLayout(self.run_dir).perf_data(length)
            if self.fresh:
                self._next_seed += inputs.fresh_entries()
                inputs.write_perf_data(path, inputs.fresh_entries(), self._next_seed)
            else:
                inputs.write_perf_data(path)
            dynamic = {s.name for s in self.info.inputs if -1 in s.dims}
            shapes = {k: v for k, v in inputs.sent_shapes.items() if k in dynamic}
            self._made[length] = LoadInputs(shapes, str(path))
        if load.trace is None:
            return self._made[length]
        intervals = RunLayout(self.run_dir).trace_intervals(load.trace.name)
        if not intervals.is_file():  # the pipeline copies every trace in before measuring
            raise PlanError(f"load {load.key}: its trace's interval file {intervals} is missing")
        return replace(self._made[length], intervals_file=str(intervals))


def _called_snapshots(server: ServerEndpoint, model: RepositoryModel) -> dict[str, StatsSnapshot]:
    """The statistics of every model ``model`` calls, by their names in the user's repository."""
    return {
        name: StatsSnapshot.from_triton(server.model_statistics(served))
        for name, served in model.called
    }


class CellSession:
    """A started server and what measuring on it needs (the module's docstring says what)."""

    def __init__(
        self,
        server: ServerEndpoint,
        perf_install: PerfAnalyzerInstall,
        plan: ExperimentPlan,
        run_dir: Path,
        input_files: InputFiles,
        recovery: Recovery,
        progress: Progress,
        deadline: float | None,
        manifest: Manifest,
    ) -> None:
        self.server, self.perf_install, self.plan = server, perf_install, plan
        self.run_dir, self.input_files, self.recovery = run_dir, input_files, recovery
        self.progress, self.deadline, self.manifest = progress, deadline, manifest
        self.measured: list[str] = []
        self.checks: list[InferCheck] = []
        # Configurations an engine keeps loaded (the block engine sets them): a restarted server
        # gets them back at once; none: each configuration is loaded when it comes to it.
        self.held: list[RepositoryModel] = []
        # Wall seconds of every cell measured in this session (retries included): what the
        # stopping rule's budget check estimates a cell's cost from.
        self.cell_seconds: list[float] = []
        # Whether a disturbed cell is worth measuring again (the interference monitor's retries).
        self.retries = RetryPolicy()

    @property
    def client_cpus(self) -> tuple[int, ...]:
        """The CPUs perf_analyzer runs on (``cpu_split.py``; empty: any)."""
        split = self.manifest.cpu_split
        return split.client_cpus if split is not None else ()

    def measure_cell(
        self,
        model: RepositoryModel,
        load: LoadPoint,
        repeat: int,
        plan: ExperimentPlan,
        folder: str = CELLS_DIR,
        monitor_tries: int = 0,
        last_try: bool = True,
    ) -> CellResult:
        """Measure and save one cell; with ``monitor_tries`` (the block engine), the interference
        monitor's reading is stored with it (``monitor_tries``: this cell's attempt number). A
        disturbed attempt that is not ``last_try`` is not saved (the next try replaces it), so a
        stored cell never changes once written."""
        server, run_dir = self.server, self.run_dir
        cid = cell_id(model.variant.name, load.key, repeat + 1)
        settings = self.input_files.for_load(load).settings(
            plan, load, model.model_name, server.url(load.protocol)
        )
        processes = server.process_tree() if isinstance(server, TritonServer) else []
        log_offset = server.log_size()
        before = StatsSnapshot.from_triton(server.model_statistics(model.model_name))
        steps_before = _called_snapshots(server, model)
        called = (served for _, served in model.called)
        idle = idle_stubs(processes, model.model_name, *called) if monitor_tries else []
        idle_before = tree_cpu_seconds(idle)
        cpu_before = tree_cpu_seconds(processes)
        started = utc_now()
        window = Window() if monitor_tries else None
        try:
            perf = run_perf(
                self.perf_install,
                settings,
                RunLayout(run_dir).benchmark_dir(model.variant.name),
                f"{load.key}__r{repeat + 1}",
                retries=plan.measurement.retries_when_unstable,
                timeout_s=settings.deadline_s,
                cpus=self.client_cpus,
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
        steps_after = _called_snapshots(server, model)
        # The exact command, written portably (run folder relative, cache and venv as variables).
        files: dict[str, Any] = {
            name: portable_path(path, run_dir)
            for name in ("input_data", "request_intervals")
            if (path := getattr(perf.settings, name)) is not None
        }
        perf = replace(
            perf,
            command=portable_command(perf.command, run_dir, cwd=Path.cwd()),
            settings=replace(perf.settings, **files),
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
            backend_fallbacks=server.log_text(log_offset).count(FALLBACK_MARKER),
            interference=interference,
            steps={n: stats_delta(steps_before[n], steps_after[n]) for n in steps_before},
        )
        if last_try or interference is None or not interference.disturbed:
            save_cell(run_dir, cell, folder)
        return cell

    def over_budget(self) -> bool:
        """True once the run's time budget (if any) has passed."""
        return self.deadline is not None and time.monotonic() > self.deadline

    def load(self, model: RepositoryModel) -> None:
        """Load a configuration, and the models it calls first (a server that dies while loading
        is restarted once)."""
        for name in load_order(model):
            _load_recovering(self.server, self.recovery, name)

    def load_together(self, models: Sequence[RepositoryModel]) -> None:
        """Load ``models`` at once, then each in turn as ``load`` does. Triton loads the
        requests it has at once side by side (their backend stubs start in parallel: about 2 s
        each here); the turn that follows returns at once for a model that loaded, and loads
        again, with the recovery behind it, one that did not (a server that died restarted)."""

        def attempt(model: RepositoryModel) -> None:
            with contextlib.suppress(Exception):  # the turn below reports it
                for name in load_order(model):
                    self.server.load_model(name)

        together(attempt, models)
        for model in models:
            self.load(model)

    def unload(self, model: RepositoryModel, quietly: bool = False) -> None:
        """Unload it. A server that died meanwhile (between cells, say) is restarted: a new
        server has nothing loaded, which is what the unload was for. A live server that refuses
        stops the run, unless another error is on its way up."""
        if quietly:
            unload_quietly(self.server, model.model_name)
            return
        try:
            self.server.unload_model(model.model_name)
        except ServerError as exc:
            if not self.recovery.server_died():
                raise
            self.recovery.handle(f"unloading {model.model_name}", exc, last_attempt=False)
            self.reload_after_restart()

    def reload_after_restart(self) -> None:
        """After a restart, load again what is held (co-loaded configurations); a session that
        holds nothing loads each configuration when it comes to it."""
        if self.held:
            self.load_together(self.held)  # a new server has nothing loaded

    def measure(
        self,
        model: RepositoryModel,
        load: LoadPoint,
        repeat: int,
        note: str = "",
        plan: ExperimentPlan | None = None,
        monitored: bool = False,
    ) -> CellResult | None:
        """Measure one cell of the loaded ``model`` with ``plan``'s settings (default: the
        session's) and save it; None when it was given up on after repeated faults
        (``results/faults.json`` says why). A ``monitored`` cell carries the interference
        monitor's reading, and one it flags is measured again, at most ``DISTURBED_RETRIES``
        times and only while retries are clearing cells (``RetryPolicy``; else it is kept as
        measured, flagged)."""
        cid = cell_id(model.variant.name, load.key, repeat + 1)
        self.progress.tell(cid + note)
        started = time.monotonic()
        tries = 1 + (DISTURBED_RETRIES if monitored else 0)
        try:
            cell = None
            for attempt in range(1, tries + 1):
                cell = self._measure_recovering(
                    model, load, repeat, plan or self.plan, attempt if monitored else 0,
                    attempt == tries,
                )  # fmt: skip
                if cell is None or cell.interference is None or not cell.interference.disturbed:
                    if attempt > 1:
                        self.retries.record(cleared=True)
                    break
                if attempt > 1:
                    self.retries.record(cleared=False)
                if attempt < tries and not self.retries.retry():
                    save_cell(self.run_dir, cell)  # kept as measured: retries are not clearing
                    break
            if cell is not None:
                self.measured.append(cid)
            return cell
        finally:
            self.progress.done += 1
            self.cell_seconds.append(time.monotonic() - started)

    def _measure_recovering(
        self,
        model: RepositoryModel,
        load: LoadPoint,
        repeat: int,
        plan: ExperimentPlan,
        monitor_tries: int,
        last_try: bool,
    ) -> CellResult | None:
        server, recovery = self.server, self.recovery
        cid = cell_id(model.variant.name, load.key, repeat + 1)
        for attempt in range(1, ATTEMPTS_PER_CELL + 1):
            recovery.mark()
            try:
                return self.measure_cell(
                    model, load, repeat, plan, monitor_tries=monitor_tries, last_try=last_try
                )
            except (ServerError, PerfAnalyzerError) as exc:
                last = attempt == ATTEMPTS_PER_CELL
                if not recovery.recoverable(exc, last):
                    raise
                restarted = recovery.handle(cid, exc, last_attempt=last)
                if restarted and self.held:
                    self.reload_after_restart()
                    continue
                if not restarted:  # reload: a stub that died starts afresh
                    # (not waited for when the stub died: Triton never finishes that unload)
                    wait_s = 0.0 if stub_died(exc) else UNLOAD_WAIT_S
                    unload_quietly(server, model.model_name, wait_s)
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
                    ids.append(cell_id(model.variant.name, load.key, repeat + 1))
            finished = True
        finally:
            self.unload(model, quietly=not finished)  # the first error is the one shown
        return True

    def save_manifest(self, **changes: Any) -> None:
        """Rewrite the manifest with ``changes`` (e.g. a plan that grew during a tune)."""
        self.manifest = replace(self.manifest, **changes)
        save_manifest(self.run_dir, self.manifest)


FALLBACK_MARKER = "tritonlab-adapter-fallback"  # backends/adapter.py prints it


def together(call: Callable[[T], object], items: Sequence[T]) -> None:
    """``call`` on every item at once (threads: each is a request to the server)."""
    if items:
        with ThreadPoolExecutor(max_workers=len(items)) as pool:
            list(pool.map(call, items))


def _load_recovering(server: ServerEndpoint, recovery: Recovery, model_name: str) -> None:
    """Load a configuration; a server that dies while loading is restarted once and retried."""
    try:
        server.load_model(model_name)
    except ServerError as exc:
        if not recovery.server_died():
            raise
        recovery.handle(f"loading {model_name}", exc, last_attempt=False)
        server.load_model(model_name)


def unload_quietly(server: ServerEndpoint, model_name: str, wait_s: float = UNLOAD_WAIT_S) -> None:
    """Unload while another error is already on its way up (that error is the one to show);
    wait up to ``wait_s`` for it to go."""
    with contextlib.suppress(Exception):
        server.unload_model(model_name, wait_s)
