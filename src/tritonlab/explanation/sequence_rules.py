"""Rules for a model served by the sequence batcher: the backlog of the direct strategy, and
what changing the strategy did.

Both read a cell's load (``PerfSettings.requests_per_sequence`` set: perf_analyzer sent
sequences, its concurrency the sequences open at a time) and the configuration: under the direct
strategy an instance has one slot per batch entry (``max_batch_size``, at least 1), and a
sequence holds its slot until its last request. How busy the instances were is computed from
the medians: throughput x compute per inference / instances (the share of the time each
instance spent computing).
"""

from __future__ import annotations

from tritonlab.explanation.rule_support import (
    Finding,
    RuleContext,
    change_text,
    changed_fields,
    rounded,
)
from tritonlab.stats.aggregate import VariantSummary, compare_figure
from tritonlab.stats.verdicts import HIGHER, NO_VERDICT
from tritonlab.stats.workload import same_workload

# How much busier (in share of the time) the instances must be for a strategy change to be
# named as what kept them busier.
BUSIER_BY = 0.1


def busy_share(s: VariantSummary) -> float | None:
    """The share of the time each instance computed: throughput x compute per inference /
    instances (medians; None where a figure is missing)."""
    rate, per_inference = s.throughput.median, s.compute_per_inference_us.median
    if rate is None or per_inference is None:
        return None
    return rate * per_inference / 1e6 / s.variant.instance_count


def _slots(s: VariantSummary) -> int:
    return s.variant.instance_count * max(1, s.variant.max_batch_size)


def sequence_backlog(ctx: RuleContext) -> Finding | None:
    """Direct strategy, more sequences open than slots: the rest wait for whole sequences."""
    s = ctx.subject
    length, open_ = s.settings.requests_per_sequence, s.settings.concurrency
    if length is None or open_ is None or s.variant.sequence_strategy != "direct":
        return None
    slots = _slots(s)
    if open_ <= slots:
        return None
    waiting = open_ - slots
    queue, busy = s.queue_us.median, busy_share(s)
    text = (
        f"Backlog: {open_} sequences were open for {slots} slot{'s' if slots > 1 else ''} "
        f"({s.variant.instance_count} instance{'s' if s.variant.instance_count > 1 else ''}); "
        f"the direct strategy binds a sequence to a slot until its {length} requests end, so "
        f"{waiting} sequence{'s' if waiting > 1 else ''} at a time "
        f"{'wait' if waiting > 1 else 'waits'} in the backlog"
        + (f", and the queue per request ({queue:,.0f} µs) holds that wait" if queue else "")
        + "."
    )
    if busy is not None:
        text += (
            f" Each instance computed {busy:.0%} of the time (throughput x compute per "
            "inference): between two requests of its bound sequence (the client's round trip) a "
            "slot has nothing else to run."
        )
    figures = {
        "sequences_open": open_,
        "slots": slots,
        "requests_per_sequence": length,
        "queue_us": rounded(queue),
        "instance_busy_share": rounded(busy, 2),
    }
    return Finding("sequence-backlog", s.variant.name, text, figures)


def strategy_effect(ctx: RuleContext) -> Finding | None:
    """direct <-> oldest: the throughput, queue and instance busy share it moved, and why."""
    s, r = ctx.subject, ctx.reference
    changed = set(changed_fields(r.variant, s.variant))
    if not changed or changed - {"sequence_strategy", "max_candidate_sequences"}:
        return None
    if "sequence_strategy" not in changed or not same_workload(r, s):
        return None
    if s.settings.requests_per_sequence is None:
        return None
    verdict = compare_figure("throughput", "throughput", r, s)
    queue = compare_figure("queue per request", "queue_us", r, s)
    busy_r, busy_s = busy_share(r), busy_share(s)
    a, b = r.variant.sequence_strategy, s.variant.sequence_strategy
    text = (
        f"{a} -> {b}: throughput {verdict.phrase()}; "
        + change_text("queue per request", r.queue_us.median, s.queue_us.median, " µs", 0)
        + f" ({queue.word})"
    )
    if busy_r is not None and busy_s is not None:
        text += f"; each instance computed {busy_r:.0%} -> {busy_s:.0%} of the time"
    if verdict.word == NO_VERDICT:
        text += f". No cause is named: throughput has {verdict.phrase()}."
    elif (
        b == "oldest"
        and verdict.word == HIGHER
        and busy_r is not None
        and busy_s is not None
        and busy_s >= busy_r + BUSIER_BY
    ):
        text += (
            f". Why: oldest runs the oldest request among up to "
            f"{s.variant.max_candidate_sequences} sequences per instance, so an instance takes "
            "another sequence's request while one sequence waits for its client; direct leaves "
            "a slot idle between its own sequence's requests (the busy share above)."
        )
    else:
        text += (
            ". Why: the figures above moved as listed; the strategy is not named as the cause "
            "of more throughput (it did not rise clearly with the instances' busy share)."
        )
    figures = {
        "strategy_before": a,
        "strategy_after": b,
        "throughput_change_pct": rounded(verdict.change_pct, 1),
        "queue_us_before": rounded(r.queue_us.median),
        "queue_us_after": rounded(s.queue_us.median),
        "instance_busy_share_before": rounded(busy_r, 2),
        "instance_busy_share_after": rounded(busy_s, 2),
    }
    return Finding("sequence-strategy", s.variant.name, text, figures)
