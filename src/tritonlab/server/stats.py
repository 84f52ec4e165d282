"""Server-side facts over a measurement: statistics-extension deltas and CPU used.

Triton's statistics are cumulative since load, so a cell's numbers are the difference between a
snapshot taken before perf_analyzer starts and one taken after it ends. Per-request times are
what every request saw (a batched request is charged the whole batch's compute); per-inference
compute divides the execution time by the inferences it served, which is what batching saves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psutil

from tritonlab.records import Record, later

_PHASES = ("queue", "compute_input", "compute_infer", "compute_output")


@dataclass(frozen=True)
class StatsSnapshot:
    """The cumulative counters of one model at one moment."""

    inference_count: int
    execution_count: int
    success_count: int
    success_ns: int
    fail_count: int
    phase_ns: dict[str, int]
    batch_executions: dict[int, int]
    batch_compute_ns: dict[int, int]
    # Requests the response cache answered, and those it looked up and did not hold.
    cache_hit_count: int = 0
    cache_miss_count: int = 0

    @classmethod
    def from_triton(cls, stats: dict[str, Any]) -> StatsSnapshot:
        """The counters of one model's entry in Triton's statistics (a missing field counts 0)."""
        inference = stats.get("inference_stats", {})
        batch_executions: dict[int, int] = {}
        batch_compute_ns: dict[int, int] = {}
        for entry in stats.get("batch_stats", []):
            size = int(entry["batch_size"])
            batch_executions[size] = int(entry.get("compute_infer", {}).get("count", 0))
            batch_compute_ns[size] = sum(
                int(entry.get(phase, {}).get("ns", 0))
                for phase in ("compute_input", "compute_infer", "compute_output")
            )
        return cls(
            inference_count=int(stats.get("inference_count", 0)),
            execution_count=int(stats.get("execution_count", 0)),
            success_count=int(inference.get("success", {}).get("count", 0)),
            success_ns=int(inference.get("success", {}).get("ns", 0)),
            fail_count=int(inference.get("fail", {}).get("count", 0)),
            phase_ns={p: int(inference.get(p, {}).get("ns", 0)) for p in _PHASES},
            batch_executions=batch_executions,
            batch_compute_ns=batch_compute_ns,
            cache_hit_count=int(inference.get("cache_hit", {}).get("count", 0)),
            cache_miss_count=int(inference.get("cache_miss", {}).get("count", 0)),
        )


@dataclass(frozen=True)
class ServerStatsDelta(Record):
    """What the server did between two snapshots, per request and per inference."""

    inference_count: int
    execution_count: int
    request_count: int
    fail_count: int
    queue_us_per_request: float
    compute_input_us_per_request: float
    compute_infer_us_per_request: float
    compute_output_us_per_request: float
    overhead_us_per_request: float
    compute_us_per_inference: float
    batch_size_executions: dict[int, int] = field(default_factory=dict)  # stored: str keys
    # Requests the response cache answered, and those it missed (they ran the model); 0 without.
    cache_hit_count: int = later(0, group="cache")
    cache_miss_count: int = later(0, group="cache")

    DERIVED = ("mean_batch_size",)

    @property
    def mean_batch_size(self) -> float:
        """Inferences per execution: the batch size the server really ran (0.0 with none)."""
        return self.inference_count / self.execution_count if self.execution_count else 0.0

    @property
    def compute_us_per_request(self) -> float:
        """Compute (input + infer + output) per request, µs."""
        return (
            self.compute_input_us_per_request
            + self.compute_infer_us_per_request
            + self.compute_output_us_per_request
        )

    @property
    def compute_us_per_execution(self) -> float:
        """Compute (input + infer + output) of one execution, whatever batch it carried."""
        return self.compute_us_per_inference * self.mean_batch_size

    @property
    def request_us_per_request(self) -> float:
        """Server-side time per request in µs: queue, compute input/infer/output and overhead."""
        return (
            self.queue_us_per_request + self.compute_us_per_request + self.overhead_us_per_request
        )


def stats_delta(before: StatsSnapshot, after: StatsSnapshot) -> ServerStatsDelta:
    """What one model did between two snapshots: counts, and phase times in µs per request."""
    requests = after.success_count - before.success_count
    per = 1e-3 / requests if requests else 0.0  # ns total -> us per request
    phases = {p: (after.phase_ns[p] - before.phase_ns[p]) * per for p in _PHASES}
    total_us = (after.success_ns - before.success_ns) * per
    inferences = after.inference_count - before.inference_count
    executions = {
        size: count - before.batch_executions.get(size, 0)
        for size, count in after.batch_executions.items()
        if count - before.batch_executions.get(size, 0) > 0
    }
    compute_ns = sum(
        ns - before.batch_compute_ns.get(size, 0) for size, ns in after.batch_compute_ns.items()
    )
    return ServerStatsDelta(
        inference_count=inferences,
        execution_count=after.execution_count - before.execution_count,
        request_count=requests,
        fail_count=after.fail_count - before.fail_count,
        queue_us_per_request=phases["queue"],
        compute_input_us_per_request=phases["compute_input"],
        compute_infer_us_per_request=phases["compute_infer"],
        compute_output_us_per_request=phases["compute_output"],
        overhead_us_per_request=max(0.0, total_us - sum(phases.values())),
        compute_us_per_inference=compute_ns * 1e-3 / inferences if inferences else 0.0,
        batch_size_executions=dict(sorted(executions.items())),
        cache_hit_count=after.cache_hit_count - before.cache_hit_count,
        cache_miss_count=after.cache_miss_count - before.cache_miss_count,
    )


def tree_cpu_seconds(processes: list[psutil.Process]) -> float:
    """User + system CPU seconds used so far by ``processes`` (gone ones count as 0)."""
    total = 0.0
    for proc in processes:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total
