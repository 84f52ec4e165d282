"""server/stats.py: snapshots of Triton's statistics extension and the delta over a cell."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import psutil
import pytest

from tritonlab.server.stats import ServerStatsDelta, StatsSnapshot, stats_delta, tree_cpu_seconds


def _d(count: int, ns: int) -> dict[str, int]:
    return {"count": count, "ns": ns}


def _batch(size: int, count: int, input_ns: int, infer_ns: int, output_ns: int) -> dict[str, Any]:
    return {
        "batch_size": size,
        "compute_input": _d(count, input_ns),
        "compute_infer": _d(count, infer_ns),
        "compute_output": _d(count, output_ns),
    }


# Shaped like one entry of GET /v2/models/<m>/stats "model_stats" (Triton 2.51): after loading
# and two warm-up requests at batch 1 (plus four batch-4 executions that happen before the cell).
BEFORE: dict[str, Any] = {
    "name": "m",
    "version": "1",
    "last_inference": 1764508484000,
    "inference_count": 18,
    "execution_count": 6,
    "inference_stats": {
        "success": _d(18, 20_000_000),
        "fail": _d(1, 5_000),
        "queue": _d(18, 1_800_000),
        "compute_input": _d(18, 360_000),
        "compute_infer": _d(18, 9_000_000),
        "compute_output": _d(18, 720_000),
        "cache_hit": _d(0, 0),
        "cache_miss": _d(0, 0),
    },
    "batch_stats": [
        _batch(1, 2, 100_000, 1_000_000, 80_000),
        _batch(4, 4, 400_000, 6_000_000, 600_000),
    ],
    "memory_usage": [],
}

# The cell: 100 requests of batch 1, executed as 20 batches of 1 and 10 batches of 8.
# Per request: queue 4000 us, compute input 100 us, infer 1000 us, output 200 us, total 6000 us.
AFTER: dict[str, Any] = {
    **BEFORE,
    "inference_count": 118,
    "execution_count": 36,
    "inference_stats": {
        "success": _d(118, 20_000_000 + 100 * 6_000_000),
        "fail": _d(3, 15_000),
        "queue": _d(118, 1_800_000 + 100 * 4_000_000),
        "compute_input": _d(118, 360_000 + 100 * 100_000),
        "compute_infer": _d(118, 9_000_000 + 100 * 1_000_000),
        "compute_output": _d(118, 720_000 + 100 * 200_000),
        "cache_hit": _d(0, 0),
        "cache_miss": _d(0, 0),
    },
    "batch_stats": [
        _batch(1, 22, 100_000 + 20 * 50_000, 1_000_000 + 20 * 400_000, 80_000 + 20 * 30_000),
        _batch(4, 4, 400_000, 6_000_000, 600_000),
        _batch(8, 10, 10 * 150_000, 10 * 2_000_000, 10 * 300_000),
    ],
}


def test_snapshot_from_triton() -> None:
    snap = StatsSnapshot.from_triton(AFTER)
    assert snap.inference_count == 118
    assert snap.execution_count == 36
    assert snap.success_count == 118
    assert snap.success_ns == 620_000_000
    assert snap.fail_count == 3
    assert snap.phase_ns == {
        "queue": 401_800_000,
        "compute_input": 10_360_000,
        "compute_infer": 109_000_000,
        "compute_output": 20_720_000,
    }
    assert snap.batch_executions == {1: 22, 4: 4, 8: 10}
    assert snap.batch_compute_ns[8] == 10 * (150_000 + 2_000_000 + 300_000)


def test_snapshot_accepts_grpc_string_counts() -> None:
    # Triton's gRPC JSON mapping writes uint64 counters as strings.
    grpc_style = {
        "inference_count": "5",
        "execution_count": "2",
        "inference_stats": {"success": {"count": "5", "ns": "1000"}},
        "batch_stats": [
            {"batch_size": "4", "compute_infer": {"count": "1", "ns": "700"}},
            {"batch_size": "1", "compute_infer": {"count": "1", "ns": "300"}},
        ],
    }
    snap = StatsSnapshot.from_triton(grpc_style)
    assert snap.inference_count == 5
    assert snap.success_ns == 1000
    assert snap.batch_executions == {4: 1, 1: 1}
    assert snap.phase_ns["queue"] == 0


def test_snapshot_of_a_model_never_called() -> None:
    snap = StatsSnapshot.from_triton({"name": "m", "version": "1"})
    assert snap.inference_count == 0
    assert snap.batch_executions == {}
    assert set(snap.phase_ns) == {"queue", "compute_input", "compute_infer", "compute_output"}


def test_stats_delta_per_request_and_per_inference() -> None:
    delta = stats_delta(StatsSnapshot.from_triton(BEFORE), StatsSnapshot.from_triton(AFTER))
    assert delta.request_count == 100
    assert delta.inference_count == 100
    assert delta.execution_count == 30
    assert delta.fail_count == 2
    assert delta.queue_us_per_request == pytest.approx(4000.0)
    assert delta.compute_input_us_per_request == pytest.approx(100.0)
    assert delta.compute_infer_us_per_request == pytest.approx(1000.0)
    assert delta.compute_output_us_per_request == pytest.approx(200.0)
    assert delta.overhead_us_per_request == pytest.approx(700.0)
    assert delta.request_us_per_request == pytest.approx(6000.0)
    assert delta.mean_batch_size == pytest.approx(100 / 30)
    # The batch-4 executions happened before the cell, so they are not in its distribution.
    assert delta.batch_size_executions == {1: 20, 8: 10}
    # (20 x 480 us + 10 x 2450 us) of compute over 100 inferences.
    assert delta.compute_us_per_inference == pytest.approx((20 * 480 + 10 * 2450) / 100)


def test_stats_delta_of_nothing_is_zero() -> None:
    snap = StatsSnapshot.from_triton(BEFORE)
    delta = stats_delta(snap, snap)
    assert delta.request_count == 0
    assert delta.queue_us_per_request == 0.0
    assert delta.compute_us_per_inference == 0.0
    assert delta.mean_batch_size == 0.0
    assert delta.batch_size_executions == {}


def test_overhead_is_never_negative() -> None:
    after = {**AFTER, "inference_stats": {**AFTER["inference_stats"], "success": _d(118, 1)}}
    delta = stats_delta(StatsSnapshot.from_triton(BEFORE), StatsSnapshot.from_triton(after))
    assert delta.overhead_us_per_request == 0.0


def test_delta_round_trip() -> None:
    delta = stats_delta(StatsSnapshot.from_triton(BEFORE), StatsSnapshot.from_triton(AFTER))
    data = delta.to_dict()
    assert data["batch_size_executions"] == {"1": 20, "8": 10}
    assert data["mean_batch_size"] == pytest.approx(100 / 30)
    assert ServerStatsDelta.from_dict(data) == delta


def test_tree_cpu_seconds_counts_live_and_skips_gone_processes() -> None:
    me = psutil.Process(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    gone = psutil.Process(child.pid)
    child.wait()
    own = me.cpu_times()
    total = tree_cpu_seconds([me, gone])
    assert total >= own.user + own.system > 0
    assert tree_cpu_seconds([gone]) == 0.0
    assert tree_cpu_seconds([]) == 0.0
