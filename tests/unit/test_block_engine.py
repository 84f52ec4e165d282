"""The block engine's parts that need no server: co-load decision, block order, windows, the
cell-cost estimate, and the interference monitor against a real busy process."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from tritonlab.errors import PerfAnalyzerError
from tritonlab.experiments.adaptive_run import cell_cost_s
from tritonlab.experiments.blocks import (
    MIN_WINDOW_MS,
    block_order,
    decide_coload,
    run_seed,
    window_ms_for,
)
from tritonlab.experiments.interference import (
    DISTURBED_FOREIGN_CORES,
    MAX_DISTURBED_SHARE,
    RETRY_PROBE_EVERY,
    RETRY_WINDOW,
    Interference,
    RetryPolicy,
    Window,
)
from tritonlab.experiments.store import CellResult, load_cells
from tritonlab.perf.locate import PerfAnalyzerInstall
from tritonlab.perf.runner import run_perf
from tritonlab.perf.settings import PerfSettings
from tritonlab.report.engine_section import interference_lines, noise_floor_lines
from tritonlab.repository.layout import RepositoryModel
from tritonlab.repository.variants import ServingVariant, aa_control
from tritonlab.stats.noise_floor import noise_floors
from tritonlab.stats.run_trust import run_trust


def _models(*counts: int) -> list[RepositoryModel]:
    return [
        RepositoryModel(f"m{i}", ServingVariant(f"v{i}", "v", instance_count=c), Path("."))
        for i, c in enumerate(counts)
    ]


def test_coload_fits_or_falls_back_with_the_reason() -> None:
    models = _models(1, 1, 2, 1)
    fits = decide_coload(models, 1 << 20, available_bytes=24 << 30)
    assert fits.co_loaded and "co-loaded" in fits.reason and fits.instances == 5
    # A 2 GiB model, 5 instances: ~31 GiB estimated against 24 GiB available.
    big = decide_coload(models, 2 << 30, available_bytes=24 << 30)
    assert not big.co_loaded
    assert "one configuration loaded at a time" in big.reason and "MiB available" in big.reason


def test_block_order_is_a_reproducible_permutation_that_varies_by_block() -> None:
    cells = list(range(6))
    first = block_order(cells, "seed", 0)
    assert sorted(first) == cells and block_order(cells, "seed", 0) == first
    orders = {tuple(block_order(cells, "seed", b)) for b in range(20)}
    assert len(orders) > 10
    # No position belongs to one configuration: each is first in some block.
    assert {block_order(cells, "seed", b)[0] for b in range(40)} == set(cells)


def test_two_fresh_runs_of_one_plan_get_different_orders() -> None:
    """The seed carries the plan's fingerprint and a random part: fresh runs are replicates."""
    cells = list(range(6))
    seeds = {run_seed("852ce0dd4cd53b88") for _ in range(5)}
    assert len(seeds) == 5 and all(s.startswith("852ce0dd4cd53b88-") for s in seeds)
    orders = {tuple(tuple(block_order(cells, s, b)) for b in range(4)) for s in seeds}
    assert len(orders) == 5


def test_window_holds_enough_requests_within_the_plan_window() -> None:
    assert window_ms_for(4000.0, 1, 2000) == MIN_WINDOW_MS  # fast model: the shortest
    assert window_ms_for(200.0, 1, 2000) == 500  # 100 requests at 200/s
    assert window_ms_for(30.0, 1, 2000) == 2000  # slow model: capped at the plan's window
    assert window_ms_for(0.0, 1, 2000) == 2000


def test_cell_cost_comes_from_the_cells_not_the_run() -> None:
    # A session that spent 180 s starting up but measured cells of about 1 s each.
    session = SimpleNamespace(cell_seconds=[0.9, 1.1, 1.0, 7.0, 1.0])
    assert cell_cost_s(session) == pytest.approx(1.0)  # the median: one slow retry does not count
    assert cell_cost_s(SimpleNamespace(cell_seconds=[])) == 0.0


