"""Named explanation rules: each reads measured figures and, if it applies, says why.

A rule returns a ``Finding`` that names itself and the figures it used, so a reader can check
the sentence against the table. Rules never estimate: they read queue and compute times from
Triton's statistics extension, batch sizes from its batch statistics, CPU from the processes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tritonlab.analysis.aggregate import VariantSummary, same_offered_load
from tritonlab.analysis.verdicts import HIGHER, compare
from tritonlab.repository.variants import ServingVariant

# Thresholds, named so the docs and tests can quote them.
TRAP_QUEUE_SHARE_OF_DELAY = 0.6  # queue time >= 60% of max_queue_delay
TRAP_BATCH_SHARE_OF_IN_FLIGHT = 0.75  # mean batch >= 75% of the requests in flight
SATURATED_QUEUE_SHARE = 0.5  # queue >= half of the time a request spends in the server
SATURATED_MIN_CORES_PER_INSTANCE = 0.8  # a busy single-threaded instance uses about a core
CPU_BOUND_SHARE = 0.9  # server + perf_analyzer CPU >= 90% of the cores
QUEUE_CROSS_CHECK_TOLERANCE = 0.25  # stats-extension vs perf_analyzer queue time


@dataclass(frozen=True)
class Finding:
    """One rule's conclusion about one variant, with the figures behind it."""

    rule: str
    variant: str
    text: str
    figures: dict[str, Any] = field(default_factory=dict)
    kind: str = "explanation"  # or "flag": a warning about the measurement itself

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "variant": self.variant,
            "text": self.text,
            "figures": self.figures,
            "kind": self.kind,
        }


@dataclass(frozen=True)
class RuleContext:
    """What a rule may look at: the subject, its baseline, its closest reference, the machine."""

    subject: VariantSummary
    baseline: VariantSummary
    reference: VariantSummary
    cores: int
    others: tuple[VariantSummary, ...] = ()


CONFIG_FIELDS = (
    "dynamic_batching",
    "max_queue_delay_us",
    "preferred_batch_sizes",
    "max_batch_size",
    "instance_count",
    "instance_kind",
    "intra_op_threads",
    "extra_parameters",
)


def raw_changed_fields(a: ServingVariant, b: ServingVariant) -> list[str]:
    """Every configuration field that differs, batcher settings included."""
    return [k for k in CONFIG_FIELDS if getattr(a, k) != getattr(b, k)]


def changed_fields(a: ServingVariant, b: ServingVariant) -> list[str]:
    """The configuration changes between two variants, as a reader counts them."""
    changed = raw_changed_fields(a, b)
    if "dynamic_batching" in changed:  # switching batching on or off carries its settings
        changed = [k for k in changed if k not in ("max_queue_delay_us", "preferred_batch_sizes")]
    return changed


def _r(value: float | None, digits: int = 0) -> float | None:
    return None if value is None else round(value, digits)


def batch_target(variant: ServingVariant) -> tuple[int, str]:
    """The batch size the dynamic batcher waits for, and which field sets it."""
    if variant.preferred_batch_sizes:
        return min(variant.preferred_batch_sizes), "preferred_batch_size"
    return variant.max_batch_size, "max_batch_size"


def in_flight_inferences(s: VariantSummary) -> float | None:
    return None if s.in_flight is None else s.in_flight * s.settings.batch_size


def queue_delay_trap(ctx: RuleContext) -> Finding | None:
    """With a queue delay and fewer requests in flight than the batch target, every batch waits."""
    s, v = ctx.subject, ctx.subject.variant
    in_flight = in_flight_inferences(s)
    if not v.dynamic_batching or v.max_queue_delay_us <= 0 or in_flight is None:
        return None
    target, source = batch_target(v)
    queue, batch = s.queue_us.median, s.mean_batch.median
    if in_flight >= target or queue is None or batch is None:
        return None
    if (
        queue < TRAP_QUEUE_SHARE_OF_DELAY * v.max_queue_delay_us
        or batch < TRAP_BATCH_SHARE_OF_IN_FLIGHT * in_flight
    ):
        return None
    zero_delay = [
        o
        for o in ctx.others
        if o.variant.dynamic_batching
        and o.variant.max_queue_delay_us == 0
        and o.load_key == s.load_key
        and o.mean_batch.median
    ]
    evidence = (
        f" (the 0 µs variant formed batches of {zero_delay[0].mean_batch.median:.1f} "
        f"with {zero_delay[0].queue_us.median:.0f} µs of queueing)"
        if zero_delay
        and zero_delay[0].mean_batch.median
        and zero_delay[0].queue_us.median is not None
        else ""
    )
    text = (
        f"Queue-delay trap: only {in_flight:g} inferences are ever in flight, fewer than the "
        f"batcher's target of {target} ({source}), so a batch never fills and every batch waits "
        f"out the full max_queue_delay: queue {queue:.0f} µs against a delay of "
        f"{v.max_queue_delay_us} µs, mean batch {batch:.1f} against {in_flight:g} in flight. "
        f"Fix: a smaller max_queue_delay_microseconds{evidence}, preferred_batch_size of "
        f"{in_flight:g} or less, or more than {target} requests in flight."
    )
    return Finding(
        "queue-delay-trap",
        v.name,
        text,
        {
            "queue_us": _r(queue),
            "max_queue_delay_us": v.max_queue_delay_us,
            "mean_batch_size": _r(batch, 2),
            "in_flight": in_flight,
            "batch_target": target,
            "batch_target_field": source,
        },
    )


