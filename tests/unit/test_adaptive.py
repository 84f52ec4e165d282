"""decisions/adaptive.py: which cells a project run measures again, and why."""

from __future__ import annotations

import dataclasses
import shutil
import statistics
from pathlib import Path

import pytest

from tritonlab.decisions.adaptive import HEADLINE_FIGURES, undecided_project
from tritonlab.experiments.store import (
    CellResult,
    load_cells,
    save_cell,
)
from tritonlab.explanation.explain import analyse
from tritonlab.run_layout import CELLS_DIR, RESULTS_DIR
from tritonlab.stats.aggregate import summarise

LOAD = "grpc_b1_c8"
# Per configuration and round, different for every pair of configurations.
JITTER = [(1.0, 1.004, 0.997), (0.996, 1.0, 1.005), (1.003, 0.995, 1.0), (1.0, 0.998, 1.004)]


@pytest.fixture
def run_copy(seed_run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(seed_run_dir, target)
    return target


def _with_figures(
    cell: CellResult, repeat: int, throughput: float, p99: float, load_key: str = LOAD
) -> CellResult:
    m = cell.perf.measurement
    assert m is not None
    measurement = dataclasses.replace(m, throughput_infer_per_s=throughput, latency_p99_us=p99)
    return dataclasses.replace(
        cell,
        repeat=repeat,
        load_key=load_key,
        cell_id=f"{cell.variant.name}__{load_key}__r{repeat}",
        perf=dataclasses.replace(cell.perf, measurement=measurement),
    )


def _first_cells(cells: list[CellResult]) -> dict[str, CellResult]:
    return {c.variant.name: c for c in cells if c.repeat == 1}


def _steady_copy(
    run_dir: Path, plan_order: list[str], round_factors: dict[int, float], load_key: str
) -> None:
    """Every recorded cell again at ``load_key``: its variant's round-1 figures times the
    round's factor (shared by every configuration, as a slow or fast round is) and a jitter
    of at most 0.5% of its own, so every paired ratio is steady and every verdict decided."""
    cells = load_cells(run_dir)
    first = _first_cells(cells)
    for cell in cells:
        m = first[cell.variant.name].perf.measurement
        assert m is not None and m.latency_p99_us is not None
        jitter = JITTER[plan_order.index(cell.variant.name)][cell.repeat - 1]
        factor = round_factors[cell.repeat]
        save_cell(
            run_dir,
            _with_figures(
                first[cell.variant.name],
                cell.repeat,
                m.throughput_infer_per_s * factor * jitter,
                m.latency_p99_us / factor / jitter,
                load_key=load_key,
            ),
        )


def test_recorded_seed_run_is_undecided(run_copy: Path, plan_order: list[str]) -> None:
    targets, reasons = undecided_project(run_copy, plan_order, cores=2)
    # One load point with undecided verdicts: every variant there is measured again, so every
    # pair stays paired by round.
    assert targets == [(name, LOAD) for name in plan_order]
    prefixes = [r.split(":")[0] for r in reasons]
    assert prefixes == [
        "batch_5ms_x1 vs baseline",
        "batch_5ms_x2 vs batch_5ms_x1",
        "batch_5ms_x2 vs batch_5ms_x1",
        "batch_0ms_x1 vs baseline",
    ]
    assert reasons[0].startswith("batch_5ms_x1 vs baseline: p99 no clear difference (+59%, CI -")
    assert reasons[1].startswith("batch_5ms_x2 vs batch_5ms_x1: throughput no clear difference")
    assert reasons[2].startswith("batch_5ms_x2 vs batch_5ms_x1: p99 no clear difference")
    assert reasons[3].startswith("batch_0ms_x1 vs baseline: p99 no clear difference")
    # batch_5ms_x2 against the baseline is decided (lower throughput, higher p99): not listed.
    assert not [r for r in reasons if r.startswith("batch_5ms_x2 vs baseline")]


def test_reasons_are_the_undecided_headline_verdicts(run_copy: Path, plan_order: list[str]) -> None:
    _, reasons = undecided_project(run_copy, plan_order, cores=2)
    (analysis,) = analyse(summarise(load_cells(run_copy), plan_order), cores=2)
    expected = []
    for r in analysis.reports[1:]:
        pairs = [("baseline", r.verdicts)]
        if r.reference != "baseline":
            pairs.append((r.reference or "", r.reference_verdicts))
        for reference, verdicts in pairs:
            expected += [
                f"{r.summary.variant.name} vs {reference}: {v.figure} {v.phrase()}"
                for key, v in verdicts.items()
                if key in HEADLINE_FIGURES and not v.decided
            ]
    assert reasons == expected
    assert all("CI " in r for r in reasons)  # each quotes the interval that is too wide


def test_synthetic_decisive_rounds_decide_everything(run_copy: Path, plan_order: list[str]) -> None:
    summaries = {s.variant.name: s for s in summarise(load_cells(run_copy), plan_order)}
    first = _first_cells(load_cells(run_copy))
    # More rounds, each at every configuration's median: the paired ratios settle.
    for repeat in range(4, 16):
        for name in plan_order:
            s = summaries[name]
            assert s.throughput.median is not None and s.latency_p99.median is not None
            save_cell(
                run_copy,
                _with_figures(first[name], repeat, s.throughput.median, s.latency_p99.median),
            )
    assert len(load_cells(run_copy)) == 4 * 15
    assert undecided_project(run_copy, plan_order, cores=2) == ([], [])


def test_only_the_undecided_load_point_is_measured_again(
    run_copy: Path, plan_order: list[str]
) -> None:
    # A second load point where every configuration moved by the same factor each round, so
    # every ratio is steady (decided); the recorded load point stays undecided.
    _steady_copy(run_copy, plan_order, {1: 1.0, 2: 0.93, 3: 1.04}, "http_b1_c8")
    targets, reasons = undecided_project(run_copy, plan_order, cores=2)
    assert targets == [(name, LOAD) for name in plan_order]
    assert len(reasons) == 4
    # Without the recorded load point, nothing is left to measure.
    for path in (run_copy / RESULTS_DIR / CELLS_DIR).glob(f"*__{LOAD}__*.json"):
        path.unlink()
    assert {c.load_key for c in load_cells(run_copy)} == {"http_b1_c8"}
    assert undecided_project(run_copy, plan_order, cores=2) == ([], [])


def test_hand_made_run_with_steady_ratios_is_decided(run_copy: Path, plan_order: list[str]) -> None:
    _steady_copy(run_copy, plan_order, {1: 1.0, 2: 1.05, 3: 0.9}, LOAD)  # overwrites them
    (analysis,) = analyse(summarise(load_cells(run_copy), plan_order), cores=2)
    for r in analysis.reports:
        assert statistics.pstdev(r.summary.throughput.values) > 0  # the rounds do differ
        for key in HEADLINE_FIGURES:
            assert r.verdicts[key].decided
            if r.reference_verdicts:
                assert r.reference_verdicts[key].decided
    assert undecided_project(run_copy, plan_order, cores=2) == ([], [])
