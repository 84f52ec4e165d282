"""Upper bounds on what a plan may ask for, so no plan (a file, or flags) can ask for a billion
cells, a million model instances or an input tensor of terabytes.

Each bound is generous for real use and named once here; ``docs/sweeps.md`` (Limits) lists
them. A plan file is checked key by key as it is read (``plan_file``, ``plan_checks``: the
error names the file, the key and the bound) before anything is built or written, and every
plan again by ``ExperimentPlan.validate`` (``ExperimentPlan.check_limits``), so a plan built from
command-line flags meets the same bounds. The concurrency axis has its own bounds
(``plan_loads.MAX_LEVELS`` and ``MAX_CONCURRENCY``), and traces theirs (``perf/trace.py``).
"""

from __future__ import annotations

import math

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
