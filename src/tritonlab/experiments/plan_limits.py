"""Upper bounds on what a plan may ask for, so no plan (a file, or flags) can ask for a billion
cells, a million model instances or an input tensor of terabytes.

Each bound is generous for real use and named once here; ``docs/sweeps.md`` (Limits) lists
them. A plan file is checked key by key as it is read (``plan_file``, ``plan_checks``: the
error names the file, the key and the bound) before anything is built or written, and every
plan again by ``ExperimentPlan.validate`` (``check_plan_limits``), so a plan built from
command-line flags meets the same bounds. The concurrency axis has its own bounds
(``plan_loads.MAX_LEVELS`` and ``MAX_CONCURRENCY``), and traces theirs (``perf/trace.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tritonlab.errors import PlanError

if TYPE_CHECKING:
    from tritonlab.experiments.plan import ExperimentPlan, LoadPoint
    from tritonlab.experiments.plan_checks import PlanChecker
    from tritonlab.repository.variants import ServingVariant

MAX_REPEATS = 100  # rounds (blocks) a plan measures (the adaptive rounds have --max-repeats)
MAX_VARIANTS = 64  # configurations measured, the block engine's A/A control not counted
MAX_LIST_VALUES = 64  # values in any one list of a plan file: an axis, a loads list, sizes
MAX_LOADS = 256  # load points of a plan, all lists combined
MAX_INSTANCE_COUNT = 256  # instance_group count (compute plans give each core one)
MAX_THREADS = 1024  # intra_op_thread_count
MAX_BATCH_SIZE = 8192  # a client batch size, max_batch_size, each preferred_batch_size
MAX_QUEUE_DELAY_US = 60_000_000  # max_queue_delay_microseconds: a minute
MAX_SEQUENCE_LENGTH = 1 << 20  # a sequence length (every dynamic non-batch dim of an input)
MAX_INPUT_ELEMENTS = 1 << 28  # client batch size x sequence length: one request's input
MAX_WINDOW_MS = 600_000  # measurement.measurement_interval_ms: ten minutes
MAX_TRIALS = 100  # measurement.max_trials
MAX_RETRIES = 10  # measurement.retries_when_unstable

# A plan file's knob (its YAML name) -> the largest value it may take.
KNOB_CAPS: dict[str, int] = {
    "instance_count": MAX_INSTANCE_COUNT,
    "intra_op_thread_count": MAX_THREADS,
    "max_batch_size": MAX_BATCH_SIZE,
    "preferred_batch_size": MAX_BATCH_SIZE,
    "max_queue_delay_microseconds": MAX_QUEUE_DELAY_US,
}


def count_words(value: int) -> str:
    """``value`` with thousands separators, or its order of magnitude when it is too long to
    print (Python refuses to print an int of over 4,300 digits, and no one reads one)."""
    if abs(value) < 10**18:
        return f"{value:,}"
    return f"{'-' if value < 0 else ''}about 10^{int(math.log10(abs(value)))}"


def over_limit(value: int, cap: int, unit: str = "") -> str:
    """The one-line reason a value is refused: ``1,000 is over the limit of 100``, or with a
    ``unit`` (a count of things) ``71 configurations; the limit is 64``."""
    if unit:
        return f"{count_words(value)} {unit}; the limit is {cap:,} (docs/sweeps.md, Limits)"
    return f"{count_words(value)} is over the limit of {cap:,} (docs/sweeps.md, Limits)"


def _variant_values(variant: ServingVariant) -> list[tuple[str, int]]:
    """A variant's bounded knobs as (plan name, value); threads None (the engine's) skipped."""
    values = [
        ("instance_count", variant.instance_count),
        ("max_batch_size", variant.max_batch_size),
        ("max_queue_delay_microseconds", variant.max_queue_delay_us),
    ]
    if variant.intra_op_threads is not None:
        values.append(("intra_op_thread_count", variant.intra_op_threads))
    return values + [("preferred_batch_size", s) for s in variant.preferred_batch_sizes]


def check_plan_limits(plan: ExperimentPlan) -> None:
    """``PlanError`` in one line naming the first key of ``plan`` over its bound."""
    if plan.repeats > MAX_REPEATS:
        raise PlanError(f"repeats: {over_limit(plan.repeats, MAX_REPEATS)}")
    measured = [v for v in plan.variants if not v.control]
    if len(measured) > MAX_VARIANTS:
        raise PlanError(f"variants: {over_limit(len(measured), MAX_VARIANTS, 'configurations')}")
    for variant in plan.variants:
        for name, value in _variant_values(variant):
            if value > KNOB_CAPS[name]:
                raise PlanError(
                    f"variant {variant.name!r}: {name}: {over_limit(value, KNOB_CAPS[name])}"
                )
    if len(plan.loads) > MAX_LOADS:
        raise PlanError(f"loads: {over_limit(len(plan.loads), MAX_LOADS, 'load points')}")
    for load in plan.loads:
        problem = load_problem(load.batch_size, load.sequence_length)
        if problem is not None:
            raise PlanError(f"load {load.key}: {problem[0]}: {problem[1]}")
    m = plan.measurement
    for key, value, cap in (
        ("measurement_interval_ms", m.measurement_interval_ms, MAX_WINDOW_MS),
        ("max_trials", m.max_trials, MAX_TRIALS),
        ("retries_when_unstable", m.retries_when_unstable, MAX_RETRIES),
    ):
        if value > cap:
            raise PlanError(f"measurement.{key}: {over_limit(value, cap)}")


def load_problem(batch_size: int, sequence_length: int | None) -> tuple[str, str] | None:
    """(key, reason) when a load's client batch size, sequence length or their product (the
    elements of one request's input per dynamic axis) is over its bound; None when within."""
    if batch_size > MAX_BATCH_SIZE:
        return "batch_size", over_limit(batch_size, MAX_BATCH_SIZE)
    if sequence_length is None:
        return None
    if sequence_length > MAX_SEQUENCE_LENGTH:
        return "sequence_length", over_limit(sequence_length, MAX_SEQUENCE_LENGTH)
    elements = batch_size * sequence_length
    if elements > MAX_INPUT_ELEMENTS:
        return (
            "sequence_length",
            f"batch_size {batch_size:,} x sequence_length {sequence_length:,} = "
            + over_limit(elements, MAX_INPUT_ELEMENTS, "elements in one request's input"),
        )
    return None


