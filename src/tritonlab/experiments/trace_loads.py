"""Trace loads in plans and run folders: a replayed trace as a load point, and its files
copied into the run folder before anything is measured (``perf/trace.py`` reads them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from tritonlab import gateway
from tritonlab.errors import PlanError
from tritonlab.experiments.plan import ExperimentPlan, LoadPoint
from tritonlab.perf.trace import Trace
from tritonlab.run_layout import RunLayout


def trace_load(
    trace: Trace, protocol: str = "grpc", batch_size: int = 1, sequence_length: int | None = None
) -> LoadPoint:
    """``trace`` replayed at this protocol, client batch size and sequence length."""
    return LoadPoint(protocol, batch_size, None, sequence_length=sequence_length, trace=trace.stats)


def under_trace(plan: ExperimentPlan, trace: Trace) -> ExperimentPlan:
    """``plan`` with each of its loads' (protocol, batch size, sequence length) replaying
    ``trace`` instead of its concurrency or rate (``run --load-trace``)."""
    shapes = dict.fromkeys((ld.protocol, ld.batch_size, ld.sequence_length) for ld in plan.loads)
    return replace(plan, loads=tuple(trace_load(trace, *shape) for shape in shapes))


def distinct_traces(traces: Sequence[Trace]) -> list[Trace]:
    """``traces`` without repeats; ``PlanError`` when two different files share a name (the
    name is their load key's and their files')."""
    by_name: dict[str, Trace] = {}
    for trace in traces:
        seen = by_name.setdefault(trace.stats.name, trace)
        if seen.stats.sha256 != trace.stats.sha256:
            raise PlanError(
                f"traces {str(seen.path)!r} and {str(trace.path)!r} are both named "
                f"{trace.stats.name!r} (from their file names); rename one"
            )
    return list(by_name.values())


def install_traces(run_dir: Path, traces: Sequence[Trace]) -> list[Path]:
    """Copy each trace's CSV into ``run_dir/traces/`` and write its ``--request-intervals``
    file beside it; the interval files' paths."""
    layout = RunLayout(run_dir)
    written = []
    for trace in distinct_traces(traces):
        name = trace.stats.name
        target = layout.trace_csv(name)
        if trace.path.resolve() != target.resolve():
            gateway.copy_in(trace.path, target)
        intervals = layout.trace_intervals(name)
        gateway.write_text(intervals, trace.interval_file_text())
        written.append(intervals)
    return written


def plan_traces_missing(plan: ExperimentPlan, traces: Sequence[Trace]) -> list[str]:
    """The names of the plan's trace loads that ``traces`` does not hold."""
    have = {t.stats.name for t in traces}
    return sorted({ld.trace.name for ld in plan.loads if ld.trace and ld.trace.name not in have})