def test_aa_control_is_the_baseline_under_another_name() -> None:
    base = ServingVariant("baseline", "b", dynamic_batching=True, max_batch_size=8)
    control = aa_control(base)
    assert control.control and control.name != base.name
    assert {
        k: v for k, v in vars(control).items() if k not in ("name", "description", "control")
    } == {k: v for k, v in vars(base).items() if k not in ("name", "description", "control")}
    assert "control" not in base.to_dict() and control.to_dict()["control"] is True


def test_monitor_sees_a_busy_process_as_foreign_until_it_is_counted_as_ours() -> None:
    """A process the test starts spins through the window: it is foreign CPU (the cell is
    disturbed); counted as the measurement's own, the foreign figure drops by what it used.
    (Another test worker may load the machine too, so the test compares, not absolutes.)"""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        spinner = psutil.Process(busy.pid)
        time.sleep(0.3)
        before = sum(spinner.cpu_times()[:2])
        started = time.monotonic()
        window = Window()
        used = 0.0
        while used <= 0.5 and time.monotonic() - started < 8.0:  # a loaded runner: longer
            time.sleep(0.25)
            used = sum(spinner.cpu_times()[:2]) - before
        as_foreign = window.close(measured_cpu_s=0.0)
        as_ours = window.close(measured_cpu_s=used)
        wall = time.monotonic() - started
    finally:
        busy.kill()
        busy.wait()
    assert used > 0.4  # it did spin, even on a shared machine
    assert as_foreign.disturbed and as_foreign.foreign_cores > DISTURBED_FOREIGN_CORES
    # counted as ours, the foreign figure drops by the spinner's cores over the window
    assert as_foreign.foreign_cores - as_ours.foreign_cores == pytest.approx(used / wall, abs=0.2)


def _stand_in(tmp_path: Path, write_csv: bool) -> PerfAnalyzerInstall:
    """A stand-in for perf_analyzer's exit hang (seen with HTTP at concurrency 256): it prints
    the real console output and writes the real CSV of a recorded run (or not), then never
    exits. Only the hang is simulated; the files are perf_analyzer's own."""
    fixtures = Path(__file__).parent.parent / "fixtures" / "perf"
    script = tmp_path / "perf_analyzer"
    csv = fixtures / "baseline_c8.csv"
    console = fixtures / "baseline_c8.console.txt"
    copy = f'cp "{csv}" "$csv"; ' if write_csv else ""
    script.write_text(
        "#!/bin/sh\n"
        'csv=""; while [ $# -gt 0 ]; do [ "$1" = "-f" ] && csv="$2"; shift; done\n'
        f'cat "{console}"; {copy}exec sleep 600\n'
    )
    script.chmod(0o755)
    return PerfAnalyzerInstall(script, (), "stand-in")


def test_results_written_before_an_exit_hang_are_kept(tmp_path: Path) -> None:
    settings = PerfSettings(model_name="m", url="localhost:1")
    run = run_perf(_stand_in(tmp_path, True), settings, tmp_path / "out", "c", 0, timeout_s=2)
    assert run.stable and run.measurement is not None
    assert run.measurement.throughput_infer_per_s > 0
    assert any("did not exit" in w for w in run.warnings)


def test_a_hang_before_results_is_still_an_error(tmp_path: Path) -> None:
    settings = PerfSettings(model_name="m", url="localhost:1")
    with pytest.raises(PerfAnalyzerError, match="ran past"):
        run_perf(_stand_in(tmp_path, False), settings, tmp_path / "out", "c", 0, timeout_s=2)


def _cells(seed_run_dir: Path) -> list[CellResult]:
    return load_cells(seed_run_dir)


