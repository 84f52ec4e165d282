"""Open-loop rates derived from stored closed-loop cells, and the resume check of a sweep."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_recommend import cell

from tritonlab.errors import PlanError
from tritonlab.experiments.manifest import Manifest
from tritonlab.experiments.opening import check_resume, plan_fingerprint
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint
from tritonlab.experiments.plan_file import load_demo_plan
from tritonlab.experiments.runner import run_experiment
from tritonlab.experiments.store import save_cell, save_manifest
from tritonlab.pipeline.sweep import open_loop_rates, peak_rates
from tritonlab.repository.variants import ServingVariant
from tritonlab.server.launch import ServerOptions

VARIANTS = (
    ServingVariant("baseline", "baseline"),
    ServingVariant("batch_0us", "batching", dynamic_batching=True),
)


def _plan(*loads: LoadPoint) -> ExperimentPlan:
    return ExperimentPlan("simple_mlp", VARIANTS, loads, repeats=2)


CLOSED = (LoadPoint("grpc", 1, 4), LoadPoint("grpc", 1, 8), LoadPoint("http", 1, 8))


def test_rate_is_fraction_of_the_highest_median_closed_loop_throughput() -> None:
    plan = _plan(*CLOSED, LoadPoint("grpc", 1, None, peak_fraction=0.5))
    cells = [
        cell("baseline", 1000, 900, repeat=1, concurrency=4),
        cell("baseline", 1200, 900, repeat=2, concurrency=4),  # median 1100
        cell("baseline", 1500, 900, repeat=1, concurrency=8),
        cell("baseline", 901, 900, repeat=2, concurrency=8),  # median 1200.5: the peak
        cell("baseline", 9000, 900, repeat=1, concurrency=8, protocol="http"),  # other protocol
        cell("batch_0us", 3001, 900, repeat=1, concurrency=4),
    ]
    rates = peak_rates(plan, cells)
    assert [(r.variant, r.load_key, r.peak_load_key) for r in rates] == [
        ("baseline", "grpc_b1_p50", "grpc_b1_c8"),
        ("batch_0us", "grpc_b1_p50", "grpc_b1_c4"),
    ]
    assert rates[0].peak_infer_per_s == 1200.5
    assert rates[0].request_rate_per_s == 600.0  # round(0.5 x 1200.5)
    assert rates[1].request_rate_per_s == 1500.0  # round(0.5 x 3001) = round(1500.5), banker's


def test_rate_per_request_for_client_batches_and_missing_peaks() -> None:
    plan = _plan(
        LoadPoint("grpc", 4, 8),
        LoadPoint("grpc", 4, None, peak_fraction=0.8),
        LoadPoint("http", 4, None, peak_fraction=0.8),  # no closed-loop http cell: no rate
    )
    cells = [cell("baseline", 4000, 900, concurrency=8, batch=4)]
    rates = peak_rates(plan, cells)
    assert [(r.variant, r.load_key, r.request_rate_per_s) for r in rates] == [
        ("baseline", "grpc_b4_p80", 800.0)  # 0.8 x 4000 infer/s / 4 per request
    ]
    fixed = peak_rates(
        _plan(LoadPoint("grpc", 1, 8), LoadPoint("grpc", 1, None, request_rate_per_s=100.0)),
        [cell("baseline", 10, 900, concurrency=8)],
    )
    assert fixed == []  # a fixed-rate load has no peak fraction: nothing to derive
    small = peak_rates(
        _plan(LoadPoint("grpc", 1, 8), LoadPoint("grpc", 1, None, peak_fraction=0.01)),
        [cell("baseline", 10, 900, concurrency=8)],
    )
    assert small[0].request_rate_per_s == 1.0  # at least one request per second


def test_rates_come_from_the_stored_cells(tmp_path: Path) -> None:
    plan = _plan(LoadPoint("grpc", 1, 8), LoadPoint("grpc", 1, None, peak_fraction=0.5))
    assert open_loop_rates(plan, tmp_path) == {}
    for c in (
        cell("baseline", 2000, 900, repeat=1, concurrency=8),
        cell("baseline", 2200, 900, repeat=2, concurrency=8),
    ):
        save_cell(tmp_path, c)
    assert open_loop_rates(plan, tmp_path) == {("baseline", "grpc_b1_p50"): 1050.0}


def test_the_demo_plan_has_five_closed_loop_and_two_open_loop_loads() -> None:
    plan = load_demo_plan().experiment
    # 6 configurations and the A/A control, 5 closed-loop and 2 open-loop loads, 10 blocks
    assert (len(plan.variants), plan.repeats) == (7, 10)
    assert sorted(ld.open_loop for ld in plan.loads) == [False] * 5 + [True] * 2


def test_fraction_of_peak_loads_need_a_rate_resolver(tmp_path: Path) -> None:
    plan = _plan(LoadPoint("grpc", 1, 8), LoadPoint("grpc", 1, None, peak_fraction=0.5))
    info: Any = SimpleNamespace(batched=True)
    with pytest.raises(PlanError, match="tritonlab sweep"):
        run_experiment(plan, info, tmp_path, ServerOptions())


def test_resume_accepts_the_same_sweep_and_refuses_another(
    tmp_path: Path, seed_manifest: Manifest
) -> None:
    plan = load_demo_plan().experiment
    fingerprint = plan_fingerprint(plan, "sha")
    check_resume(tmp_path, fingerprint)  # nothing there yet
    stored = replace(seed_manifest, plan=plan, plan_fingerprint=fingerprint)
    save_manifest(tmp_path, stored)
    check_resume(tmp_path, plan_fingerprint(load_demo_plan().experiment, "sha"))
    other = ExperimentPlan.from_dict({**plan.to_dict(), "repeats": plan.repeats + 1})
    with pytest.raises(PlanError, match="different plan or model"):
        check_resume(tmp_path, plan_fingerprint(other, "sha"))
    with pytest.raises(PlanError, match="different plan or model"):
        check_resume(tmp_path, plan_fingerprint(plan, "another model"))
    assert json.loads((tmp_path / "results" / "manifest.json").read_text())["plan_fingerprint"]
