"""The ``loads:`` section of a sweep plan file: the concurrency curve at the reference protocol
and client batch size, the other protocols and batch sizes at the reference concurrency, the
open-loop fractions of each configuration's peak, the sequence lengths and the replayed traces
(``docs/sweeps.md``; ``plan_file`` reads the trace files ``loads.trace`` names).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tritonlab.experiments.load_kinds import PLAN_KEYS, PLAN_KINDS, RateKind
from tritonlab.experiments.plan import LoadPoint
from tritonlab.experiments.plan_checks import PlanChecker
from tritonlab.perf.settings import PROTOCOLS
from tritonlab.perf.trace import Trace

LOAD_KEYS = (
    "protocol",
    "batch_size",
    "concurrency",
    "reference_concurrency",
    "open_loop",
    "sequence_length",
    "trace",
    *PLAN_KEYS,
)
OPEN_LOOP_KEYS = ("peak_fractions", "protocol")
RANGE_KEYS = ("start", "stop", "factor", "step")
DEFAULT_CONCURRENCY = (1, 2, 4, 8, 16)
DEFAULT_REFERENCE_CONCURRENCY = 8
# Bounds on a concurrency axis: a plan file must not be able to ask for a billion cells.
MAX_CONCURRENCY = 4096
MAX_LEVELS = 64


def _concurrency(check: PlanChecker, value: Any) -> list[int]:
    path = "loads.concurrency"
    if isinstance(value, dict):
        spec = check.mapping(value, path, RANGE_KEYS)
        start = check.integer(spec.get("start", 1), f"{path}.start", 1)
        stop = check.integer(spec.get("stop"), f"{path}.stop", start)
        if "factor" in spec and "step" in spec:
            raise check.fail(path, "give either factor (1, 2, 4, ...) or step (1, 3, 5, ...)")
        if stop > MAX_CONCURRENCY:
            raise check.fail(f"{path}.stop", f"at most {MAX_CONCURRENCY}, got {stop}")
        if "step" in spec:
            step = check.integer(spec["step"], f"{path}.step", 1)
            count = (stop - start) // step + 1
            if count > MAX_LEVELS:
                raise check.fail(
                    path,
                    f"start {start}, stop {stop}, step {step} gives {count} levels; at most "
                    f"{MAX_LEVELS} (a larger step, or factor)",
                )
            return list(range(start, stop + 1, step))
        factor = check.integer(spec.get("factor", 2), f"{path}.factor", 2)
        levels = [start]
        while levels[-1] * factor <= stop:
            levels.append(levels[-1] * factor)
        return levels
    levels = check.each(value, path, check.integer, 1)
    if len(levels) > MAX_LEVELS or max(levels) > MAX_CONCURRENCY:
        raise check.fail(path, f"at most {MAX_LEVELS} levels, each at most {MAX_CONCURRENCY}")
    if len(set(levels)) != len(levels):
        raise check.fail(path, f"levels must be distinct, got {levels}")
    return sorted(levels)


def _kind_levels(check: PlanChecker, kind: RateKind, value: Any) -> list[float]:
    """A load kind's ``loads.<plan_key>`` list: distinct numbers > 0, each at most its
    ``max_level``."""
    path = f"loads.{kind.plan_key}"
    levels = check.each(value, path, check.number)
    if len(set(levels)) != len(levels):
        raise check.fail(path, f"values must be distinct, got {[f'{v:g}' for v in levels]}")
    if max(levels) > kind.max_level:
        raise check.fail(path, f"each at most {kind.max_level:g}, got {max(levels):g}")
    return sorted(levels)


def parse_loads(check: PlanChecker, value: Any, traces: Sequence[Trace] = ()) -> list[LoadPoint]:
    """The plan's load points (protocol x batch size x concurrency or rate x sequence length),
    and ``traces`` (the files of ``loads.trace``) replayed at the reference protocol and batch;
    ``PlanError`` naming the key that is wrong."""
    data = check.mapping(value, "loads", LOAD_KEYS)
    protocols = check.each(data.get("protocol", "grpc"), "loads.protocol", check.choice, PROTOCOLS)
    batches = check.each(data.get("batch_size", 1), "loads.batch_size", check.integer, 1)
    for path, items in (("loads.protocol", protocols), ("loads.batch_size", batches)):
        if len(set(items)) != len(items):
            raise check.fail(path, f"values must be distinct, got {items}")
    levels = _concurrency(check, data.get("concurrency", list(DEFAULT_CONCURRENCY)))
    default_ref = (
        DEFAULT_REFERENCE_CONCURRENCY
        if DEFAULT_REFERENCE_CONCURRENCY in levels
        else levels[len(levels) // 2]
    )
    ref_conc = check.integer(
        data.get("reference_concurrency", default_ref), "loads.reference_concurrency", 1
    )
    if ref_conc not in levels:
        raise check.fail(
            "loads.reference_concurrency", f"must be one of loads.concurrency {levels}"
        )
    ref_protocol, ref_batch = protocols[0], batches[0]
    # The reference load first: the project's scripts use plan.loads[0] as "the" baseline.
    loads = [LoadPoint(ref_protocol, ref_batch, ref_conc)]
    loads += [LoadPoint(ref_protocol, ref_batch, c) for c in levels if c != ref_conc]
    loads += [LoadPoint(p, ref_batch, ref_conc) for p in protocols[1:]]
    loads += [LoadPoint(ref_protocol, b, ref_conc) for b in batches[1:]]
    if "open_loop" in data:
        spec = check.mapping(data["open_loop"], "loads.open_loop", OPEN_LOOP_KEYS)
        if "peak_fractions" not in spec:
            raise check.fail("loads.open_loop.peak_fractions", "missing: e.g. [0.5, 0.7, 0.9]")
        path = "loads.open_loop.peak_fractions"
        fractions = []
        for i, f in enumerate(check.items(spec["peak_fractions"], path)):
            fraction = check.number(f, f"{path}[{i}]")
            if fraction > 2:
                raise check.fail(f"{path}[{i}]", f"must be at most 2 (200% of peak), got {f!r}")
            fractions.append(fraction)
        path = "loads.open_loop.protocol"
        open_protocols = check.each(
            spec.get("protocol", ref_protocol), path, check.choice, tuple(protocols)
        )
        loads += [
            LoadPoint(p, ref_batch, None, peak_fraction=f)
            for p in open_protocols
            for f in sorted(set(fractions))
        ]
    for kind in PLAN_KINDS:
        if kind.plan_key in data:
            rates = _kind_levels(check, kind, data[kind.plan_key])
            loads += [LoadPoint(ref_protocol, ref_batch, **kind.fields(r)) for r in rates]
    if "sequence_length" in data:
        # The first length is the reference every other load is measured at; the others are
        # measured at the reference protocol, batch size and concurrency.
        lengths = check.each(data["sequence_length"], "loads.sequence_length", check.integer, 1)
        if len(set(lengths)) != len(lengths):
            raise check.fail("loads.sequence_length", f"values must be distinct, got {lengths}")
        loads = [replace(ld, sequence_length=lengths[0]) for ld in loads]
        loads += [
            LoadPoint(ref_protocol, ref_batch, ref_conc, sequence_length=n) for n in lengths[1:]
        ]
    seq = loads[0].sequence_length
    loads += [
        LoadPoint(ref_protocol, ref_batch, None, sequence_length=seq, trace=t.stats) for t in traces
    ]
    return loads