def batching_raised_throughput(ctx: RuleContext) -> Finding | None:
    """Batching paid off: bigger batches made each inference cheaper, so throughput rose."""
    s, r = ctx.subject, ctx.reference
    if not s.variant.dynamic_batching or r.variant.dynamic_batching:
        return None
    if changed_fields(r.variant, s.variant) != ["dynamic_batching"] or not same_offered_load(r, s):
        return None  # another knob changed too, or the loads differ: batching alone is not why
    verdict = compare("throughput", r.throughput, s.throughput)
    b0, b1 = r.mean_batch.median, s.mean_batch.median
    c0, c1 = r.compute_per_inference_us.median, s.compute_per_inference_us.median
    if verdict.word != HIGHER or None in (b0, b1, c0, c1):
        return None
    assert b0 is not None and b1 is not None and c0 is not None and c1 is not None
    if b1 <= b0 or c1 >= c0:
        return None
    text = (
        f"Batching raised throughput ({verdict.phrase()}) because the mean batch rose from "
        f"{b0:.1f} to {b1:.1f} while compute per inference fell from {c0:.0f} µs to {c1:.0f} µs: "
        f"one execution now serves {b1:.1f} requests."
    )
    return Finding(
        "batching-raised-throughput",
        s.variant.name,
        text,
        {
            "throughput_change_pct": _r(verdict.change_pct, 1),
            "mean_batch_before": _r(b0, 2),
            "mean_batch_after": _r(b1, 2),
            "compute_us_per_inference_before": _r(c0),
            "compute_us_per_inference_after": _r(c1),
        },
    )


def instances_effect(ctx: RuleContext) -> Finding | None:
    """More (or fewer) instances: did it help, given the cores and the CPU actually used?"""
    s, r = ctx.subject, ctx.reference
    if changed_fields(r.variant, s.variant) != ["instance_count"] or not same_offered_load(r, s):
        return None
    verdict = compare("throughput", r.throughput, s.throughput)
    used, used_before = s.server_cores.median, r.server_cores.median
    client = s.perf_analyzer_cores.median
    n0, n1 = r.variant.instance_count, s.variant.instance_count
    figures = {
        "instances_before": n0,
        "instances_after": n1,
        "cores": ctx.cores,
        "server_cores_used": _r(used, 2),
        "server_cores_used_before": _r(used_before, 2),
        "perf_analyzer_cores_used": _r(client, 2),
        "throughput_change_pct": _r(verdict.change_pct, 1),
    }
    head = f"{n0} -> {n1} instances: throughput {verdict.phrase()}"
    more = n1 > n0
    if verdict.word == HIGHER:
        why = (
            "the added instances ran executions in parallel"
            if more
            else "fewer instances competed for the cores"
        )
        if used and used_before:
            why += f"; the server used {used:.2f} cores (was {used_before:.2f}) of {ctx.cores}"
        return Finding("instances-effect", s.variant.name, f"{head}: {why}.", figures)
    if not more:
        why = "removing instances cost no clear throughput at this load" + (
            f" (the server used {used:.2f} of {ctx.cores} cores)" if used else ""
        )
        if verdict.word != HIGHER and verdict.word != "no clear difference":
            why = "the remaining instances could not keep up" + (
                f" (the server used {used:.2f} of {ctx.cores} cores)" if used else ""
            )
        return Finding("instances-effect", s.variant.name, f"{head}: {why}.", figures)
    trap = queue_delay_trap(RuleContext(s, ctx.baseline, r, ctx.cores, ctx.others))
    if trap is not None:
        why = (
            "the batcher, not the instances, sets the pace: every batch waits out the queue "
            "delay, so the added instances have nothing more to execute"
            + (f" (the server used only {used:.2f} of {ctx.cores} cores)" if used else "")
        )
    elif used is not None and client is not None and used + client >= CPU_BOUND_SHARE * ctx.cores:
        why = (
            f"no spare CPU: the server used {used:.2f} and perf_analyzer {client:.2f} of "
            f"{ctx.cores} cores, so another instance only competes for the same cores"
        )
    else:
        why = f"{n0} instance{'s were' if n0 > 1 else ' was'} not the bottleneck" + (
            f" (the server used {used:.2f} of {ctx.cores} cores)" if used else ""
        )
    return Finding("instances-effect", s.variant.name, f"{head}: {why}.", figures)