def test_the_log_names_disturbed_cells_and_the_idle_models_cpu(seed_run_dir: Path) -> None:
    cells = _cells(seed_run_dir)
    quiet = Interference(0.01, 0.0, 0.002, False)
    retried = Interference(0.05, 0.0, 0.001, False, attempts=2)
    stuck = Interference(0.9, 0.0, 0.004, True, attempts=3)
    marked = [replace(c, interference=quiet) for c in cells]
    marked[0] = replace(cells[0], interference=retried)
    marked[1] = replace(cells[1], interference=stuck)
    text = "\n".join(interference_lines(marked))
    assert f"Re-measured because disturbed: 2 cell(s): {cells[0].cell_id}" in text
    assert f"Stored as disturbed (every try made was): 1: {cells[1].cell_id}" in text
    assert "3 retries in all, 1 of the cells came back undisturbed" in text
    assert "Kept disturbed without all retries" not in text
    assert "max 0.90" in text and "max 0.004 cores" in text
    assert interference_lines(cells) == []  # cells measured without the monitor: no section
    marked[2] = replace(cells[2], interference=replace(stuck, attempts=1))
    text = "\n".join(interference_lines(marked))
    assert f"Kept disturbed without all retries: 1 cell(s): {cells[2].cell_id}" in text


def test_retries_stop_while_they_are_not_clearing_cells_and_probe_for_the_end() -> None:
    """A steady load: twelve retries in a row stay disturbed, so disturbed cells are kept as
    measured, but one in four is still retried; once those probes clear, retries resume."""
    policy = RetryPolicy()
    for _ in range(RETRY_WINDOW):
        assert policy.retry()
        policy.record(cleared=False)
    assert not policy.paying()
    assert [policy.retry() for _ in range(2 * RETRY_PROBE_EVERY)] == (
        [False] * (RETRY_PROBE_EVERY - 1) + [True]
    ) * 2
    for _ in range(4):  # the load ended: a third of the last twelve retries cleared
        policy.record(cleared=True)
    assert policy.paying() and policy.retry()


def test_an_aa_control_that_differs_says_the_run_is_not_to_be_trusted(
    seed_run_dir: Path,
) -> None:
    cells = [c for c in _cells(seed_run_dir) if c.variant.name in ("baseline", "batch_0ms_x1")]
    # The batching cells relabelled as the control: a "control" that clearly differs.
    control = aa_control(next(c.variant for c in cells if c.variant.name == "baseline"))
    relabelled = [
        replace(c, variant=control) if c.variant.name == "batch_0ms_x1" else c for c in cells
    ]
    floors = noise_floors(relabelled)
    assert len(floors) == 1 and not floors[0].trusted
    assert "not to be trusted" in "\n".join(noise_floor_lines(floors))
    same = noise_floors([c for c in cells if c.variant.name == "baseline"])
    assert same == []  # no control, no floor


def test_a_run_with_too_many_disturbed_cells_is_not_called_trusted(seed_run_dir: Path) -> None:
    """Past MAX_DISTURBED_SHARE of its cells stored disturbed, a run's log does not call its
    verdicts trusted, even where its A/A control reads no difference; at or below, it does."""
    cells = _cells(seed_run_dir)
    control = aa_control(next(c.variant for c in cells if c.variant.name == "baseline"))
    both = cells + [replace(c, variant=control) for c in cells if c.variant.name == "baseline"]
    floors = noise_floors(both)
    assert len(floors) == 1 and floors[0].trusted
    quiet = Interference(0.01, 0.0, 0.0, False)
    stuck = Interference(0.9, 0.0, 0.0, True, attempts=3)
    limit = math.floor(MAX_DISTURBED_SHARE * len(both))  # the most cells that may stay disturbed
    assert limit >= 1  # enough cells for a share below the limit to exist
    within = [replace(c, interference=stuck if i < limit else quiet) for i, c in enumerate(both)]
    beyond = [replace(c, interference=stuck if i <= limit else quiet) for i, c in enumerate(both)]
    # the control reads no difference either way: the run's trust, not the control, says no
    assert noise_floors(within)[0].trusted and noise_floors(beyond)[0].trusted
    trust_within = run_trust(within, noise_floors(within))
    trust_beyond = run_trust(beyond, noise_floors(beyond))
    assert trust_within.trusted and not trust_beyond.trusted
    within_text = "\n".join(noise_floor_lines(noise_floors(within), trust_within, True))
    assert "can be trusted" in within_text
    assert "within the 16%" in "\n".join(interference_lines(within))
    beyond_text = "\n".join(noise_floor_lines(noise_floors(beyond), trust_beyond, True))
    assert "not to be trusted" in beyond_text and "can be trusted as far" not in beyond_text
    assert "more than 16%, so this run's verdicts are not to be trusted" in "\n".join(
        interference_lines(beyond)
    )
    assert pytest.approx(1 - (1 / math.sqrt(2)) ** 0.5) == MAX_DISTURBED_SHARE


