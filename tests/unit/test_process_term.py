"""The process term (``stats/process_term.py``): its estimate recovers a planted spread of
processes, verdicts carry it (wider intervals, the method says so), a co-loaded run's cells are
marked for it, and on simulated runs whose configurations each have a process offset of their
own, intervals with the term estimated from other runs keep their coverage where intervals
without it do not."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from tritonlab.experiments.blocks import CoLoad, EngineRecord, save_engine_record
from tritonlab.experiments.store import CellResult, with_process_lifetimes
from tritonlab.stats.aggregate import compare_figure, summarise
from tritonlab.stats.calibration import Tally, block_reading
from tritonlab.stats.error_rates import packaged_process_term
from tritonlab.stats.process_term import ProcessTerm, estimate_sd_log, widened
from tritonlab.stats.summary import Summary
from tritonlab.stats.verdicts import compare


def _run(rng: random.Random, blocks: int, process_sd: float, change: float = 0.0):
    """Two configurations of one run: each with its process's own offset for the whole run, a
    shared drift, independent noise per cell, and a true change on the variant."""
    offsets = [rng.gauss(0.0, process_sd) for _ in range(2)]
    reference, variant = {}, {}
    drift = 0.0
    for block in range(1, blocks + 1):
        drift = 0.7 * drift + rng.gauss(0.0, 0.03)
        reference[block] = 3000.0 * math.exp(drift + offsets[0] + rng.gauss(0.0, 0.05))
        variant[block] = 3000.0 * math.exp(drift + offsets[1] + change + rng.gauss(0.0, 0.05))
    return reference, variant


def _log_ratios(reference: dict[int, float], variant: dict[int, float]) -> list[float]:
    return [math.log(variant[b] / reference[b]) for b in sorted(reference)]


def test_the_estimate_recovers_a_planted_process_spread() -> None:
    rng = random.Random(7)
    series = [_log_ratios(*_run(rng, 20, 0.01)) for _ in range(400)]
    assert estimate_sd_log(series) == pytest.approx(0.01, rel=0.2)
    quiet = [_log_ratios(*_run(rng, 20, 0.0)) for _ in range(400)]
    assert estimate_sd_log(quiet) < 0.003  # noise alone: (nearly) no term
    with pytest.raises(ValueError):
        estimate_sd_log([[0.1]])  # one block: no spread over blocks to subtract


def test_intervals_hold_their_coverage_only_with_the_term() -> None:
    rng = random.Random(34)
    training = [_log_ratios(*_run(rng, 20, 0.012)) for _ in range(200)]
    term = estimate_sd_log(training)  # from runs other than those judged
    without, with_term = Tally(), Tally()
    for i in range(300):
        change = (0.0, -0.05)[i % 2]
        ref, var = _run(rng, 20, 0.012, change)
        truth = 100.0 * math.expm1(change)
        without = without.add(block_reading(ref, var), truth)
        with_term = with_term.add(block_reading(ref, var, term), truth)
    assert without.covered / without.intervals < 0.88  # blocks cannot see the processes
    assert 0.93 <= with_term.covered / with_term.intervals <= 0.995


def test_a_verdict_with_the_term_is_wider_and_says_so() -> None:
    values = [3000.0 + 10 * (i % 3) for i in range(12)]
    rounds = list(range(1, 13))
    ref = Summary.of(values, rounds)
    var = Summary.of([v * 1.03 for v in values], rounds)
    plain = compare("throughput", ref, var)
    term = 0.01
    held = compare(
        "throughput", replace(ref, process_sd_log=term), replace(var, process_sd_log=term)
    )
    assert plain.word.value == "higher" and "own server process" not in plain.method
    assert held.low_pct < plain.low_pct and held.high_pct > plain.high_pct  # type: ignore[operator]
    assert held.change_pct == pytest.approx(plain.change_pct)
    assert "own server process" in held.method and "±2.8%" in held.method  # 1.96 x sqrt(2) x 1%
    assert held.p_value is not None and held.p_value > plain.p_value  # type: ignore[operator]
    low, high = widened(0.0, -0.03, 0.04, 0.04 / 1.96, 1.96)
    assert (low, high) == pytest.approx((-0.05, math.hypot(0.04, 0.04)))


def test_summaries_are_never_stored_with_the_term() -> None:
    summary = Summary.of([1.0, 2.0], [1, 2], process_sd_log=0.01, process="/baseline")
    assert "process_sd_log" not in summary.to_dict() and "process" not in summary.to_dict()


def test_one_process_at_two_loads_holds_no_term() -> None:
    rounds = list(range(1, 9))
    low = Summary.of([1000.0 + i for i in rounds], rounds, 0.01, "/baseline")
    high = Summary.of([1500.0 + 3 * i for i in rounds], rounds, 0.01, "/baseline")
    assert "own server process" not in compare("throughput", low, high).method
    other = replace(high, process="/batch")
    assert "own server process" in compare("throughput", low, other).method


def test_the_term_has_a_figure_for_latency_percentiles() -> None:
    term = ProcessTerm(0.01, 0.03, 120, 20)
    assert term.sd_log("throughput") == term.sd_log("latency_avg") == 0.01
    assert term.sd_log("latency_p99") == term.sd_log("latency_p95_us") == 0.03


def test_cells_of_a_co_loaded_run_are_marked_and_carry_the_packaged_term(
    tmp_path: Path, seed_cells: list[CellResult], plan_order: list[str]
) -> None:
    cells = seed_cells  # a classic run: each cell loaded its configuration afresh
    assert not any(c.whole_run_process for c in with_process_lifetimes(tmp_path, cells))
    coload = CoLoad(True, 1, 2, 2, "co-loaded")
    save_engine_record(tmp_path, EngineRecord("blocks", "seed", coload))
    marked = with_process_lifetimes(tmp_path, cells)
    assert all(c.whole_run_process for c in marked)
    term = packaged_process_term()
    assert term is not None, "tritonlab carries the calibration's process term"
    base, other = summarise(marked, plan_order)[:2]
    assert base.throughput.process_sd_log == term.throughput_sd_log
    assert base.latency_p99.process_sd_log == term.latency_p99_sd_log
    assert "own server process" in compare_figure("throughput", "throughput", base, other).method
    assert "own server process" not in compare_figure("throughput", "throughput", base, base).method
    plain = summarise(cells, plan_order)[0]
    assert plain.throughput.process_sd_log == 0.0
    one_at_a_time = replace(coload, co_loaded=False)
    save_engine_record(tmp_path, EngineRecord("blocks", "seed", one_at_a_time))
    assert not any(c.whole_run_process for c in with_process_lifetimes(tmp_path, cells))


def test_a_widened_verdict_keeps_what_the_pairing_alone_read() -> None:
    """A verdict the process term widened carries the pairing's own word and interval (the
    noise-floor line quotes it where only the term kept a control from a difference); one not
    widened carries none."""
    rounds = list(range(1, 13))
    ref = Summary.of([1000.0 + (i % 3) for i in rounds], rounds, 0.02, "/baseline")
    sub = Summary.of([1030.0 + (i % 3) for i in rounds], rounds, 0.02, "/baseline_aa")
    widened_verdict = compare("throughput", ref, sub)
    assert widened_verdict.unwidened_word == "higher" and widened_verdict.word != "higher"
    assert widened_verdict.widening_decides
    low, high = widened_verdict.unwidened_pct or (0.0, 0.0)
    assert 0 < low <= high and low > (widened_verdict.low_pct or 0.0)
    plain = compare(
        "throughput", replace(ref, process_sd_log=0.0), replace(sub, process_sd_log=0.0)
    )
    assert plain.unwidened_word is None and plain.unwidened_pct is None
    assert not plain.widening_decides and plain.word == "higher"