def check_variant_count(check: PlanChecker, data: dict[str, Any]) -> None:
    """Refuse a plan whose axes and combined variants are more than ``MAX_VARIANTS``
    configurations (baseline and anchor included), before any of them is built."""
    axes, combined = data.get("axes", {}), data.get("combined", [])
    count = 1 + ("anchor" in data) + (len(combined) if isinstance(combined, list) else 0)
    if isinstance(axes, dict):
        count += sum(len(v) if isinstance(v, list) else 1 for v in axes.values())
    if count > MAX_VARIANTS:
        raise check.fail(
            "axes" if isinstance(axes, dict) and axes else "combined",
            over_limit(
                count,
                MAX_VARIANTS,
                "configurations (the baseline, the anchor, every "
                "axis value and every combined variant)",
            ),
        )


def check_load_limits(check: PlanChecker, loads: Sequence[LoadPoint]) -> None:
    """Refuse a load over its bound: a client batch size, a sequence length, one request's
    input elements (``plan_limits.load_problem``), or more than ``MAX_LOADS`` load points."""
    for load in loads:
        problem = load_problem(load.batch_size, load.sequence_length)
        if problem is not None:
            raise check.fail(f"loads.{problem[0]}", problem[1])
    if len(loads) > MAX_LOADS:
        raise check.fail("loads", over_limit(len(loads), MAX_LOADS, "load points"))