def saturated_server(ctx: RuleContext) -> Finding | None:
    """Requests mostly wait for a busy instance (not for a batch to fill)."""
    s = ctx.subject
    queue = s.queue_us.median
    compute = sum(
        x.median or 0.0 for x in (s.compute_input_us, s.compute_infer_us, s.compute_output_us)
    )
    if queue is None or not compute:
        return None
    share = queue / (queue + compute)
    if share < SATURATED_QUEUE_SHARE or queue_delay_trap(ctx) is not None:
        return None
    v = s.variant
    if v.dynamic_batching and v.max_queue_delay_us > 0 and queue <= 1.2 * v.max_queue_delay_us:
        return None  # the wait can be the batcher's own delay, not a busy instance
    n = v.instance_count
    used = s.server_cores.median
    busy_cores = min(n, ctx.cores) * SATURATED_MIN_CORES_PER_INSTANCE
    if used is not None and used < busy_cores:
        return None  # the server was not busy enough for its instances to be the queue's cause
    evidence = f" (the server used {used:.2f} of {ctx.cores} cores)" if used is not None else ""
    text = (
        f"Saturated: requests spend {share:.0%} of their server time queued ({queue:.0f} µs) "
        f"against {compute:.0f} µs of compute; the {n} instance{'s' if n > 1 else ''} "
        f"{'are' if n > 1 else 'is'} kept busy{evidence} and the other requests in flight "
        "wait behind it."
    )
    return Finding(
        "saturated-server",
        s.variant.name,
        text,
        {"queue_us": _r(queue), "compute_us": _r(compute), "queue_share": _r(share, 2)},
    )


def cpu_bound(ctx: RuleContext) -> Finding | None:
    """Flag cells where server and load generator together used up the machine's cores."""
    s = ctx.subject
    used, client = s.server_cores.median, s.perf_analyzer_cores.median
    if used is None or client is None or used + client < CPU_BOUND_SHARE * ctx.cores:
        return None
    text = (
        f"CPU-bound: the server used {used:.2f} and perf_analyzer {client:.2f} of {ctx.cores} "
        "cores; the load generator competes with the server, so these numbers understate a "
        "dedicated server."
    )
    return Finding(
        "cpu-bound",
        s.variant.name,
        text,
        {
            "server_cores_used": _r(used, 2),
            "perf_analyzer_cores_used": _r(client, 2),
            "cores": ctx.cores,
        },
        kind="flag",
    )


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
    return Finding("littles-law", s.variant.name, text, {"ratio": _r(ratio, 2)}, kind="flag")


def unstable_measurement(ctx: RuleContext) -> Finding | None:
    s = ctx.subject
    unstable = len(s.cells) - s.stable_count
    if not unstable:
        return None
    text = (
        f"{unstable} of {len(s.cells)} repeats did not stabilise in perf_analyzer even with a "
        "longer window; their numbers are the mean of the last windows and have no percentiles."
    )
    return Finding("unstable", s.variant.name, text, {"unstable_repeats": unstable}, kind="flag")


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
        {"stats_queue_us": _r(ours), "perf_analyzer_queue_us": _r(theirs)},
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


RULES: tuple[Callable[[RuleContext], Finding | None], ...] = (
    batching_raised_throughput,
    queue_delay_trap,
    instances_effect,
    saturated_server,
    cpu_bound,
    littles_law,
    unstable_measurement,
    queue_cross_check,
    perf_analyzer_warnings,
)


def apply_rules(ctx: RuleContext) -> list[Finding]:
    return [f for rule in RULES if (f := rule(ctx)) is not None]
