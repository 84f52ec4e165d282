"""Rules that flag the measurement itself rather than explain a change: Little's law against the
measured figures, unstable perf_analyzer windows, a backend that fell back, the statistics
extension's queue time against perf_analyzer's, and perf_analyzer's own warnings. Each returns a
``Finding`` of kind ``flag`` with the figures it read."""

from __future__ import annotations

from tritonlab.explanation.rule_support import Finding, RuleContext, rounded

QUEUE_CROSS_CHECK_TOLERANCE = 0.25  # stats-extension vs perf_analyzer queue time


def littles_law(ctx: RuleContext) -> Finding | None:
    """Flag a cell whose throughput x latency does not match its concurrency."""
    s = ctx.subject
    if s.littles_law_ok is not False:
        return None
    ratio = s.littles_law_ratio
    text = (
        f"Inconsistent cell: throughput x avg latency / concurrency = {ratio:.2f} (expected "
        "about 1); the client may not have kept its requests in flight (load generator "
        "starved), re-measure."
    )
    return Finding("littles-law", s.variant.name, text, {"ratio": rounded(ratio, 2)}, kind="flag")


def unstable_measurement(ctx: RuleContext) -> Finding | None:
    """Flag a variant whose perf_analyzer windows did not all reach stability."""
    s = ctx.subject
    unstable = len(s.cells) - s.stable_count
    if not unstable:
        return None
    text = (
        f"{unstable} of {len(s.cells)} repeats did not stabilise in perf_analyzer even with a "
        "longer window; their numbers are the mean of the last windows and have no percentiles."
    )
    return Finding("unstable", s.variant.name, text, {"unstable_repeats": unstable}, kind="flag")


def backend_fallback(ctx: RuleContext) -> Finding | None:
    """The backend ran batches request by request (a batch failed): say so, with the count."""
    s = ctx.subject
    fallbacks = sum(c.backend_fallbacks for c in s.cells)
    if not fallbacks:
        return None
    text = (
        f"The onnxruntime backend ran {fallbacks} batch(es) request by request because they "
        "failed as one batch (server log, `tritonlab-adapter-fallback`); those executions did "
        "not batch, so this row does not show what batching does."
    )
    return Finding(
        "backend-fallback", s.variant.name, text, {"backend_fallbacks": fallbacks}, kind="flag"
    )


def queue_cross_check(ctx: RuleContext) -> Finding | None:
    """Flag a disagreement between the statistics deltas and perf_analyzer's server columns."""
    s = ctx.subject
    ours, theirs = s.queue_us.median, s.perf_queue_us.median
    if ours is None or theirs is None or max(ours, theirs) < 100:
        return None
    if abs(ours - theirs) <= QUEUE_CROSS_CHECK_TOLERANCE * max(ours, theirs):
        return None
    text = (
        f"Queue time disagrees: statistics extension {ours:.0f} µs over the whole run, "
        f"perf_analyzer {theirs:.0f} µs over its last window; the queue was not steady over the "
        "run (a backlog that grew or drained), so read the queue figures with care."
    )
    return Finding(
        "queue-cross-check",
        s.variant.name,
        text,
        {"stats_queue_us": rounded(ours), "perf_analyzer_queue_us": rounded(theirs)},
        kind="flag",
    )


def perf_analyzer_warnings(ctx: RuleContext) -> Finding | None:
    """Flag cells where perf_analyzer itself warned, e.g. it could not keep up an open-loop rate."""
    s = ctx.subject
    warned = [c for c in s.cells if c.perf.warnings]
    if not warned:
        return None
    messages = list(dict.fromkeys(w for c in warned for w in c.perf.warnings))
    text = (
        f"perf_analyzer warned in {len(warned)} of {len(s.cells)} repeats: "
        + "; ".join(m.rstrip(".") for m in messages)
        + ". The load it offered or its latencies are less trustworthy here."
    )
    return Finding(
        "perf-warnings",
        s.variant.name,
        text,
        {"warned_repeats": len(warned), "warnings": messages},
        kind="flag",
    )
