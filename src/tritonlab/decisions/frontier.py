"""The selection maths of a sweep's recommendations: the Pareto frontier, the knee of each
concurrency curve, saturation over concurrency, the highest open-loop rate within a latency
budget, and the reference sequence length the ranking keeps, each with its rule.
"""

from __future__ import annotations

import collections
import itertools
import math
from collections import defaultdict

from tritonlab.decisions.recommend_records import (
    KNEE_GAIN_PER_DOUBLING_PCT,
    RATE_KEPT_UP_SHARE,
    SATURATION_QUEUE_GROWTH_PCT,
    LengthFilter,
    OperatingPoint,
    Saturation,
)
from tritonlab.experiments.plan import sequence_length_of
from tritonlab.stats.aggregate import VariantSummary
from tritonlab.stats.config_key import ConfigKey
from tritonlab.stats.load_drift import Block, without_disturbed
from tritonlab.stats.verdicts import HIGHER, MIN_EFFECT_PCT, Verdict, compare
from tritonlab.stats.workload import same_workload


def pareto_frontier(points: list[OperatingPoint]) -> list[OperatingPoint]:
    """Points no other point dominates (>= throughput and <= p99, one strictly), by
    throughput; points where perf_analyzer fell behind are left out (their load is not named)."""
    points = [p for p in points if not p.load_generator_fell_behind]

    def dominated(p: OperatingPoint) -> bool:
        return any(
            q.throughput_infer_per_s >= p.throughput_infer_per_s
            and q.latency_p99_us <= p.latency_p99_us
            and (
                q.throughput_infer_per_s > p.throughput_infer_per_s
                or q.latency_p99_us < p.latency_p99_us
            )
            for q in points
        )

    front = [p for p in points if not dominated(p)]
    return sorted(front, key=lambda p: (p.throughput_infer_per_s, -p.latency_p99_us, p.variant))


def _paired_gain_per_doubling_pct(verdict: Verdict, c0: int, c1: int) -> float:
    """The verdict's paired change spread over the doublings from ``c0`` to ``c1`` (the paired
    estimate, not a ratio of medians that may rest on different blocks: issue 36 audit)."""
    doublings = math.log2(c1 / c0)
    change = verdict.change_pct
    if change is None or doublings <= 0:
        return 0.0
    return float(100.0 * ((1.0 + change / 100.0) ** (1.0 / doublings) - 1.0))


def closed_loop_curves(summaries: list[VariantSummary]) -> dict[ConfigKey, list[VariantSummary]]:
    """Each configuration at its length -> its closed-loop summaries, by concurrency."""
    curves: dict[ConfigKey, list[VariantSummary]] = defaultdict(list)
    for s in summaries:
        st = s.settings
        if st.request_rate_per_s is None and st.concurrency and s.throughput.median is not None:
            curves[ConfigKey.of(s)].append(s)
    return {k: sorted(v, key=lambda s: s.settings.concurrency or 0) for k, v in curves.items()}


def knee_concurrency(curve: list[VariantSummary]) -> int | None:
    """The knee of one closed-loop curve; None below 2 levels: the smallest level no higher level
    is clearly above (verdict "higher" and ``KNEE_GAIN_PER_DOUBLING_PCT`` per doubling), else the
    largest, so one noisy flat step does not hide a later gain."""
    if len(curve) < 2:
        return None
    for i, lower in enumerate(curve):
        c0 = lower.settings.concurrency or 1
        gains_later = any(
            _counts(
                compare("throughput", lower.throughput, upper.throughput),
                c0,
                upper.settings.concurrency or 1,
            )
            for upper in curve[i + 1 :]
        )
        if not gains_later:
            return c0
    return curve[-1].settings.concurrency


def after_knee(
    curve: list[VariantSummary], knee: int, disturbed: dict[Block, float] | None = None
) -> str:
    """What the next measured level above ``knee`` gave, in words: its throughput verdict and
    gain per doubling, so a knee at 1 is not read as "nothing above helps" where the next level
    gained, under the knee's rule (issue 36 audit); at the top of the curve, the step into the
    knee from the level below, which the knee rests on (issue 36 audit: a top knee stated with
    no doubt where its step's interval spanned the rule); '' for a curve of one level. With the
    verdict over the pairs outside the ``disturbed`` blocks where some are among them
    (``stats.load_drift``)."""
    at = next((s for s in curve if s.settings.concurrency == knee), None)
    above = [s for s in curve if (s.settings.concurrency or 0) > knee]
    below = [s for s in curve if (s.settings.concurrency or 0) < knee]
    if at is None or not (above or below):
        return ""
    lower, upper = (at, above[0]) if above else (below[-1], at)
    c0, c1 = lower.settings.concurrency or 1, upper.settings.concurrency or 1
    verdict = compare("throughput", lower.throughput, upper.throughput)
    per = _paired_gain_per_doubling_pct(verdict, c0, c1)
    where = f"concurrency {c1}" if above else f"the step into it from concurrency {c0}"
    text = f"{where}: throughput {verdict.phrase()}, {per:+.1f}% per doubling"
    if spans := _spans_rule(verdict, c0, c1):
        # the knee rule reads the estimate; an interval that spans its threshold leaves the
        # knee unsettled (issue 36 audit: "no higher level clearly beats it" said of one)
        text += f" ({spans}: this knee rests on the estimate, not settled)"
    if disturbed and (drift := without_disturbed(lower, upper, "throughput", disturbed)):
        text += f"; {drift.text()}"
        if (without := drift.without) is not None and without.change_pct is not None:
            text += f", {_per_doubling(without.change_pct, c0, c1):+.1f}% per doubling"
            if spans := _spans_rule(without, c0, c1):
                text += f" ({spans})"  # the same doubt without them (issue 36 audit)
            if _counts(verdict, c0, c1) != _counts(without, c0, c1):
                text += ", which the knee's rule would " + (
                    "not count as a gain" if _counts(verdict, c0, c1) else "count as a gain"
                )
    return text