def test_a_swallowed_interrupt_is_raised_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python drops a KeyboardInterrupt raised in an at-fork callback; the handler's flag makes
    the next wait raise it again."""
    from tritonlab import procenv

    monkeypatch.setattr(procenv, "_INTERRUPTED", False)
    procenv.raise_if_interrupted()  # nothing pending: nothing raised
    with pytest.raises(KeyboardInterrupt):
        procenv.interrupt(2, None)
    with pytest.raises(KeyboardInterrupt):  # as if the first had been swallowed
        procenv.raise_if_interrupted()


class _ReloadRecorder:
    """The parts of a CellSession that a reload touches, recording what it is asked to do."""

    def __init__(self, run_dir: Path) -> None:
        from tritonlab.experiments.plan import PlanBasics, seed_comparison_plan

        self.run_dir = run_dir
        self.plan = seed_comparison_plan(PlanBasics("m"))
        self.calls: list[str] = []
        self.held: list[RepositoryModel] = []

    def over_budget(self) -> bool:
        return False

    def load(self, model: RepositoryModel) -> None:
        self.calls.append(f"load {model.variant.name}")

    def load_together(self, models: list[RepositoryModel]) -> None:
        for model in models:
            self.load(model)

    def unload(self, model: RepositoryModel, quietly: bool = False) -> None:
        self.calls.append(f"unload {model.variant.name}")


def test_co_loaded_configurations_are_reloaded_at_each_new_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New processes before blocks 10 and 20 (not at the first block measured, which the
    session's own load serves, also after a resume), each warmed up; engine.json says so."""
    from tritonlab.experiments.block_engine import BlockEngine
    from tritonlab.experiments.blocks import EngineRecord, load_engine_record
    from tritonlab.experiments.plan import LoadPoint

    models = _models(1, 1, 2)
    record = EngineRecord("blocks", "s", coload=decide_coload(models, 1 << 20))
    record.reload_every_blocks = 10  # off by default (measured not to pay): set as a trial
    session = _ReloadRecorder(tmp_path)
    engine = BlockEngine(session, models, record)  # type: ignore[arg-type]
    assert session.held == models  # co-loaded: a restarted server gets them all back
    warmed: list[str] = []
    monkeypatch.setattr(engine, "warm", lambda model, load: warmed.append(model.variant.name))
    (tmp_path / "results").mkdir()
    load = LoadPoint()
    for block in (7, 8, 9, 10, 11, 19, 20):  # a resume at block 7
        engine._reload_if_due(block, [(m, load, block) for m in models])
    assert [r.before_block for r in record.reloads] == [10, 20]
    assert session.calls.count("unload v0") == 2 and session.calls.count("load v2") == 2
    assert sorted(warmed) == sorted([m.variant.name for m in models] * 2)
    first = session.calls[: 2 * len(models)]
    assert all(c.startswith("unload") for c in first[: len(models)])
    stored = load_engine_record(tmp_path)
    assert stored is not None and stored.reload_every_blocks == 10
    assert [r.before_block for r in stored.reloads] == [10, 20]
    # one configuration loaded at a time: nothing to reload
    alone = BlockEngine(session, models, EngineRecord("blocks", "s"))  # type: ignore[arg-type]
    alone._reload_if_due(0, [])
    alone._reload_if_due(30, [])
    assert len(session.calls) == 4 * len(models)