def _spans_rule(verdict: Verdict, c0: int, c1: int) -> str:
    """'CI +4.1% to +20.7% per doubling, which spans the rule's 10%' where the verdict's
    interval, spread over the doublings from ``c0`` to ``c1``, spans the knee's threshold;
    else ''."""
    ci = verdict.ci95_change_pct
    if ci is None or math.log2(c1 / c0) <= 0:
        return ""
    low, high = (_per_doubling(end, c0, c1) for end in ci)
    if not low < KNEE_GAIN_PER_DOUBLING_PCT <= high:
        return ""
    return (
        f"CI {low:+.1f}% to {high:+.1f}% per doubling, which spans the rule's "
        f"{KNEE_GAIN_PER_DOUBLING_PCT:g}%"
    )


def _counts(verdict: Verdict, c0: int, c1: int) -> bool:
    """Whether the knee's rule counts ``verdict`` from ``c0`` to ``c1`` as a gain."""
    return (
        verdict.word == HIGHER
        and _paired_gain_per_doubling_pct(verdict, c0, c1) >= KNEE_GAIN_PER_DOUBLING_PCT
    )


def _per_doubling(change_pct: float, c0: int, c1: int) -> float:
    """A change in % from ``c0`` to ``c1`` spread over its doublings, in % per doubling."""
    return float(100.0 * ((1.0 + change_pct / 100.0) ** (1.0 / math.log2(c1 / c0)) - 1.0))


def knees(summaries: list[VariantSummary]) -> dict[ConfigKey, int]:
    """Each closed-loop curve's knee (a concurrency), by configuration, sorted by name."""
    curves = closed_loop_curves(summaries)
    return {
        key: k
        for key, curve in sorted(curves.items(), key=lambda kv: str(kv[0]))
        if (k := knee_concurrency(curve))
    }


def saturation_over_concurrency(curve: list[VariantSummary]) -> Saturation | None:
    """The first step up the curve where queue time grows clearly (verdict "higher", by at least
    ``SATURATION_QUEUE_GROWTH_PCT``) while throughput is not "higher"; a step goes to a higher
    concurrency under the same workload but the load (``same_workload``)."""
    for lower, upper in itertools.pairwise(curve):
        if (
            lower.variant.name != upper.variant.name
            or not same_workload(lower, upper, load=False)
            or (lower.settings.concurrency or 0) >= (upper.settings.concurrency or 0)
        ):
            continue  # not the same configuration and workload at a higher concurrency
        q0, q1 = lower.queue_us.median, upper.queue_us.median
        if q0 is None or q1 is None:
            continue
        queue = compare("queue", lower.queue_us, upper.queue_us)
        tput = compare("throughput", lower.throughput, upper.throughput)
        grew = queue.word == HIGHER and q1 >= q0 * (1 + SATURATION_QUEUE_GROWTH_PCT / 100)
        flat = tput.word != HIGHER and (tput.change_pct or 0.0) < MIN_EFFECT_PCT
        if grew and flat:
            c0, c1 = lower.settings.concurrency or 0, upper.settings.concurrency or 0
            return Saturation(ConfigKey.of(lower), c0, c1, q0, q1, tput)
    return None


def saturation_findings(summaries: list[VariantSummary]) -> list[Saturation]:
    """``saturation_over_concurrency`` for every closed-loop curve of the sweep."""
    curves = closed_loop_curves(summaries).values()
    return [sat for curve in curves if (sat := saturation_over_concurrency(curve)) is not None]


def max_rates_within_budget(
    points: list[OperatingPoint], budget_us: float
) -> dict[ConfigKey, float]:
    """Each configuration's highest Poisson rate (req/s) with every repeat's p99 within
    ``budget_us`` that perf_analyzer and the server kept up with (evenly spaced requests queue
    less and would overstate what random traffic gets)."""
    best: dict[ConfigKey, float] = {}
    for p in points:
        if p.request_rate_per_s is None or not p.within(budget_us):
            continue  # closed loop, or some repeat's p99 over the budget
        if p.request_distribution != "poisson":
            continue
        if p.load_generator_fell_behind:
            continue  # perf_analyzer delayed requests: the offered rate was not really offered
        if p.throughput_infer_per_s < RATE_KEPT_UP_SHARE * p.request_rate_per_s * p.batch_size:
            continue  # the server fell behind the offered rate: its p99 is not of that load
        best[p.curve_key] = max(best.get(p.curve_key, 0.0), p.request_rate_per_s)
    return dict(sorted(best.items(), key=lambda kv: str(kv[0])))


def length_filter(summaries: list[VariantSummary]) -> LengthFilter | None:
    """The reference sequence length (the one most loads use) and the others; None with one."""
    lengths = collections.Counter(sequence_length_of(s.load_key) for s in summaries)
    if len(lengths) < 2:
        return None
    reference = lengths.most_common(1)[0][0]
    others = tuple(sorted(n for n in lengths if n != reference and n is not None))
    return LengthFilter(reference, others)


def at_reference_length(summaries: list[VariantSummary]) -> list[VariantSummary]:
    """The summaries at the reference sequence length (all of them with one length)."""
    lengths = length_filter(summaries)
    if lengths is None:
        return summaries
    return [s for s in summaries if sequence_length_of(s.load_key) == lengths.reference]
